//! ropescope's tokenizers against HF transformers on the real test models: every committed text of
//! `fixtures/tokenizer/texts.json` must give exactly the ids in `expected_<model>.json`, written by
//! `fixtures/tokenizer/make_expected.py` from a tokenizer HF builds out of the same GGUF file (for the 7B model,
//! out of a header-only copy of it).

use proptest::prelude::*;
use ropescope::gguf::{Array, GgufFile};
use ropescope::tokenizer::Tokenizer;
use ropescope_test_support::paths;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::OnceLock;

#[derive(Deserialize)]
struct Expected {
    add_bos_token: bool,
    bos_token_id: u32,
    /// HF's ids past the file's vocabulary, with their pieces (see [`Reference`]).
    tokens_past_vocabulary: HashMap<u32, String>,
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
    let (tokenizer, expected, _) = load_with_pieces(model, expected);
    (tokenizer, expected)
}

/// The tokenizer, HF's expected ids, and the file's pieces as it spells them (`tokenizer.ggml.tokens`).
fn load_with_pieces(model: &str, expected: &str) -> (Tokenizer, Expected, Vec<String>) {
    // The tokenizer needs only the header, which is all the 7B file has whole.
    let file = GgufFile::open_header(paths::model(model)).expect("model opens");
    let tokenizer = Tokenizer::from_gguf(&file).expect("tokenizer builds");
    let json = std::fs::read_to_string(paths::fixture(&format!("tokenizer/{expected}")))
        .expect("expected ids are committed");
    let pieces = match file.get_array("tokenizer.ggml.tokens").unwrap() {
        Some(Array::String(pieces)) => pieces.clone(),
        _ => panic!("the file has a vocabulary"),
    };
    (
        tokenizer,
        serde_json::from_str(&json).expect("expected ids parse"),
        pieces,
    )
}

/// HF's ids in terms of the file's vocabulary.
///
/// HF numbers some tokens past the file's vocabulary (`tokens_past_vocabulary`). DeepSeek-R1-Distill-Qwen spells
/// its BOS and EOS `<｜begin▁of▁sentence｜>` and `<｜end▁of▁sentence｜>`, outside the byte alphabet; HF's byte-level
/// vocabulary (respelled) has no token of that name, so HF appends them as new tokens. They are the file's tokens
/// all the same, found here by the file's own spelling. A token the file does not have at all (HF's GPT-2 default
/// unknown token `<|endoftext|>`) has no id in the file: the texts where HF uses one are returned apart.
struct Reference<'a> {
    tokenizer: &'a Tokenizer,
    expected: &'a Expected,
    file_pieces: &'a [String],
}

impl Reference<'_> {
    /// The file's id of HF's id `id`, or `None` for a token the file does not have.
    fn file_id(&self, id: u32) -> Option<u32> {
        if (id as usize) < self.tokenizer.vocab_size() {
            return Some(id);
        }
        let piece = &self.expected.tokens_past_vocabulary[&id];
        self.file_pieces
            .iter()
            .position(|p| p == piece)
            .map(|i| i as u32)
    }

    /// `ids` as file ids, or `None` if one is a token the file does not have.
    fn file_ids(&self, ids: &[u32]) -> Option<Vec<u32>> {
        ids.iter().map(|&id| self.file_id(id)).collect()
    }
}

/// Every text's ids, with and without special tokens, and its token pieces equal HF's, in terms of the file's
/// vocabulary ([`Reference`]); all mismatches are reported together. The texts where HF uses a token the file
/// does not have must be exactly `hf_only`.
fn assert_ids_match(reference: &Reference, hf_only: &[&str]) {
    let (tokenizer, expected) = (reference.tokenizer, reference.expected);
    let texts: Vec<Vec<String>> = serde_json::from_str(
        &std::fs::read_to_string(paths::fixture("tokenizer/texts.json")).unwrap(),
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
    let mut skipped = Vec::new();
    for (case, text) in expected.cases.iter().zip(&texts) {
        assert_eq!(
            (&case.name, &case.text),
            (&text[0], &text[1]),
            "expected ids are stale"
        );
        let (Some(hf_plain), Some(hf_special)) = (
            reference.file_ids(&case.ids),
            reference.file_ids(&case.ids_with_special),
        ) else {
            skipped.push(case.name.as_str());
            continue;
        };
        let plain = tokenizer.encode(&case.text, false).unwrap();
        let special = tokenizer.encode(&case.text, true).unwrap();
        let pieces: Vec<&str> = plain
            .iter()
            .map(|&id| tokenizer.token(id).unwrap())
            .collect();
        if plain != hf_plain || special != hf_special || pieces != case.tokens {
            failures.push(format!(
                "{}: {:?}\n  ours {plain:?} / {special:?}\n  HF   {hf_plain:?} / {hf_special:?}\n  ours {pieces:?}\n  HF   {:?}",
                case.name, case.text, case.tokens
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
    assert_eq!(
        skipped, hf_only,
        "texts where HF uses a token the file does not have"
    );
}

/// Decoding HF's ids gives HF's text, so every text HF round-trips round-trips here too (texts where HF uses a
/// token the file does not have are left out).
fn assert_decode_matches(reference: &Reference) {
    let tokenizer = reference.tokenizer;
    for case in &reference.expected.cases {
        let Some(ids) = reference.file_ids(&case.ids) else {
            continue;
        };
        let decoded = tokenizer.decode(&ids).unwrap();
        assert_eq!(decoded, case.decoded, "{}", case.name);
        if case.decoded == case.text {
            let ids = tokenizer.encode(&case.text, false).unwrap();
            assert_eq!(tokenizer.decode(&ids).unwrap(), case.text, "{}", case.name);
        }
    }
}

/// Checks the ids and the decoding of `model` against `expected`.
fn check_model(model: &str, expected: &str, hf_only: &[&str]) {
    let (tokenizer, expected, file_pieces) = load_with_pieces(model, expected);
    let reference = Reference {
        tokenizer: &tokenizer,
        expected: &expected,
        file_pieces: &file_pieces,
    };
    assert_ids_match(&reference, hf_only);
    assert_decode_matches(&reference);
}

#[test]
fn smollm2_ids_and_decoding_match_hf() {
    check_model(paths::SMOLLM2, "expected_smollm2.json", &[]);
}

#[test]
fn gemma3_ids_and_decoding_match_hf() {
    check_model(paths::GEMMA3, "expected_gemma3.json", &[]);
}

/// DeepSeek-R1-Distill-Qwen-7B (pre-tokenizer `deepseek-r1-qwen`, Qwen2's split, 152k tokens), from its header.
/// In `special_tokens`, HF matches `<|endoftext|>` whole as the unknown token it adds of its own; the file has no
/// such token, and ropescope spells it out like any text.
#[test]
fn qwen7b_ids_and_decoding_match_hf() {
    check_model(
        paths::QWEN7B_HEAD,
        "expected_qwen7b.json",
        &["special_tokens"],
    );
}

/// The 7B vocabulary's BOS is the file's own id; HF adds the same piece under an id past the vocabulary.
#[test]
fn qwen7b_bos_is_the_files() {
    let (tokenizer, expected) = load(paths::QWEN7B_HEAD, "expected_qwen7b.json");
    assert_eq!(
        (
            tokenizer.bos_id(),
            tokenizer.eos_id(),
            tokenizer.vocab_size()
        ),
        (Some(151646), Some(151643), 152064)
    );
    assert!(expected.add_bos_token);
    assert_eq!(expected.bos_token_id, 152065);
    assert_eq!(
        expected.tokens_past_vocabulary[&152064], "<|endoftext|>",
        "HF's own unknown token"
    );
    assert_eq!(tokenizer.encode("", true).unwrap(), vec![151646]);
    assert_eq!(
        tokenizer.decode(&[151646]).unwrap(),
        "<｜begin▁of▁sentence｜>"
    );
}

#[test]
fn special_token_ids_come_from_the_metadata() {
    let (smollm2, expected) = load(paths::SMOLLM2, "expected_smollm2.json");
    assert_eq!(
        (smollm2.bos_id(), smollm2.eos_id(), smollm2.vocab_size()),
        (Some(1), Some(2), 49152)
    );
    assert!(!expected.add_bos_token);
    assert_eq!(smollm2.token(1), Some("<|im_start|>"));
    let (gemma3, expected) = load(paths::GEMMA3, "expected_gemma3.json");
    assert_eq!(
        (gemma3.bos_id(), gemma3.eos_id(), gemma3.vocab_size()),
        (Some(2), Some(1), 262144)
    );
    assert!(expected.add_bos_token);
    assert_eq!(gemma3.encode("", true).unwrap(), vec![2]);
}

fn smollm2() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| load(paths::SMOLLM2, "expected_smollm2.json").0)
}

fn gemma3() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| load(paths::GEMMA3, "expected_gemma3.json").0)
}

fn qwen7b() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| load(paths::QWEN7B_HEAD, "expected_qwen7b.json").0)
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

    /// So does the 7B vocabulary, whose 256 byte tokens spell any text.
    #[test]
    fn qwen7b_round_trips_any_text(text in any_text()) {
        let ids = qwen7b().encode(&text, true).unwrap();
        prop_assert_eq!(&ids[..1], &[151646]);
        prop_assert_eq!(qwen7b().decode(&ids[1..]).unwrap(), text);
    }

    /// Gemma's byte fallback loses nothing either, except that a literal `▁` comes back as a space.
    #[test]
    fn gemma3_round_trips_any_text(text in any_text()) {
        let ids = gemma3().encode(&text, false).unwrap();
        prop_assert_eq!(gemma3().decode(&ids).unwrap(), text.replace('▁', " "));
    }
}
