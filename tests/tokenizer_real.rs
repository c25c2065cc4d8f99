//! ropescope's tokenizers against HF transformers on the real test models: every committed text of
//! `fixtures/tokenizer/texts.json` must give exactly the ids in `expected_<model>.json`, written by
//! `fixtures/tokenizer/make_expected.py` from a tokenizer HF builds out of the same GGUF file.

mod common;

use proptest::prelude::*;
use ropescope::gguf::GgufFile;
use ropescope::tokenizer::Tokenizer;
use serde::Deserialize;
use std::sync::OnceLock;

#[derive(Deserialize)]
struct Expected {
    add_bos_token: bool,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    ids_with_special: Vec<u32>,
    ids: Vec<u32>,
    tokens: Vec<String>,
    decoded: String,
}

fn load(model: &str, expected: &str) -> (Tokenizer, Expected) {
    let file = GgufFile::open(common::model(model)).expect("model opens");
    let tokenizer = Tokenizer::from_gguf(&file).expect("tokenizer builds");
    let json = std::fs::read_to_string(common::fixture(&format!("tokenizer/{expected}")))
        .expect("expected ids are committed");
    (
        tokenizer,
        serde_json::from_str(&json).expect("expected ids parse"),
    )
}

/// Every text's ids, with and without special tokens, and its token pieces equal HF's; all mismatches are
/// reported together.
fn assert_ids_match(tokenizer: &Tokenizer, expected: &Expected) {
    let texts: Vec<Vec<String>> = serde_json::from_str(
        &std::fs::read_to_string(common::fixture("tokenizer/texts.json")).unwrap(),
    )
    .map(|v: Vec<serde_json::Value>| {
        v.iter()
            .map(|t| {
                vec![
                    t["name"].as_str().unwrap().to_string(),
                    t["text"].as_str().unwrap().to_string(),
                ]
            })
            .collect()
    })
    .unwrap();
    assert_eq!(
        texts.len(),
        expected.cases.len(),
        "expected ids are stale: rerun fixtures/tokenizer/make_expected.py"
    );
    let mut failures = Vec::new();
    for (case, text) in expected.cases.iter().zip(&texts) {
        assert_eq!(
            (&case.name, &case.text),
            (&text[0], &text[1]),
            "expected ids are stale"
        );
        let plain = tokenizer.encode(&case.text, false).unwrap();
        let special = tokenizer.encode(&case.text, true).unwrap();
        let pieces: Vec<&str> = plain
            .iter()
            .map(|&id| tokenizer.token(id).unwrap())
            .collect();
        if plain != case.ids || special != case.ids_with_special || pieces != case.tokens {
            failures.push(format!(
                "{}: {:?}\n  ours {plain:?} / {special:?}\n  HF   {:?} / {:?}\n  ours {pieces:?}\n  HF   {:?}",
                case.name, case.text, case.ids, case.ids_with_special, case.tokens
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} texts differ:\n{}",
        failures.len(),
        texts.len(),
        failures.join("\n")
    );
}

/// Decoding HF's ids gives HF's text, so every text HF round-trips round-trips here too.
fn assert_decode_matches(tokenizer: &Tokenizer, expected: &Expected) {
    for case in &expected.cases {
        let decoded = tokenizer.decode(&case.ids).unwrap();
        assert_eq!(decoded, case.decoded, "{}", case.name);
        if case.decoded == case.text {
            let ids = tokenizer.encode(&case.text, false).unwrap();
            assert_eq!(tokenizer.decode(&ids).unwrap(), case.text, "{}", case.name);
        }
    }
}

#[test]
fn smollm2_ids_match_hf() {
    let (tokenizer, expected) = load(common::SMOLLM2, "expected_smollm2.json");
    assert_ids_match(&tokenizer, &expected);
}

#[test]
fn gemma3_ids_match_hf() {
    let (tokenizer, expected) = load(common::GEMMA3, "expected_gemma3.json");
    assert_ids_match(&tokenizer, &expected);
}

#[test]
fn smollm2_decode_matches_hf() {
    let (tokenizer, expected) = load(common::SMOLLM2, "expected_smollm2.json");
    assert_decode_matches(&tokenizer, &expected);
}

#[test]
fn gemma3_decode_matches_hf() {
    let (tokenizer, expected) = load(common::GEMMA3, "expected_gemma3.json");
    assert_decode_matches(&tokenizer, &expected);
}

#[test]
fn special_token_ids_come_from_the_metadata() {
    let (smollm2, expected) = load(common::SMOLLM2, "expected_smollm2.json");
    assert_eq!(
        (smollm2.bos_id(), smollm2.eos_id(), smollm2.vocab_size()),
        (Some(1), Some(2), 49152)
    );
    assert!(!expected.add_bos_token);
    assert_eq!(smollm2.token(1), Some("<|im_start|>"));
    let (gemma3, expected) = load(common::GEMMA3, "expected_gemma3.json");
    assert_eq!(
        (gemma3.bos_id(), gemma3.eos_id(), gemma3.vocab_size()),
        (Some(2), Some(1), 262144)
    );
    assert!(expected.add_bos_token);
    assert_eq!(gemma3.encode("", true).unwrap(), vec![2]);
}

fn smollm2() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| load(common::SMOLLM2, "expected_smollm2.json").0)
}

fn gemma3() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| load(common::GEMMA3, "expected_gemma3.json").0)
}

/// Texts of printable characters from the first four planes (SmolLM2 has no tokens for the UTF-8 bytes of
/// higher planes, nor for some control characters: those are dropped, as the committed texts check), spaces and
/// newlines, with special-token strings of both models mixed in.
fn any_text() -> impl Strategy<Value = String> {
    let printable = any::<char>().prop_filter("printable, below plane 4", |&c| {
        !c.is_control() && u32::from(c) < 0x40000
    });
    let part = prop_oneof![
        4 => printable.prop_map(String::from),
        1 => prop::sample::select(vec![" ", "  ", "\n", "\t", "<|im_start|>", "<start_of_turn>", "<bos>", "<b>"])
            .prop_map(String::from),
    ];
    prop::collection::vec(part, 0..40).prop_map(|parts| parts.concat())
}

proptest! {
    /// Byte-level BPE loses nothing a token spells: such a text decodes back to itself.
    #[test]
    fn smollm2_round_trips_any_text(text in any_text()) {
        let ids = smollm2().encode(&text, true).unwrap();
        prop_assert_eq!(smollm2().decode(&ids).unwrap(), text);
    }

    /// Gemma's byte fallback loses nothing either, except that a literal `▁` comes back as a space.
    #[test]
    fn gemma3_round_trips_any_text(text in any_text()) {
        let ids = gemma3().encode(&text, false).unwrap();
        prop_assert_eq!(gemma3().decode(&ids).unwrap(), text.replace('▁', " "));
    }
}
