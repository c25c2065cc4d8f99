//! `ropescope reference` from the command line: the prompt as ids, as text or from a file, and a `meta.json`
//! that records the exact command, the model's hash and completion.

use ropescope_test_support::paths;
use std::path::Path;
use std::process::{Command, Output};

fn reference(model: &Path, prompt: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("reference")
        .arg(model)
        .args(prompt)
        .args(["--layers", "0", "--precision", "f32", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

fn meta(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap()
}

#[test]
fn meta_records_the_command_the_hash_and_completion() {
    let model = paths::model(paths::SMOLLM2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ref");
    let r = reference(&model, &["--ids", "1,2,3,4"], &out);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let m = meta(&out);
    assert_eq!(m["complete"], true);
    let command: Vec<&str> = m["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        &command[1..],
        [
            "reference",
            model.to_str().unwrap(),
            "--ids",
            "1,2,3,4",
            "--layers",
            "0",
            "--precision",
            "f32",
            "--out",
            out.to_str().unwrap()
        ]
    );
    // The hash, computed by coreutils rather than by ropescope.
    let sum = Command::new("sha256sum").arg(&model).output().unwrap();
    let sum = String::from_utf8(sum.stdout).unwrap();
    assert_eq!(m["model_sha256"], sum.split_whitespace().next().unwrap());
}

#[test]
fn text_inline_and_from_a_file_give_the_same_reference() {
    let model = paths::model(paths::SMOLLM2);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prompt.txt");
    std::fs::write(&file, "The cat sat").unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let ra = reference(&model, &["--text", "The cat sat"], &a);
    let rb = reference(&model, &["--file", file.to_str().unwrap()], &b);
    assert!(ra.status.success() && rb.status.success());
    for name in ["ids.npy", "logits.npy", "attn_L0.npy"] {
        assert_eq!(
            std::fs::read(a.join(name)).unwrap(),
            std::fs::read(b.join(name)).unwrap(),
            "{name}"
        );
    }
    let none = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("reference")
        .arg(&model)
        .arg("--out")
        .arg(dir.path().join("c"))
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("--ids, --text TEXT or --file PATH"));
}

/// `meta.json`'s `rotated_dims` name the coordinates RoPE turns, layer by layer: on files written by llama.cpp's
/// converter, HF transformers' own float64 q equals its q before RoPE on every other coordinate, exactly, and
/// differs on the named ones past position 0 (GPT-NeoX's 25% partial rotation, Gemma 4's global layers with 4 of
/// 16 chunks turning, DeepSeek's latent heads, whose rotated part ropescope writes first, SmolLM3's NoPE layers).
#[test]
fn rotated_dims_split_each_head_as_hf_rotates_it() {
    let dir = tempfile::tempdir().unwrap();
    for (variant, hf_order) in [
        ("gptneox", false),
        ("gemma4", false),
        ("smollm3", false),
        ("deepseek2", true),
    ] {
        let fixture = paths::fixture(&format!("converted/{variant}"));
        let out = dir.path().join(variant);
        let ids = fixture.join("main/ids.npy");
        let r = Command::new(env!("CARGO_BIN_EXE_ropescope"))
            .arg("reference")
            .arg(fixture.join("model.gguf"))
            .args(["--ids", ids.to_str().unwrap(), "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let m = meta(&out);
        let layers = m["layers"].as_array().unwrap();
        for (i, l) in layers.iter().enumerate() {
            let dims: Vec<usize> = (m["rotated_dims"][i].as_array().unwrap().iter())
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            let read = |name: &str| {
                let file = fixture.join(format!("main/{name}_L{l}.npy"));
                ropescope::io::npy::Array::read(&file).unwrap()
            };
            let (q, q_pre) = (read("q"), read("q_pre"));
            let (d, t) = (q.shape[2], q.shape[1]);
            let (q, q_pre) = (q.to_f64(), q_pre.to_f64());
            let r = dims.len();
            // HF's DeepSeek heads are [unrotated | rotated]; ropescope writes the rotated part first.
            let hf = |k: usize| match (hf_order, k < r) {
                (false, _) => k,
                (true, true) => d - r + k,
                (true, false) => k - r,
            };
            for k in 0..d {
                let rows = || (0..q.len() / d).filter(|row| row % t > 0);
                let moved = rows().any(|row| q[row * d + hf(k)] != q_pre[row * d + hf(k)]);
                assert_eq!(
                    moved,
                    dims.contains(&k),
                    "{variant} L{l}: coordinate {k} (HF's {}) moved: {moved}",
                    hf(k)
                );
            }
        }
    }
}

/// `--arithmetic ggml` is recorded in `meta.json`; it exists in float32 only, and the float64 default is
/// refused by name before anything is written.
#[test]
fn the_ggml_arithmetic_is_recorded_and_refused_in_float64() {
    let model = paths::model(paths::SMOLLM2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ref");
    let r = reference(&model, &["--ids", "1,2,3,4", "--arithmetic", "ggml"], &out);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(meta(&out)["arithmetic"], "ggml");
    let exact = dir.path().join("exact");
    assert!(reference(&model, &["--ids", "1,2,3,4"], &exact)
        .status
        .success());
    assert_eq!(meta(&exact)["arithmetic"], "exact");

    let f64_out = dir.path().join("f64");
    let r = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("reference")
        .arg(&model)
        .args(["--ids", "1,2,3,4", "--arithmetic", "ggml", "--out"])
        .arg(&f64_out)
        .output()
        .unwrap();
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("ggml arithmetic") && err.contains("f32"),
        "{err}"
    );
    assert!(!f64_out.exists());
}
