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
