//! Quantization is byte-identical to ggml's reference quantizers (llama.cpp's `libggml-base`), and, for the
//! types gguf-py quantizes, to gguf-py's `gguf.quants.quantize` (the fixture script checks the two agree). The
//! i-quants whose ggml quantizers need an importance matrix, and IQ4_XS, are written as valid random blocks
//! instead, checked for validity and scale below.
//!
//! Tolerance: none; every byte must match (for IQ4_NL, ggml leaves the codes of a block below `GROUP_MAX_EPS`,
//! whose scale is 0, as its scratch array held them; the fixture zeroes them, as ropescope writes them).
//! Reference data: `fixtures/quant/make_quantize_fixtures.py`, on rows that reach every branch (Gaussian at three
//! scales, an outlier, all-positive, all-negative, constant, all-zero, below ggml's `GROUP_MAX_EPS`, exact
//! half-step ties, zero groups, uniform).

use ropescope::quant::{can_quantize, dequantize_into, quantize_into, GgmlType};
use ropescope_test_support::paths;

/// Values per fixture row.
const ROW_LEN: usize = 512;

fn input() -> Vec<f32> {
    std::fs::read(paths::fixture("quant/quantize_input.f32"))
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn quantized(ty: GgmlType, x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; ty.byte_size(x.len() as u64).unwrap() as usize];
    quantize_into(ty, x, &mut out, "fixture").unwrap();
    out
}

#[test]
fn every_quantizer_matches_ggml_byte_for_byte() {
    let x = input();
    assert_eq!(x.len() % ROW_LEN, 0);
    for name in [
        "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q6_K", "MXFP4", "NVFP4", "TQ1_0", "TQ2_0",
        "IQ4_NL", "F16", "BF16",
    ] {
        let ty = GgmlType::from_name(name).unwrap();
        let want = std::fs::read(paths::fixture(&format!("quant/quantize_{name}.bin"))).unwrap();
        let got = quantized(ty, &x);
        assert_eq!(got.len(), want.len(), "{name}: byte count");
        let row_bytes = got.len() / (x.len() / ROW_LEN);
        let bad_rows: Vec<usize> = got
            .chunks(row_bytes)
            .zip(want.chunks(row_bytes))
            .enumerate()
            .filter(|(_, (g, w))| g != w)
            .map(|(r, _)| r)
            .collect();
        assert!(
            bad_rows.is_empty(),
            "{name}: rows {bad_rows:?} differ from ggml"
        );
    }
}

/// Dequantizing what was quantized gives values within the type's step of the input: a check of the pairing of
/// the two directions that does not rest on the fixture (Gaussian rows only, where the steps are meaningful).
#[test]
fn quantize_then_dequantize_stays_within_a_step() {
    let x = &input()[..4 * ROW_LEN];
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    // Worst error as a fraction of the largest magnitude: half a step for Q8_0 (levels ±127, step amax/127); a
    // whole step for Q4_0 and Q5_0 (step amax/8, amax/16), whose top level on the side opposite the extreme value
    // is one short of it; for the K-quants, half a step of their grids (Q6_K: levels -32..31 over ±amax, half
    // step amax/64; Q4_K: 16 levels over [min, max], half step amax/15) with a third more for the rounding of
    // the groups' scales to 6- or 8-bit codes under an f16 super-scale: amax/48 and amax/12.
    // The ternary types round each value to -d, 0 or d with d its block's largest magnitude: half of it. MXFP4's
    // levels reach 6 of its power-of-two unit s while a block's largest magnitude lies in [4s, 8s): at most 2s,
    // half of it. IQ4_NL: half the widest gap of its levels (23 of 127, by the extreme one), amax/11, with the
    // refitted scale moving the levels a little: amax/8.
    // Measured on the fixture: Q8_0 0.0039, Q5_0 0.041, Q4_0 0.085, Q6_K 0.014, Q4_K 0.053, MXFP4 0.19,
    // TQ1_0 and TQ2_0 0.498, IQ4_NL 0.080 (of amax). NVFP4: its E4M3 scale of a sub-block's `amax / 6` is rounded
    // to 3 mantissa bits (a factor 1 ± 1/16), and its widest gap, between levels 4 and 6, is two scales: about
    // amax/6 at most (measured 0.11).
    for (name, fraction) in [
        ("Q8_0", 0.5 / 127.0),
        ("Q5_0", 1.0 / 16.0),
        ("Q4_0", 1.0 / 8.0),
        ("Q6_K", 1.0 / 48.0),
        ("Q4_K", 1.0 / 12.0),
        ("MXFP4", 0.5),
        ("TQ1_0", 0.5),
        ("TQ2_0", 0.5),
        ("IQ4_NL", 1.0 / 8.0),
        ("NVFP4", 0.2),
    ] {
        let ty = GgmlType::from_name(name).unwrap();
        let mut back = vec![0.0f32; x.len()];
        dequantize_into(ty, &quantized(ty, x), &mut back, "fixture").unwrap();
        let worst = x
            .iter()
            .zip(&back)
            .fold(0.0f32, |a, (u, v)| a.max((u - v).abs()));
        assert!(
            worst <= fraction * amax * 1.01,
            "{name}: worst error {worst} above {fraction} of the largest magnitude {amax}"
        );
        assert!(
            worst > 0.0,
            "{name}: a lossy type reproduced its input exactly"
        );
    }
}

#[test]
fn types_without_a_quantizer_are_refused_by_name() {
    for name in ["Q2_K", "Q3_K", "Q5_K", "Q8_K"] {
        let ty = GgmlType::from_name(name).unwrap();
        assert!(!can_quantize(ty));
        let mut out = vec![0u8; ty.byte_size(256).unwrap() as usize];
        let err = quantize_into(ty, &[0.0; 256], &mut out, "blk.0.attn_q.weight").unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(name) && message.contains("blk.0.attn_q.weight"),
            "{message}"
        );
    }
}

/// The i-quants whose ggml quantizers need an importance matrix, and IQ4_XS, are written as valid random blocks:
/// every value finite, each block's RMS that of its input within the f16 rounding of the block scale (2⁻¹¹,
/// asserted within 10⁻³), an all-zero block all zeros, and the bytes a function of the values alone.
#[test]
fn random_iquant_blocks_are_valid_and_keep_each_blocks_rms() {
    let x = &input()[..4 * ROW_LEN];
    let rms =
        |v: &[f32]| (v.iter().map(|&a| a as f64 * a as f64).sum::<f64>() / v.len() as f64).sqrt();
    for name in [
        "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS",
    ] {
        let ty = GgmlType::from_name(name).unwrap();
        assert!(can_quantize(ty), "{name}");
        let bytes = quantized(ty, x);
        assert_eq!(
            bytes,
            quantized(ty, x),
            "{name}: not a function of the values"
        );
        let mut back = vec![0.0f32; x.len()];
        dequantize_into(ty, &bytes, &mut back, "fixture").unwrap();
        for (i, (a, b)) in x.chunks(256).zip(back.chunks(256)).enumerate() {
            assert!(b.iter().all(|v| v.is_finite()), "{name} block {i}");
            let (want, got) = (rms(a), rms(b));
            assert!(
                (got / want - 1.0).abs() < 1e-3,
                "{name} block {i}: RMS {got} for {want}"
            );
        }
        let mut moved = x.to_vec();
        moved[3] += 1.0;
        assert_ne!(
            quantized(ty, &moved)[..],
            bytes[..],
            "{name}: the same bytes for other values"
        );
        let mut zero = vec![1.0f32; 256];
        dequantize_into(ty, &quantized(ty, &[0.0; 256]), &mut zero, "zero").unwrap();
        assert!(zero.iter().all(|&v| v == 0.0), "{name}: an all-zero block");
    }
}

#[test]
fn a_partial_block_is_refused() {
    let mut out = vec![0u8; 144];
    let err = quantize_into(GgmlType::Q4_K, &[0.0; 200], &mut out, "t").unwrap_err();
    assert!(err.to_string().contains("whole Q4_K blocks"), "{err}");
}
