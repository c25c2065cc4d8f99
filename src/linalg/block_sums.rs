//! The f32 product of a weight tile, summed in f32 over short blocks of the inner dimension and in f64 across
//! them: f32 speed with the accuracy of much shorter f32 sums.
//!
//! A projection's f32 sum over 576–2048 inputs is where most of the f32 engine's distance to float64 comes
//! from (`docs/speed-avx2.md`): a long f32 accumulation loses the small terms that follow a large one. Here
//! every output element is a sum of [`BLOCK`]-long f32 dot products (fused multiply-adds in inner-index order,
//! in registers), each widened exactly and added in f64 in block order; only the final sum is rounded to f32.
//! matrixmultiply cannot do this (its register tiles add into an f32 output, and calling it once per block
//! repacks the weight each time, 1.12–1.17× the pass's time), so the GEMM is written here: packing in the
//! usual panel layout, cache blocks of `BLOCK` inner indices, and a register-tile kernel in plain Rust that the
//! compiler vectorizes for each instruction set it is compiled for (AVX-512F, AVX2+FMA, NEON, portable).
//!
//! Every instruction set runs the same operations in the same order (a fused multiply-add is exact to one
//! rounding everywhere; `f32::mul_add` is a software one where the CPU has none), so all of them give the same
//! bits; only the register-tile shape differs, and it does not change any element's operations.

use super::Isa;
use rayon::prelude::*;

/// Inner indices per f32 block sum, and the cache block of the inner dimension.
pub const BLOCK: usize = 128;

/// Rows of a register tile, on every instruction set: activations are packed in strips of this many rows.
pub(super) const STRIP: usize = 6;

/// Activation rows multiplied together: a `ROW_BLOCK × BLOCK` f32 block stays in the L2 cache.
const ROW_BLOCK: usize = 16 * STRIP;

/// Reusable buffers of [`tile_product`]: the packed weight tile and the f64 sums.
#[derive(Default)]
struct Scratch {
    weights: Vec<f32>,
    sums: Vec<f64>,
}

/// The activations `x` (`rows × k`, row-major) packed for [`tile_product`], once per product: strips of
/// `STRIP` rows, each stored index by index (`out[(i · k + p) · STRIP + r] = x[(i · STRIP + r) · k + p]`), the
/// last strip padded with zero rows. Panics if `x` is shorter than `rows × k`.
pub fn pack_activations(x: &[f32], rows: usize, k: usize) -> Vec<f32> {
    let len = rows.div_ceil(STRIP) * k * STRIP;
    let mut out = Vec::with_capacity(len);
    if k > 0 {
        let x = &x[..rows * k];
        // Written in order, an index of the strip's rows at a time (a write per row and index would stride).
        out.spare_capacity_mut()[..len]
            .par_chunks_mut(k * STRIP)
            .zip(x.par_chunks(k * STRIP))
            .for_each(|(strip, rows)| {
                let rows: [&[f32]; STRIP] =
                    std::array::from_fn(|r| rows.get(r * k..(r + 1) * k).unwrap_or(&[]));
                for (p, dst) in strip.chunks_exact_mut(STRIP).enumerate() {
                    for (d, row) in dst.iter_mut().zip(&rows) {
                        d.write(row.get(p).copied().unwrap_or(0.0));
                    }
                }
            });
    }
    // SAFETY: every one of the `len` elements was written above (none when `k` is 0).
    unsafe { out.set_len(len) };
    out
}

/// `out[r · ldo + c] = Σ_p x[r · k + p] · w[c · k + p]` for `r < rows`, `c < nc`: the product of `rows`
/// activation rows (`x`, row-major, `k` each, given as `packed` = [`pack_activations`]`(x, rows, k)`) with a
/// tile of `nc` weight rows (`w`, row-major, `k` each), with the kernel for `isa` (the engine passes
/// [`Isa::best`]) and the calling thread's buffers; nothing else of `out` is touched. Panics if `isa` is not
/// available on this CPU, `packed` or `w` is shorter than its view, or `ldo < nc`.
///
/// # Safety
/// `out` must be valid for writes at every `r · ldo + c` above, and nothing else may access those elements
/// during the call. They need not be initialized: each is written once and never read. (The output is a
/// pointer because the tiles of one product write interleaved column strips of the same rows.)
#[allow(clippy::too_many_arguments)]
pub unsafe fn tile_product(
    isa: Isa,
    packed: &[f32],
    rows: usize,
    k: usize,
    w: &[f32],
    nc: usize,
    out: *mut f32,
    ldo: usize,
) {
    assert!(isa.is_available(), "{isa} is not available on this CPU");
    assert!(packed.len() >= rows.div_ceil(STRIP) * k * STRIP && w.len() >= nc * k && ldo >= nc);
    SCRATCH.with_borrow_mut(|scratch| {
        let args = (packed, rows, k, w, nc, Out(out), ldo, scratch);
        match isa {
            // SAFETY (each arm): the instruction set was checked available above; the output is the caller's.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { avx512(args) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => unsafe { avx2(args) },
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => unsafe { neon(args) },
            _ => unsafe { product::<16>(args) },
        }
    })
}

thread_local! {
    /// Each thread's buffers for [`tile_product`], kept between products.
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// The output of [`tile_product`], valid for writes at `r · ldo + c` for `r < rows`, `c < nc`.
#[derive(Clone, Copy)]
struct Out(*mut f32);

/// The arguments of [`tile_product`] after its checks.
type Args<'a> = (
    &'a [f32],
    usize,
    usize,
    &'a [f32],
    usize,
    Out,
    usize,
    &'a mut Scratch,
);

/// [`product`] compiled for AVX-512F: 6 × 32 register tiles (12 of the 32 vector registers).
///
/// # Safety
/// The CPU must have AVX-512F; `args`' output as in [`tile_product`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn avx512(args: Args) {
    unsafe { product::<32>(args) }
}

/// [`product`] compiled for AVX2 with FMA: 6 × 16 register tiles (12 of the 16 vector registers).
///
/// # Safety
/// The CPU must have AVX2 and FMA; `args`' output as in [`tile_product`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2(args: Args) {
    unsafe { product::<16>(args) }
}

/// [`product`] compiled for NEON: 6 × 16 register tiles (24 of the 32 vector registers).
///
/// # Safety
/// The CPU must have NEON; `args`' output as in [`tile_product`].
#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
unsafe fn neon(args: Args) {
    unsafe { product::<16>(args) }
}

/// The blocked product with `STRIP × NR` register tiles (see [`tile_product`]).
///
/// # Safety
/// `args`' output as in [`tile_product`].
#[inline(always)]
unsafe fn product<const NR: usize>((packed, rows, k, w, nc, out, ldo, s): Args) {
    let panels = nc.div_ceil(NR);
    let weights = pack_weights::<NR>(w, nc, k, &mut s.weights);
    if k == 0 {
        for r in 0..rows {
            // SAFETY: row `r`'s `nc` elements are the caller's output.
            unsafe { std::ptr::write_bytes(out.0.add(r * ldo), 0, nc) };
        }
        return;
    }
    // Every sum is written by its first block before it is read, so the buffer is never cleared.
    let len = ROW_BLOCK.div_ceil(STRIP) * panels * STRIP * NR;
    if s.sums.len() < len {
        s.sums.resize(len, 0.0);
    }
    for r0 in (0..rows).step_by(ROW_BLOCK) {
        let mr = ROW_BLOCK.min(rows - r0);
        let (first, strips) = (r0 / STRIP, mr.div_ceil(STRIP));
        for p0 in (0..k).step_by(BLOCK) {
            let kb = BLOCK.min(k - p0);
            let step = Step::of(p0, kb, k);
            for j in 0..panels {
                let b = &weights[(j * k + p0) * NR..(j * k + p0 + kb) * NR];
                for i in 0..strips {
                    let a = &packed[((first + i) * k + p0) * STRIP..][..kb * STRIP];
                    let sums = &mut s.sums[(i * panels + j) * STRIP * NR..][..STRIP * NR];
                    let (r, c) = (r0 + i * STRIP, j * NR);
                    let tile = Tile {
                        // SAFETY: `(r, c)` is an element of the caller's output (`r < rows`, `c < nc`).
                        at: unsafe { out.0.add(r * ldo + c) },
                        ldo,
                        rows: STRIP.min(rows - r),
                        cols: NR.min(nc - c),
                    };
                    // SAFETY: the tile's rows and columns are the caller's output.
                    unsafe { block_kernel::<STRIP, NR>(block_dot(a, b), sums, step, 1.0, tile) };
                }
            }
        }
    }
}

/// Which block of the inner dimension [`block_kernel`] multiplies: whether the f64 sums hold earlier blocks,
/// and whether the result is final.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Step {
    /// The first of several blocks: the sums are set.
    First,
    /// Neither the first nor the last: the sums are added to.
    Middle,
    /// The last of several: the sums plus this block, rounded to f32, go to the output.
    Last,
    /// The only block: it goes to the output.
    Only,
}

impl Step {
    /// The step of the block of `kb` inner indices from `p0`, of `k` in all.
    pub(super) fn of(p0: usize, kb: usize, k: usize) -> Step {
        match (p0 == 0, p0 + kb == k) {
            (true, true) => Step::Only,
            (true, false) => Step::First,
            (false, false) => Step::Middle,
            (false, true) => Step::Last,
        }
    }
}

/// The part of the output a register tile writes at its last block: `rows × cols` elements from `at`, row
/// stride `ldo`.
#[derive(Clone, Copy)]
pub(super) struct Tile {
    pub(super) at: *mut f32,
    pub(super) ldo: usize,
    pub(super) rows: usize,
    pub(super) cols: usize,
}

/// One block of the inner dimension for one register tile, given its f32 sums `acc` ([`block_dot`]): as
/// `step` says, set into the f64 `sums[r · NR + c]`, added to them, or added, multiplied by `alpha` and
/// written to `out` rounded to f32.
///
/// # Safety
/// At the last (or only) block, `out` must be valid for writes at its `rows × cols` elements.
#[inline(always)]
pub(super) unsafe fn block_kernel<const MR: usize, const NR: usize>(
    acc: [[f32; NR]; MR],
    sums: &mut [f64],
    step: Step,
    alpha: f64,
    out: Tile,
) {
    let sums = &mut sums[..MR * NR];
    if matches!(step, Step::First | Step::Only) {
        for r in 0..MR {
            for c in 0..NR {
                sums[r * NR + c] = f64::from(acc[r][c]);
            }
        }
    } else {
        for r in 0..MR {
            for c in 0..NR {
                sums[r * NR + c] += f64::from(acc[r][c]);
            }
        }
    }
    if matches!(step, Step::First | Step::Middle) {
        return;
    }
    for (r, sums) in sums.chunks_exact(NR).take(out.rows).enumerate() {
        // SAFETY: the tile's `rows × cols` elements are the caller's output.
        let row = unsafe { std::slice::from_raw_parts_mut(out.at.add(r * out.ldo), out.cols) };
        if let Ok(row) = <&mut [f32; NR]>::try_from(&mut *row) {
            // A whole tile row, with a constant length: vectorized.
            for (o, &v) in row.iter_mut().zip(sums) {
                *o = (v * alpha) as f32;
            }
        } else {
            for (o, &v) in row.iter_mut().zip(sums) {
                *o = (v * alpha) as f32;
            }
        }
    }
}

/// `acc[r][c] = Σ_p a[p · MR + r] · b[p · NR + c]` in f32 fused multiply-adds over `p` in order.
#[inline(always)]
fn block_dot<const MR: usize, const NR: usize>(a: &[f32], b: &[f32]) -> [[f32; NR]; MR] {
    let mut acc = [[0.0f32; NR]; MR];
    // Constant loop bounds, so that the compiler unrolls both inner loops and keeps `acc` in vector registers.
    for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        for r in 0..MR {
            for c in 0..NR {
                acc[r][c] = ap[r].mul_add(bp[c], acc[r][c]);
            }
        }
    }
    acc
}

/// Packs the `nc × k` weight tile into panels of `NR` weight rows, each stored index by index
/// (`out[(j · k + p) · NR + c] = w[(j · NR + c) · k + p]`), the last panel padded with zero rows.
#[inline(always)]
fn pack_weights<'a, const NR: usize>(
    w: &[f32],
    nc: usize,
    k: usize,
    buf: &'a mut Vec<f32>,
) -> &'a [f32] {
    // Panels start on a cache line (a line holds 16 f32), so that no load of a panel row straddles two lines.
    let len = nc.div_ceil(NR) * k * NR;
    if buf.len() < len + 15 {
        buf.resize(len + 15, 0.0);
    }
    let skip = buf.as_ptr().align_offset(64).min(15);
    let out = &mut buf[skip..skip + len];
    if k > 0 {
        // Written in order, a panel row at a time from NR weight rows read side by side: a write per
        // weight row and index would touch a new cache line each time.
        for (panel, rows) in out.chunks_exact_mut(k * NR).zip(w[..nc * k].chunks(k * NR)) {
            if rows.len() == k * NR {
                // A whole panel: every row has `k` values, read without the padding's checks.
                let rows: [&[f32]; NR] = std::array::from_fn(|c| &rows[c * k..(c + 1) * k]);
                for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
                    let dst: &mut [f32; NR] = dst.try_into().expect("a panel row");
                    for c in 0..NR {
                        dst[c] = rows[c][p];
                    }
                }
                continue;
            }
            let row = |c: usize| rows.get(c * k..(c + 1) * k).unwrap_or(&[]);
            let rows: [&[f32]; NR] = std::array::from_fn(row);
            for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
                for (d, row) in dst.iter_mut().zip(&rows) {
                    *d = row.get(p).copied().unwrap_or(0.0);
                }
            }
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Deterministic values in [-1, 1) with a few large ones, as real activations have.
    pub(in crate::linalg) fn values(n: usize, seed: u64) -> Vec<f32> {
        (0..n as u64)
            .map(|i| {
                let h = (i ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
                let v = h as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                if h.is_multiple_of(61) {
                    v * 300.0
                } else {
                    v
                }
            })
            .collect()
    }

    /// The product of the test operands of shape `(rows, k, nc)` by `isa`'s kernel, or by the portable code
    /// with `STRIP × NR` tiles when `isa` is `None`, into rows 3 longer than the tile.
    fn run<const NR: usize>(isa: Option<Isa>, (rows, k, nc): (usize, usize, usize)) -> Vec<f32> {
        let (x, w) = (values(rows * k, 1), values(nc * k, 2));
        let packed = pack_activations(&x, rows, k);
        let ldo = nc + 3;
        let mut out = vec![f32::NAN; rows * ldo];
        let o = out.as_mut_ptr();
        // SAFETY: `out` holds `rows` rows of `ldo ≥ nc` elements and is not otherwise used during the call.
        unsafe {
            match isa {
                Some(isa) => tile_product(isa, &packed, rows, k, &w, nc, o, ldo),
                None => {
                    let s = &mut Scratch::default();
                    product::<NR>((&packed, rows, k, &w, nc, Out(o), ldo, s))
                }
            }
        }
        // The columns past `nc` of each row are not the product's: they stay untouched.
        assert!(out.chunks(ldo).all(|r| r[nc..].iter().all(|v| v.is_nan())));
        out
    }

    /// The sum the kernel is specified to compute, written plainly: f32 fused multiply-adds over each block of
    /// `BLOCK` inner indices, added in f64, rounded once.
    fn reference(x: &[f32], w: &[f32], k: usize, r: usize, c: usize) -> f32 {
        let mut total = 0.0f64;
        for p0 in (0..k).step_by(BLOCK) {
            let mut acc = 0.0f32;
            for p in p0..(p0 + BLOCK).min(k) {
                acc = x[r * k + p].mul_add(w[c * k + p], acc);
            }
            total += f64::from(acc);
        }
        total as f32
    }

    /// Shapes with partial strips, panels and blocks, several row blocks, and the empty cases.
    const SHAPES: [(usize, usize, usize); 6] = [
        (1, 1, 1),
        (7, 130, 17),
        (ROW_BLOCK + 13, 2 * BLOCK + 5, 33),
        (200, 64, 48),
        (0, 10, 5),
        (5, 0, 3),
    ];

    #[test]
    fn every_element_is_the_specified_block_sum() {
        for (rows, k, nc) in SHAPES {
            let got = run::<16>(Some(Isa::Portable), (rows, k, nc));
            let (x, w) = (values(rows * k, 1), values(nc * k, 2));
            for r in 0..rows {
                for c in 0..nc {
                    let want = reference(&x, &w, k, r, c);
                    assert_eq!(
                        got[r * (nc + 3) + c].to_bits(),
                        want.to_bits(),
                        "{rows}×{k}×{nc} at ({r}, {c})"
                    );
                }
            }
        }
    }

    #[test]
    fn every_instruction_set_and_tile_shape_gives_the_same_bits() {
        for shape in SHAPES {
            let portable = run::<16>(Some(Isa::Portable), shape);
            for isa in Isa::available() {
                let got = run::<16>(Some(isa), shape);
                assert!(
                    got.iter()
                        .zip(&portable)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{isa} at {shape:?}"
                );
            }
            // Other tile shapes (AVX-512's among them), run by the portable code on any CPU.
            for other in [run::<32>(None, shape), run::<8>(None, shape)] {
                assert!(other
                    .iter()
                    .zip(&portable)
                    .all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }

    #[test]
    fn block_sums_are_closer_to_the_exact_product_than_one_long_f32_sum() {
        let (rows, k, nc) = (64, 1536, 32);
        let (x, w) = (values(rows * k, 3), values(nc * k, 4));
        let mut out = vec![0.0f32; rows * nc];
        // SAFETY: `out` holds the `rows × nc` product and is not otherwise used during the call.
        unsafe {
            let packed = pack_activations(&x, rows, k);
            tile_product(Isa::best(), &packed, rows, k, &w, nc, out.as_mut_ptr(), nc);
        }
        let (mut err_blocks, mut err_long, mut norm) = (0.0f64, 0.0f64, 0.0f64);
        for r in 0..rows {
            for c in 0..nc {
                let (xr, wc) = (&x[r * k..(r + 1) * k], &w[c * k..(c + 1) * k]);
                let exact: f64 = xr
                    .iter()
                    .zip(wc)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                let long = xr
                    .iter()
                    .zip(wc)
                    .fold(0.0f32, |s, (&a, &b)| a.mul_add(b, s));
                err_blocks += (f64::from(out[r * nc + c]) - exact).powi(2);
                err_long += (f64::from(long) - exact).powi(2);
                norm += exact * exact;
            }
        }
        // The 12 block sums of 128 terms each carry about 1/12 of the long sum's squared error; allow 1/4.
        assert!(
            err_blocks < err_long / 4.0,
            "{err_blocks:e} vs {err_long:e}"
        );
        assert!(err_blocks / norm < 1e-13, "NMSE {:e}", err_blocks / norm);
    }
}
