//! Dequantization of ggml's ternary formats (TQ1_0, TQ2_0): 256 values in {-1, 0, 1} times one f16 scale, as
//! ggml's `dequantize_row_tq*` computes them, bit-identical to ggml and gguf-py.

use super::f16_at;

/// The powers of 3 that bring each base-3 digit of a TQ1_0 byte to the top.
const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// The ternary digit at the top of the byte `b · 3ⁿ` (mod 256), where TQ1_0 keeps it: `((q · 3) >> 8) - 1`.
#[inline]
fn trit(b: u8, pow: u8) -> i32 {
    let q = b.wrapping_mul(pow) as u16;
    ((q * 3) >> 8) as i32 - 1
}

/// TQ1_0: `qs: [u8; 48], qh: [u8; 4], d: f16`; five ternary digits per byte of `qs` (values 0..240: the digits
/// of the first 32 bytes, then of the next 16), four per byte of `qh` (values 240..256); `y = d * t`.
pub fn tq1_0(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 52);
    let (first, rest) = out.split_at_mut(160);
    let (second, third) = rest.split_at_mut(80);
    for (&pow, y) in POW3.iter().zip(first.chunks_exact_mut(32)) {
        for (v, &b) in y.iter_mut().zip(&block[0..32]) {
            *v = d * (trit(b, pow) as f32);
        }
    }
    for (&pow, y) in POW3.iter().zip(second.chunks_exact_mut(16)) {
        for (v, &b) in y.iter_mut().zip(&block[32..48]) {
            *v = d * (trit(b, pow) as f32);
        }
    }
    for (&pow, y) in POW3[..4].iter().zip(third.chunks_exact_mut(4)) {
        for (v, &b) in y.iter_mut().zip(&block[48..52]) {
            *v = d * (trit(b, pow) as f32);
        }
    }
}

/// TQ2_0: `qs: [u8; 64], d: f16`; 2-bit codes `c`, four per byte (per 32 bytes, bit pair `l` of byte `m` is value
/// `32 l + m`); `y = d * (c - 1)`.
pub fn tq2_0(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 64);
    for (q, y) in block[0..64].chunks_exact(32).zip(out.chunks_exact_mut(128)) {
        for (l, y) in y.chunks_exact_mut(32).enumerate() {
            for (v, &b) in y.iter_mut().zip(q) {
                *v = d * ((((b >> (2 * l)) & 3) as i32 - 1) as f32);
            }
        }
    }
}
