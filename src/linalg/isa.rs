//! The SIMD instruction sets of the CPUs ropescope runs on, detected at run time.
//!
//! The weight products ([`super::block_sums`]), attention's f32 products and the FMA peak loops the benchmarks
//! report against are compiled per instruction set with `#[target_feature]`, and run only after
//! [`Isa::is_available`] has confirmed the CPU has it; matrixmultiply (attention's f64 products) picks its own
//! kernel at run time.

use std::sync::OnceLock;

/// An instruction set with its own FMA peak loop (none for the portable path).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Plain Rust with no instruction set assumed: runs everywhere.
    Portable,
    /// x86-64 AVX2 with FMA3 (256-bit vectors).
    Avx2Fma,
    /// x86-64 AVX-512F (512-bit vectors).
    Avx512,
    /// AArch64 Advanced SIMD (128-bit vectors, fused multiply-add).
    Neon,
}

impl Isa {
    /// Every instruction set, portable first.
    #[cfg(any(test, feature = "internals"))]
    pub const ALL: [Isa; 4] = [Isa::Portable, Isa::Avx2Fma, Isa::Avx512, Isa::Neon];

    /// The name used in benchmarks and messages.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2Fma => "avx2+fma",
            Isa::Avx512 => "avx512f",
            Isa::Neon => "neon",
        }
    }

    /// Whether the running CPU executes this instruction set.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            // The AVX-512 kernels also use AVX2 and FMA instructions, which every AVX-512F CPU has; checked anyway.
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[allow(unreachable_patterns)] // every arm above may be compiled in
            _ => false,
        }
    }

    /// The instruction sets the running CPU executes, portable first.
    #[cfg(any(test, feature = "internals"))]
    pub fn available() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.is_available()).collect()
    }

    /// The widest available instruction set (detected once per process): the one the weight products use.
    pub fn best() -> Isa {
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| {
            [Isa::Avx512, Isa::Avx2Fma, Isa::Neon]
                .into_iter()
                .find(|i| i.is_available())
                .unwrap_or(Isa::Portable)
        })
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
