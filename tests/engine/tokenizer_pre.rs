//! ropescope's pre-tokenizers against HF tokenizers' own: for every value of `tokenizer.ggml.pre` ropescope
//! accepts, every text of `fixtures/tokenizer/texts.json` must split into exactly the pieces of
//! `expected_splits.json`, written by `fixtures/tokenizer/make_splits.py` with the patterns HF transformers uses
//! for a GGUF file of that name (GPT-2's byte-level regex for a name it has no pattern for). This covers the
//! pre-tokenizers no real vocabulary is at hand for (Llama 3's `llama-bpe`, Tekken, GPT-4o).

use ropescope::tokenizer::PreTokenizer;
use ropescope_test_support::paths;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Expected {
    texts: Vec<String>,
    /// Name → key of its entry in `patterns`.
    names: BTreeMap<String, String>,
    patterns: BTreeMap<String, Splits>,
}

#[derive(Deserialize)]
struct Splits {
    /// The regex as HF writes it; `None` for GPT-2's byte-level regex.
    regex: Option<String>,
    /// The pieces of each text.
    splits: Vec<Vec<String>>,
}

/// The key of GPT-2's byte-level split in `patterns`.
const BYTE_LEVEL: &str = "byte-level";

fn expected() -> Expected {
    let json = std::fs::read_to_string(paths::fixture("tokenizer/expected_splits.json"))
        .expect("expected splits are committed");
    serde_json::from_str(&json).expect("expected splits parse")
}

fn texts() -> Vec<(String, String)> {
    let v: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(paths::fixture("tokenizer/texts.json")).unwrap(),
    )
    .unwrap();
    v.iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every accepted name splits every text as HF does; every name with a pattern of its own in HF has ropescope's
/// pattern character for character. All mismatches are reported together.
#[test]
fn every_pre_tokenizer_splits_as_hf() {
    let expected = expected();
    let texts = texts();
    assert_eq!(
        expected.texts,
        texts.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        "expected splits are stale: rerun fixtures/tokenizer/make_splits.py"
    );
    let mut failures = Vec::new();
    for name in PreTokenizer::names() {
        let pre = PreTokenizer::from_name(Some(name)).unwrap();
        let key = expected.names.get(name).map_or(BYTE_LEVEL, String::as_str);
        let reference = &expected.patterns[key];
        if let Some(regex) = &reference.regex {
            assert_eq!(pre.regex_source(), regex, "pattern of '{name}'");
        }
        for ((text_name, text), hf) in texts.iter().zip(&reference.splits) {
            let ours = pre.split(text).unwrap();
            if ours != *hf {
                failures.push(format!(
                    "{name} / {text_name}: {text:?}\n  ours {ours:?}\n  HF   {hf:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} splits differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A text without a `tokenizer.ggml.pre` splits as GPT-2's byte-level regex does, as HF's does.
#[test]
fn absent_name_is_gpt2s() {
    let expected = expected();
    let pre = PreTokenizer::from_name(None).unwrap();
    for ((_, text), hf) in texts().iter().zip(&expected.patterns[BYTE_LEVEL].splits) {
        assert_eq!(pre.split(text).unwrap(), *hf);
    }
}

/// The names HF has a pattern for and ropescope refuses are refused by name (none falls back silently), and
/// they are exactly the ones listed here: Qwen3.5's (`qwen35`, whose architecture ropescope does not run).
#[test]
fn names_hf_knows_and_ropescope_refuses() {
    let expected = expected();
    let accepted: Vec<&str> = PreTokenizer::names().collect();
    let refused: Vec<&str> = expected
        .names
        .keys()
        .map(String::as_str)
        .filter(|n| !accepted.contains(n))
        .collect();
    assert_eq!(refused, ["qwen35"]);
    for name in refused {
        let err = PreTokenizer::from_name(Some(name)).unwrap_err().to_string();
        assert!(
            err.contains(&format!("unsupported pre-tokenizer '{name}'")),
            "{err}"
        );
    }
}

/// Splitting loses nothing: the pieces of any text concatenate back to it, for every pattern.
#[test]
fn pieces_concatenate_to_the_text() {
    let samples = [
        "",
        " ",
        "\n\n \t",
        "x  y   ",
        "IT'S 1234567 ſ'S é\u{301}",
        "👍🏽 \u{200d}\u{fe0f} \r\n\r\n",
    ];
    for name in PreTokenizer::names() {
        let pre = PreTokenizer::from_name(Some(name)).unwrap();
        for text in samples {
            assert_eq!(pre.split(text).unwrap().concat(), text, "{name}: {text:?}");
        }
    }
}
