//! Quantized weights as integers, and their dot products with quantized activations as ggml computes them.
//!
//! Every weight type ggml multiplies by eight-bit activations stores, per block, integer quants `q`, small
//! integer sub-block scales `c` and (some types) mins `m`, and one or two float16 block factors. A row is read
//! here as `w = D·(c·q) − M·m` per sub-block (the K-quants), `w = D·q + M` (Q4_1, Q5_1) or `w = D·q` (Q4_0,
//! Q5_0, Q8_0), with the sub-block scale folded into the quant (`c·q` fits an i16). A block's dot product with a
//! [`Q8Rows`] block is then, as in ggml's `ggml_vec_dot_*`:
//!
//! - `fl(D·d) · Σ (c·q)·qx − fl(d·M) · Σ_g m_g · Σ_g qx` for the K-quants, with the activations'
//!   float32 `d`;
//! - `fl(D·d) · Σ q·qx + fl(M·s)` for Q4_1 and Q5_1, with Q8_1's float16 sum `s`;
//! - `fl(D·d) · Σ q·qx` for the rest,
//!
//! where the sums are exact integers and `fl` is a float32 product, the same float32 numbers ggml forms. ggml
//! then adds the blocks' terms in float32 lanes in an order of its kernel and instruction set; here they are
//! added in 16 float32 lanes of a fixed order ([`IntRows::dots`]), so a product differs from llama.cpp's by
//! float32 rounding only.

use super::q8::{Q8Kind, Q8Rows};
use super::{f16_at, GgmlType, QK_K};
use multiversion::multiversion;
use std::ops::Range;

/// How a weight type's blocks add their mins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Offset {
    /// No min (`w = D·c·q`).
    None,
    /// One min per block (`w = D·q + M`): the term `fl(M·s)` with Q8_1's sum.
    Block,
    /// A min per sub-block (`w = D·c·q − M·m`): the term `fl(d·M)·Σ m·Σqx` with the sub-block sums.
    SubBlocks,
}

/// The integer form of one weight type: its activation blocks, sub-block length and kind of offset.
#[derive(Clone, Copy, Debug)]
pub struct IntLayout {
    ty: GgmlType,
    kind: Q8Kind,
    group: usize,
    offset: Offset,
}

impl IntLayout {
    /// The integer form of `ty`, or `None` for a type whose product ggml does not take with eight-bit
    /// activations in this form (floats, i-quants, ternary and FP4 types).
    pub fn of(ty: GgmlType) -> Option<Self> {
        use GgmlType::*;
        let (kind, group, offset) = match ty {
            Q4_0 | Q5_0 | Q8_0 => (Q8Kind::Q8_0, 32, Offset::None),
            Q4_1 | Q5_1 => (Q8Kind::Q8_1, 32, Offset::Block),
            Q2_K => (Q8Kind::Q8_K, 16, Offset::SubBlocks),
            Q3_K | Q6_K => (Q8Kind::Q8_K, 16, Offset::None),
            Q4_K | Q5_K => (Q8Kind::Q8_K, 32, Offset::SubBlocks),
            _ => return None,
        };
        Some(Self {
            ty,
            kind,
            group,
            offset,
        })
    }

    /// The activation blocks of this weight type (ggml's `vec_dot_type`).
    pub fn kind(&self) -> Q8Kind {
        self.kind
    }
}

/// Weight rows in integer form ([`IntLayout`]), decoded from their blocks.
pub struct IntRows {
    layout: IntLayout,
    cols: usize,
    /// `rows × cols` quants with their sub-block scale folded in.
    q: Vec<i16>,
    /// Per block: `D` and `M` (zero where the type has no min).
    dm: Vec<[f32; 2]>,
    /// Per sub-block: the min `m` (empty unless the type has sub-block mins).
    mins: Vec<i16>,
}

impl IntRows {
    /// Decodes the rows in `bytes` (whole rows of `cols` values of `layout`'s type).
    pub fn decode(layout: IntLayout, bytes: &[u8], cols: usize) -> Self {
        let len = layout.kind.block_len();
        let block_bytes = layout.ty.type_size();
        let blocks = bytes.len() / block_bytes;
        assert_eq!(cols % len, 0);
        assert_eq!(blocks * block_bytes, bytes.len());
        let mut out = IntRows {
            layout,
            cols,
            q: vec![0; blocks * len],
            dm: vec![[0.0; 2]; blocks],
            mins: match layout.offset {
                Offset::SubBlocks => vec![0; blocks * len / layout.group],
                _ => Vec::new(),
            },
        };
        let groups = len / layout.group;
        for (b, block) in bytes.chunks_exact(block_bytes).enumerate() {
            let q = &mut out.q[b * len..(b + 1) * len];
            let mins = match layout.offset {
                Offset::SubBlocks => &mut out.mins[b * groups..(b + 1) * groups],
                _ => &mut [][..],
            };
            out.dm[b] = decode_block(layout.ty, block, q, mins);
        }
        out
    }

    /// The dot products of every row with rows `xs` of `x` (at most [`ACT_ROWS`]), whose sub-block sums of
    /// quants are `x_sums` (from [`IntRows::sub_block_sums`], one list per row of `xs`): row `a`'s product with
    /// weight row `r` goes to `out[(a − xs.start) · ld + r]`. As ggml computes them up to the order of the
    /// float32 additions: each block's integer sum kept in 16 lanes (pairs of neighbouring products), the
    /// lanes scaled by the block's float32 factor and added across blocks in float32, the min terms added in
    /// float32 in block order, then the lanes added in float64 in a fixed tree, the min terms added, and the
    /// sum rounded once. The order is fixed, so the bits are the same on every instruction set: AVX-512BW and
    /// AVX2 run kernels written with intrinsics, chosen at run time; other CPUs a portable one.
    pub fn dots(
        &self,
        x: &Q8Rows,
        xs: Range<usize>,
        x_sums: &[Vec<i32>],
        out: &mut [f32],
        ld: usize,
    ) {
        assert_eq!(
            x.kind, self.layout.kind,
            "activations in the blocks of the weight's type"
        );
        assert!(xs.len() <= ACT_ROWS && xs.len() == x_sums.len() && xs.end * x.cols <= x.q.len());
        let kernel = match self.layout.kind.block_len() {
            32 => kernel::<32>(),
            _ => kernel::<QK_K>(),
        };
        // SAFETY: `kernel` returns only kernels whose instruction sets the CPU has.
        unsafe { kernel(self, x, xs, x_sums, out, ld) }
    }

    /// The sums of row `a`'s quants over this layout's sub-blocks (what Q8_K keeps as `bsums`), for
    /// [`IntRows::dots`]; empty when the layout has no sub-block mins.
    pub fn sub_block_sums(layout: IntLayout, x: &Q8Rows, a: usize) -> Vec<i32> {
        if layout.offset != Offset::SubBlocks {
            return Vec::new();
        }
        x.q[a * x.cols..(a + 1) * x.cols]
            .chunks_exact(layout.group)
            .map(|g| g.iter().map(|&v| v as i32).sum())
            .collect()
    }
}

/// Activation rows one call of [`IntRows::dots`] takes: each block of weights is loaded once for all of them.
pub const ACT_ROWS: usize = 4;

/// A kernel of [`IntRows::dots`]: weight rows, activations, the activation rows, their sub-block sums, output
/// and its row stride.
type Kernel = unsafe fn(&IntRows, &Q8Rows, Range<usize>, &[Vec<i32>], &mut [f32], usize);

/// The fastest kernel for blocks of `LEN` values the CPU runs (detected at run time).
fn kernel<const LEN: usize>() -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512bw") {
            return dots_avx512::<LEN>;
        }
        if has!("avx2") && has!("fma") {
            return dots_avx2::<LEN>;
        }
    }
    dots_portable::<LEN>
}

/// [`IntRows::dots`] for blocks of `LEN` values where no intrinsics are written (NEON, portable), compiled for
/// each instruction set; the arithmetic is that of the intrinsic kernels.
#[multiversion(targets("aarch64+neon"))]
fn dots_portable<const LEN: usize>(
    w: &IntRows,
    x: &Q8Rows,
    xs: Range<usize>,
    x_sums: &[Vec<i32>],
    out: &mut [f32],
    ld: usize,
) {
    all_rows::<LEN, Portable>(w, x, xs, x_sums, out, ld)
}

/// An x86 kernel of [`IntRows::dots`] compiled for `$features`, its lanes formed by `$lanes`.
macro_rules! x86_kernel {
    ($(#[$doc:meta])* $name:ident, $features:literal, $lanes:ty) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The CPU must have the instruction sets the function is compiled for.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<const LEN: usize>(
            w: &IntRows,
            x: &Q8Rows,
            xs: Range<usize>,
            x_sums: &[Vec<i32>],
            out: &mut [f32],
            ld: usize,
        ) {
            all_rows::<LEN, $lanes>(w, x, xs, x_sums, out, ld)
        }
    };
}

x86_kernel!(
    /// [`IntRows::dots`] with AVX-512BW's `vpmaddwd` on 32 pairs at a time. Written with intrinsics because
    /// the compiler does not vectorize the 256-value blocks' pair sums (it widens every product to 32 bits).
    dots_avx512,
    "avx512f,avx512bw",
    Avx512
);
x86_kernel!(
    /// [`IntRows::dots`] with AVX2's `vpmaddwd` on 16 pairs at a time (as [`dots_avx512`], in two halves).
    dots_avx2,
    "avx2,fma",
    Avx2
);

/// Every weight row's products with the activation rows `xs`, the integer lanes formed by `L`.
#[inline(always)]
fn all_rows<const LEN: usize, L: PairLanes>(
    w: &IntRows,
    x: &Q8Rows,
    xs: Range<usize>,
    x_sums: &[Vec<i32>],
    out: &mut [f32],
    ld: usize,
) {
    let rows: [usize; ACT_ROWS] = std::array::from_fn(|i| (xs.start + i).min(xs.end - 1));
    for r in 0..w.q.len() / w.cols {
        // Every slot takes a row of `xs` (the last one repeated where `xs` is short), so the loop over them
        // has a fixed length and its accumulators stay in registers.
        let terms = block_terms::<LEN, L>(w, r, x, rows, x_sums);
        for i in 0..xs.len() {
            out[i * ld + r] = terms[i] as f32;
        }
    }
}

/// How a kernel forms a block's 16 integer lanes and adds them, scaled, into 16 float32 lanes: the same
/// integers and float32 operations on every instruction set.
trait PairLanes {
    /// 16 float32 lanes, in registers where the instruction set has them.
    type Acc: Copy;

    /// Lanes of zeros.
    ///
    /// # Safety
    /// The CPU must have the implementation's instruction set.
    unsafe fn zero() -> Self::Acc;

    /// `acc + f · lanes`, lane by lane (a float32 product, then a float32 sum), where lane `l` of the block's
    /// integer product sums the products of values `32c + 2l` and `32c + 2l + 1` over its 32-value chunks `c`:
    /// exact in i32 (`|c·q| ≤ 128·32`, `|qx| ≤ 128`, at most 256 values) and exact in float32 (below 2^24).
    ///
    /// # Safety
    /// As [`PairLanes::zero`].
    unsafe fn add_block<const LEN: usize>(
        acc: Self::Acc,
        w: &[i16; LEN],
        x: &[i16; LEN],
        f: f32,
    ) -> Self::Acc;

    /// The lanes' sum in float64, in a fixed tree: lanes `l` and `l + 8` first, then `l` and `l + 4`, then `l`
    /// and `l + 2`, then the last two.
    ///
    /// # Safety
    /// As [`PairLanes::zero`].
    unsafe fn total(acc: Self::Acc) -> f64;
}

/// Plain Rust lanes.
struct Portable;

impl PairLanes for Portable {
    type Acc = [f32; 16];

    #[inline(always)]
    unsafe fn zero() -> [f32; 16] {
        [0.0; 16]
    }

    #[inline(always)]
    unsafe fn add_block<const LEN: usize>(
        mut acc: [f32; 16],
        w: &[i16; LEN],
        x: &[i16; LEN],
        f: f32,
    ) -> [f32; 16] {
        let mut lanes = [0i32; 16];
        for (wc, xc) in w.chunks_exact(32).zip(x.chunks_exact(32)) {
            for (l, lane) in lanes.iter_mut().enumerate() {
                let i = 2 * l;
                *lane += wc[i] as i32 * xc[i] as i32 + wc[i + 1] as i32 * xc[i + 1] as i32;
            }
        }
        for (a, &v) in acc.iter_mut().zip(&lanes) {
            *a += f * v as f32;
        }
        acc
    }

    #[inline(always)]
    unsafe fn total(acc: [f32; 16]) -> f64 {
        let v = acc.map(f64::from);
        let h8: [f64; 8] = std::array::from_fn(|l| v[l] + v[l + 8]);
        let h4: [f64; 4] = std::array::from_fn(|l| h8[l] + h8[l + 4]);
        (h4[0] + h4[2]) + (h4[1] + h4[3])
    }
}

/// AVX-512BW lanes: one `vpmaddwd` per 32-value chunk, the float32 lanes one vector.
#[cfg(target_arch = "x86_64")]
struct Avx512;

#[cfg(target_arch = "x86_64")]
impl PairLanes for Avx512 {
    type Acc = std::arch::x86_64::__m512;

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: the caller's CPU has AVX-512F.
        unsafe { std::arch::x86_64::_mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn add_block<const LEN: usize>(
        acc: Self::Acc,
        w: &[i16; LEN],
        x: &[i16; LEN],
        f: f32,
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F and BW; chunk `c` of 32 i16 values lies inside both blocks.
        unsafe {
            let mut sum = _mm512_setzero_si512();
            for c in 0..LEN / 32 {
                let a = _mm512_loadu_si512(w.as_ptr().add(32 * c).cast());
                let b = _mm512_loadu_si512(x.as_ptr().add(32 * c).cast());
                sum = _mm512_add_epi32(sum, _mm512_madd_epi16(a, b));
            }
            _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(f), _mm512_cvtepi32_ps(sum)))
        }
    }

    #[inline(always)]
    unsafe fn total(acc: Self::Acc) -> f64 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX-512F.
        unsafe {
            let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(acc));
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
            let h8 = _mm512_add_pd(lo, _mm512_cvtps_pd(hi));
            let h4 = _mm256_add_pd(
                _mm512_castpd512_pd256(h8),
                _mm512_extractf64x4_pd(h8, 1),
            );
            last_two(h4)
        }
    }
}

/// AVX2 lanes: two `vpmaddwd` per 32-value chunk, for lanes 0–7 and 8–15.
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl PairLanes for Avx2 {
    type Acc = [std::arch::x86_64::__m256; 2];

    #[inline(always)]
    unsafe fn zero() -> Self::Acc {
        // SAFETY: the caller's CPU has AVX.
        unsafe { [std::arch::x86_64::_mm256_setzero_ps(); 2] }
    }

    #[inline(always)]
    unsafe fn add_block<const LEN: usize>(
        [lo, hi]: Self::Acc,
        w: &[i16; LEN],
        x: &[i16; LEN],
        f: f32,
    ) -> Self::Acc {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX2; chunk `c` of 32 i16 values, read in two halves, lies inside both
        // blocks.
        unsafe {
            let (mut slo, mut shi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for c in 0..LEN / 32 {
                let wl = _mm256_loadu_si256(w.as_ptr().add(32 * c).cast());
                let wh = _mm256_loadu_si256(w.as_ptr().add(32 * c + 16).cast());
                let xl = _mm256_loadu_si256(x.as_ptr().add(32 * c).cast());
                let xh = _mm256_loadu_si256(x.as_ptr().add(32 * c + 16).cast());
                slo = _mm256_add_epi32(slo, _mm256_madd_epi16(wl, xl));
                shi = _mm256_add_epi32(shi, _mm256_madd_epi16(wh, xh));
            }
            let f = _mm256_set1_ps(f);
            [
                _mm256_add_ps(lo, _mm256_mul_ps(f, _mm256_cvtepi32_ps(slo))),
                _mm256_add_ps(hi, _mm256_mul_ps(f, _mm256_cvtepi32_ps(shi))),
            ]
        }
    }

    #[inline(always)]
    unsafe fn total([lo, hi]: Self::Acc) -> f64 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's CPU has AVX.
        unsafe {
            // Lanes 0–3 and 4–7 of `lo` meet lanes 8–11 and 12–15 of `hi`.
            let a = _mm256_add_pd(
                _mm256_cvtps_pd(_mm256_castps256_ps128(lo)),
                _mm256_cvtps_pd(_mm256_castps256_ps128(hi)),
            );
            let b = _mm256_add_pd(
                _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)),
                _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)),
            );
            last_two(_mm256_add_pd(a, b))
        }
    }
}

/// The last two steps of [`PairLanes::total`]'s tree on four float64 lanes: `(0 + 2) + (1 + 3)`.
///
/// # Safety
/// The CPU must have AVX.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn last_two(h4: std::arch::x86_64::__m256d) -> f64 {
    use std::arch::x86_64::*;
    // SAFETY: the caller's CPU has AVX.
    unsafe {
        let h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd(h4, 1));
        _mm_cvtsd_f64(h2) + _mm_cvtsd_f64(_mm_unpackhi_pd(h2, h2))
    }
}

/// For weight row `r` and the activation rows `rows` (sub-block sums `x_sums`, by slot):
/// `Σ_blocks fl(D·d) · (block's integer sum)`, kept in 16 float32 lanes across blocks, plus the min terms
/// (`fl(M·s)` or `−fl(d·M)·Σ_g m_g·Σ_g qx` per block), added in float32 in block order as ggml adds them;
/// the lanes' float64 total ([`PairLanes::total`]) plus the min terms at the end.
#[inline(always)]
fn block_terms<const LEN: usize, L: PairLanes>(
    w: &IntRows,
    r: usize,
    x: &Q8Rows,
    rows: [usize; ACT_ROWS],
    x_sums: &[Vec<i32>],
) -> [f64; ACT_ROWS] {
    let cols = w.cols;
    let n_blocks = cols / LEN;
    let groups = LEN / w.layout.group;
    let wr = &w.q[r * cols..(r + 1) * cols];
    let dm = &w.dm[r * n_blocks..(r + 1) * n_blocks];
    let xq: [&[i16]; ACT_ROWS] = rows.map(|a| &x.q[a * cols..(a + 1) * cols]);
    let xd: [&[f32]; ACT_ROWS] = rows.map(|a| &x.d[a * n_blocks..(a + 1) * n_blocks]);
    let sums: [&[i32]; ACT_ROWS] = std::array::from_fn(|i| x_sums[rows[i] - rows[0]].as_slice());
    // SAFETY (here and below): `L`'s instruction set was detected before the kernel was chosen.
    let mut acc = [unsafe { L::zero() }; ACT_ROWS];
    // The blocks' float32 factors `fl(D·d)` are formed a run of blocks at a time, so that the loop below
    // multiplies by them from memory.
    const RUN: usize = 64;
    let mut factors = [[0.0f32; RUN]; ACT_ROWS];
    for start in (0..n_blocks).step_by(RUN) {
        let end = (start + RUN).min(n_blocks);
        for (f, xd) in factors.iter_mut().zip(&xd) {
            for ((f, &[dw, _]), &dx) in f.iter_mut().zip(&dm[start..end]).zip(&xd[start..end]) {
                *f = dw * dx;
            }
        }
        for b in start..end {
            let wb: &[i16; LEN] = wr[b * LEN..(b + 1) * LEN].try_into().expect("a block");
            for i in 0..ACT_ROWS {
                let xb: &[i16; LEN] = xq[i][b * LEN..(b + 1) * LEN].try_into().expect("a block");
                acc[i] = unsafe { L::add_block(acc[i], wb, xb, factors[i][b - start]) };
            }
        }
    }
    // The min terms in a second pass, so that the loop above holds nothing but the block products; block by
    // block, each activation row's sum in block order (the rows' sums are independent, so their additions
    // overlap).
    let mut mins_acc = [0.0f32; ACT_ROWS];
    match w.layout.offset {
        Offset::None => {}
        Offset::Block => {
            let s: [&[f32]; ACT_ROWS] = rows.map(|a| &x.s[a * n_blocks..(a + 1) * n_blocks]);
            for (b, &[_, mw]) in dm.iter().enumerate() {
                for (m, s) in mins_acc.iter_mut().zip(&s) {
                    *m += mw * s[b];
                }
            }
        }
        Offset::SubBlocks => {
            let mins = &w.mins[r * n_blocks * groups..(r + 1) * n_blocks * groups];
            for (b, (mn, &[_, mw])) in mins.chunks_exact(groups).zip(dm).enumerate() {
                for ((m, sums), xd) in mins_acc.iter_mut().zip(&sums).zip(&xd) {
                    let s = &sums[b * groups..(b + 1) * groups];
                    let s2: i32 = mn.iter().zip(s).map(|(&m, &s)| m as i32 * s).sum();
                    *m -= (xd[b] * mw) * s2 as f32;
                }
            }
        }
    }
    // A loop, not a closure: a closure does not inherit the kernel's instruction sets, so the intrinsics
    // inside `total` would become calls.
    let mut terms = [0.0f64; ACT_ROWS];
    for i in 0..ACT_ROWS {
        terms[i] = unsafe { L::total(acc[i]) } + mins_acc[i] as f64;
    }
    terms
}

/// Decodes one block of `ty` into `q` (sub-block scales folded in) and `mins`; returns `[D, M]`.
fn decode_block(ty: GgmlType, b: &[u8], q: &mut [i16], mins: &mut [i16]) -> [f32; 2] {
    use GgmlType::*;
    match ty {
        Q4_0 | Q4_1 => {
            let (off, start) = if ty == Q4_0 { (8, 2) } else { (0, 4) };
            for (j, &byte) in b[start..start + 16].iter().enumerate() {
                q[j] = (byte & 0x0F) as i16 - off;
                q[j + 16] = (byte >> 4) as i16 - off;
            }
            [f16_at(b, 0), if ty == Q4_1 { f16_at(b, 2) } else { 0.0 }]
        }
        Q5_0 | Q5_1 => {
            let (off, h) = if ty == Q5_0 { (16, 2) } else { (0, 4) };
            let qh = u32::from_le_bytes([b[h], b[h + 1], b[h + 2], b[h + 3]]);
            for (j, &byte) in b[h + 4..h + 20].iter().enumerate() {
                let hi0 = ((qh >> j) & 1) << 4;
                let hi1 = ((qh >> (j + 16)) & 1) << 4;
                q[j] = ((byte & 0x0F) as u32 | hi0) as i16 - off;
                q[j + 16] = ((byte >> 4) as u32 | hi1) as i16 - off;
            }
            [f16_at(b, 0), if ty == Q5_1 { f16_at(b, 2) } else { 0.0 }]
        }
        Q8_0 => {
            for (q, &v) in q.iter_mut().zip(&b[2..34]) {
                *q = v as i8 as i16;
            }
            [f16_at(b, 0), 0.0]
        }
        Q2_K => {
            let (scales, qs) = (&b[0..16], &b[16..80]);
            for (i, q) in q.iter_mut().enumerate().take(QK_K) {
                let (half, shift, p) = (i / 128, (i % 128) / 32, i % 32);
                let v = (qs[half * 32 + p] >> (2 * shift)) & 3;
                *q = (scales[i / 16] & 0x0F) as i16 * v as i16;
            }
            for (m, &s) in mins.iter_mut().zip(scales) {
                *m = (s >> 4) as i16;
            }
            [f16_at(b, 80), f16_at(b, 82)]
        }
        Q3_K => {
            let (hmask, qs, sc) = (&b[0..32], &b[32..96], &b[96..108]);
            let scale: [i16; 16] = std::array::from_fn(|i| {
                let low = (sc[i % 8] >> (4 * (i / 8))) & 0x0F;
                let high = (sc[8 + i % 4] >> (2 * (i / 4))) & 0x03;
                (low | (high << 4)) as i16 - 32
            });
            for (i, q) in q.iter_mut().enumerate().take(QK_K) {
                let (half, shift, p) = (i / 128, (i % 128) / 32, i % 32);
                let low = ((qs[half * 32 + p] >> (2 * shift)) & 3) as i16;
                let v = if (hmask[p] >> (i / 32)) & 1 == 1 {
                    low
                } else {
                    low - 4
                };
                *q = scale[i / 16] * v;
            }
            [f16_at(b, 108), 0.0]
        }
        Q4_K | Q5_K => {
            let (sc, mn) = super::kquants::scale_min_k4(&b[4..16]);
            let (qh, qs) = if ty == Q5_K {
                (Some(&b[16..48]), &b[48..176])
            } else {
                (None, &b[16..144])
            };
            for (i, q) in q.iter_mut().enumerate().take(QK_K) {
                let j = i / 32;
                let p = i % 32;
                let mut v = (qs[(j / 2) * 32 + p] >> (4 * (j % 2))) & 0x0F;
                if let Some(qh) = qh {
                    v |= ((qh[p] >> j) & 1) << 4;
                }
                *q = sc[j] as i16 * v as i16;
            }
            for (m, &v) in mins.iter_mut().zip(&mn) {
                *m = v as i16;
            }
            [f16_at(b, 0), f16_at(b, 2)]
        }
        Q6_K => {
            let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
            for (i, q) in q.iter_mut().enumerate().take(QK_K) {
                let (half, quarter, p) = (i / 128, (i % 128) / 32, i % 32);
                let l = ql[half * 64 + 32 * (quarter % 2) + p] >> (4 * (quarter / 2));
                let h = qh[half * 32 + p] >> (2 * quarter);
                let v = ((l & 0x0F) | ((h & 0x03) << 4)) as i16 - 32;
                *q = scales[i / 16] as i8 as i16 * v;
            }
            [f16_at(b, 208), 0.0]
        }
        _ => unreachable!("IntLayout::of admits only the types decoded here"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dequantize_into;
    use crate::quant::q8::Q8Rounding;

    /// `rows × cols` values of `ty` in random blocks: random bytes, with the float16 factors set to small
    /// finite values (every other bit pattern is a valid block of these types).
    fn random_blocks(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
        use GgmlType::*;
        let factors: &[usize] = match ty {
            Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
            Q2_K => &[80, 82],
            Q3_K => &[108],
            Q6_K => &[208],
            _ => &[0],
        };
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut out: Vec<u8> = (0..rows * cols / ty.block_size() * ty.type_size())
            .map(|_| next() as u8)
            .collect();
        for block in out.chunks_exact_mut(ty.type_size()) {
            for &at in factors {
                let v = half::f16::from_f32((next() % 1000) as f32 / 3000.0 + 0.01);
                block[at..at + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    const COLS: usize = 512;
    const TYPES: [GgmlType; 10] = {
        use GgmlType::*;
        [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K]
    };

    /// `rows` random rows of `ty` (`COLS` each), their integer form and ggml's dequantization of them.
    fn decoded(ty: GgmlType, rows: usize, seed: u64) -> (IntLayout, IntRows, Vec<f32>) {
        let layout = IntLayout::of(ty).unwrap();
        let bytes = random_blocks(ty, rows, COLS, seed);
        let mut deq = vec![0.0f32; rows * COLS];
        dequantize_into(ty, &bytes, &mut deq, "w").unwrap();
        (layout, IntRows::decode(layout, &bytes, COLS), deq)
    }

    /// Every admitted type: the integer form read back as `D·(c·q) − M·m` (or `+ M`) equals ggml's
    /// dequantization up to the rounding of its float32 products.
    #[test]
    fn integer_form_reproduces_the_dequantized_values() {
        for ty in TYPES {
            let (layout, rows, deq) = decoded(ty, 3, 7);
            let len = layout.kind.block_len();
            for (i, &want) in deq.iter().enumerate() {
                let [d, m] = rows.dm[i / len];
                let mut v = d as f64 * rows.q[i] as f64;
                v += match layout.offset {
                    Offset::None => 0.0,
                    Offset::Block => m as f64,
                    Offset::SubBlocks => -(m as f64) * rows.mins[i / layout.group] as f64,
                };
                let tol =
                    4.0 * f32::EPSILON as f64 * (d.abs() as f64 * 4096.0 + m.abs() as f64 * 64.0);
                assert!(
                    (v - want as f64).abs() <= tol,
                    "{ty} value {i}: {v} against {want}"
                );
            }
        }
    }

    /// The intrinsic kernels compute the portable kernel's integer lanes and float32 steps: the same bits, for
    /// every type, a short last group of activation rows included.
    #[test]
    fn every_instruction_set_gives_the_portable_bits() {
        for ty in TYPES {
            let (layout, w, _) = decoded(ty, 5, 11);
            let x: Vec<f32> = (0..3 * COLS)
                .map(|i| ((i * 104_729 % 997) as f32 - 498.0) / 37.0)
                .collect();
            let xq = Q8Rows::quantize(&x, COLS, layout.kind, Q8Rounding::X86);
            let sums: Vec<Vec<i32>> = (0..3).map(|a| IntRows::sub_block_sums(layout, &xq, a)).collect();
            let run = |kernel: Kernel| {
                let mut out = vec![0.0f32; 15];
                // SAFETY: only kernels whose instruction sets were detected are run.
                unsafe { kernel(&w, &xq, 0..3, &sums, &mut out, 5) };
                out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            let pick = |k32: Kernel, k256: Kernel| match layout.kind.block_len() {
                32 => k32,
                _ => k256,
            };
            let want = run(pick(dots_portable::<32>, dots_portable::<QK_K>));
            #[allow(unused_mut)] // only x86 has intrinsic kernels
            let mut kernels = vec![("detected", pick(kernel::<32>(), kernel::<QK_K>()))];
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::is_x86_feature_detected as has;
                if has!("avx512f") && has!("avx512bw") {
                    kernels.push(("AVX-512", pick(dots_avx512::<32>, dots_avx512::<QK_K>)));
                }
                if has!("avx2") && has!("fma") {
                    kernels.push(("AVX2", pick(dots_avx2::<32>, dots_avx2::<QK_K>)));
                }
            }
            for (name, kernel) in kernels {
                assert_eq!(run(kernel), want, "{ty}: {name} against the portable kernel");
            }
        }
    }

    /// The dot product equals the float64 sum of the dequantized weights times the dequantized activations
    /// (`d·q`, Q8_1's min term through its rounded sum), to float32 rounding.
    #[test]
    fn dot_products_equal_the_dequantized_sums() {
        let cols = COLS;
        for ty in TYPES {
            let (layout, w, deq) = decoded(ty, 2, 3);
            let x: Vec<f32> = (0..3 * cols)
                .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 13.0)
                .collect();
            let xq = Q8Rows::quantize(&x, cols, layout.kind, Q8Rounding::X86);
            let len = layout.kind.block_len();
            for a in 0..3 {
                let sums = vec![IntRows::sub_block_sums(layout, &xq, a)];
                let mut out = [0.0f32; 2];
                w.dots(&xq, a..a + 1, &sums, &mut out, 2);
                for r in 0..2 {
                    let got = out[r] as f64;
                    let mut want = 0.0f64;
                    let mut scale = 0.0f64;
                    for i in 0..cols {
                        let xv = xq.d[(a * cols + i) / len] as f64 * xq.q[a * cols + i] as f64;
                        want += deq[r * cols + i] as f64 * xv;
                        scale += (deq[r * cols + i] as f64 * xv).abs();
                    }
                    if layout.offset == Offset::Block {
                        // ggml uses Q8_1's float16 sum for the min term instead of d·Σq.
                        want = 0.0;
                        for b in 0..cols / len {
                            let [d, m] = w.dm[r * cols / len + b];
                            let blk = (a * cols) / len + b;
                            let s: i64 = (0..len)
                                .map(|i| {
                                    w.q[r * cols + b * len + i] as i64
                                        * xq.q[a * cols + b * len + i] as i64
                                })
                                .sum();
                            want += (d * xq.d[blk]) as f64 * s as f64 + (m * xq.s[blk]) as f64;
                        }
                    }
                    assert!(
                        (got - want).abs() <= 1e-5 * scale.max(1e-30),
                        "{ty} ({r}, {a}): {got} against {want}"
                    );
                }
            }
        }
    }
}
