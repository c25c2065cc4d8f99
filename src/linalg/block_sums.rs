//! The product of a weight tile, summed over short blocks of the inner dimension and in f64 across them: in
//! f32, f32 speed with the accuracy of much shorter f32 sums; in f64, matrixmultiply's sums at the speed of a
//! kernel with twice as many registers in use.
//!
//! A projection's f32 sum over 576–2048 inputs is where most of the f32 engine's distance to float64 comes
//! from (`docs/speed-avx2.md`): a long f32 accumulation loses the small terms that follow a large one. Here
//! every output element is a sum of [`BlockElement::BLOCK`]-long dot products (fused multiply-adds in
//! inner-index order, in registers), each widened exactly and added in f64 in block order; only the final sum
//! is rounded to the element type. matrixmultiply cannot do this in f32 (its register tiles add into an f32
//! output, and calling it once per block repacks the weight each time, 1.12–1.17× the pass's time), so the
//! GEMM is written here: packing in the usual panel layout, cache blocks of `BLOCK` inner indices, and a
//! register-tile kernel in plain Rust that the compiler vectorizes for each instruction set it is compiled for
//! (AVX-512F, AVX2+FMA, NEON, portable).
//!
//! In f64 the blocks are matrixmultiply's own cache blocks of the inner dimension (256), and a block's
//! fused multiply-adds start from zero and are added to the earlier blocks' sum, as matrixmultiply's
//! fused-multiply-add kernels (AVX-512F, AVX2+FMA, NEON) compute every element of a product with `alpha = 1`
//! (`tests::f64_products_are_matrixmultiplys_bits`): the f64 golden pass keeps its bits. Its 8 × 8 AVX-512
//! register tile keeps 8 of the 32 vector registers summing, and a broadcast load feeds each fused
//! multiply-add; the 6 × 24 tile here keeps 18 summing, a broadcast feeding three.
//!
//! Every instruction set runs the same operations in the same order (a fused multiply-add is exact to one
//! rounding everywhere; `mul_add` is a software one where the CPU has none), so all of them give the same
//! bits; only the register-tile shape differs, and it does not change any element's operations.

use super::{weight_tiles, Isa};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Inner indices per f32 block sum, and the f32 cache block of the inner dimension.
pub const BLOCK: usize = 128;

/// Inner indices per f64 block sum: matrixmultiply's `D_KC`, whose blocks its f64 products sum in.
pub const F64_BLOCK: usize = 256;

/// Rows of a register tile, on every instruction set: activations are packed in strips of this many rows.
pub(super) const STRIP: usize = 6;

/// Columns (weight rows) of each instruction set's register tile, in f32 and in f64: [`panel_width`].
const AVX512_WIDTHS: (usize, usize) = (32, 24);
/// As [`AVX512_WIDTHS`], for AVX2 with FMA.
const AVX2_WIDTHS: (usize, usize) = (16, 8);
/// As [`AVX512_WIDTHS`], for NEON.
const NEON_WIDTHS: (usize, usize) = (16, 8);
/// As [`AVX512_WIDTHS`], for the portable code.
const PORTABLE_WIDTHS: (usize, usize) = (16, 16);

/// The number of weight rows (output columns) one register tile of `isa`'s kernel multiplies in `T`: the
/// width of its weight panels. A weight tile of a multiple of it leaves no panel padded.
pub fn panel_width<T: BlockElement>(isa: Isa) -> usize {
    let (f32_width, f64_width) = match isa {
        Isa::Avx512 => AVX512_WIDTHS,
        Isa::Avx2Fma => AVX2_WIDTHS,
        Isa::Neon => NEON_WIDTHS,
        Isa::Portable => PORTABLE_WIDTHS,
    };
    if is_f32::<T>() {
        f32_width
    } else {
        f64_width
    }
}

/// Whether `T` is f32 (else f64).
const fn is_f32<T>() -> bool {
    std::mem::size_of::<T>() == 4
}

/// Activation rows multiplied together: a `ROW_BLOCK × BLOCK` block (48 KiB in f32, 192 KiB in f64) stays in
/// the L2 cache.
const ROW_BLOCK: usize = 16 * STRIP;

/// An element type of the block-sum GEMM: f32 or f64.
pub trait BlockElement: Copy + Default + Send + Sync + 'static {
    /// Inner indices per block sum, and the cache block of the inner dimension.
    const BLOCK: usize;

    /// `self · b + c`, rounded once.
    fn fused(self, b: Self, c: Self) -> Self;

    /// The value in f64 (exact).
    fn widen(self) -> f64;

    /// `v` rounded to this type.
    fn narrow(v: f64) -> Self;

    /// `self · alpha` rounded once to this type, for an `alpha` that this type holds exactly.
    fn times(self, alpha: f64) -> Self;

    /// Runs `f` on the calling thread's [`Scratch`] for this type, kept between products.
    fn with_scratch<R>(f: impl FnOnce(&mut Scratch<Self>) -> R) -> R;

    /// This type's slot of `cache`.
    fn slot(cache: &PanelCache) -> &OnceLock<Option<Panels<Self>>>;
}

impl BlockElement for f32 {
    const BLOCK: usize = BLOCK;
    #[inline(always)]
    fn fused(self, b: f32, c: f32) -> f32 {
        self.mul_add(b, c)
    }
    #[inline(always)]
    fn widen(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn narrow(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn times(self, alpha: f64) -> f32 {
        self * alpha as f32
    }
    fn with_scratch<R>(f: impl FnOnce(&mut Scratch<f32>) -> R) -> R {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch<f32>> = std::cell::RefCell::default();
        }
        SCRATCH.with_borrow_mut(f)
    }
    fn slot(cache: &PanelCache) -> &OnceLock<Option<Panels<f32>>> {
        &cache.f32
    }
}

impl BlockElement for f64 {
    const BLOCK: usize = F64_BLOCK;
    #[inline(always)]
    fn fused(self, b: f64, c: f64) -> f64 {
        self.mul_add(b, c)
    }
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
    #[inline(always)]
    fn narrow(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn times(self, alpha: f64) -> f64 {
        self * alpha
    }
    fn with_scratch<R>(f: impl FnOnce(&mut Scratch<f64>) -> R) -> R {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch<f64>> = std::cell::RefCell::default();
        }
        SCRATCH.with_borrow_mut(f)
    }
    fn slot(cache: &PanelCache) -> &OnceLock<Option<Panels<f64>>> {
        &cache.f64
    }
}

/// Reusable buffers of [`tile_product`]: the packed weight tile and the f64 sums.
#[derive(Default)]
pub struct Scratch<T> {
    weights: Vec<T>,
    sums: Vec<f64>,
}

/// The activations `x` (`rows × k`, row-major) packed for [`tile_product`], once per product: strips of
/// `STRIP` rows, each stored index by index (`out[(i · k + p) · STRIP + r] = x[(i · STRIP + r) · k + p]`), the
/// last strip padded with zero rows. Panics if `x` is shorter than `rows × k`.
pub fn pack_activations<T: BlockElement>(x: &[T], rows: usize, k: usize) -> Vec<T> {
    let len = rows.div_ceil(STRIP) * k * STRIP;
    let mut out = Vec::with_capacity(len);
    if k > 0 {
        let x = &x[..rows * k];
        // Written in order, an index of the strip's rows at a time (a write per row and index would stride).
        out.spare_capacity_mut()[..len]
            .par_chunks_mut(k * STRIP)
            .zip(x.par_chunks(k * STRIP))
            .for_each(|(strip, rows)| {
                let rows: [&[T]; STRIP] =
                    std::array::from_fn(|r| rows.get(r * k..(r + 1) * k).unwrap_or(&[]));
                for (p, dst) in strip.chunks_exact_mut(STRIP).enumerate() {
                    for (d, row) in dst.iter_mut().zip(&rows) {
                        d.write(row.get(p).copied().unwrap_or_default());
                    }
                }
            });
    }
    // SAFETY: every one of the `len` elements was written above (none when `k` is 0).
    unsafe { out.set_len(len) };
    out
}

/// A whole weight (`n × k`) packed once into the panels that `isa`'s kernel multiplies, for a weight multiplied
/// many times: [`tile_product`] packs a tile's panels on every call, [`panels_product`] reads these.
pub struct Panels<T> {
    isa: Isa,
    n: usize,
    k: usize,
    /// Panel `j` (weight rows `j · NR..(j + 1) · NR`, the last padded with zero rows) at
    /// `data[start + j · k · NR..]`, stored index by index as [`tile_product`] packs a tile; `start` puts the
    /// panels on a cache line.
    data: Vec<T>,
    start: usize,
}

impl<T: BlockElement> Panels<T> {
    /// Bytes the panels of an `n × k` weight take for `isa`'s kernel.
    pub fn bytes(isa: Isa, n: usize, k: usize) -> usize {
        let width = panel_width::<T>(isa);
        (n.div_ceil(width) * width * k + 64) * std::mem::size_of::<T>()
    }

    /// The `n × k` weight whose rows `fill(r0..r1, buf)` writes (row-major, `k` each), packed for `isa`, in
    /// parallel over the tiles of [`weight_tiles`]. Panics if `isa` is not available on this CPU.
    pub fn pack(
        isa: Isa,
        n: usize,
        k: usize,
        fill: impl Fn(Range<usize>, &mut [T]) + Sync,
    ) -> Self {
        assert!(isa.is_available(), "{isa} is not available on this CPU");
        let (width, line) = (panel_width::<T>(isa), 64 / std::mem::size_of::<T>());
        let len = n.div_ceil(width) * width * k;
        let mut data = vec![T::default(); len + line];
        let start = data.as_ptr().align_offset(64).min(line);
        let mut panels: Vec<&mut [T]> = Vec::new();
        let mut rest = &mut data[start..start + len];
        for tile in weight_tiles(n, width) {
            let (head, tail) = rest.split_at_mut(tile.len().div_ceil(width) * width * k);
            panels.push(head);
            rest = tail;
        }
        weight_tiles(n, width).into_par_iter().zip(panels).for_each(|(tile, out)| {
            // Once per weight: a buffer of its own.
            let mut w = vec![T::default(); tile.len() * k];
            fill(tile.clone(), &mut w);
            pack_into(isa, &w, tile.len(), k, out);
        });
        Self { isa, n, k, data, start }
    }

    /// The weight's rows.
    pub fn rows(&self) -> usize {
        self.n
    }

    /// The weight's columns.
    pub fn cols(&self) -> usize {
        self.k
    }

    /// The instruction set whose kernel the panels are packed for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The panels of weight rows `rows`, which start on a panel.
    fn of_rows(&self, rows: Range<usize>) -> &[T] {
        let width = panel_width::<T>(self.isa);
        assert!(rows.start.is_multiple_of(width) && rows.end <= self.n, "rows {rows:?} of panels of {width}");
        let len = rows.len().div_ceil(width) * width * self.k;
        &self.data[self.start + rows.start * self.k..][..len]
    }
}

/// The packed panels of one weight in each precision, made on first use where a budget shared with other
/// weights allows ([`PanelCache::get_or_pack`]).
#[derive(Default)]
pub struct PanelCache {
    f32: OnceLock<Option<Panels<f32>>>,
    f64: OnceLock<Option<Panels<f64>>>,
}

impl PanelCache {
    /// The weight's panels in `T` for `isa`: packed on the first call if their [`Panels::bytes`] fit in what is
    /// left of `budget` (which they then take), else never (`None` on this and every later call).
    pub fn get_or_pack<T: BlockElement>(
        &self,
        isa: Isa,
        (n, k): (usize, usize),
        budget: &AtomicUsize,
        fill: impl Fn(Range<usize>, &mut [T]) + Sync,
    ) -> Option<&Panels<T>> {
        T::slot(self)
            .get_or_init(|| {
                let bytes = Panels::<T>::bytes(isa, n, k);
                let taken = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                    left.checked_sub(bytes)
                });
                taken.ok().map(|_| Panels::pack(isa, n, k, fill))
            })
            .as_ref()
            .filter(|p| p.isa == isa && (p.n, p.k) == (n, k))
    }
}

/// [`tile_product`] with weight rows `tile` of `panels` (whose first row starts a panel) instead of a tile to
/// pack: the same bits.
///
/// # Safety
/// As [`tile_product`], for `nc = tile.len()`.
pub unsafe fn panels_product<T: BlockElement>(
    packed: &[T],
    rows: usize,
    panels: &Panels<T>,
    tile: Range<usize>,
    out: *mut T,
    ldo: usize,
) {
    let (isa, k, nc) = (panels.isa, panels.k, tile.len());
    assert!(packed.len() >= rows.div_ceil(STRIP) * k * STRIP && ldo >= nc);
    let weights = Weights::Panels(panels.of_rows(tile));
    // SAFETY: forwarded from the caller; the panels were packed for `isa`, which `Panels::pack` checked.
    T::with_scratch(|s| unsafe { dispatch(isa, (packed, rows, k, weights, nc, Out(out), ldo, s)) })
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
pub unsafe fn tile_product<T: BlockElement>(
    isa: Isa,
    packed: &[T],
    rows: usize,
    k: usize,
    w: &[T],
    nc: usize,
    out: *mut T,
    ldo: usize,
) {
    assert!(isa.is_available(), "{isa} is not available on this CPU");
    assert!(packed.len() >= rows.div_ceil(STRIP) * k * STRIP && w.len() >= nc * k && ldo >= nc);
    let weights = Weights::Rows(w);
    // SAFETY: the instruction set was checked available above; the output is the caller's.
    T::with_scratch(|s| unsafe { dispatch(isa, (packed, rows, k, weights, nc, Out(out), ldo, s)) })
}

/// Runs [`product`] with `isa`'s kernel. The kernel is compiled inside the instruction set's function: a
/// closure called from there would not inherit its instruction sets (its fused multiply-adds became calls of
/// a software `fmaf` where it was not inlined).
///
/// # Safety
/// `isa` must be available on this CPU; `args`' output as in [`tile_product`].
unsafe fn dispatch<T: BlockElement>(isa: Isa, args: Args<T>) {
    match isa {
        // SAFETY (each arm): forwarded from the caller.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512(args) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unsafe { avx2(args) },
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => unsafe { neon(args) },
        _ => unsafe {
            if is_f32::<T>() {
                product::<T, { PORTABLE_WIDTHS.0 }>(args)
            } else {
                product::<T, { PORTABLE_WIDTHS.1 }>(args)
            }
        },
    }
}

/// The weight of a [`tile_product`]: rows to pack, or a tile of [`Panels`].
#[derive(Clone, Copy)]
enum Weights<'a, T> {
    Rows(&'a [T]),
    Panels(&'a [T]),
}

/// Packs the `nc × k` weight rows `w` into `out` as [`pack_weights`] does for `isa`'s kernel.
fn pack_into<T: BlockElement>(isa: Isa, w: &[T], nc: usize, k: usize, out: &mut [T]) {
    match panel_width::<T>(isa) {
        32 => pack_rows::<T, 32>(w, nc, k, out),
        24 => pack_rows::<T, 24>(w, nc, k, out),
        16 => pack_rows::<T, 16>(w, nc, k, out),
        8 => pack_rows::<T, 8>(w, nc, k, out),
        width => unreachable!("no kernel has panels of {width}"),
    }
}

/// The output of [`tile_product`], valid for writes at `r · ldo + c` for `r < rows`, `c < nc`.
#[derive(Clone, Copy)]
struct Out<T>(*mut T);

/// The arguments of [`tile_product`] after its checks.
type Args<'a, T> = (
    &'a [T],
    usize,
    usize,
    Weights<'a, T>,
    usize,
    Out<T>,
    usize,
    &'a mut Scratch<T>,
);

/// [`product`] compiled for AVX-512F: register tiles of 6 × 32 in f32 (12 of the 32 vector registers) and
/// 6 × 24 in f64 (18: with 12, the f64 kernel ran 4% slower).
///
/// # Safety
/// The CPU must have AVX-512F; `args`' output as in [`tile_product`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn avx512<T: BlockElement>(args: Args<T>) {
    // Only the branch of `T`'s width is kept.
    unsafe {
        if is_f32::<T>() {
            product::<T, { AVX512_WIDTHS.0 }>(args)
        } else {
            product::<T, { AVX512_WIDTHS.1 }>(args)
        }
    }
}

/// [`product`] compiled for AVX2 with FMA: 6 × 2 vectors of register tiles (6 × 16 in f32, 6 × 8 in f64; 12 of
/// the 16 vector registers).
///
/// # Safety
/// The CPU must have AVX2 and FMA; `args`' output as in [`tile_product`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2<T: BlockElement>(args: Args<T>) {
    unsafe {
        if is_f32::<T>() {
            product::<T, { AVX2_WIDTHS.0 }>(args)
        } else {
            product::<T, { AVX2_WIDTHS.1 }>(args)
        }
    }
}

/// [`product`] compiled for NEON: 6 × 4 vectors of register tiles (6 × 16 in f32, 6 × 8 in f64; 24 of the 32
/// vector registers).
///
/// # Safety
/// The CPU must have NEON; `args`' output as in [`tile_product`].
#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "neon")]
unsafe fn neon<T: BlockElement>(args: Args<T>) {
    unsafe {
        if is_f32::<T>() {
            product::<T, { NEON_WIDTHS.0 }>(args)
        } else {
            product::<T, { NEON_WIDTHS.1 }>(args)
        }
    }
}

/// The blocked product with `STRIP × NR` register tiles (see [`tile_product`]).
///
/// # Safety
/// `args`' output as in [`tile_product`].
#[inline(always)]
unsafe fn product<T: BlockElement, const NR: usize>((packed, rows, k, w, nc, out, ldo, s): Args<T>) {
    let panels = nc.div_ceil(NR);
    let weights = match w {
        Weights::Rows(w) => pack_weights::<T, NR>(w, nc, k, &mut s.weights),
        Weights::Panels(p) => p,
    };
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
        for p0 in (0..k).step_by(T::BLOCK) {
            let kb = T::BLOCK.min(k - p0);
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
                    unsafe { block_kernel::<T, STRIP, NR>(block_dot(a, b), sums, step, 1.0, tile) };
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
pub(super) struct Tile<T> {
    pub(super) at: *mut T,
    pub(super) ldo: usize,
    pub(super) rows: usize,
    pub(super) cols: usize,
}

/// One block of the inner dimension for one register tile, given its block sums `acc` ([`block_dot`]): as
/// `step` says, set into the f64 `sums[r · NR + c]`, added to them, or added, multiplied by `alpha` and
/// written to `out` rounded to `T`; the only block goes to `out` the same way without the sums (which may then
/// be empty). `alpha` must be a value of `T` (an f32 product's scale is an f32).
///
/// # Safety
/// At the last (or only) block, `out` must be valid for writes at its `rows × cols` elements.
#[inline(always)]
pub(super) unsafe fn block_kernel<T: BlockElement, const MR: usize, const NR: usize>(
    acc: [[T; NR]; MR],
    sums: &mut [f64],
    step: Step,
    alpha: f64,
    out: Tile<T>,
) {
    if step == Step::Only {
        // The only block: straight from the registers to the output, the sums untouched, scaled in `T`. That
        // is the value the f64 path gives: the product of two f32 values is exact in f64, so rounding it to
        // f32 once is f32's own (correctly rounded) product. Widening a tile's elements to f64 and back kept
        // the vector units busy about a fifth as long as its fused multiply-adds at a 64-long inner index.
        // SAFETY: forwarded from the caller.
        unsafe { write_tile(out, &acc, |v| v.times(alpha)) };
        return;
    }
    let sums = &mut sums[..MR * NR];
    if step == Step::First {
        for r in 0..MR {
            for c in 0..NR {
                sums[r * NR + c] = acc[r][c].widen();
            }
        }
    } else {
        for r in 0..MR {
            for c in 0..NR {
                sums[r * NR + c] += acc[r][c].widen();
            }
        }
    }
    if step == Step::Last {
        // SAFETY: forwarded from the caller.
        unsafe { write_tile(out, sums.as_chunks::<NR>().0, |v| T::narrow(v * alpha)) };
    }
}

/// Writes `value(values[r][c])` to each of the tile's `rows × cols` elements. The values come as whole rows of
/// constant length (not through a closure of `r` and `c`), so that the conversions and stores of a whole tile
/// row vectorize: through a closure of position the compiler wrote them one element at a time, a scalar
/// conversion, product and store per element, which doubled the time of attention's score products.
///
/// # Safety
/// `out` must be valid for writes at its `rows × cols` elements.
#[inline(always)]
unsafe fn write_tile<T: BlockElement, V: Copy, const NR: usize>(
    out: Tile<T>,
    values: &[[V; NR]],
    value: impl Fn(V) -> T,
) {
    for (r, vals) in values.iter().take(out.rows).enumerate() {
        // SAFETY: the tile's `rows × cols` elements are the caller's output.
        let row = unsafe { std::slice::from_raw_parts_mut(out.at.add(r * out.ldo), out.cols) };
        if let Ok(row) = <&mut [T; NR]>::try_from(&mut *row) {
            // A whole tile row, with a constant length, computed in registers and stored at once: vectorized
            // (written straight into `row`, the compiler could not rule out that `row` overlaps `values`).
            let mut done = [T::default(); NR];
            for (o, &v) in done.iter_mut().zip(vals) {
                *o = value(v);
            }
            *row = done;
        } else {
            for (o, &v) in row.iter_mut().zip(vals) {
                *o = value(v);
            }
        }
    }
}

/// `acc[r][c] = Σ_p a[p · MR + r] · b[p · NR + c]` in fused multiply-adds over `p` in order, from zero.
#[inline(always)]
fn block_dot<T: BlockElement, const MR: usize, const NR: usize>(a: &[T], b: &[T]) -> [[T; NR]; MR] {
    let mut acc = [[T::default(); NR]; MR];
    // Constant loop bounds, so that the compiler unrolls both inner loops and keeps `acc` in vector registers.
    for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        for r in 0..MR {
            for c in 0..NR {
                acc[r][c] = ap[r].fused(bp[c], acc[r][c]);
            }
        }
    }
    acc
}

/// Packs the `nc × k` weight tile into panels of `NR` weight rows, each stored index by index
/// (`out[(j · k + p) · NR + c] = w[(j · NR + c) · k + p]`), the last panel padded with zero rows.
#[inline(always)]
fn pack_weights<'a, T: BlockElement, const NR: usize>(
    w: &[T],
    nc: usize,
    k: usize,
    buf: &'a mut Vec<T>,
) -> &'a [T] {
    // Panels start on a cache line (of `line` elements), so that no load of a panel row straddles two lines.
    let line = 64 / std::mem::size_of::<T>();
    let len = nc.div_ceil(NR) * k * NR;
    if buf.len() < len + line - 1 {
        buf.resize(len + line - 1, T::default());
    }
    let skip = buf.as_ptr().align_offset(64).min(line - 1);
    let out = &mut buf[skip..skip + len];
    pack_rows::<T, NR>(w, nc, k, out);
    out
}

/// Writes the `nc × k` weight rows `w` into `out` (`nc.div_ceil(NR) · k · NR` long) as panels of `NR` weight
/// rows ([`pack_weights`]' layout), the last padded with zero rows.
#[inline(always)]
fn pack_rows<T: BlockElement, const NR: usize>(w: &[T], nc: usize, k: usize, out: &mut [T]) {
    if k > 0 {
        // Written in order, a panel row at a time from NR weight rows read side by side: a write per
        // weight row and index would touch a new cache line each time.
        for (panel, rows) in out.chunks_exact_mut(k * NR).zip(w[..nc * k].chunks(k * NR)) {
            if rows.len() == k * NR {
                // A whole panel: every row has `k` values, read without the padding's checks.
                let rows: [&[T]; NR] = std::array::from_fn(|c| &rows[c * k..(c + 1) * k]);
                for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
                    let dst: &mut [T; NR] = dst.try_into().expect("a panel row");
                    for c in 0..NR {
                        dst[c] = rows[c][p];
                    }
                }
                continue;
            }
            let row = |c: usize| rows.get(c * k..(c + 1) * k).unwrap_or(&[]);
            let rows: [&[T]; NR] = std::array::from_fn(row);
            for (p, dst) in panel.chunks_exact_mut(NR).enumerate() {
                for (d, row) in dst.iter_mut().zip(&rows) {
                    *d = row.get(p).copied().unwrap_or_default();
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Deterministic values in [-1, 1) of `bits` significant bits, a few of them (one in 61) 300 times larger,
    /// as real activations have.
    fn values_of(n: usize, seed: u64, bits: u32) -> impl Iterator<Item = f64> {
        (0..n as u64).map(move |i| {
            let h = (i ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits);
            let v = h as f64 / (1u64 << bits) as f64 * 2.0 - 1.0;
            if h.is_multiple_of(61) {
                v * 300.0
            } else {
                v
            }
        })
    }

    /// [`values_of`] in f32, with 24 bits (each value exact in f32).
    pub(in crate::linalg) fn values(n: usize, seed: u64) -> Vec<f32> {
        values_of(n, seed, 24).map(|v| v as f32).collect()
    }

    /// [`values_of`] in f64, with all 53 bits of their significands in use: products of f32 values are exact in
    /// f64, where fused and unfused multiply-adds would agree.
    fn values_f64(n: usize, seed: u64) -> Vec<f64> {
        values_of(n, seed, 53).collect()
    }

    /// The product of `x` (`rows × k`) and `w` (`nc × k`) by `isa`'s kernel, or by the portable code with
    /// `STRIP × NR` tiles when `isa` is `None`, into rows 3 longer than the tile.
    fn product_of<T: BlockElement, const NR: usize>(
        isa: Option<Isa>,
        (rows, k, nc): (usize, usize, usize),
        x: &[T],
        w: &[T],
    ) -> Vec<T> {
        let packed = pack_activations(x, rows, k);
        let ldo = nc + 3;
        let mut out = vec![T::narrow(f64::NAN); rows * ldo];
        let o = out.as_mut_ptr();
        // SAFETY: `out` holds `rows` rows of `ldo ≥ nc` elements and is not otherwise used during the call.
        unsafe {
            match isa {
                Some(isa) => tile_product(isa, &packed, rows, k, w, nc, o, ldo),
                None => {
                    let s = &mut Scratch::default();
                    product::<T, NR>((&packed, rows, k, Weights::Rows(w), nc, Out(o), ldo, s))
                }
            }
        }
        // The columns past `nc` of each row are not the product's: they stay untouched.
        assert!(out
            .chunks(ldo)
            .all(|r| r[nc..].iter().all(|v| v.widen().is_nan())));
        out
    }

    /// The f32 product of the test operands of shape `(rows, k, nc)`, as [`product_of`].
    fn run<const NR: usize>(isa: Option<Isa>, (rows, k, nc): (usize, usize, usize)) -> Vec<f32> {
        let (x, w) = (values(rows * k, 1), values(nc * k, 2));
        product_of::<f32, NR>(isa, (rows, k, nc), &x, &w)
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

    /// Every tile of a weight multiplied from its [`Panels`] against the same tile packed per call, on every
    /// instruction set: bit for bit.
    fn panels_are_the_packed_tiles<T: BlockElement>(value: impl Fn(f64) -> T) {
        // Two blocks of the inner index and a bit; a last tile that does not fill its panel.
        let (rows, k, n) = (13, 2 * T::BLOCK + 3, 3 * 32 + 5);
        let x: Vec<T> = values_of(rows * k, 11, 20).map(&value).collect();
        let w: Vec<T> = values_of(n * k, 12, 20).map(&value).collect();
        let packed = pack_activations(&x, rows, k);
        for isa in Isa::available() {
            let panels = Panels::pack(isa, n, k, |r, buf| buf.copy_from_slice(&w[r.start * k..r.end * k]));
            assert_eq!((panels.rows(), panels.cols(), panels.isa()), (n, k, isa));
            assert!(panels.data.len() * std::mem::size_of::<T>() <= Panels::<T>::bytes(isa, n, k));
            for tile in weight_tiles(n, panel_width::<T>(isa)) {
                let (mut want, mut got) = (vec![T::default(); rows * n], vec![T::default(); rows * n]);
                let wt = &w[tile.start * k..tile.end * k];
                // SAFETY: each output holds `rows × n`, the tile's columns start at `tile.start < n`.
                unsafe {
                    let at = tile.start;
                    tile_product(isa, &packed, rows, k, wt, tile.len(), want.as_mut_ptr().add(at), n);
                    panels_product(&packed, rows, &panels, tile.clone(), got.as_mut_ptr().add(at), n);
                }
                let bits = |v: &[T]| v.iter().map(|x| x.widen().to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{isa}, rows {tile:?}");
                assert!(got.iter().any(|v| v.widen() != 0.0));
            }
        }
    }

    #[test]
    fn panels_packed_once_give_the_bits_of_tiles_packed_per_call() {
        panels_are_the_packed_tiles::<f32>(|v| v as f32);
        panels_are_the_packed_tiles::<f64>(|v| v);
    }

    #[test]
    fn a_cache_packs_within_its_budget_once_and_never_beyond_it() {
        let (n, k, isa) = (40, 9, Isa::best());
        let w: Vec<f32> = values_of(n * k, 5, 16).map(|v| v as f32).collect();
        let fills = AtomicUsize::new(0);
        let fill = |r: Range<usize>, buf: &mut [f32]| {
            fills.fetch_add(1, Ordering::Relaxed);
            buf.copy_from_slice(&w[r.start * k..r.end * k]);
        };
        let bytes = Panels::<f32>::bytes(isa, n, k);
        // One byte short: never packed, nothing taken, and not tried again when the budget grows.
        let (short, cache) = (AtomicUsize::new(bytes - 1), PanelCache::default());
        assert!(cache.get_or_pack(isa, (n, k), &short, fill).is_none());
        short.fetch_add(1, Ordering::Relaxed);
        assert!(cache.get_or_pack(isa, (n, k), &short, fill).is_none());
        assert_eq!((short.load(Ordering::Relaxed), fills.load(Ordering::Relaxed)), (bytes, 0));
        // Enough: packed on the first call, which takes its bytes, and only then.
        let (budget, cache) = (AtomicUsize::new(bytes + 7), PanelCache::default());
        assert!(cache.get_or_pack(isa, (n, k), &budget, fill).is_some());
        let tiles = fills.load(Ordering::Relaxed);
        assert_eq!((budget.load(Ordering::Relaxed), tiles), (7, weight_tiles(n, panel_width::<f32>(isa)).len()));
        let again = cache.get_or_pack(isa, (n, k), &budget, fill).expect("kept");
        assert_eq!((again.rows(), fills.load(Ordering::Relaxed)), (n, tiles));
        // Each precision has its own panels; a shape the panels are not of gets none.
        assert!(cache.get_or_pack::<f64>(isa, (n, k), &budget, |_, _| {}).is_none());
        assert!(cache.get_or_pack(isa, (n + 1, k), &budget, fill).is_none());
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

    /// Shapes for the f64 blocks: partial strips and panels, one, two and three blocks of 256 (the engine's
    /// 576-long rows among them), several row blocks.
    const F64_SHAPES: [(usize, usize, usize); 6] = [
        (1, 1, 1),
        (7, 130, 17),
        (ROW_BLOCK + 13, 2 * F64_BLOCK + 5, 33),
        (13, 576, 40),
        (0, 10, 5),
        (5, 0, 3),
    ];

    /// The f64 sum matrixmultiply computes for an element with `alpha = 1` on CPUs with fused multiply-adds:
    /// over each block of `F64_BLOCK` inner indices, fused multiply-adds from zero in order, added in order.
    fn reference_f64(x: &[f64], w: &[f64], k: usize, r: usize, c: usize) -> f64 {
        let mut total = 0.0f64;
        for p0 in (0..k).step_by(F64_BLOCK) {
            let mut acc = 0.0f64;
            for p in p0..(p0 + F64_BLOCK).min(k) {
                acc = x[r * k + p].mul_add(w[c * k + p], acc);
            }
            total = if p0 == 0 { acc } else { total + acc };
        }
        total
    }

    #[test]
    fn f64_products_are_matrixmultiplys_bits() {
        for (rows, k, nc) in F64_SHAPES {
            let (x, w) = (values_f64(rows * k, 5), values_f64(nc * k, 6));
            let want: Vec<u64> = (0..rows)
                .flat_map(|r| (0..nc).map(move |c| (r, c)))
                .map(|(r, c)| reference_f64(&x, &w, k, r, c).to_bits())
                .collect();
            let got = |out: Vec<f64>| -> Vec<u64> {
                out.chunks(nc + 3)
                    .flat_map(|row| row[..nc].iter().map(|v| v.to_bits()))
                    .collect()
            };
            for isa in Isa::available() {
                let out = product_of::<f64, 16>(Some(isa), (rows, k, nc), &x, &w);
                assert_eq!(got(out), want, "{isa} at {rows}×{k}×{nc}");
            }
            for out in [
                product_of::<f64, 8>(None, (rows, k, nc), &x, &w),
                product_of::<f64, 32>(None, (rows, k, nc), &x, &w),
            ] {
                assert_eq!(got(out), want, "another tile shape at {rows}×{k}×{nc}");
            }
            // matrixmultiply's fused kernels compute the same bits (it picks one where the CPU fuses, as every
            // instruction set but the portable one does); its portable kernel rounds each product apart.
            if Isa::best() != Isa::Portable && rows > 0 && nc > 0 {
                let mut mm = vec![0.0f64; rows * nc];
                // SAFETY: the views are the `rows × k`, `k × nc` (column stride `k`) and `rows × nc` matrices
                // inside `x`, `w` and `mm`.
                unsafe {
                    matrixmultiply::dgemm(
                        rows,
                        k,
                        nc,
                        1.0,
                        x.as_ptr(),
                        k as isize,
                        1,
                        w.as_ptr(),
                        1,
                        k as isize,
                        0.0,
                        mm.as_mut_ptr(),
                        nc as isize,
                        1,
                    )
                };
                let mm: Vec<u64> = mm.iter().map(|v| v.to_bits()).collect();
                assert_eq!(mm, want, "matrixmultiply at {rows}×{k}×{nc}");
            }
        }
    }
}
