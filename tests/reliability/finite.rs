//! No output holds a NaN or an infinity: a model file whose weights give one is refused where it first
//! appears, naming the layer and the tensor, and nothing is written (`src/model/finite.rs`).

use ropescope::synth::SyntheticModel;
use ropescope::ErrorKind;
use ropescope_test_support::cli::{arg, assert_ok, assert_refused, run, Run};
use ropescope_test_support::inputs::write_ids;
use std::path::{Path, PathBuf};

/// A two-layer llama model whose tensor `name` has `value` at element 3 (every other element small and
/// random, as `SyntheticModel` makes them).
fn model_with(dir: &Path, name: &str, value: f32) -> PathBuf {
    let mut m = SyntheticModel::new("llama");
    let (_, dims, _) = m
        .tensor_shapes()
        .into_iter()
        .find(|(n, _, _)| n == name)
        .expect("the tensor exists");
    let n = dims.iter().product::<u64>() as usize;
    let mut values: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 1e-3)
        .collect();
    values[3] = value;
    m.overrides.insert(name.to_string(), values);
    let path = dir.join("model.gguf");
    std::fs::write(&path, m.to_bytes()).unwrap();
    path
}

/// `reference` of `model` on six tokens in `precision`, into `out`.
fn reference(model: &Path, out: &Path, precision: &str) -> Run {
    run(&[
        "reference",
        arg(model),
        "--ids",
        "1,5,9,2,7,3",
        "--precision",
        precision,
        "--out",
        arg(out),
    ])
}

#[test]
fn a_nan_weight_is_refused_at_its_layer_and_tensor_in_both_precisions() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_with(dir.path(), "blk.1.attn_q.weight", f32::NAN);
    for precision in ["f64", "f32"] {
        let out = dir.path().join(format!("ref-{precision}"));
        assert_refused(
            &reference(&model, &out, precision),
            ErrorKind::BadFile.exit_code() as i32,
            &["the post-RoPE queries of layer 1 holds NaN at position 0"],
        );
        assert!(!out.exists(), "{precision}: an output was written");
    }
    // The unaltered model runs, so the refusal is the NaN's.
    let clean = dir.path().join("clean");
    std::fs::create_dir(&clean).unwrap();
    let model = model_with(&clean, "blk.1.attn_q.weight", 0.01);
    assert_ok(&reference(&model, &clean.join("ref"), "f64"));
}

#[test]
fn a_weight_that_overflows_f32_is_refused_in_f32_and_finite_in_f64() {
    // 1e38 in a value weight: finite in both precisions, but the values of layer 0 are about 1e38 times an
    // activation of order 1, and their products overflow f32 (largest 3.4e38) while f64 holds them.
    let dir = tempfile::tempdir().unwrap();
    let model = model_with(dir.path(), "blk.0.attn_v.weight", 3e38);
    let o = reference(&model, &dir.path().join("f32"), "f32");
    assert_eq!(o.code, Some(3), "{}", o.stderr);
    assert!(o.stderr.contains("of layer 0 holds"), "{}", o.stderr);
    assert_ok(&reference(&model, &dir.path().join("f64"), "f64"));
    let logits = ropescope::io::npy::Array::read(&dir.path().join("f64/logits.npy")).unwrap();
    assert!(logits.to_f64().iter().all(|v| v.is_finite()));
}

#[test]
fn a_scan_of_a_model_giving_nan_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_with(dir.path(), "blk.0.ffn_down.weight", f32::INFINITY);
    let ids = dir.path().join("p.npy");
    write_ids(&ids, 24);
    let out = dir.path().join("scan");
    let o = run(&[
        "scan",
        arg(&model),
        "--prompts",
        arg(&ids),
        "--delta-max",
        "3",
        "--analyses",
        "slash,rank",
        "--quiet",
        "--out",
        arg(&out),
    ]);
    assert_eq!(o.code, Some(3), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("the residual stream after the feed-forward block of layer 0 holds"),
        "{}",
        o.stderr
    );
    assert!(!out.exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "staging left behind: {left:?}");
}
