//! Dequantization is bit-identical to gguf-py's reference (`gguf.quants.dequantize`).
//!
//! Tolerance: none. A quantized weight's value is the f32 ggml's arithmetic gives, so every value must have the
//! same bits as the reference. Reference data: `fixtures/quant/make_fixtures.py`.

use ropescope::gguf::GgufFile;
use ropescope::quant::GgmlType;
use ropescope_test_support::paths;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

/// Every type ropescope dequantizes, each present once in the fixture file.
const REQUIRED: [&str; 27] = [
    "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
    "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS", "IQ3_XXS", "IQ3_S", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S",
    "IQ1_M", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4",
];

#[test]
fn every_type_matches_gguf_py_bit_for_bit() {
    let file = GgufFile::open(paths::fixture("quant/quant_types.gguf")).unwrap();
    let expected_bytes = std::fs::read(paths::fixture("quant/quant_types.expected")).unwrap();
    let expected: Vec<f32> = expected_bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let mut at = 0;
    let mut seen = BTreeSet::new();
    for t in file.tensors() {
        let got = file.dequantize_f32(&t.name).unwrap();
        let want = &expected[at..at + got.len()];
        at += got.len();
        let mismatches = got
            .iter()
            .zip(want)
            .filter(|(g, w)| g.to_bits() != w.to_bits())
            .count();
        assert_eq!(
            mismatches,
            0,
            "{}: {mismatches} of {} values differ from gguf-py",
            t.name,
            got.len()
        );
        seen.insert(t.ty.name());
    }
    assert_eq!(
        at,
        expected.len(),
        "the fixture holds values for tensors the file does not have"
    );
    assert_eq!(seen, REQUIRED.into_iter().collect::<BTreeSet<_>>());
}

/// `REQUIRED` is exactly the set of types `GgmlType::can_dequantize` accepts, so a type made dequantizable
/// needs a tensor in the fixture.
#[test]
fn the_fixture_types_are_every_dequantizable_type() {
    let dequantizable: BTreeSet<&str> = (0..=u8::MAX as u32)
        .filter_map(GgmlType::from_id)
        .filter(|t| t.can_dequantize())
        .map(|t| t.name())
        .collect();
    assert_eq!(dequantizable, REQUIRED.into_iter().collect::<BTreeSet<_>>());
}

#[test]
fn unsupported_type_is_a_clear_error_naming_type_and_tensor() {
    // Q8_1 is the type of ggml's intermediate products, which gguf-py does not dequantize.
    let ty = GgmlType::Q8_1;
    assert!(!ty.can_dequantize());
    let err =
        ropescope::quant::dequantize_into(ty, &[0u8; 36], &mut [0f32; 32], "blk.3.ffn_up.weight")
            .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("Q8_1") && msg.contains("blk.3.ffn_up.weight"),
        "{msg}"
    );
}

#[test]
fn f64_path_widens_the_f32_values() {
    let file = GgufFile::open(paths::fixture("quant/quant_types.gguf")).unwrap();
    let t = file.tensor("t.Q4_K").unwrap();
    let narrow = file.dequantize_f32(&t.name).unwrap();
    let mut wide = vec![0f64; narrow.len()];
    ropescope::quant::dequantize_into_f64(t.ty, file.tensor_bytes(t), &mut wide, &t.name).unwrap();
    assert!(narrow.iter().zip(&wide).all(|(&n, &w)| n as f64 == w));
}

/// Every tensor of a real model: sha256 of its dequantized f32 values equals gguf-py's.
fn check_model(file_name: &str) {
    let hashes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(paths::fixture("quant/model_hashes.json")).unwrap())
            .unwrap();
    let want = hashes["models"][file_name]
        .as_object()
        .expect("model in model_hashes.json");
    let file = GgufFile::open(paths::model(file_name)).unwrap();
    assert_eq!(file.tensors().len(), want.len());
    for t in file.tensors() {
        let values = file.dequantize_f32(&t.name).unwrap();
        let mut h = Sha256::new();
        for v in &values {
            h.update(v.to_le_bytes());
        }
        let got = format!("{:x}", h.finalize());
        let entry = &want[&t.name];
        assert_eq!(entry["type"], t.ty.name(), "{}", t.name);
        assert_eq!(
            got,
            entry["sha256"].as_str().unwrap(),
            "{} ({}) differs from gguf-py",
            t.name,
            t.ty
        );
    }
}

#[test]
fn smollm2_every_tensor_matches_gguf_py() {
    check_model(paths::SMOLLM2);
}

#[test]
fn gemma3_every_tensor_matches_gguf_py() {
    check_model(paths::GEMMA3);
}
