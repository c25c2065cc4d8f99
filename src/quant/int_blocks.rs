//! Quantized weights as integers, and their dot products with quantized activations as ggml computes them.
//!
//! Every weight type ggml multiplies by eight-bit activations stores, per block, integer quants `q`, small
//! integer sub-block scales `c` and (some types) mins `m`, and one or two float16 block factors. A row is read
//! here as `w = D·(c·q) − M·m` per sub-block (the K-quants), `w = D·q + M` (Q4_1, Q5_1) or `w = D·q` (Q4_0,
//! Q5_0, Q8_0). A block's dot product with a [`Q8Rows`] block is then, as in ggml's `ggml_vec_dot_*`:
//!
//! - `fl(D·d) · Σ (c·q)·qx − fl(d·M) · Σ_g m_g · Σ_g qx` for the K-quants, with the activations'
//!   float32 `d`;
//! - `fl(D·d) · Σ q·qx + fl(M·s)` for Q4_1 and Q5_1, with Q8_1's float16 sum `s`;
//! - `fl(D·d) · Σ q·qx` for the rest,
//!
//! where the sums are exact integers and `fl` is a float32 product, the same float32 numbers ggml forms. ggml
//! then adds the blocks' terms in float32 in an order of its kernel and instruction set; here the order is
//! fixed, so a product differs from llama.cpp's by float32 rounding only, and has the same bits on every
//! instruction set:
//!
//! - the 32-value blocks ([`quads`]): each block's integer sum kept in 8 lanes of byte-product quads, added
//!   across blocks into 16 float32 lanes (one fused multiply-add per block, as ggml's x86 kernels add theirs)
//!   and those summed in a fixed float64 tree ([`lanes`]);
//! - the 256-value blocks ([`super_blocks`]): sixteen weight rows at a time, each block's whole integer sum
//!   added across blocks into one float32 sum per row by one fused multiply-add, the mins' term into a second
//!   one, the two added in float64.

use super::q8::{Q8Kind, Q8Rows};
use super::{f16_at, GgmlType, QK_K};
use std::ops::Range;

/// A block length's kernels of [`IntRows::dots`], each the generic `$run` over the operations of its
/// instruction set: `portable` (plain Rust lanes, compiled for NEON too); one x86 kernel per row
/// `($label, [$feature…], $kernel, $lanes)` of the table, fastest first, compiled for its features; `kernel()`,
/// the first x86 kernel whose features the CPU has (detected at run time), else the portable one; and for the
/// tests `kernels()`, every kernel the CPU runs by name, the portable one first. Each feature list serves both
/// the compilation and the detection.
macro_rules! kernels {
    ($run:ident;
     $($(#[$doc:meta])* ($label:literal, [$($feature:tt),+], $kernel:ident, $lanes:ty)),+ $(,)?) => {
        /// The portable kernel (NEON and others), compiled for each instruction set; the arithmetic is that of
        /// the intrinsic kernels.
        #[multiversion::multiversion(targets("aarch64+neon"))]
        fn portable(w: &IntRows, x: &Activations, xs: Range<usize>, out: &mut [f32], ld: usize) {
            // SAFETY: the portable lanes need no instruction set.
            unsafe { $run::<super::lanes::Portable>(w, x, xs, out, ld) }
        }

        $(
            $(#[$doc])*
            ///
            /// # Safety
            /// The CPU must have the instruction sets the function is compiled for.
            #[cfg(target_arch = "x86_64")]
            $(#[target_feature(enable = $feature)])+
            unsafe fn $kernel(
                w: &IntRows,
                x: &Activations,
                xs: Range<usize>,
                out: &mut [f32],
                ld: usize,
            ) {
                // SAFETY: the CPU has the function's instruction sets.
                unsafe { $run::<$lanes>(w, x, xs, out, ld) }
            }
        )+

        /// The fastest kernel the CPU runs (detected at run time).
        pub(super) fn kernel() -> Kernel {
            #[cfg(target_arch = "x86_64")]
            {
                $(
                    if true $(&& std::arch::is_x86_feature_detected!($feature))+ {
                        return $kernel;
                    }
                )+
            }
            portable
        }

        /// Every kernel the CPU runs, by name, the portable one first.
        #[cfg(test)]
        pub(super) fn kernels() -> Vec<(&'static str, Kernel)> {
            #[allow(unused_mut)] // only x86 has intrinsic kernels
            let mut out: Vec<(&'static str, Kernel)> = vec![("portable", portable)];
            #[cfg(target_arch = "x86_64")]
            {
                $(
                    if true $(&& std::arch::is_x86_feature_detected!($feature))+ {
                        out.push(($label, $kernel));
                    }
                )+
            }
            out
        }
    };
}

mod lanes;
mod quads;
mod super_blocks;

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

    /// Whether the blocks hold 32 values rather than 256.
    fn short_blocks(&self) -> bool {
        self.kind.block_len() == 32
    }
}

/// Weight rows in integer form ([`IntLayout`]), decoded from their blocks.
pub struct IntRows {
    layout: IntLayout,
    rows: usize,
    cols: usize,
    /// 256-value blocks: per group of [`ROW_GROUP`] rows (the last one padded with rows of zeros), its blocks
    /// as the kernels read them (empty otherwise).
    row_blocks: Vec<RowBlock>,
    /// 32-value blocks: per row, its blocks two at a time as the byte kernels read them (a row of an odd
    /// count ends with a block of zeros under a factor 0); empty otherwise.
    pairs: Vec<BytePair>,
    /// 32-value blocks: per block, `D` and `M` (zero where the type has no min); empty otherwise (a
    /// [`RowBlock`] holds its rows' factors).
    dm: Vec<[f32; 2]>,
}

impl IntRows {
    /// Decodes the rows in `bytes` (whole rows of `cols` values of `layout`'s type).
    pub fn decode(layout: IntLayout, bytes: &[u8], cols: usize) -> Self {
        let len = layout.kind.block_len();
        let block_bytes = layout.ty.type_size();
        let blocks = bytes.len() / block_bytes;
        assert!(cols.is_multiple_of(len));
        assert_eq!(blocks * block_bytes, bytes.len());
        let mut out = IntRows {
            layout,
            // Rows of no columns hold no blocks: their products are the empty sum, which the caller's zeros are.
            rows: (blocks * len).checked_div(cols).unwrap_or(0),
            cols,
            row_blocks: Vec::new(),
            pairs: Vec::new(),
            dm: vec![[0.0; 2]; if layout.short_blocks() { blocks } else { 0 }],
        };
        let mut wide = [0i8; 32];
        // (`max(1)`: rows of no columns are no rows, whatever their blocks, and nothing reads them.)
        let n_blocks = (cols / len).max(1);
        for (b, block) in bytes.chunks_exact(block_bytes).enumerate() {
            let (row, at) = (b / n_blocks, b % n_blocks);
            if layout.short_blocks() {
                out.dm[b] = decode_short(layout.ty, block, &mut wide);
                if at % 2 == 0 {
                    out.pairs.push(BytePair::ZERO);
                }
                let pair = out.pairs.last_mut().expect("pushed at the pair's first block");
                let half = 32 * (at % 2);
                pair.w[half..half + 32].copy_from_slice(&wide);
                for (j, quad) in pair.w[half..half + 32].chunks_exact(4).enumerate() {
                    pair.minus_offset[half / 4 + j] = -128 * quad.iter().map(|&v| v as i32).sum::<i32>();
                }
                pair.d[half / 4..half / 4 + 8].fill(out.dm[b][0]);
                debug_assert_eq!(out.pairs.len(), row * n_blocks.div_ceil(2) + at / 2 + 1);
            } else {
                if row % ROW_GROUP == 0 && at == 0 {
                    out.row_blocks.resize(out.row_blocks.len() + n_blocks, RowBlock::ZERO);
                }
                let rb = &mut out.row_blocks[(row / ROW_GROUP) * n_blocks + at];
                fill_row_block(layout, block, rb, row % ROW_GROUP);
            }
        }
        out
    }

    /// The dot products of every row with rows `xs` of `x` (at most [`ACT_ROWS`]): row `a`'s product with
    /// weight row `r` goes to `out[(a − xs.start) · ld + r]`. As ggml computes them up to the order of the
    /// float32 additions, which is fixed (the module's documentation), so the bits are the same on every
    /// instruction set: AVX-512 and AVX2 run kernels written with intrinsics, chosen at run time; other CPUs a
    /// portable one.
    pub fn dots(&self, x: &Activations, xs: Range<usize>, out: &mut [f32], ld: usize) {
        assert_eq!(
            x.q8.kind, self.layout.kind,
            "activations in the blocks of the weight's type"
        );
        assert!(x.q8.cols == self.cols && xs.len() <= ACT_ROWS && xs.end <= x.rows);
        assert!(xs.is_empty() || (xs.len() - 1) * ld + self.rows <= out.len());
        if xs.is_empty() {
            return;
        }
        let kernel = if self.layout.short_blocks() {
            quads::kernel()
        } else {
            super_blocks::kernel()
        };
        // SAFETY: the kernels returned are only those whose instruction sets the CPU has.
        unsafe { kernel(self, x, xs, out, ld) }
    }
}

/// Two 32-value blocks of a weight row as the byte kernels read them: the 64 quants, what the AVX-512 VNNI
/// kernel takes back for its activations' offset of 128 (`−128 ·` each quad's sum of quants), and the blocks'
/// `D`, the first's in lanes 0–7 and the second's in 8–15. Aligned to a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct BytePair {
    w: [i8; 64],
    minus_offset: [i32; 16],
    d: [f32; 16],
}

impl BytePair {
    /// Two blocks of zeros with factors 0.
    const ZERO: Self = BytePair {
        w: [0; 64],
        minus_offset: [0; 16],
        d: [0.0; 16],
    };
}

/// Weight rows a [`RowBlock`] holds.
const ROW_GROUP: usize = 16;

/// One 256-value block of [`ROW_GROUP`] weight rows as the K-quant kernels read it, each field row by row: per
/// quad `j` (values `4j` to `4j + 3`), every row's four quants without their scales, as signed bytes; per
/// sub-block, every row's scale `c`; `−128 · Σ c·q` (what the kernels take back for their activations'
/// offset of 128); per pair of sub-blocks, every row's two mins as the 16-bit halves of an i32 (zeros past the
/// type's sub-blocks, and for types without mins); and every row's `D` and `−M`. Aligned to a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct RowBlock {
    q: [[i8; 4 * ROW_GROUP]; QK_K / 4],
    c: [[i32; ROW_GROUP]; 16],
    minus_offset: [i32; ROW_GROUP],
    m: [[i32; ROW_GROUP]; 8],
    d: [f32; ROW_GROUP],
    minus_m: [f32; ROW_GROUP],
}

impl RowBlock {
    /// A block of zeros.
    const ZERO: Self = RowBlock {
        q: [[0; 4 * ROW_GROUP]; QK_K / 4],
        c: [[0; ROW_GROUP]; 16],
        minus_offset: [0; ROW_GROUP],
        m: [[0; ROW_GROUP]; 8],
        d: [0.0; ROW_GROUP],
        minus_m: [0.0; ROW_GROUP],
    };
}

/// Activation rows quantized for one weight layout, with what its kernels read besides the quants: the
/// sub-block sums of the types with sub-block mins (what Q8_K keeps as `bsums`), the quants as bytes and the
/// scales per pair of blocks for the 32-value blocks.
pub struct Activations<'a> {
    q8: &'a Q8Rows,
    /// How many rows.
    rows: usize,
    /// Per row and 256-value block, the sums of its quants over the layout's sub-blocks, zeros past their
    /// count (empty without sub-block mins). A sum of at most 32 quants fits 16 bits.
    sums: Vec<[i16; 16]>,
    /// 32-value blocks: the quants as signed bytes, each row padded with zeros to an even count of blocks
    /// (empty otherwise).
    bytes: Vec<i8>,
    /// The quants plus 128, as unsigned bytes; for 32-value blocks, rows padded as `bytes`.
    offset_bytes: Vec<u8>,
    /// 32-value blocks: per row and pair of blocks, the first block's scale `d` in lanes 0–7 and the second's
    /// in lanes 8–15 (0 past an odd count), as the kernels multiply them into the weights' (empty otherwise).
    pair_scales: Vec<[f32; 16]>,
}

impl<'a> Activations<'a> {
    /// The rows of `q8` for products with weights of `layout`. Panics unless `q8` is in `layout`'s activation
    /// blocks.
    pub fn new(layout: IntLayout, q8: &'a Q8Rows) -> Self {
        assert_eq!(
            q8.kind, layout.kind,
            "activations in the blocks of the weight's type"
        );
        let n = q8.q.len() / q8.cols.max(1);
        let sums = match layout.offset {
            Offset::SubBlocks => q8.q[..n * q8.cols]
                .chunks_exact(QK_K)
                .map(|block| {
                    let mut sums = [0i16; 16];
                    for (s, g) in sums.iter_mut().zip(block.chunks_exact(layout.group)) {
                        *s = g.iter().sum();
                    }
                    sums
                })
                .collect(),
            _ => Vec::new(),
        };
        let (bytes, pair_scales) = match layout.short_blocks() {
            true => {
                let n_blocks = q8.cols / 32;
                let padded = 64 * n_blocks.div_ceil(2);
                let mut bytes = vec![0i8; n * padded];
                // (`max(1)`: rows of no columns have no chunks to fill.)
                let rows = bytes.chunks_exact_mut(padded.max(1));
                for (row, q) in rows.zip(q8.q.chunks_exact(q8.cols.max(1))) {
                    for (b, &v) in row.iter_mut().zip(q) {
                        // Q8_0 and Q8_1 quants are at most 127 in magnitude (`|x · id| ≤ 127` up to
                        // rounding), which the AVX2 kernel's sign trick needs.
                        assert!((-127..=127).contains(&v), "a Q8_0 quant of {v}");
                        *b = v as i8;
                    }
                }
                let pair_scales = (0..n)
                    .flat_map(|a| q8.d[a * n_blocks..(a + 1) * n_blocks].chunks(2))
                    .map(|d| std::array::from_fn(|l| d.get(l / 8).copied().unwrap_or(0.0)))
                    .collect();
                (bytes, pair_scales)
            }
            false => (Vec::new(), Vec::new()),
        };
        let offset_bytes = match layout.short_blocks() {
            true => bytes.iter().map(|&v| (v as i16 + 128) as u8).collect(),
            // Q8_K quants lie in [−128, 127] (`min(127, round(iscale · x))`).
            false => q8.q.iter().map(|&v| u8::try_from(v + 128).expect("a Q8_K quant")).collect(),
        };
        Activations {
            q8,
            rows: n,
            sums,
            bytes,
            offset_bytes,
            pair_scales,
        }
    }
}

/// Activation rows one call of [`IntRows::dots`] takes: each block of weights is loaded once for all of them.
pub const ACT_ROWS: usize = 4;

/// A kernel of [`IntRows::dots`]: weight rows, activations, the activation rows, output and its row stride.
type Kernel = unsafe fn(&IntRows, &Activations, Range<usize>, &mut [f32], usize);

/// Decodes one 256-value block of `layout`'s type into row `r` of `rb`. Compiled for each
/// instruction set (chosen at run time), so that its loops of fixed lengths run on the widest vectors.
#[multiversion::multiversion(targets("x86_64+avx512f+avx512bw+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn fill_row_block(layout: IntLayout, block: &[u8], rb: &mut RowBlock, r: usize) {
    let (mut q, mut scales, mut mins) = ([0i8; QK_K], [0i16; 16], [0i16; 16]);
    let [d, m] = decode_super(layout.ty, block, &mut q, &mut scales, &mut mins);
    for (lanes, quad) in rb.q.iter_mut().zip(q.chunks_exact(4)) {
        lanes[4 * r..4 * r + 4].copy_from_slice(quad);
    }
    let per_sub = layout.group / 16;
    for (c, &scale) in rb.c.iter_mut().zip(scales.iter().step_by(per_sub)) {
        c[r] = scale as i32;
    }
    // Σ c·q down the block's rows of 16 values (each under one scale), in 16 lanes: loops of fixed lengths,
    // which the compiler vectorizes.
    let mut lanes = [0i32; 16];
    for (q, &c) in q.chunks_exact(16).zip(&scales) {
        for (lane, &v) in lanes.iter_mut().zip(q) {
            *lane += c as i32 * v as i32;
        }
    }
    rb.minus_offset[r] = -128 * lanes.iter().sum::<i32>();
    for (mp, pair) in rb.m.iter_mut().zip(mins.chunks_exact(2)) {
        mp[r] = (pair[0] as u16 as u32 | (pair[1] as u16 as u32) << 16) as i32;
    }
    (rb.d[r], rb.minus_m[r]) = (d, -m);
}

/// Decodes one 32-value block of `ty` into `q` (every such type's integers fit a signed byte); returns
/// `[D, M]`.
fn decode_short(ty: GgmlType, b: &[u8], q: &mut [i8; 32]) -> [f32; 2] {
    use GgmlType::*;
    match ty {
        Q4_0 | Q4_1 => {
            let (off, start) = if ty == Q4_0 { (8, 2) } else { (0, 4) };
            for (j, &byte) in b[start..start + 16].iter().enumerate() {
                q[j] = (byte & 0x0F) as i8 - off;
                q[j + 16] = (byte >> 4) as i8 - off;
            }
            [f16_at(b, 0), if ty == Q4_1 { f16_at(b, 2) } else { 0.0 }]
        }
        Q5_0 | Q5_1 => {
            let (off, h) = if ty == Q5_0 { (16, 2) } else { (0, 4) };
            let qh = u32::from_le_bytes([b[h], b[h + 1], b[h + 2], b[h + 3]]);
            for (j, &byte) in b[h + 4..h + 20].iter().enumerate() {
                let hi0 = ((qh >> j) & 1) << 4;
                let hi1 = ((qh >> (j + 16)) & 1) << 4;
                q[j] = ((byte & 0x0F) as u32 | hi0) as i8 - off;
                q[j + 16] = ((byte >> 4) as u32 | hi1) as i8 - off;
            }
            [f16_at(b, 0), if ty == Q5_1 { f16_at(b, 2) } else { 0.0 }]
        }
        Q8_0 => {
            for (q, &v) in q.iter_mut().zip(&b[2..34]) {
                *q = v as i8;
            }
            [f16_at(b, 0), 0.0]
        }
        _ => unreachable!("IntLayout::of admits only the 32-value types decoded here"),
    }
}

/// Decodes one 256-value block of `ty` into its quants `q` (as signed bytes, without their scales), the scale
/// `c` of each 16 values (a sub-block of 32 gives its two halves the same) and its sub-blocks' `mins` (left
/// as they are past their count); returns `[D, M]`.
#[inline(always)]
fn decode_super(ty: GgmlType, b: &[u8], q: &mut [i8; QK_K], c: &mut [i16; 16], mins: &mut [i16; 16]) -> [f32; 2] {
    use GgmlType::*;
    match ty {
        Q2_K => {
            let (scales, qs) = (&b[0..16], &b[16..80]);
            for (i, q) in q.iter_mut().enumerate() {
                let (half, shift, p) = (i / 128, (i % 128) / 32, i % 32);
                *q = ((qs[half * 32 + p] >> (2 * shift)) & 3) as i8;
            }
            for ((c, m), &s) in c.iter_mut().zip(mins.iter_mut()).zip(scales) {
                *c = (s & 0x0F) as i16;
                *m = (s >> 4) as i16;
            }
            [f16_at(b, 80), f16_at(b, 82)]
        }
        Q3_K => {
            let (hmask, qs, sc) = (&b[0..32], &b[32..96], &b[96..108]);
            for (i, c) in c.iter_mut().enumerate() {
                let low = (sc[i % 8] >> (4 * (i / 8))) & 0x0F;
                let high = (sc[8 + i % 4] >> (2 * (i / 4))) & 0x03;
                *c = (low | (high << 4)) as i16 - 32;
            }
            for (i, q) in q.iter_mut().enumerate() {
                let (half, shift, p) = (i / 128, (i % 128) / 32, i % 32);
                let low = ((qs[half * 32 + p] >> (2 * shift)) & 3) as i8;
                *q = if (hmask[p] >> (i / 32)) & 1 == 1 {
                    low
                } else {
                    low - 4
                };
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
            // Sub-block by sub-block, so that the compiler vectorizes each loop of 32 values.
            for (j, q) in q.chunks_exact_mut(32).enumerate() {
                let (src, shift) = (&qs[(j / 2) * 32..][..32], 4 * (j % 2));
                match qh {
                    Some(qh) => {
                        for ((q, &l), &h) in q.iter_mut().zip(src).zip(qh) {
                            *q = (((l >> shift) & 0x0F) | (((h >> j) & 1) << 4)) as i8;
                        }
                    }
                    None => {
                        for (q, &l) in q.iter_mut().zip(src) {
                            *q = ((l >> shift) & 0x0F) as i8;
                        }
                    }
                }
                c[2 * j..2 * j + 2].fill(sc[j] as i16);
            }
            for (m, &v) in mins.iter_mut().zip(&mn) {
                *m = v as i16;
            }
            [f16_at(b, 0), f16_at(b, 2)]
        }
        Q6_K => {
            let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
            // Sixteen values at a time (one scale), so that the compiler vectorizes each loop.
            for (g, q) in q.chunks_exact_mut(16).enumerate() {
                let (half, quarter, p0) = (g / 8, (g % 8) / 2, 16 * (g % 2));
                let l = &ql[half * 64 + 32 * (quarter % 2) + p0..][..16];
                let h = &qh[half * 32 + p0..][..16];
                let (l_shift, h_shift) = (4 * (quarter / 2), 2 * quarter);
                for ((q, &l), &h) in q.iter_mut().zip(l).zip(h) {
                    *q = (((l >> l_shift) & 0x0F) | (((h >> h_shift) & 0x03) << 4)) as i8 - 32;
                }
                c[g] = scales[g] as i8 as i16;
            }
            [f16_at(b, 208), 0.0]
        }
        _ => unreachable!("IntLayout::of admits only the 256-value types decoded here"),
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

    /// The columns of one more block where `ty`'s blocks hold 32 values, so that `COLS` plus them is an odd
    /// count of blocks; none for the 256-value blocks.
    fn odd_block(ty: GgmlType) -> usize {
        32 * usize::from(ty.block_size() == 32)
    }
    const TYPES: [GgmlType; 10] = {
        use GgmlType::*;
        [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K]
    };

    /// `rows` random rows of `ty` (`cols` each), their integer form and ggml's dequantization of them.
    fn decoded(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> (IntLayout, IntRows, Vec<f32>) {
        let layout = IntLayout::of(ty).unwrap();
        let bytes = random_blocks(ty, rows, cols, seed);
        let mut deq = vec![0.0f32; rows * cols];
        dequantize_into(ty, &bytes, &mut deq, "w").unwrap();
        (layout, IntRows::decode(layout, &bytes, cols), deq)
    }

    /// Value `i`'s integer (its sub-block scale folded in), from whichever form the layout keeps.
    fn quant(w: &IntRows, i: usize) -> i32 {
        if w.layout.short_blocks() {
            let (row, col) = (i / w.cols, i % w.cols);
            w.pairs[row * (w.cols / 32).div_ceil(2) + col / 64].w[col % 64] as i32
        } else {
            let (block, r, p) = row_block(w, i);
            block.c[p / w.layout.group][r] * block.q[p / 4][4 * r + p % 4] as i32
        }
    }

    /// Where value `i` of 256-value blocks lies: its row block, its row there and its place in the block.
    fn row_block(w: &IntRows, i: usize) -> (&RowBlock, usize, usize) {
        let (row, col) = (i / w.cols, i % w.cols);
        let n_blocks = w.cols / QK_K;
        let block = &w.row_blocks[(row / ROW_GROUP) * n_blocks + col / QK_K];
        (block, row % ROW_GROUP, col % QK_K)
    }

    /// Every admitted type: the integer form read back as `D·(c·q) − M·m` (or `+ M`) equals ggml's
    /// dequantization up to the rounding of its float32 products.
    #[test]
    fn integer_form_reproduces_the_dequantized_values() {
        for ty in TYPES {
            let (layout, rows, deq) = decoded(ty, 3, COLS, 7);
            let len = layout.kind.block_len();
            for (i, &want) in deq.iter().enumerate() {
                let [d, m] = match layout.short_blocks() {
                    true => rows.dm[i / len],
                    false => {
                        let (block, r, _) = row_block(&rows, i);
                        [block.d[r], -block.minus_m[r]]
                    }
                };
                let mut v = d as f64 * quant(&rows, i) as f64;
                v += match layout.offset {
                    Offset::None => 0.0,
                    Offset::Block => m as f64,
                    Offset::SubBlocks => {
                        let (block, r, p) = row_block(&rows, i);
                        let g = p / layout.group;
                        -(m as f64) * (block.m[g / 2][r] >> (16 * (g % 2))) as i16 as f64
                    }
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
    /// every type, a short last group of activation rows included, an odd count of 32-value blocks, and wide
    /// rows.
    #[test]
    fn every_instruction_set_gives_the_portable_bits() {
        const ROWS: usize = 19;
        for ty in TYPES {
            for cols in [COLS, COLS + odd_block(ty), 5 * COLS + odd_block(ty)] {
                let layout = IntLayout::of(ty).unwrap();
                let w = IntRows::decode(layout, &random_blocks(ty, ROWS, cols, 11), cols);
                let x: Vec<f32> = (0..3 * cols)
                    .map(|i| ((i * 104_729 % 997) as f32 - 498.0) / 37.0)
                    .collect();
                let xq = Q8Rows::quantize(&x, cols, layout.kind, Q8Rounding::X86);
                let acts = Activations::new(layout, &xq);
                let run = |kernel: Kernel| {
                    let mut out = vec![0.0f32; 3 * ROWS];
                    // SAFETY: only kernels whose instruction sets were detected are run.
                    unsafe { kernel(&w, &acts, 0..3, &mut out, ROWS) };
                    out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                let kernels = match layout.short_blocks() {
                    true => quads::kernels(),
                    false => super_blocks::kernels(),
                };
                let want = run(kernels[0].1);
                assert!(want.iter().all(|&b| f32::from_bits(b).is_finite()));
                for (name, kernel) in &kernels[1..] {
                    assert_eq!(run(*kernel), want, "{ty}, {cols} columns: {name} against the portable kernel");
                }
            }
        }
    }

    /// The dot product equals the float64 sum of the dequantized weights times the dequantized activations
    /// (`d·q`, Q8_1's min term through its rounded sum), to float32 rounding; on short and on wide rows.
    #[test]
    fn dot_products_equal_the_dequantized_sums() {
        for (ty, cols) in TYPES.into_iter().flat_map(|ty| [(ty, COLS), (ty, 5 * COLS + odd_block(ty))]) {
            let (layout, w, deq) = decoded(ty, 2, cols, 3);
            let x: Vec<f32> = (0..3 * cols)
                .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 13.0)
                .collect();
            let xq = Q8Rows::quantize(&x, cols, layout.kind, Q8Rounding::X86);
            let len = layout.kind.block_len();
            let acts = Activations::new(layout, &xq);
            for a in 0..3 {
                let mut out = [0.0f32; 2];
                w.dots(&acts, a..a + 1, &mut out, 2);
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
                                    quant(&w, r * cols + b * len + i) as i64
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
