//! Valid random blocks of the i-quants whose ggml quantizers need an importance matrix (IQ1_S, IQ1_M, IQ2_XXS,
//! IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) and of IQ4_XS, for `synth --quant`: random grid indices, signs and group
//! scales, under a block scale chosen so that the block's values have the RMS of the values given. Such a file
//! exercises every code path of the dequantizers at the sizes of real files; its weights are not a quantization
//! of anything (no search for the nearest grid points, which ggml runs against an importance matrix).
//!
//! Written by hand: no crate writes ggml's i-quant blocks.

use super::block_kernel;
use super::types::{GgmlType, QK_K};
use half::f16;

/// Fills `out` with one valid random block of `ty` (any of the types above) whose values have the RMS of `x`;
/// the bytes are a function of `x` alone, so files stay reproducible from their seed.
pub(super) fn random_block(ty: GgmlType, x: &[f32], out: &mut [u8]) {
    let mut state = x.iter().fold(0x9E37_79B9_7F4A_7C15u64 ^ ty as u64, |h, v| {
        splitmix(h ^ v.to_bits() as u64)
    });
    for chunk in out.chunks_mut(8) {
        state = splitmix(state);
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
    let kernel = block_kernel(ty).expect("an i-quant has a dequantizer");
    // Every type here has blocks of QK_K values: no allocation per block.
    let mut values = [0.0f32; QK_K];
    let values = &mut values[..x.len()];
    set_scale(ty, out, f16::ONE);
    kernel(out, values);
    let rms =
        |v: &[f32]| (v.iter().map(|&a| a as f64 * a as f64).sum::<f64>() / v.len() as f64).sqrt();
    let (want, unit) = (rms(x), rms(values));
    let d = if unit > 0.0 && want.is_finite() {
        want / unit
    } else {
        0.0
    };
    set_scale(ty, out, f16::from_f64(d));
}

/// Writes the block scale `d`: the f16 at offset 0, or for IQ1_M spread over the top nibbles of its four scale
/// words (bytes 48–55).
fn set_scale(ty: GgmlType, out: &mut [u8], d: f16) {
    if ty == GgmlType::IQ1_M {
        let bits = d.to_bits();
        for i in 0..4 {
            let at = 48 + 2 * i;
            let word = u16::from_le_bytes([out[at], out[at + 1]]) & 0x0FFF;
            let nibble = (bits >> (4 * i)) & 0xF;
            out[at..at + 2].copy_from_slice(&(word | nibble << 12).to_le_bytes());
        }
    } else {
        out[..2].copy_from_slice(&d.to_le_bytes());
    }
}

/// One step of SplitMix64: a well-mixed 64-bit value of `z`.
fn splitmix(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
