//! `ropescope tokenize` end to end: text and JSON output on the real models, stdin, and one-line errors.

use ropescope::gguf::{GgufWriter, Value};
use ropescope_test_support::paths;
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn ropescope(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ropescope runs");
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn text_file(dir: &tempfile::TempDir, text: &str) -> String {
    let path = dir.path().join("text.txt");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The failure's stderr, checked to be one line.
fn one_line_error(out: &Output) -> String {
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn text_output_is_one_id_and_piece_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = paths::model(paths::SMOLLM2);
    let out = ropescope(
        &[
            "tokenize",
            model.to_str().unwrap(),
            "--file",
            &text_file(&dir, "Hello world\n"),
        ],
        None,
    );
    assert_eq!(stdout(&out), "19556\tHello\n905\tĠworld\n198\tĊ\n");
}

/// `--text` takes the text itself, `--file` a path; giving both, or neither, is a usage error.
#[test]
fn text_is_given_inline_or_as_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = paths::model(paths::SMOLLM2);
    let m = model.to_str().unwrap();
    let file = text_file(&dir, "Hello world\n");
    let inline = ropescope(&["tokenize", m, "--text", "Hello world\n"], None);
    assert_eq!(stdout(&inline), "19556\tHello\n905\tĠworld\n198\tĊ\n");
    let both = ropescope(&["tokenize", m, "--text", "x", "--file", &file], None);
    assert_eq!(both.status.code(), Some(2));
    let neither = ropescope(&["tokenize", m], None);
    assert_eq!(neither.status.code(), Some(2));
    assert!(one_line_error(&neither).contains("--text TEXT or --file PATH"));
}

#[test]
fn json_output_has_ids_and_tokens_with_bos() {
    let dir = tempfile::tempdir().unwrap();
    let model = paths::model(paths::GEMMA3);
    let text = text_file(&dir, "Hello world");
    let out = ropescope(
        &[
            "tokenize",
            model.to_str().unwrap(),
            "--file",
            &text,
            "--json",
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["ids"], serde_json::json!([2, 9259, 1902]));
    assert_eq!(
        json["tokens"],
        serde_json::json!(["<bos>", "Hello", "▁world"])
    );
    let out = ropescope(
        &[
            "tokenize",
            model.to_str().unwrap(),
            "--file",
            &text,
            "--json",
            "--no-special",
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["ids"], serde_json::json!([9259, 1902]));
}

#[test]
fn dash_reads_stdin_and_control_characters_are_escaped() {
    let model = paths::model(paths::GEMMA3);
    let out = ropescope(
        &[
            "tokenize",
            model.to_str().unwrap(),
            "--file",
            "-",
            "--no-special",
        ],
        Some("a\n\n"),
    );
    assert_eq!(stdout(&out), "236746\ta\n108\t\\n\\n\n");
}

#[test]
fn missing_text_file_is_one_line_error() {
    let model = paths::model(paths::SMOLLM2);
    let out = ropescope(
        &[
            "tokenize",
            model.to_str().unwrap(),
            "--file",
            "/nonexistent/text.txt",
        ],
        None,
    );
    assert!(one_line_error(&out).contains("/nonexistent/text.txt"));
}

#[test]
fn unsupported_tokenizer_is_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("bert.gguf");
    let bytes = GgufWriter::new()
        .kv("general.architecture", Value::String("bert".into()))
        .kv("tokenizer.ggml.model", Value::String("bert".into()))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(ropescope::gguf::Array::String(vec!["[CLS]".into()])),
        )
        .to_bytes();
    std::fs::write(&model, bytes).unwrap();
    let text = text_file(&dir, "hi");
    let out = ropescope(
        &["tokenize", model.to_str().unwrap(), "--file", &text],
        None,
    );
    assert!(one_line_error(&out).contains("unsupported tokenizer model 'bert'"));
}

/// The 7B file is only its header and the start of its tensor data: `tokenize` needs no more. The ids are HF's
/// (`Hello`, a space, then one token per digit under Qwen2's split), after the file's BOS.
#[test]
fn truncated_7b_file_tokenizes_from_its_header() {
    let model = paths::model(paths::QWEN7B_HEAD);
    let out = ropescope(
        &[
            "tokenize",
            model.to_str().unwrap(),
            "--text",
            "Hello 12345",
            "--json",
        ],
        None,
    );
    let j: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        j["ids"],
        serde_json::json!([151646, 9707, 220, 16, 17, 18, 19, 20])
    );
}
