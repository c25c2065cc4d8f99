//! The f32 products of attention, `alpha · a · b` with both operands row-major and read where they lie, summed
//! as [`block_sums`](super::block_sums) sums: f32 fused multiply-adds over [`BLOCK`]-long blocks of the inner
//! index, added in f64 across blocks, scaled and rounded once.
//!
//! Attention's products have a short side (the head dimension, 64–256) and a long one (the keys, up to the
//! context): `scores = q · kᵀ` reads 128 query rows against every visible key, `probs · v` the probabilities of
//! those rows against the values. matrixmultiply packs both operands of every such product, and packing the
//! probability matrix for `probs · v` alone was a sixth of a long prompt's pass, with the keys' packing
//! another share. Here nothing is packed: a register tile of `STRIP` rows of `a` and `NR` columns of `b` reads
//! `a`'s rows by broadcasts and `b`'s row segments by vector loads straight from the caller's slices (the keys
//! are laid out once per layer, transposed, for this), and only a tile with fewer than `NR` columns copies
//! its part of `b` into a zero-padded buffer.
//!
//! As in [`block_sums`](super::block_sums), every instruction set runs the same operations in the same order,
//! so all of them give the same bits.

use super::block_sums::{block_kernel, Step, Tile, BLOCK, STRIP};
use super::{span, Isa};

/// Output elements whose f64 sums are held at once: the columns of the output are taken in chunks of at most
/// this many elements (whole register panels), so the sums stay in the L2 cache.
const SUMS: usize = 1 << 15;

/// Zeros standing in for the rows of a register tile past the last row of `a`.
static ZEROS: [f32; BLOCK] = [0.0; BLOCK];

/// `out[r · ldo + c] = alpha · Σ_p a[r · lda + p] · b[p · ldb + c]` for `r < m`, `c < n`, `p < k`, with the
/// kernel for `isa` (the engine passes [`Isa::best`]); nothing else of `out` is touched. Panics if `isa` is not
/// available on this CPU, a slice is shorter than its view, or a row stride is shorter than its row.
#[allow(clippy::too_many_arguments)]
pub fn product(
    isa: Isa,
    out: &mut [f32],
    ldo: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    (m, n, k): (usize, usize, usize),
    alpha: f32,
) {
    assert!(isa.is_available(), "{isa} is not available on this CPU");
    assert!(lda >= k && ldb >= n && ldo >= n);
    assert!(a.len() >= span(m, k, lda) && b.len() >= span(k, n, ldb));
    assert!(out.len() >= span(m, n, ldo));
    if m == 0 || n == 0 {
        return;
    }
    let args = Args {
        out,
        ldo,
        a,
        lda,
        b,
        ldb,
        mnk: (m, n, k),
        alpha: f64::from(alpha),
    };
    match isa {
        // SAFETY (each arm): the instruction set was checked available above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512(args) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unsafe { avx2(args) },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => unsafe { neon(args) },
        _ => run::<16>(args),
    }
}

/// The arguments of [`product`] after its checks.
struct Args<'a> {
    out: &'a mut [f32],
    ldo: usize,
    a: &'a [f32],
    lda: usize,
    b: &'a [f32],
    ldb: usize,
    mnk: (usize, usize, usize),
    alpha: f64,
}

/// [`run`] compiled for AVX-512F: 6 × 32 register tiles.
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn avx512(args: Args) {
    run::<32>(args)
}

/// [`run`] compiled for AVX2 with FMA: 6 × 16 register tiles.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2(args: Args) {
    run::<16>(args)
}

/// [`run`] compiled for NEON: 6 × 16 register tiles.
///
/// # Safety
/// The CPU must have NEON.
#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
unsafe fn neon(args: Args) {
    run::<16>(args)
}

/// The product with `STRIP × NR` register tiles: column chunks whose sums fit [`SUMS`], then blocks of the
/// inner index, then panels of `NR` columns, then strips of `STRIP` rows.
#[inline(always)]
fn run<const NR: usize>(args: Args) {
    let Args {
        out,
        ldo,
        a,
        lda,
        b,
        ldb,
        mnk: (m, n, k),
        alpha,
    } = args;
    let out_ptr = out.as_mut_ptr();
    if k == 0 {
        for r in 0..m {
            out[r * ldo..][..n].fill(0.0);
        }
        return;
    }
    let strips = m.div_ceil(STRIP);
    let chunk = ((SUMS / (strips * STRIP * NR)).max(1) * NR).min(n.next_multiple_of(NR));
    // The f64 sums of several blocks; none for a single block, which goes from the registers to `out`.
    let mut sums = vec![0.0f64; if k > BLOCK { strips * STRIP * chunk } else { 0 }];
    let mut edge = Vec::new();
    for c0 in (0..n).step_by(chunk) {
        let cn = chunk.min(n - c0);
        for p0 in (0..k).step_by(BLOCK) {
            let kb = BLOCK.min(k - p0);
            let step = Step::of(p0, kb, k);
            for j in 0..cn.div_ceil(NR) {
                let c = c0 + j * NR;
                let cols = NR.min(n - c);
                // A whole panel is read in place; a partial one is copied, zero-padded, `NR` to a row.
                let (panel, ld): (&[f32], usize) = if cols == NR {
                    (&b[p0 * ldb + c..], ldb)
                } else {
                    edge.clear();
                    edge.resize(kb * NR, 0.0);
                    for (p, row) in edge.chunks_exact_mut(NR).enumerate() {
                        row[..cols].copy_from_slice(&b[(p0 + p) * ldb + c..][..cols]);
                    }
                    (&edge, NR)
                };
                for i in 0..strips {
                    let r = i * STRIP;
                    let rows = STRIP.min(m - r);
                    let a_rows: [&[f32]; STRIP] = std::array::from_fn(|s| {
                        if s < rows {
                            &a[(r + s) * lda + p0..][..kb]
                        } else {
                            &ZEROS[..kb]
                        }
                    });
                    let acc = dot::<NR>(&a_rows, panel, ld, kb);
                    let tile = Tile {
                        // SAFETY: `(r, c)` is an element of `out` (`r < m`, `c < n`).
                        at: unsafe { out_ptr.add(r * ldo + c) },
                        ldo,
                        rows,
                        cols,
                    };
                    let sums = sums.get_mut((i * (chunk / NR) + j) * STRIP * NR..).unwrap_or(&mut []);
                    // SAFETY: the tile's `rows × cols` elements lie in `out` (checked by `product`), which
                    // this function borrows uniquely.
                    unsafe { block_kernel::<f32, STRIP, NR>(acc, sums, step, alpha, tile) };
                }
            }
        }
    }
}

/// `acc[r][c] = Σ_p a[r][p] · b[p · ldb + c]` for `p < kb`, in f32 fused multiply-adds over `p` in order.
#[inline(always)]
fn dot<const NR: usize>(
    a: &[&[f32]; STRIP],
    b: &[f32],
    ldb: usize,
    kb: usize,
) -> [[f32; NR]; STRIP] {
    let mut acc = [[0.0f32; NR]; STRIP];
    assert!(a.iter().all(|row| row.len() >= kb) && b.len() >= (kb - 1) * ldb + NR);
    for p in 0..kb {
        // SAFETY: `p < kb`, and the assertion above bounds every row of `a` and the last row of `b`.
        let bp: &[f32; NR] = unsafe { &*b.as_ptr().add(p * ldb).cast() };
        for r in 0..STRIP {
            // SAFETY: as above.
            let ar = unsafe { *a[r].get_unchecked(p) };
            for c in 0..NR {
                acc[r][c] = ar.mul_add(bp[c], acc[r][c]);
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::super::block_sums::tests::values;
    use super::*;

    /// Shapes with partial strips, panels and blocks, more columns than one chunk, a single strip, and the
    /// empty cases.
    const SHAPES: [(usize, usize, usize); 8] = [
        (1, 1, 1),
        (5, 70, 64),
        (7, 17, 130),
        (128, 64, 300),
        (13, 2 * BLOCK + 5, 64),
        (128, 2000, 40),
        (0, 10, 5),
        (5, 3, 0),
    ];

    /// The product of the test operands (strided: 3 more columns in each row of `a`, `b` and `out`).
    fn run_on(isa: Isa, (m, n, k): (usize, usize, usize), alpha: f32) -> Vec<f32> {
        let (lda, ldb, ldo) = (k + 3, n + 3, n + 3);
        let (a, b) = (values(m * lda, 1), values(k * ldb, 2));
        let mut out = vec![f32::NAN; m * ldo];
        product(isa, &mut out, ldo, &a, lda, &b, ldb, (m, n, k), alpha);
        // The columns past `n` of each row are not the product's: they stay untouched.
        assert!(out.chunks(ldo).all(|r| r[n..].iter().all(|v| v.is_nan())));
        out
    }

    #[test]
    fn every_element_is_the_specified_block_sum() {
        for (m, n, k) in SHAPES {
            // Not a power of two, so that scaling rounds: a single block is scaled in f32, which must give
            // the f64 product's rounding.
            let alpha = 0.3;
            let got = run_on(Isa::Portable, (m, n, k), alpha);
            let (lda, ldb, ldo) = (k + 3, n + 3, n + 3);
            let (a, b) = (values(m * lda, 1), values(k * ldb, 2));
            for r in 0..m {
                for c in 0..n {
                    let mut total = 0.0f64;
                    for p0 in (0..k).step_by(BLOCK) {
                        let mut acc = 0.0f32;
                        for p in p0..(p0 + BLOCK).min(k) {
                            acc = a[r * lda + p].mul_add(b[p * ldb + c], acc);
                        }
                        total += f64::from(acc);
                    }
                    let want = (total * f64::from(alpha)) as f32;
                    assert_eq!(
                        got[r * ldo + c].to_bits(),
                        want.to_bits(),
                        "{m}×{n}×{k} ({r}, {c})"
                    );
                }
            }
        }
    }

    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        for shape in SHAPES {
            let portable = run_on(Isa::Portable, shape, 1.5);
            for isa in Isa::available() {
                let got = run_on(isa, shape, 1.5);
                assert!(
                    got.iter()
                        .zip(&portable)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{isa} at {shape:?}"
                );
            }
        }
    }
}
