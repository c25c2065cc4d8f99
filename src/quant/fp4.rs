//! Dequantization of ggml's 4-bit float formats: E2M1 codes under a shared power-of-two scale (MXFP4, the OCP
//! microscaling format) or under unsigned E4M3 scales (NVFP4), bit-identical to ggml and gguf-py.
//!
//! As in ggml, the E2M1 levels are kept doubled (integers) and the scales halved, so every product is exact.

/// ggml's `kvalues_mxfp4`: the 16 E2M1 values, doubled.
pub(super) const E2M1_DOUBLED: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// ggml's `ggml_e8m0_to_fp32_half`: half of the power of two `2^(e - 127)` an E8M0 byte encodes (exponents 0 and
/// 1 give subnormals).
#[inline]
fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e - 1) as u32) << 23
    };
    f32::from_bits(bits)
}

/// `2^k` for the exponents of an unsigned E4M3 scale (`-10..=4`, normal f32 values).
#[inline]
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// Half of the unsigned E4M3 value of `x` (bias 7; the sign bit ignored; 0 and the NaN code 0x7F give 0), as
/// gguf-py's `NVFP4.ue4m3_to_fp32` computes it.
#[inline]
pub(super) fn ue4m3_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = ((x >> 3) & 0x0F) as i32;
    let man = (x & 7) as f32;
    if exp == 0 {
        man * pow2(-10)
    } else {
        (8.0 + man) * pow2(exp - 11)
    }
}

/// `E2M1_DOUBLED` as f32 (exact), so that [`e2m1`] multiplies without converting.
const E2M1_DOUBLED_F32: [f32; 16] = super::levels_f32(&E2M1_DOUBLED);

/// `d * level[nibble]` for the 2·`low.len()` codes of `qs`: low nibbles into `low`, high nibbles into `high`.
#[inline]
fn e2m1(d: f32, qs: &[u8], low: &mut [f32], high: &mut [f32]) {
    for ((&q, a), b) in qs.iter().zip(low).zip(high) {
        *a = d * E2M1_DOUBLED_F32[(q & 0x0F) as usize];
        *b = d * E2M1_DOUBLED_F32[(q >> 4) as usize];
    }
}

/// MXFP4: `e: u8 (E8M0), qs: [u8; 16]`; `y = 2^(e-128) * level[nibble]`, low nibbles first.
pub fn mxfp4(block: &[u8], out: &mut [f32]) {
    let (low, high) = out.split_at_mut(16);
    e2m1(e8m0_half(block[0]), &block[1..17], low, high);
}

/// NVFP4: `d: [u8; 4] (unsigned E4M3), qs: [u8; 32]`; four sub-blocks of 16 values, each `d[s]/2 *
/// level[nibble]` with the low nibbles of its 8 bytes first.
pub fn nvfp4(block: &[u8], out: &mut [f32]) {
    for (s, (q, y)) in block[4..36]
        .chunks_exact(8)
        .zip(out.chunks_exact_mut(16))
        .enumerate()
    {
        let (low, high) = y.split_at_mut(8);
        e2m1(ue4m3_half(block[s]), q, low, high);
    }
}
