//! Dequantization of ggml's K-quants (256-element super-blocks: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K).
//!
//! The per-sub-block scale is formed first (`d * scale`, `dmin * min` in f32), then applied to each quant, as in
//! ggml's `dequantize_row_*`; the results are bit-identical to ggml and gguf-py.

use super::f16_at;
use crate::quant::QK_K;

/// Q2_K: `scales: [u8; 16], qs: [u8; 64], d: f16, dmin: f16`; 16 sub-blocks of 16, 2-bit quants.
pub fn q2_k(block: &[u8], out: &mut [f32]) {
    let scales = &block[0..16];
    let qs = &block[16..80];
    let d = f16_at(block, 80);
    let dmin = f16_at(block, 82);
    for (i, y) in out.iter_mut().enumerate().take(QK_K) {
        let (half, shift, p) = (i / 128, (i % 128) / 32, i % 32);
        let q = (qs[half * 32 + p] >> (2 * shift)) & 3;
        let sc = scales[i / 16];
        let dl = d * ((sc & 0x0F) as f32);
        let ml = dmin * ((sc >> 4) as f32);
        *y = dl * (q as f32) - ml;
    }
}

/// Q3_K: `hmask: [u8; 32], qs: [u8; 64], scales: [u8; 12], d: f16`; 16 sub-blocks of 16, signed 6-bit scales,
/// 3-bit quants whose high bit is stored inverted in `hmask`.
pub fn q3_k(block: &[u8], out: &mut [f32]) {
    let hmask = &block[0..32];
    let qs = &block[32..96];
    let sc = &block[96..108];
    let d = f16_at(block, 108);
    let mut scale = [0f32; 16];
    for (i, s) in scale.iter_mut().enumerate() {
        let low = (sc[i % 8] >> (4 * (i / 8))) & 0x0F;
        let high = (sc[8 + i % 4] >> (2 * (i / 4))) & 0x03;
        *s = d * (((low | (high << 4)) as i32 - 32) as f32);
    }
    for (i, y) in out.iter_mut().enumerate().take(QK_K) {
        let (half, shift, p) = (i / 128, (i % 128) / 32, i % 32);
        let low = ((qs[half * 32 + p] >> (2 * shift)) & 3) as i32;
        let high_set = (hmask[p] >> (i / 32)) & 1 == 1;
        let q = if high_set { low } else { low - 4 };
        *y = scale[i / 16] * (q as f32);
    }
}

/// The eight 6-bit (scale, min) pairs packed into 12 bytes, shared by Q4_K and Q5_K.
pub(super) fn scale_min_k4(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 6) << 4);
        mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
    (sc, mn)
}

/// Per-sub-block multipliers `d * scale` and offsets `dmin * min` of a Q4_K/Q5_K block.
fn k4_factors(block: &[u8]) -> ([f32; 8], [f32; 8]) {
    let d = f16_at(block, 0);
    let dmin = f16_at(block, 2);
    let (sc, mn) = scale_min_k4(&block[4..16]);
    (sc.map(|s| d * s as f32), mn.map(|m| dmin * m as f32))
}

/// Q4_K: `d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128]`; 8 sub-blocks of 32, `y = d*sc*q - dmin*m`.
///
/// Written sub-block by sub-block over fixed-length slices, so that the compiler vectorises the inner loops
/// (the same operations per value as ggml's, in the same order: the bits do not change); likewise Q5_K and Q6_K.
pub fn q4_k(block: &[u8], out: &mut [f32]) {
    let (mul, off) = k4_factors(block);
    let qs: &[u8; 128] = block[16..144].try_into().expect("a Q4_K block");
    for (j, y) in out[..QK_K].chunks_exact_mut(32).enumerate() {
        let q = &qs[(j / 2) * 32..(j / 2) * 32 + 32];
        let shift = 4 * (j % 2) as u32;
        let (m, o) = (mul[j], off[j]);
        for (y, &q) in y.iter_mut().zip(q) {
            *y = m * (((q >> shift) & 0x0F) as f32) - o;
        }
    }
}

/// Q5_K: `d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128]`; as Q4_K with a fifth bit.
pub fn q5_k(block: &[u8], out: &mut [f32]) {
    let (mul, off) = k4_factors(block);
    let qh: &[u8; 32] = block[16..48].try_into().expect("a Q5_K block");
    let qs: &[u8; 128] = block[48..176].try_into().expect("a Q5_K block");
    for (j, y) in out[..QK_K].chunks_exact_mut(32).enumerate() {
        let q = &qs[(j / 2) * 32..(j / 2) * 32 + 32];
        let shift = 4 * (j % 2) as u32;
        let (m, o) = (mul[j], off[j]);
        for ((y, &q), &h) in y.iter_mut().zip(q).zip(qh) {
            let low = (q >> shift) & 0x0F;
            let high = (h >> j) & 1;
            *y = m * ((low | (high << 4)) as f32) - o;
        }
    }
}

/// Q6_K: `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16`; 16 sub-blocks of 16, `y = d*sc*(q6 - 32)`.
pub fn q6_k(block: &[u8], out: &mut [f32]) {
    let ql: &[u8; 128] = block[0..128].try_into().expect("a Q6_K block");
    let qh: &[u8; 64] = block[128..192].try_into().expect("a Q6_K block");
    let scales = &block[192..208];
    let d = f16_at(block, 208);
    // Value i = 128·half + 32·quarter + p: low nibble of ql[64·half + 32·(quarter % 2) + p] (shifted by 4 for
    // quarters 2 and 3), high two bits of qh[32·half + p] at 2·quarter.
    for (c, y) in out[..QK_K].chunks_exact_mut(32).enumerate() {
        let (half, quarter) = (c / 4, c % 4);
        let low = &ql[half * 64 + 32 * (quarter % 2)..half * 64 + 32 * (quarter % 2) + 32];
        let high = &qh[half * 32..half * 32 + 32];
        let (ls, hs) = (4 * (quarter / 2) as u32, 2 * quarter as u32);
        let scale = [
            d * (scales[2 * c] as i8 as f32),
            d * (scales[2 * c + 1] as i8 as f32),
        ];
        for (k, y) in y.chunks_exact_mut(16).enumerate() {
            let sc = scale[k];
            for ((y, &l), &h) in y.iter_mut().zip(&low[16 * k..]).zip(&high[16 * k..]) {
                let q = (((l >> ls) & 0x0F) | (((h >> hs) & 0x03) << 4)) as i32 - 32;
                *y = sc * (q as f32);
            }
        }
    }
}

/// Q8_K: `d: f32, qs: [i8; 256], bsums: [i16; 16]`; `y = d * q` (the block sums are not needed).
pub fn q8_k(block: &[u8], out: &mut [f32]) {
    let d = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
    for (y, &q) in out.iter_mut().zip(&block[4..4 + QK_K]) {
        *y = d * (q as i8 as f32);
    }
}
