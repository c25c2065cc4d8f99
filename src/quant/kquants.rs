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
pub fn q4_k(block: &[u8], out: &mut [f32]) {
    let (mul, off) = k4_factors(block);
    let qs = &block[16..144];
    for (i, y) in out.iter_mut().enumerate().take(QK_K) {
        let j = i / 32;
        let q = (qs[(j / 2) * 32 + i % 32] >> (4 * (j % 2))) & 0x0F;
        *y = mul[j] * (q as f32) - off[j];
    }
}

/// Q5_K: `d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128]`; as Q4_K with a fifth bit.
pub fn q5_k(block: &[u8], out: &mut [f32]) {
    let (mul, off) = k4_factors(block);
    let qh = &block[16..48];
    let qs = &block[48..176];
    for (i, y) in out.iter_mut().enumerate().take(QK_K) {
        let (j, p) = (i / 32, i % 32);
        let low = (qs[(j / 2) * 32 + p] >> (4 * (j % 2))) & 0x0F;
        let high = (qh[p] >> j) & 1;
        *y = mul[j] * ((low | (high << 4)) as f32) - off[j];
    }
}

/// Q6_K: `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16`; 16 sub-blocks of 16, `y = d*sc*(q6 - 32)`.
pub fn q6_k(block: &[u8], out: &mut [f32]) {
    let ql = &block[0..128];
    let qh = &block[128..192];
    let scales = &block[192..208];
    let d = f16_at(block, 208);
    for (i, y) in out.iter_mut().enumerate().take(QK_K) {
        let half = i / 128;
        let r = i % 128;
        let low = (ql[half * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
        let high = (qh[half * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
        let q = (low | (high << 4)) as i32 - 32;
        *y = (d * (scales[i / 16] as i8 as f32)) * (q as f32);
    }
}

/// Q8_K: `d: f32, qs: [i8; 256], bsums: [i16; 16]`; `y = d * q` (the block sums are not needed).
pub fn q8_k(block: &[u8], out: &mut [f32]) {
    let d = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
    for (y, &q) in out.iter_mut().zip(&block[4..4 + QK_K]) {
        *y = d * (q as i8 as f32);
    }
}
