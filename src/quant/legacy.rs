//! Dequantization of ggml's 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
//!
//! Each function maps one block of bytes to 32 f32 values with ggml's own f32 operations, in ggml's order,
//! so the results are bit-identical to ggml and to gguf-py (`gguf.quants`).

use super::f16_at;

/// Q4_0: `d: f16, qs: [u8; 16]`; `y = d * (nibble - 8)`, low nibbles first.
pub fn q4_0(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let qs = &block[2..18];
    for j in 0..16 {
        out[j] = d * (((qs[j] & 0x0F) as i32 - 8) as f32);
        out[j + 16] = d * (((qs[j] >> 4) as i32 - 8) as f32);
    }
}

/// Q4_1: `d: f16, m: f16, qs: [u8; 16]`; `y = d * nibble + m`.
pub fn q4_1(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let m = f16_at(block, 2);
    let qs = &block[4..20];
    for j in 0..16 {
        out[j] = d * ((qs[j] & 0x0F) as f32) + m;
        out[j + 16] = d * ((qs[j] >> 4) as f32) + m;
    }
}

/// The 5-bit values of a Q5 block: low nibbles from `qs`, fifth bits from the little-endian `qh`.
fn five_bit(qh: u32, qs: &[u8], j: usize) -> (u8, u8) {
    let h0 = (((qh >> j) & 1) << 4) as u8;
    let h1 = (((qh >> (j + 16)) & 1) << 4) as u8;
    ((qs[j] & 0x0F) | h0, (qs[j] >> 4) | h1)
}

/// Q5_0: `d: f16, qh: u32, qs: [u8; 16]`; `y = d * (q5 - 16)`.
pub fn q5_0(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
    let qs = &block[6..22];
    for j in 0..16 {
        let (a, b) = five_bit(qh, qs, j);
        out[j] = d * ((a as i32 - 16) as f32);
        out[j + 16] = d * ((b as i32 - 16) as f32);
    }
}

/// Q5_1: `d: f16, m: f16, qh: u32, qs: [u8; 16]`; `y = d * q5 + m`.
pub fn q5_1(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let m = f16_at(block, 2);
    let qh = u32::from_le_bytes([block[4], block[5], block[6], block[7]]);
    let qs = &block[8..24];
    for j in 0..16 {
        let (a, b) = five_bit(qh, qs, j);
        out[j] = d * (a as f32) + m;
        out[j + 16] = d * (b as f32) + m;
    }
}

/// Q8_0: `d: f16, qs: [i8; 32]`; `y = q * d`.
pub fn q8_0(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    for (y, &q) in out.iter_mut().zip(&block[2..34]) {
        *y = (q as i8 as f32) * d;
    }
}
