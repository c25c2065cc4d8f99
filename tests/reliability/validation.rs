//! What a model file must satisfy (README, "What a model file must satisfy"): every value is checked against the
//! others and against the tensor directory before any work. Each test alters one value of a llama.cpp-converted
//! model (`fixtures/converted/`) so that it breaks exactly one rule, and checks that `reference` refuses it with
//! exit 3 and one line naming the key and its allowed range, writing nothing; the unaltered models pass.

use ropescope::gguf::{GgmlType, GgufFile, GgufWriter, Value};
use ropescope::model::arch::validate::RULES;
use ropescope::rope::{Scaling, Yarn};
use ropescope_test_support::cli::{arg, assert_ok, assert_refused, run, Run};
use ropescope_test_support::paths;
use std::path::{Path, PathBuf};

fn converted(variant: &str) -> PathBuf {
    paths::fixture(&format!("converted/{variant}/model.gguf"))
}

/// A copy of converted model `variant` in `dir` with `edit` applied.
fn altered(variant: &str, edit: impl FnOnce(&mut GgufWriter), dir: &Path) -> PathBuf {
    let path = dir.join("altered.gguf");
    ropescope_test_support::gguf::rewrite_gguf(&converted(variant), edit, &path);
    path
}

/// Sets metadata key `key` to `value` (replacing it where present).
fn set(key: &str, value: Value) -> impl FnOnce(&mut GgufWriter) + '_ {
    move |w: &mut GgufWriter| {
        w.metadata.retain(|(k, _)| k != key);
        w.metadata.push((key.to_string(), value));
    }
}

/// `reference` on `model` (three tokens) into a fresh directory under `dir`.
fn reference(model: &Path, dir: &Path) -> (Run, PathBuf) {
    let out = dir.join("o");
    let r = run(&[
        "reference",
        arg(model),
        "--ids",
        "5,6,7",
        "--out",
        arg(&out),
    ]);
    (r, out)
}

/// `reference` refuses `model` with exit 3 (a bad model file) and one line containing every needle, writing no
/// output.
fn assert_reference_refuses(model: &Path, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (r, out) = reference(model, dir.path());
    assert_refused(&r, 3, needles);
    assert!(!out.exists(), "output written for a refused file");
}

/// Refused with the message of rule `key` (with the `{arch}.` prefix) of [`RULES`]: the key, what is wrong
/// (`needle`) and the rule's requirement.
fn assert_breaks_rule(model: &Path, key: &str, needle: &str) {
    let suffix = key.split_once('.').unwrap().1;
    let requires: Vec<&str> = RULES
        .iter()
        .filter(|r| r.key == suffix)
        .map(|r| r.requires)
        .collect();
    assert!(!requires.is_empty(), "no rule for {key}");
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = reference(model, dir.path());
    assert!(
        requires
            .iter()
            .any(|q| r.stderr.contains(&format!("(must be {q})"))),
        "{key}: the requirement is not stated: {}",
        r.stderr
    );
    assert_reference_refuses(model, &[&format!("metadata key '{key}'"), needle]);
}

/// The unaltered models the tests below alter are accepted.
#[test]
fn the_unaltered_converted_models_pass() {
    for variant in [
        "llama",
        "llama-yarn",
        "llama-linear",
        "llama-llama3",
        "gemma",
        "gemma2",
        "gemma3",
        "phi3-partial",
        "phi3-longrope",
    ]
    .into_iter()
    .filter(|v| converted(v).is_file())
    {
        let dir = tempfile::tempdir().unwrap();
        let (r, out) = reference(&converted(variant), dir.path());
        assert_ok(&r);
        assert!(out.join("meta.json").is_file());
    }
}

/// One case per rule of `RULES`, each a converted model with one key changed: (variant, key, value, what the
/// message says). Every rule has a case (checked), and each case breaks its own rule only.
#[test]
fn every_rule_refuses_a_file_breaking_it_alone() {
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "llama",
            "llama.block_count",
            Value::U32(3),
            "says 3 blocks, the tensors hold 2",
        ),
        (
            "llama",
            "llama.embedding_length",
            Value::U32(32),
            "tensor 'token_embd.weight' has 64 columns",
        ),
        (
            "llama",
            "llama.feed_forward_length",
            Value::U32(0),
            "the feed-forward width is 0",
        ),
        (
            "llama",
            "llama.attention.head_count_kv",
            Value::U32(3),
            "3 does not divide the 4 query heads",
        ),
        (
            "gemma",
            "gemma.attention.key_length",
            Value::U32(1),
            "1 is below 2",
        ),
        (
            "gemma",
            "gemma.attention.value_length",
            Value::U32(0),
            "value head dimension is 0",
        ),
        (
            "gemma",
            "gemma.attention.head_count",
            Value::U32(8),
            "head_count × key_length is 256, but tensor 'blk.0.attn_q.weight' has 128 rows",
        ),
        (
            "gemma",
            "gemma.attention.head_count_kv",
            Value::U32(2),
            "head_count_kv × key_length is 64, but tensor 'blk.0.attn_k.weight' has 32 rows",
        ),
        (
            "phi3-partial",
            "phi3.rope.dimension_count",
            Value::U32(7),
            "7 rotated dimensions for a head dimension of 16",
        ),
        (
            "llama",
            "llama.context_length",
            Value::U32(0),
            "the context is 0",
        ),
        (
            "llama",
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(f32::INFINITY),
            "inf is not a finite positive number",
        ),
        (
            "gptneox",
            "gptneox.attention.layer_norm_epsilon",
            Value::F32(-1.0),
            "-1 is not a finite positive number",
        ),
        (
            "gemma2",
            "gemma2.attn_logit_softcapping",
            Value::F32(f32::NAN),
            "NaN is not a finite positive number",
        ),
        (
            "gemma2",
            "gemma2.final_logit_softcapping",
            Value::F32(0.0),
            "0 is not a finite positive number",
        ),
        (
            "gemma2",
            "gemma2.attention.sliding_window",
            Value::U32(0),
            "a window of 0 keys",
        ),
        (
            "llama",
            "llama.rope.freq_base",
            Value::F32(0.5),
            "0.5 is not above 1",
        ),
        (
            "gemma3",
            "gemma3.rope.freq_base_swa",
            Value::F32(1.0),
            "1 is not above 1",
        ),
        (
            "llama-yarn",
            "llama.rope.scaling.original_context_length",
            Value::U32(0),
            "the original context is 0",
        ),
        (
            "llama-linear",
            "llama.rope.scaling.factor",
            Value::F32(0.5),
            "0.5 is below 1",
        ),
        (
            "llama-yarn",
            "llama.rope.scaling.yarn_beta_fast",
            Value::F32(1.0),
            "beta_fast 1 is not above beta_slow 1",
        ),
        (
            "llama-yarn",
            "llama.rope.scaling.original_context_length",
            Value::U32(1),
            "puts YaRN's ramp from dimension 0 to -1",
        ),
        (
            "llama",
            "llama.vocab_size",
            Value::U32(300),
            "the key says 300 tokens, tokenizer.ggml.tokens 256",
        ),
    ];
    for rule in RULES {
        assert!(
            cases
                .iter()
                .any(|(_, key, _, _)| key.ends_with(&format!(".{}", rule.key))),
            "rule {} has no case",
            rule.key
        );
    }
    for (variant, key, value, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = altered(variant, set(key, value), dir.path());
        assert_breaks_rule(&path, key, needle);
    }
}

/// YaRN's correction range divides by `ln base`: with base 1 and an original context above `2π·β_fast` both ends
/// are +∞, the ramp `(l − ∞)/(15 − ∞)` is NaN, and so were every rotated query and key, the attention and the
/// logits that `reference` used to write with exit 0 (llama-yarn: 16 rotated dims, β 32 and 1, original context
/// 256). A base of at most 1 is now refused.
#[test]
fn yarn_base_that_makes_the_ramp_degenerate_is_refused() {
    let yarn = Yarn {
        factor: 4.0,
        original_context: 256,
        beta_fast: 32.0,
        beta_slow: 1.0,
        attention_factor: None,
        truncate: true,
    };
    let (freqs, _) = Scaling::Yarn(yarn).frequencies(1.0, 16, 8);
    assert!(freqs.iter().all(|g| g.is_nan()), "{freqs:?}");

    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        "llama-yarn",
        |w| {
            set("llama.rope.freq_base", Value::F32(1.0))(w);
            set(
                "llama.rope.scaling.original_context_length",
                Value::U32(256),
            )(w);
        },
        dir.path(),
    );
    assert_breaks_rule(&path, "llama.rope.freq_base", "1 is not above 1");
}

/// `beta_fast < beta_slow` puts the extrapolated chunks after the interpolated ones.
#[test]
fn inverted_yarn_ramp_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        "llama-yarn",
        |w| {
            set("llama.rope.scaling.yarn_beta_fast", Value::F32(1.0))(w);
            set("llama.rope.scaling.yarn_beta_slow", Value::F32(32.0))(w);
        },
        dir.path(),
    );
    assert_breaks_rule(
        &path,
        "llama.rope.scaling.yarn_beta_fast",
        "beta_fast 1 is not above beta_slow 32",
    );
}

/// Zero rotated dimensions would run the model without RoPE, every chunk analysis on nothing.
#[test]
fn rope_dimension_count_zero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        "llama",
        set("llama.rope.dimension_count", Value::U32(0)),
        dir.path(),
    );
    assert_breaks_rule(
        &path,
        "llama.rope.dimension_count",
        "0 rotated dimensions for a head dimension of 16",
    );
}

/// Without `key_length`, two heads of 32 dims instead of four of 16 (and one key-value head instead of two) fit
/// every tensor shape, but then the file's 16 rotated dimensions are half a head, which `llama` does not do.
#[test]
fn head_count_disagreeing_with_rope_dimension_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        "llama",
        |w| {
            w.metadata
                .retain(|(k, _)| !k.ends_with(".key_length") && !k.ends_with(".value_length"));
            set("llama.attention.head_count", Value::U32(2))(w);
            set("llama.attention.head_count_kv", Value::U32(1))(w);
        },
        dir.path(),
    );
    assert_breaks_rule(
        &path,
        "llama.rope.dimension_count",
        "16 rotated dimensions for a head dimension of 32; llama rotates whole heads",
    );
}

/// Only Phi-3 rotates part of the head: HF's Gemma and Qwen attention multiply the whole head by the cosines, so
/// a `gemma` or `qwen2` file rotating 16 of 32 or 8 of 16 dimensions describes no model of its family (and ran,
/// with finite outputs, before this was refused).
#[test]
fn partial_rotation_outside_phi3_is_refused() {
    for (variant, arch, rotated, head_dim) in
        [("gemma", "gemma", 16, 32), ("qwen2", "qwen2", 8, 16)]
    {
        let dir = tempfile::tempdir().unwrap();
        let key = format!("{arch}.rope.dimension_count");
        let path = altered(variant, set(&key, Value::U32(rotated)), dir.path());
        assert_breaks_rule(
            &path,
            &key,
            &format!("{rotated} rotated dimensions for a head dimension of {head_dim}; {arch} rotates whole heads"),
        );
    }
}

/// A soft-cap `c` is applied as `tanh(x / c) · c` in the engine's precision: one of 1e300 (f64) is infinite in
/// f32 and gives NaN there, one of 1e-320 is 0 in f32 and gives `0 / 0`. Both are refused by name, not left to
/// the finiteness guard of the f32 pass.
#[test]
fn soft_caps_must_be_finite_and_positive_in_f32() {
    for (key, value, needle) in [
        (
            "gemma2.attn_logit_softcapping",
            1e300,
            "1e300 is inf in f32",
        ),
        (
            "gemma2.final_logit_softcapping",
            1e-320,
            "1e-320 is 0 in f32",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = altered("gemma2", set(key, Value::F64(value)), dir.path());
        assert_breaks_rule(&path, key, needle);
    }
}

/// `vocab_size` is read and its type checked even when `tokenizer.ggml.tokens` gives the size: a negative or
/// textual value was silently ignored.
#[test]
fn vocab_size_of_another_type_is_refused() {
    for value in [Value::I32(-1), Value::String("256".into())] {
        let dir = tempfile::tempdir().unwrap();
        let path = altered("llama", set("llama.vocab_size", value), dir.path());
        assert_reference_refuses(
            &path,
            &[
                "metadata key 'llama.vocab_size'",
                "expected a non-negative integer",
            ],
        );
    }
}

/// A head count stored per layer has one entry per layer, as llama.cpp requires; the same value for every layer
/// is accepted.
#[test]
fn per_layer_head_counts_must_have_one_entry_per_layer() {
    let per_layer = |v: Vec<i32>| Value::Array(ropescope::gguf::Array::I32(v));
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        "llama",
        set("llama.attention.head_count_kv", per_layer(vec![2])),
        dir.path(),
    );
    assert_reference_refuses(
        &path,
        &[
            "metadata key 'llama.attention.head_count_kv'",
            "1 entries for 2 layers (must be one entry per layer)",
        ],
    );
    let path = altered(
        "llama",
        set("llama.attention.head_count_kv", per_layer(vec![2, 2])),
        dir.path(),
    );
    let (r, _) = reference(&path, dir.path());
    assert_ok(&r);
}

/// The feed-forward width is checked against the gate, up and down projections, a fused `ffn_up.weight`
/// (Phi-3) holding twice it.
#[test]
fn feed_forward_length_disagreeing_with_the_tensors_is_refused() {
    for (variant, key, n, needle) in [
        (
            "llama",
            "llama.feed_forward_length",
            96,
            "feed_forward_length is 96, but tensor 'blk.0.ffn_gate.weight' has 128 rows",
        ),
        (
            "phi3-partial",
            "phi3.feed_forward_length",
            256,
            "2 × feed_forward_length is 512, but tensor 'blk.0.ffn_up.weight' has 256 rows",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = altered(variant, set(key, Value::U32(n)), dir.path());
        assert_breaks_rule(&path, key, needle);
    }
}

/// Every count is read into 32 bits by llama.cpp; a larger one is refused as it is read. On Phi-3's fused
/// projections a width of 2^63 overflowed the sum of its parts (a panic), and an original context of 2^64 − 1
/// overflowed `inspect`'s switch position.
#[test]
fn counts_above_32_bits_are_refused_as_read() {
    for (variant, key, n) in [
        ("llama", "llama.context_length", 1u64 << 32),
        ("phi3-partial", "phi3.feed_forward_length", 1 << 63),
        ("phi3-partial", "phi3.attention.key_length", 1 << 63),
        (
            "phi3-longrope",
            "phi3.rope.scaling.original_context_length",
            u64::MAX,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = altered(variant, set(key, Value::U64(n)), dir.path());
        let needle = format!("{n} is above 4294967295");
        assert_reference_refuses(&path, &[&format!("metadata key '{key}'"), &needle]);
        let r = run(&["inspect", arg(&path), "--json"]);
        assert_refused(&r, 3, &[&needle]);
    }
}

/// LongRoPE's factor is the context over the original context; a file stating another one is refused rather
/// than ignored, and the ratio itself is accepted.
#[test]
fn longrope_factor_other_than_the_context_ratio_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = "phi3.rope.scaling.factor";
    let path = altered("phi3-longrope", set(key, Value::F32(0.5)), dir.path());
    assert_reference_refuses(
        &path,
        &[
            &format!("metadata key '{key}'"),
            "0.5 with LongRoPE, whose factor is context_length / original_context_length = 16",
        ],
    );
    let path = altered("phi3-longrope", set(key, Value::F32(16.0)), dir.path());
    let (r, _) = reference(&path, dir.path());
    assert_ok(&r);
}

/// A RoPE scaling value is read as GGUF stores it, in f32: a YaRN magnitude of 1e300 (f64) wrote NaN heads in
/// the f64 pass, stopped only by the finiteness guard; it is now refused by name.
#[test]
fn rope_values_must_be_finite_and_positive_in_f32() {
    let dir = tempfile::tempdir().unwrap();
    let key = "llama.rope.scaling.yarn_attn_factor";
    let path = altered("llama-yarn", set(key, Value::F64(1e300)), dir.path());
    assert_reference_refuses(
        &path,
        &[&format!("metadata key '{key}'"), "1e300 is inf in f32"],
    );
}

/// A fused `attn_qkv.weight` (Phi-3) must have the rows the head counts give.
#[test]
fn head_count_disagreeing_with_the_fused_projection_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        "phi3-partial",
        |w| {
            set("phi3.attention.head_count", Value::U32(2))(w);
            set("phi3.attention.key_length", Value::U32(32))(w);
            set("phi3.attention.value_length", Value::U32(32))(w);
        },
        dir.path(),
    );
    assert_breaks_rule(
        &path,
        "phi3.attention.head_count",
        "is 192, but tensor 'blk.0.attn_qkv.weight' has 128 rows",
    );
}

/// The key, the tokenizer and the embedding must agree on the vocabulary.
#[test]
fn vocab_size_disagreeing_with_the_embedding_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        "llama",
        |w| {
            w.metadata.retain(|(k, _)| k != "tokenizer.ggml.tokens");
            set("llama.vocab_size", Value::U32(300))(w);
        },
        dir.path(),
    );
    assert_breaks_rule(
        &path,
        "llama.vocab_size",
        "the key says 300 tokens, tensor 'token_embd.weight' 256",
    );
}

/// Gemma 3's layer pattern, when the file states it, has one entry per layer.
#[test]
fn sliding_window_pattern_must_have_one_entry_per_layer() {
    let dir = tempfile::tempdir().unwrap();
    let pattern = Value::Array(ropescope::gguf::Array::Bool(vec![true, false]));
    let path = altered(
        "gemma3",
        set("gemma3.attention.sliding_window_pattern", pattern),
        dir.path(),
    );
    assert_reference_refuses(
        &path,
        &[
            "metadata key 'gemma3.attention.sliding_window_pattern'",
            "2 entries for 6 layers (must be one entry per layer)",
        ],
    );
}

/// A copy of converted `variant` in which the directory entry of tensor `moved` points at the data of `onto`.
fn with_shared_data(variant: &str, moved: &str, onto: &str, dir: &Path) -> PathBuf {
    let src = converted(variant);
    let file = GgufFile::open(&src).unwrap();
    let target = file.tensor(onto).unwrap().offset;
    let moved_info = file.tensor(moved).unwrap();
    let mut bytes = std::fs::read(&src).unwrap();
    // A directory entry: name length (u64), name, n_dims (u32), dims (u64 each), type (u32), offset (u64).
    let mut entry = (moved.len() as u64).to_le_bytes().to_vec();
    entry.extend_from_slice(moved.as_bytes());
    let at = bytes
        .windows(entry.len())
        .position(|w| w == entry.as_slice())
        .unwrap();
    let offset_at = at + entry.len() + 4 + 8 * moved_info.dims.len() + 4;
    let stored = u64::from_le_bytes(bytes[offset_at..offset_at + 8].try_into().unwrap());
    assert_eq!(stored, moved_info.offset);
    bytes[offset_at..offset_at + 8].copy_from_slice(&target.to_le_bytes());
    let path = dir.join("overlap.gguf");
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Two tensors whose data overlap are refused by the parser, naming both, whatever command opens the file.
#[test]
fn overlapping_tensor_data_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = with_shared_data(
        "llama",
        "blk.0.attn_k.weight",
        "blk.0.attn_q.weight",
        dir.path(),
    );
    assert_reference_refuses(
        &path,
        &["'blk.0.attn_q.weight'", "'blk.0.attn_k.weight'", "overlap"],
    );
    let r = run(&["inspect", arg(&path)]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
}

/// Tensors of no bytes at the same offset as another occupy nothing and are accepted; a real overlap anywhere
/// in the directory is refused, not just between neighbours.
#[test]
fn only_bytes_shared_between_tensors_are_an_overlap() {
    let empty = GgufWriter::new()
        .tensor_f32("a", &[4], &[1.0; 4])
        .tensor_raw("b", &[0], GgmlType::F32, Vec::new())
        .tensor_f32("c", &[4], &[2.0; 4]);
    assert!(GgufFile::from_bytes(empty.to_bytes()).is_ok());
    // "a" spans 64 bytes; "c" (4 values at offset 32 of its 32-byte slot) lies inside it after "b".
    let big = GgufWriter::new()
        .tensor_f32("a", &[16], &[1.0; 16])
        .tensor_f32("b", &[4], &[2.0; 4]);
    let mut bytes = big.to_bytes();
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let b = file.tensor("b").unwrap().offset;
    assert_eq!(b, 64);
    let at = bytes
        .windows(9)
        .position(|w| w == b"\x01\x00\x00\x00\x00\x00\x00\x00b")
        .unwrap();
    let offset_at = at + 9 + 4 + 8 + 4;
    bytes[offset_at..offset_at + 8].copy_from_slice(&32u64.to_le_bytes());
    let err = GgufFile::from_bytes(bytes).err().unwrap().to_string();
    assert!(
        err.contains("'a'") && err.contains("'b'") && err.contains("overlap"),
        "{err}"
    );
}

/// RoPE factor tensors (LongRoPE's, Llama 3's `rope_freqs.weight`) hold finite positive divisors.
#[test]
fn rope_factor_tensors_must_be_finite_and_positive() {
    for (variant, tensor, bad) in [
        ("phi3-longrope", "rope_factors_long.weight", 0.0),
        ("phi3-longrope", "rope_factors_short.weight", -1.0),
        ("llama-llama3", "rope_freqs.weight", f32::NAN),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = altered(
            variant,
            |w| {
                let t = w.tensors.iter_mut().find(|t| t.name == tensor).unwrap();
                t.data[..4].copy_from_slice(&bad.to_le_bytes());
            },
            dir.path(),
        );
        assert_reference_refuses(
            &path,
            &[
                &format!("tensor '{tensor}' holds {bad}"),
                "must be finite and positive",
            ],
        );
    }
}

/// The table of what a model file must satisfy (`docs/reliability.md`) names every rule of `RULES` (key and
/// requirement), and every test it names exists.
#[test]
fn readme_table_lists_every_rule_and_real_tests() {
    let readme = std::fs::read_to_string(paths::fixture("../docs/reliability.md")).unwrap();
    let section = readme
        .split("## What a model file must satisfy")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| ")).collect();
    for rule in RULES {
        let key = format!("`{}`", rule.key);
        assert!(
            rows.iter()
                .any(|r| r.contains(&key) && r.contains(rule.requires)),
            "docs/reliability.md has no row with {key} requiring \"{}\"",
            rule.requires
        );
    }
    let this = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reliability/validation.rs"),
    )
    .unwrap();
    let mut cited = 0;
    for row in &rows[2..] {
        let tests = row.trim_end_matches('|').rsplit('|').next().unwrap();
        for name in tests.split('`').skip(1).step_by(2) {
            let (file, func) = match name.split_once("::") {
                Some((file, func)) => (file.to_string(), func),
                None => ("tests/reliability/validation.rs".to_string(), name),
            };
            let text = if file.ends_with("validation.rs") {
                this.clone()
            } else {
                std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(&file))
                    .unwrap_or_else(|_| panic!("docs/reliability.md cites missing {file}"))
            };
            assert!(
                text.contains(&format!("fn {func}(")),
                "docs/reliability.md cites missing test {name}"
            );
            cited += 1;
        }
    }
    assert!(cited >= RULES.len(), "{cited} tests cited");
}

/// A Gemma 2 file without its soft-capping keys computes as HF's `Gemma2Config` and llama.cpp do without them:
/// with their defaults 50 and 30, the values the converted model states; its logits equal the converted
/// model's bit for bit (which `tests/engine/converted.rs` holds to HF float64).
#[test]
fn gemma2_without_soft_capping_keys_takes_the_defaults_of_hf_and_llama_cpp() {
    use ropescope::capture::NoCapture;
    use ropescope::model::{ForwardOptions, Model};
    let dir = tempfile::tempdir().unwrap();
    let stripped = altered(
        "gemma2",
        |w| {
            w.metadata
                .retain(|(k, _)| !k.ends_with("_logit_softcapping"))
        },
        dir.path(),
    );
    let logits = |path: &Path| {
        let file = GgufFile::open(path).unwrap();
        let model = Model::<f64>::load(&file).unwrap();
        let c = &model.config;
        assert_eq!((c.attn_softcap, c.final_softcap), (Some(50.0), Some(30.0)));
        let opts = ForwardOptions {
            logits_rows: 0..4,
            rope_keep: None,
        };
        model
            .forward(&[2, 5, 6, 7], &opts, &mut NoCapture)
            .unwrap()
            .logits
    };
    assert_eq!(logits(&stripped), logits(&converted("gemma2")));
}
