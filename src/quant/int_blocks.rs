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
    /// float32 in block order, then the lanes and the min terms added in float64 and rounded once. The order
    /// is fixed, so the bits are the same on every instruction set.
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
        match self.layout.kind.block_len() {
            32 => dots_kernel::<32>(self, x, xs, x_sums, out, ld),
            _ => dots_kernel::<QK_K>(self, x, xs, x_sums, out, ld),
        }
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

/// [`IntRows::dots`] for blocks of `LEN` values, compiled for each instruction set (the integer pair sums
/// become `pmaddwd`); the arithmetic is the same on all.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2+fma", "aarch64+neon"))]
fn dots_kernel<const LEN: usize>(
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
        let terms = block_terms::<LEN>(w, r, x, rows, x_sums);
        for i in 0..xs.len() {
            out[i * ld + r] = terms[i] as f32;
        }
    }
}

/// For weight row `r` and the activation rows `rows` (sub-block sums `x_sums`, by slot):
/// `Σ_blocks fl(D·d) · (block's integer sum)`, kept in 16 float32 lanes across blocks, plus the min terms
/// (`fl(M·s)` or `−fl(d·M)·Σ_g m_g·Σ_g qx` per block), added in float32 in block order as ggml adds them;
/// lanes and min terms added in float64 at the end.
#[inline(always)]
fn block_terms<const LEN: usize>(
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
    let mut acc = [[0.0f32; 16]; ACT_ROWS];
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
                let lanes = pair_lanes(wb, xb);
                let f = factors[i][b - start];
                for (a, &v) in acc[i].iter_mut().zip(&lanes) {
                    *a += f * v as f32;
                }
            }
        }
    }
    // The min terms in a second pass, so that the loop above holds nothing but the block products.
    let mut mins_acc = [0.0f32; ACT_ROWS];
    match w.layout.offset {
        Offset::None => {}
        Offset::Block => {
            for (i, m) in mins_acc.iter_mut().enumerate() {
                let s = &x.s[rows[i] * n_blocks..(rows[i] + 1) * n_blocks];
                for (&[_, mw], &s) in dm.iter().zip(s) {
                    *m += mw * s;
                }
            }
        }
        Offset::SubBlocks => {
            let mins = &w.mins[r * n_blocks * groups..(r + 1) * n_blocks * groups];
            for (i, m) in mins_acc.iter_mut().enumerate() {
                let per_block = mins.chunks_exact(groups).zip(sums[i].chunks_exact(groups));
                for ((mn, s), (&[_, mw], &dx)) in per_block.zip(dm.iter().zip(xd[i])) {
                    let s2: i32 = mn.iter().zip(s).map(|(&m, &s)| m as i32 * s).sum();
                    *m -= (dx * mw) * s2 as f32;
                }
            }
        }
    }
    std::array::from_fn(|i| acc[i].iter().map(|&v| v as f64).sum::<f64>() + mins_acc[i] as f64)
}

/// The 16 lanes of a block's integer dot product: lane `l` sums the products of values `32c + 2l` and
/// `32c + 2l + 1` over the block's 32-value chunks `c`. Exact in i32 (`|c·q| ≤ 128·32`, `|qx| ≤ 128`, at most
/// 256 values).
#[inline(always)]
fn pair_lanes<const LEN: usize>(w: &[i16; LEN], x: &[i16; LEN]) -> [i32; 16] {
    let mut lanes = [0i32; 16];
    for (wc, xc) in w.chunks_exact(32).zip(x.chunks_exact(32)) {
        for (l, lane) in lanes.iter_mut().enumerate() {
            let i = 2 * l;
            *lane += wc[i] as i32 * xc[i] as i32 + wc[i + 1] as i32 * xc[i + 1] as i32;
        }
    }
    lanes
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
