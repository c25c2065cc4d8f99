//! `ropescope inspect` on the two real models, and its errors.

mod common;

use std::process::Command;

fn inspect_json(model: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(["inspect", "--json"])
        .arg(common::model(model))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn smollm2_hyper_parameters() {
    let j = inspect_json(common::SMOLLM2);
    assert_eq!(j["architecture"], "llama");
    assert_eq!(j["n_layers"], 30);
    assert_eq!(j["n_heads"], 9);
    assert_eq!(j["n_kv_heads"], 3);
    assert_eq!(j["head_dim"], 64);
    assert_eq!(j["rope_base"], 100000.0);
    assert_eq!(j["context_length"], 8192);
    assert!(j["sliding_window"].is_null());
    assert_eq!(j["file_size"], 98_362_432);
    assert_eq!(j["tensor_types"]["Q4_1"], 210);
    assert_eq!(j["vocab_size"], 49152);
}

#[test]
fn gemma3_hyper_parameters() {
    let j = inspect_json(common::GEMMA3);
    assert_eq!(j["architecture"], "gemma3");
    assert_eq!(j["n_layers"], 18);
    assert_eq!(j["n_heads"], 4);
    assert_eq!(j["n_kv_heads"], 1);
    assert_eq!(j["head_dim"], 256);
    assert_eq!(j["rope_base"], 1_000_000.0);
    assert_eq!(j["sliding_window"], 512);
    assert_eq!(j["context_length"], 32768);
    assert_eq!(j["file_size"], 253_113_024);
    assert_eq!(j["tensor_types"]["Q4_K"], 27);
    assert_eq!(j["vocab_size"], 262144);
}

#[test]
fn text_output_names_the_architecture() {
    let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("inspect")
        .arg(common::model(common::SMOLLM2))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("architecture    llama") && text.contains("9 query / 3 key-value"),
        "{text}"
    );
}

/// A missing path and a file that is not GGUF each exit non-zero with exactly one line on stderr.
#[test]
fn bad_paths_give_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let not_gguf = dir.path().join("notes.txt");
    std::fs::write(&not_gguf, "hello, not a model\n").unwrap();
    for (path, needle, code) in [
        (dir.path().join("missing.gguf"), "No such file", 6),
        (not_gguf, "not a GGUF file", 3),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
            .arg("inspect")
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(code), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
    }
}
