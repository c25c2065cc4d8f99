//! `ropescope inspect` on the real models (the 7B one only by its header), on a file cut inside its tensor data,
//! and its errors.

use ropescope::gguf::GgufFile;
use ropescope::synth::SyntheticModel;
use ropescope_test_support::paths;
use std::process::Command;

fn inspect_json(model: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(["inspect", "--json"])
        .arg(paths::model(model))
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
    let j = inspect_json(paths::SMOLLM2);
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
    let j = inspect_json(paths::GEMMA3);
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
        .arg(paths::model(paths::SMOLLM2))
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

/// The header of DeepSeek-R1-Distill-Qwen-7B Q4_K_M (the first 95 MB of the file): described in full, with the
/// tensor data it lacks. The expected size, 4,683,073,248 bytes, is the data section's start (5,953,248, as HF
/// transformers' GGUF reader finds it) plus the end of the last tensor's data.
#[test]
fn qwen7b_header_is_inspected_with_its_missing_data() {
    let j = inspect_json(paths::QWEN7B_HEAD);
    assert_eq!(j["architecture"], "qwen2");
    assert_eq!(j["n_layers"], 28);
    assert_eq!(j["n_heads"], 28);
    assert_eq!(j["n_kv_heads"], 4);
    assert_eq!(j["head_dim"], 128);
    assert_eq!(j["vocab_size"], 152064);
    assert_eq!(j["n_tensors"], 339);
    assert_eq!(j["file_size"], 99_614_720);
    let d = &j["tensor_data"];
    assert_eq!(d["file_size"], 99_614_720);
    assert_eq!(d["expected_size"], 4_683_073_248u64);
    assert_eq!(d["missing_bytes"], 4_683_073_248u64 - 99_614_720);
    // The first tensor of the directory, output.weight (Q6_K, 152064 x 3584), alone needs 447 MB.
    assert_eq!(
        (&d["complete_tensors"], &d["incomplete_tensors"]),
        (&0.into(), &339.into())
    );
    assert!(j["problem"]
        .as_str()
        .unwrap()
        .contains("4583458528 bytes short"));
}

/// A synthetic qwen2 model cut inside its tensor data, written to disk: `inspect` describes it and counts what is
/// missing from the directory; `reference` refuses it with one line naming the missing bytes.
#[test]
fn truncated_file_is_inspected_and_refused_for_a_forward_pass() {
    let whole = SyntheticModel::new("qwen2").to_bytes();
    let parsed = GgufFile::from_bytes(whole.clone()).unwrap();
    let ends: Vec<u64> = parsed
        .tensors()
        .iter()
        .map(|t| parsed.data_offset() + t.offset + t.n_bytes)
        .collect();
    let expected_size = *ends.iter().max().unwrap();
    // Cut in the middle of the tensor that ends at the median end: about half the tensors stay whole.
    let mut sorted = ends.clone();
    sorted.sort_unstable();
    let cut = sorted[sorted.len() / 2] - 3;
    let complete = ends.iter().filter(|&&e| e <= cut).count();
    let incomplete = ends.len() - complete;
    assert!(complete > 0 && incomplete > 0);
    let missing = expected_size - cut;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    std::fs::write(&path, &whole[..cut as usize]).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(["inspect", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["architecture"], "qwen2");
    let d = &j["tensor_data"];
    assert_eq!(d["expected_size"], expected_size);
    assert_eq!(d["file_size"], cut);
    assert_eq!(d["missing_bytes"], missing);
    assert_eq!(d["complete_tensors"], complete);
    assert_eq!(d["incomplete_tensors"], incomplete);

    let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("inspect")
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "INCOMPLETE: {missing} bytes missing (the directory needs a file of {expected_size} bytes, this one \
             has {cut}); {complete} tensors complete, {incomplete} incomplete"
        )),
        "{text}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(["reference", "--ids", "1,2,3", "--out"])
        .arg(dir.path().join("ref"))
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("{missing} bytes short")), "{err}");
}

/// A whole file says so.
#[test]
fn whole_file_has_no_missing_data() {
    let j = inspect_json(paths::SMOLLM2);
    assert_eq!(j["tensor_data"]["missing_bytes"], 0);
    assert_eq!(j["tensor_data"]["incomplete_tensors"], 0);
    assert_eq!(j["tensor_data"]["complete_tensors"], 272);
}
