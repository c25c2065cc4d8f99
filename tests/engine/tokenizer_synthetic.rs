//! Tokenizers built from small synthetic GGUF files: malformed or unsupported metadata gives a clear error, and
//! the SentencePiece conventions the real Gemma 3 file does not exercise (prefix space, unknown-token fusion,
//! EOS) behave as documented.

use ropescope::gguf::{Array, GgufFile, GgufWriter, Value};
use ropescope::tokenizer::Tokenizer;

fn strings(items: &[&str]) -> Value {
    Value::Array(Array::String(items.iter().map(|s| s.to_string()).collect()))
}

/// A byte-level BPE vocabulary: the byte alphabet's `a`, `b`, `Ġ`, the merges `a b` and `Ġ ab`, and `<|end|>`.
fn gpt2() -> GgufWriter {
    GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("tokenizer.ggml.model", Value::String("gpt2".into()))
        .kv("tokenizer.ggml.pre", Value::String("smollm".into()))
        .kv(
            "tokenizer.ggml.tokens",
            strings(&["<|end|>", "a", "b", "Ġ", "ab", "Ġab"]),
        )
        .kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![3, 1, 1, 1, 1, 1])),
        )
        .kv("tokenizer.ggml.merges", strings(&["a b", "Ġ ab"]))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(0))
}

/// A Llama-style SentencePiece vocabulary with scores, byte tokens for `é` only, and `<unk>`, `<s>`, `</s>`.
/// (HF transformers gives the ids asserted below for this vocabulary written as a GGUF file.)
fn llama() -> GgufWriter {
    let tokens = [
        "<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab", "<0xC3>", "<0xA9>",
    ];
    let scores = vec![0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, 0.0, 0.0];
    GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv("tokenizer.ggml.tokens", strings(&tokens))
        .kv("tokenizer.ggml.scores", Value::Array(Array::F32(scores)))
        .kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6])),
        )
        .kv("tokenizer.ggml.unknown_token_id", Value::U32(0))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(1))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(2))
}

fn build(writer: GgufWriter) -> ropescope::Result<Tokenizer> {
    Tokenizer::from_gguf(
        &GgufFile::from_bytes(writer.to_bytes()).expect("the GGUF itself is valid"),
    )
}

/// Replaces (or adds) one metadata key.
fn with(mut writer: GgufWriter, key: &str, value: Value) -> GgufWriter {
    writer.metadata.retain(|(k, _)| k != key);
    writer.kv(key, value)
}

fn without(mut writer: GgufWriter, key: &str) -> GgufWriter {
    writer.metadata.retain(|(k, _)| k != key);
    writer
}

fn error_of(writer: GgufWriter) -> String {
    match build(writer) {
        Ok(_) => panic!("the tokenizer should have been rejected"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn byte_level_bpe_merges_by_rank() {
    let t = build(gpt2()).unwrap();
    assert_eq!(t.encode("ab ab", false).unwrap(), vec![4, 5]);
    assert_eq!(t.encode("ab<|end|>b", true).unwrap(), vec![4, 0, 2]);
    assert_eq!(t.decode(&[4, 5, 0]).unwrap(), "ab ab<|end|>");
    assert_eq!(t.token(5), Some("Ġab"));
    // Bytes without a token are dropped (the vocabulary has no unknown token), as HF does.
    assert_eq!(t.encode("xa", false).unwrap(), vec![1]);
}

#[test]
fn sentencepiece_adds_prefix_space_bos_and_byte_fallback() {
    let t = build(llama()).unwrap();
    // Llama-style files get a leading `▁` and BOS unless they say otherwise.
    assert_eq!(t.encode("ab ab", true).unwrap(), vec![1, 8, 8]);
    assert_eq!(t.decode(&[1, 8, 8]).unwrap(), "<s> ab ab");
    assert_eq!(t.decode(&[8, 8]).unwrap(), "ab ab");
    // `é` has no token of its own: its UTF-8 bytes' tokens stand for it.
    assert_eq!(t.encode("aé", false).unwrap(), vec![6, 9, 10]);
    assert_eq!(t.decode(&[6, 9, 10]).unwrap(), "aé");
    // A lone continuation byte is not UTF-8: one replacement character per byte.
    assert_eq!(t.decode(&[10, 10]).unwrap(), "\u{fffd}\u{fffd}");
    // Characters with neither a token nor byte tokens are dropped by a Llama-style tokenizer, as HF does.
    assert_eq!(t.encode("xyz a", false).unwrap(), vec![3, 6]);
    // Only text at the very start gets the prefix, not text after a control token.
    assert_eq!(t.encode("<s>a", false).unwrap(), vec![1, 4]);
}

#[test]
fn sentencepiece_flags_come_from_the_metadata() {
    let t = build(
        llama()
            .kv("tokenizer.ggml.add_space_prefix", Value::Bool(false))
            .kv("tokenizer.ggml.add_bos_token", Value::Bool(false))
            .kv("tokenizer.ggml.add_eos_token", Value::Bool(true)),
    )
    .unwrap();
    assert_eq!(t.encode("ab", true).unwrap(), vec![7, 2]);
    assert_eq!(t.encode("ab", false).unwrap(), vec![7]);
    assert_eq!(
        (t.bos_id(), t.eos_id(), t.vocab_size()),
        (Some(1), Some(2), 11)
    );
}

#[test]
fn gemma_merges_by_token_order_without_prefix_and_fuses_unknowns() {
    // Gemma's scores play no part: its merge order is its token order.
    let gemma = with(
        llama(),
        "general.architecture",
        Value::String("gemma3".into()),
    );
    let gemma = with(gemma, "tokenizer.ggml.tokens", strings(&GEMMA_TOKENS));
    let gemma = with(
        gemma,
        "tokenizer.ggml.scores",
        Value::Array(Array::F32(vec![0.0; 12])),
    );
    let types = vec![2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 4];
    let t = build(with(
        gemma,
        "tokenizer.ggml.token_type",
        Value::Array(Array::I32(types)),
    ))
    .unwrap();
    // Earlier tokens merge first: `▁a` (6) before `ab` (7), then `ab` before `▁ab` (8). No prefix space.
    assert_eq!(t.encode("ab ab", true).unwrap(), vec![1, 7, 8]);
    // The two-space token is spelled `▁▁`; a run of unknown characters becomes one `<unk>`.
    assert_eq!(t.token(11), Some("▁▁"));
    assert_eq!(t.encode("a  b", false).unwrap(), vec![4, 11, 5]);
    assert_eq!(t.encode("xyz a", false).unwrap(), vec![0, 6]);
    assert_eq!(t.decode(&[8, 8]).unwrap(), " ab ab");
    assert_eq!(t.decode(&[0, 11]).unwrap(), "<unk>  ");
}

/// [`llama`]'s tokens plus Gemma's kind of two-space token, as the file stores it.
const GEMMA_TOKENS: [&str; 12] = [
    "<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab", "<0xC3>", "<0xA9>", "  ",
];

#[test]
fn gpt2_without_merges_is_rejected() {
    let err = error_of(without(gpt2(), "tokenizer.ggml.merges"));
    assert!(
        err.contains("tokenizer.ggml.merges") && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn merges_naming_unknown_pieces_are_rejected() {
    let err = error_of(with(gpt2(), "tokenizer.ggml.merges", strings(&["a c"])));
    assert!(err.contains("'c' is not in the vocabulary"), "{err}");
    let err = error_of(with(gpt2(), "tokenizer.ggml.merges", strings(&["ab"])));
    assert!(err.contains("not two pieces"), "{err}");
}

#[test]
fn unknown_tokenizer_model_is_named() {
    let err = error_of(with(
        gpt2(),
        "tokenizer.ggml.model",
        Value::String("bert".into()),
    ));
    assert!(err.contains("unsupported tokenizer model 'bert'"), "{err}");
}

#[test]
fn unknown_pre_tokenizer_is_named() {
    let err = error_of(with(
        gpt2(),
        "tokenizer.ggml.pre",
        Value::String("qwen35".into()),
    ));
    assert!(err.contains("unsupported pre-tokenizer 'qwen35'"), "{err}");
}

#[test]
fn missing_tokenizer_metadata_is_named() {
    let err = error_of(without(gpt2(), "tokenizer.ggml.model"));
    assert!(
        err.contains("tokenizer.ggml.model") && err.contains("missing"),
        "{err}"
    );
    let err = error_of(without(gpt2(), "tokenizer.ggml.tokens"));
    assert!(
        err.contains("tokenizer.ggml.tokens") && err.contains("missing"),
        "{err}"
    );
    let err = error_of(without(llama(), "tokenizer.ggml.scores"));
    assert!(err.contains("tokenizer.ggml.scores"), "{err}");
}

#[test]
fn mistyped_or_inconsistent_metadata_is_rejected() {
    let err = error_of(with(
        gpt2(),
        "tokenizer.ggml.tokens",
        Value::Array(Array::I32(vec![1])),
    ));
    assert!(err.contains("expected an array of strings"), "{err}");
    let err = error_of(with(gpt2(), "tokenizer.ggml.tokens", strings(&[])));
    assert!(err.contains("empty"), "{err}");
    let err = error_of(with(gpt2(), "tokenizer.ggml.model", Value::U32(2)));
    assert!(
        err.contains("tokenizer.ggml.model") && err.contains("expected a string"),
        "{err}"
    );
    let err = error_of(with(
        llama(),
        "tokenizer.ggml.token_type",
        Value::Array(Array::I32(vec![1])),
    ));
    assert!(
        err.contains("1 entries for a vocabulary of 11 tokens"),
        "{err}"
    );
    let err = error_of(with(llama(), "tokenizer.ggml.scores", strings(&["x"])));
    assert!(err.contains("expected an array of floats"), "{err}");
    let err = error_of(with(
        gpt2(),
        "tokenizer.ggml.add_bos_token",
        Value::String("yes".into()),
    ));
    assert!(
        err.contains("add_bos_token") && err.contains("expected a bool"),
        "{err}"
    );
}

#[test]
fn special_token_ids_outside_the_vocabulary_are_rejected() {
    let err = error_of(with(llama(), "tokenizer.ggml.bos_token_id", Value::U32(99)));
    assert!(
        err.contains("token id 99 is outside the vocabulary of 11"),
        "{err}"
    );
    let err = error_of(with(llama(), "tokenizer.ggml.eos_token_id", Value::I32(-1)));
    assert!(err.contains("tokenizer.ggml.eos_token_id"), "{err}");
}

#[test]
fn bos_asked_for_but_not_named_is_rejected() {
    let err = error_of(without(llama(), "tokenizer.ggml.bos_token_id"));
    assert!(
        err.contains("tokenizer.ggml.bos_token_id") && err.contains("missing"),
        "{err}"
    );
}

#[test]
fn decoding_an_id_outside_the_vocabulary_fails() {
    let t = build(gpt2()).unwrap();
    let err = t.decode(&[1, 6]).unwrap_err().to_string();
    assert!(
        err.contains("token id 6 is outside the vocabulary of 6 tokens"),
        "{err}"
    );
    assert_eq!(t.token(6), None);
}
