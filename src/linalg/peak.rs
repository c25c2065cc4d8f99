//! The machine's own fused multiply-add peak, measured: the yardstick the benchmarks report every kernel
//! against, since machines differ (AVX-512 servers, AVX2 desktops, ARM laptops) and a figure in seconds alone
//! says little about how close a kernel runs to the hardware.
//!
//! Each loop keeps independent accumulators in registers (more than the FMA latency times the number of FMA
//! units of current cores) and touches no memory, so it runs at the core's FMA throughput. The integer products
//! of `--arithmetic ggml` have their own yardsticks, the same kind of loop over the instructions of their
//! kernels: [`pair_product_peak_gops`], 16-bit pair products (`vpmaddwd`) added into 32-bit lanes (the step
//! that ends each product of the AVX2 kernels), and [`byte_product_peak_gops`], byte products added four at a
//! time (`vpdpbusd`, the AVX-512 VNNI kernels).

use super::isa::Isa;
use std::time::Instant;

/// Accumulators per loop on 16-register instruction sets (AVX2): 12, leaving room for the two operands.
#[cfg(target_arch = "x86_64")]
const ACC_16_REGS: usize = 12;
/// Accumulators per loop on 32-register instruction sets (AVX-512, NEON): 16, twice the FMA latency (4) times
/// the FMA units (2). With 24, the compiler kept some on the stack and moved the others between registers
/// every round, and the loop measured half the peak of a Xeon with two 512-bit FMA units.
const ACC_32_REGS: usize = 16;

/// Defines a peak loop: `iters` rounds of `$acc` independent `acc ← fma(acc, a, b)` on `$lanes`-lane vectors.
/// Returns a value that depends on every accumulator, so no round can be optimised away.
macro_rules! peak_loop {
    ($name:ident, $feature:literal, $t:ty, $acc:expr, $lanes:literal,
     $splat:expr, $fma:expr, $store:expr) => {
        /// A register-only FMA loop (see the module documentation).
        ///
        /// # Safety
        /// The CPU must support the loop's target features.
        #[target_feature(enable = $feature)]
        pub(super) unsafe fn $name(iters: u64) -> f64 {
            let (a, b) = ($splat(0.999_999 as $t), $splat(1e-7 as $t));
            let mut acc = [$splat(1.0 as $t); $acc];
            for _ in 0..iters {
                for v in acc.iter_mut() {
                    *v = $fma(*v, a, b);
                }
            }
            let mut sum = 0.0;
            for v in acc {
                let mut lanes = [0.0 as $t; $lanes];
                // SAFETY: `lanes` holds one vector.
                unsafe { $store(lanes.as_mut_ptr(), v) };
                sum += lanes.iter().map(|&x| x as f64).sum::<f64>();
            }
            sum
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{ACC_16_REGS, ACC_32_REGS};
    use std::arch::x86_64::*;

    peak_loop!(
        avx2_f32,
        "avx2,fma",
        f32,
        ACC_16_REGS,
        8,
        _mm256_set1_ps,
        |a, b, c| _mm256_fmadd_ps(a, b, c),
        _mm256_storeu_ps
    );
    peak_loop!(
        avx2_f64,
        "avx2,fma",
        f64,
        ACC_16_REGS,
        4,
        _mm256_set1_pd,
        |a, b, c| _mm256_fmadd_pd(a, b, c),
        _mm256_storeu_pd
    );
    peak_loop!(
        avx512_f32,
        "avx512f",
        f32,
        ACC_32_REGS,
        16,
        _mm512_set1_ps,
        |a, b, c| _mm512_fmadd_ps(a, b, c),
        _mm512_storeu_ps
    );
    peak_loop!(
        avx512_f64,
        "avx512f",
        f64,
        ACC_32_REGS,
        8,
        _mm512_set1_pd,
        |a, b, c| _mm512_fmadd_pd(a, b, c),
        _mm512_storeu_pd
    );
}

/// Register-only loops of the integer products of `--arithmetic ggml` (`crate::quant::int_blocks`): 16-bit
/// pair products added into 32-bit lanes (`acc ← acc + madd(acc, b)`, the K-quants) and byte products added four
/// at a time (`acc ← dpbusd(acc, a, b)`, the 32-value blocks). Each product reads the accumulator or adds into
/// it: a product of two constants would be computed once, outside the loop, which would then time additions.
#[cfg(target_arch = "x86_64")]
mod integer {
    use super::{ACC_16_REGS, ACC_32_REGS};
    use std::arch::x86_64::*;

    /// Defines a register-only loop of 512-bit integer products: `iters` rounds of [`ACC_32_REGS`] independent
    /// `acc ← $step(acc, b)` with `b = $b`. Returns the sum of every lane, so no round can be optimised away.
    macro_rules! int512_loop {
        ($(#[$doc:meta])* $name:ident, $feature:literal, $b:expr, $step:expr) => {
            $(#[$doc])*
            ///
            /// # Safety
            /// The CPU must have the loop's target features.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn $name(iters: u64) -> f64 {
                let b = $b;
                let mut acc = [_mm512_set1_epi32(1); ACC_32_REGS];
                for _ in 0..iters {
                    for v in acc.iter_mut() {
                        *v = $step(*v, b);
                    }
                }
                let mut sum = 0.0;
                for v in acc {
                    sum += _mm512_reduce_add_epi32(v) as f64;
                }
                sum
            }
        };
    }

    int512_loop!(
        /// 512-bit pair products (32 each).
        pairs_avx512,
        "avx512f,avx512bw",
        _mm512_set1_epi16(-2),
        |acc, b| _mm512_add_epi32(acc, _mm512_madd_epi16(acc, b))
    );
    int512_loop!(
        /// 512-bit byte products (64 each).
        bytes_avx512_vnni,
        "avx512f,avx512bw,avx512vnni",
        _mm512_set1_epi8(-2),
        |acc, b| _mm512_dpbusd_epi32(acc, _mm512_set1_epi8(3), b)
    );

    /// `iters` rounds of [`ACC_16_REGS`] 256-bit pair products.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pairs_avx2(iters: u64) -> f64 {
        let b = _mm256_set1_epi16(-2);
        let mut acc = [_mm256_set1_epi32(1); ACC_16_REGS];
        for _ in 0..iters {
            for v in acc.iter_mut() {
                *v = _mm256_add_epi32(*v, _mm256_madd_epi16(*v, b));
            }
        }
        let mut sum = 0.0;
        for v in acc {
            let mut lanes = [0i32; 8];
            // SAFETY: `lanes` holds one vector.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), v) };
            sum += lanes.iter().map(|&x| x as f64).sum::<f64>();
        }
        sum
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use super::ACC_32_REGS;
    use std::arch::aarch64::*;

    peak_loop!(
        neon_f32,
        "neon",
        f32,
        ACC_32_REGS,
        4,
        vdupq_n_f32,
        |a, b, c| vfmaq_f32(c, a, b),
        vst1q_f32
    );
    peak_loop!(
        neon_f64,
        "neon",
        f64,
        ACC_32_REGS,
        2,
        vdupq_n_f64,
        |a, b, c| vfmaq_f64(c, a, b),
        vst1q_f64
    );
}

/// One peak loop and the floating-point operations one of its rounds performs.
type Loop = (unsafe fn(u64) -> f64, f64);

/// The peak loop of `isa` for f32 (`double = false`) or f64, if the instruction set has one.
fn peak_loop(isa: Isa, double: bool) -> Option<Loop> {
    // Two flops (a multiply and an add) per lane per accumulator.
    let flops = |acc: usize, lanes: usize| (2 * acc * lanes) as f64;
    match (isa, double) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2Fma, false) => Some((x86::avx2_f32, flops(ACC_16_REGS, 8))),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2Fma, true) => Some((x86::avx2_f64, flops(ACC_16_REGS, 4))),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, false) => Some((x86::avx512_f32, flops(ACC_32_REGS, 16))),
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, true) => Some((x86::avx512_f64, flops(ACC_32_REGS, 8))),
        #[cfg(target_arch = "aarch64")]
        (Isa::Neon, false) => Some((arm::neon_f32, flops(ACC_32_REGS, 4))),
        #[cfg(target_arch = "aarch64")]
        (Isa::Neon, true) => Some((arm::neon_f64, flops(ACC_32_REGS, 2))),
        _ => None,
    }
}

/// The pair-product loop of `isa` and the operations one of its rounds performs (two, a multiply and an add, per
/// 16-bit product), if the instruction set has one written.
fn pair_loop(isa: Isa) -> Option<Loop> {
    let ops = |acc: usize, pairs: usize| (2 * 2 * acc * pairs) as f64;
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if std::arch::is_x86_feature_detected!("avx512bw") => {
            Some((integer::pairs_avx512, ops(ACC_32_REGS, 16)))
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => Some((integer::pairs_avx2, ops(ACC_16_REGS, 8))),
        _ => None,
    }
}

/// The byte-product loop of `isa` and the operations one of its rounds performs (two per product), if the
/// instruction set has one written.
fn byte_loop(isa: Isa) -> Option<Loop> {
    let ops = |acc: usize, products: usize| (2 * acc * products) as f64;
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512
            if std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni") =>
        {
            Some((integer::bytes_avx512_vnni, ops(ACC_32_REGS, 64)))
        }
        _ => None,
    }
}

/// The measured peak of byte multiply-adds (`vpdpbusd`, four products into each 32-bit lane) of `isa`, in
/// billions of operations per second (two per product), with `threads` threads for about `seconds`: the
/// yardstick of the 32-value blocks' products. `None` where the instruction set is unavailable or no loop is
/// written for it (AVX-512 without VNNI, AVX2, NEON, portable).
pub fn byte_product_peak_gops(isa: Isa, threads: usize, seconds: f64) -> Option<f64> {
    if !isa.is_available() || threads == 0 {
        return None;
    }
    measure(byte_loop(isa)?, threads, seconds)
}

/// The measured peak of 16-bit integer multiply-adds (`vpmaddwd` into 32-bit lanes) of `isa`, in billions of
/// operations per second (two per product, as flops are counted), with `threads` threads for about `seconds`:
/// the yardstick of `--arithmetic ggml`'s integer products. `None` where the instruction set is unavailable or
/// no loop is written for it (NEON, portable).
pub fn pair_product_peak_gops(isa: Isa, threads: usize, seconds: f64) -> Option<f64> {
    if !isa.is_available() || threads == 0 {
        return None;
    }
    measure(pair_loop(isa)?, threads, seconds)
}

/// The measured FMA peak of `isa` in GFLOP/s, f32 (`double = false`) or f64, with `threads` threads each
/// running the loop for about `seconds`. `None` when `isa` is unavailable or has no FMA (the portable path).
pub fn fma_peak_gflops(isa: Isa, double: bool, threads: usize, seconds: f64) -> Option<f64> {
    if !isa.is_available() || threads == 0 {
        return None;
    }
    measure(peak_loop(isa, double)?, threads, seconds)
}

/// Runs `run` on `threads` threads for about `seconds` each; billions of operations per second.
fn measure((run, flops_per_round): Loop, threads: usize, seconds: f64) -> Option<f64> {
    // SAFETY (both calls): the caller checked that the loop's instruction set is available.
    let calibrate = Instant::now();
    std::hint::black_box(unsafe { run(1_000_000) });
    let per_round = calibrate.elapsed().as_secs_f64() / 1e6;
    let rounds = ((seconds / per_round.max(1e-12)) as u64).max(1_000_000);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| std::hint::black_box(unsafe { run(rounds) }));
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    Some(flops_per_round * rounds as f64 * threads as f64 / elapsed / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `peak` is measured where `has_loop` says a loop is written for the best instruction set, is absent on
    /// the portable path and at no threads, and lies between `low` GOP/s and a thousand products a cycle at
    /// 10 GHz. The rate is wall-clock, so the test may share the machine with other work: a test run at the
    /// lowest priority beside two busy threads gets about 1.5% of a core. The lower bounds are therefore a
    /// hundredth of what any CPU with the loop does: they catch a rate off by a unit or a miscounted loop, not
    /// a slow machine.
    fn check_peak(peak: fn(Isa, usize, f64) -> Option<f64>, has_loop: bool, low: f64) {
        assert_eq!(peak(Isa::Portable, 1, 0.01), None);
        assert_eq!(peak(Isa::best(), 0, 0.01), None);
        let p = peak(Isa::best(), 1, 0.01);
        assert_eq!(p.is_some(), has_loop);
        if let Some(p) = p {
            assert!(p > low && p < 2e5, "{p} GOP/s");
        }
    }

    /// The pair-product peak, two operations per 16-bit product: one 16-lane product a nanosecond would be
    /// 32 GOP/s, and any CPU with the loop does more than a tenth of that (the bound: a hundredth of it).
    #[test]
    fn pair_product_peak_is_measured_where_a_loop_exists() {
        check_peak(pair_product_peak_gops, pair_loop(Isa::best()).is_some(), 0.03);
    }

    /// The byte-product peak, two operations per byte product: one 64-product instruction a nanosecond would
    /// be 128 GOP/s, and any CPU with VNNI does more than a tenth of that (the bound: a hundredth of it).
    #[test]
    fn byte_product_peak_is_measured_where_a_loop_exists() {
        check_peak(byte_product_peak_gops, byte_loop(Isa::best()).is_some(), 0.12);
    }
}
