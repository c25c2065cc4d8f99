//! Seed inputs built in memory, per target: a synthetic model of every architecture the writer knows, a file
//! with one tensor of every ggml type, byte-level BPE and SentencePiece tokenizers, `.npy` arrays of every dtype
//! and small JSON documents. Files on disk (the converted models, real model headers, the example scan) are
//! added by the callers that have them.

use super::Target;
use crate::gguf::{Array, GgufWriter, Value};
use crate::quant::GgmlType;
use crate::synth::SyntheticModel;

/// Architectures [`SyntheticModel`] writes.
const SYNTHETIC_ARCHS: [&str; 7] = [
    "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3",
];

/// The synthetic seeds of `target`.
pub fn synthetic(target: Target) -> Vec<Vec<u8>> {
    match target {
        Target::Npy => npy_seeds(),
        Target::NpyIds => ids_seeds(),
        Target::DivergeDump => vec![dump_seed()],
        Target::ScanDir => [
            &["{}", "{}"][..],
            &[
                r#"{"format_version": 1, "model": {"n_layers": 1000000000}}"#,
                r#"{"heads": []}"#,
                "",
                r#"{"of": 4000000000}"#,
            ],
        ]
        .iter()
        .map(|files| {
            let files: Vec<&[u8]> = files.iter().map(|f| f.as_bytes()).collect();
            files.join(super::PART_SEPARATOR)
        })
        .collect(),
        Target::ScanJson => [
            &b"{}"[..],
            b"{\"format_version\": 1, \"model\": {\"n_layers\": 2, \"n_heads\": 4}}",
            b"[1.5, null, \"x\", {\"a\": [true, false]}]",
        ]
        .iter()
        .map(|s| s.to_vec())
        .collect(),
        _ => {
            let mut seeds: Vec<Vec<u8>> = SYNTHETIC_ARCHS
                .iter()
                .map(|arch| tiny_model(arch).to_bytes())
                .collect();
            seeds.push(every_tensor_type());
            seeds.push(bpe_tokenizer());
            seeds.push(spm_tokenizer("llama"));
            seeds.push(spm_tokenizer("gemma3"));
            seeds.extend(worst_cases());
            seeds
        }
    }
}

/// A one-layer model small enough that one execution of the resolve target takes microseconds.
fn tiny_model(arch: &str) -> SyntheticModel {
    let mut m = SyntheticModel::new(arch);
    m.n_layers = 1;
    m.n_embd = 8;
    m.n_heads = 2;
    m.n_kv_heads = 1;
    m.head_dim = 4;
    m.rope_dim = 4;
    m.n_ff = 8;
    m.vocab = 8;
    m.context_length = 16;
    if arch == "mistral" || arch.starts_with("gemma") {
        m.sliding_window = Some(4);
    }
    if arch == "gemma2" {
        m.softcaps = Some((50.0, 30.0));
    }
    m
}

/// One block of every ggml type, with bytes that vary from block to block.
fn every_tensor_type() -> Vec<u8> {
    let mut w = GgufWriter::new().kv("general.architecture", Value::String("llama".into()));
    for id in 0..64 {
        if let Some(ty) = GgmlType::from_id(id) {
            let data = (0..ty.type_size())
                .map(|i| (i * 37 + id as usize) as u8)
                .collect();
            w = w.tensor_raw(ty.name(), &[ty.block_size() as u64], ty, data);
        }
    }
    w.to_bytes()
}

/// Files that are cheap to write and expensive to read: many tiny entries, each costing the reader more memory
/// than its bytes. They keep the allocation bound honest from the first case on.
fn worst_cases() -> Vec<Vec<u8>> {
    const N: usize = 20_000;
    let many_tokens: Vec<String> = (0..N).map(|i| format!("<{i}>")).collect();
    let all_control = GgufWriter::new()
        .kv("general.architecture", Value::String("gemma3".into()))
        .kv("tokenizer.ggml.model", Value::String("gpt2".into()))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(many_tokens.clone())),
        )
        .kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::U8(vec![3; N])),
        )
        .kv(
            "tokenizer.ggml.merges",
            Value::Array(Array::String(vec![String::new(); N])),
        )
        .to_bytes();
    let spm_control = GgufWriter::new()
        .kv("general.architecture", Value::String("gemma3".into()))
        .kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(many_tokens)),
        )
        .kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::U8(vec![4; N])),
        )
        .kv(
            "tokenizer.ggml.scores",
            Value::Array(Array::F32(vec![0.0; N])),
        )
        .to_bytes();
    let empty_strings = GgufWriter::new()
        .kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(vec![String::new(); N])),
        )
        .kv(
            "tokenizer.ggml.scores",
            Value::Array(Array::F32(vec![0.0; N])),
        )
        .to_bytes();
    let mut nested = Array::U8(Vec::new());
    for _ in 1..crate::gguf::MAX_ARRAY_DEPTH {
        nested = Array::Array(vec![nested; 3]);
    }
    let mut w = GgufWriter::new().kv("nested", Value::Array(nested)).kv(
        "empty arrays",
        Value::Array(Array::Array(vec![Array::Bool(Vec::new()); N])),
    );
    for i in 0..N / 4 {
        w = w.kv(&format!("{i}"), Value::Bool(true));
    }
    for i in 0..N / 4 {
        w = w.tensor_raw(&format!("{i}"), &[0, 0, 0, 0], GgmlType::F32, Vec::new());
    }
    vec![all_control, spm_control, empty_strings, w.to_bytes()]
}

fn strings(items: &[&str]) -> Value {
    Value::Array(Array::String(items.iter().map(|s| s.to_string()).collect()))
}

/// A byte-level BPE vocabulary with merges, a control token and BOS/EOS.
fn bpe_tokenizer() -> Vec<u8> {
    let tokens = [
        "<|endoftext|>",
        "<|im_start|>",
        "H",
        "e",
        "l",
        "o",
        "Ġ",
        "w",
        "He",
        "ll",
        "Hell",
        "Hello",
        "Ġw",
    ];
    let mut types = vec![1i32; tokens.len()];
    types[0] = 3;
    types[1] = 3;
    GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("tokenizer.ggml.model", Value::String("gpt2".into()))
        .kv("tokenizer.ggml.tokens", strings(&tokens))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)))
        .kv(
            "tokenizer.ggml.merges",
            strings(&["H e", "l l", "He ll", "Hell o", "Ġ w"]),
        )
        .kv("tokenizer.ggml.bos_token_id", Value::U32(0))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(0))
        .kv("tokenizer.ggml.add_bos_token", Value::Bool(true))
        .to_bytes()
}

/// A SentencePiece vocabulary with scores, byte fallback tokens and BOS/EOS/UNK, for `arch`.
fn spm_tokenizer(arch: &str) -> Vec<u8> {
    let tokens = [
        "<unk>", "<s>", "</s>", "▁", "H", "e", "l", "o", "▁H", "ll", "▁Hell", "<0x41>", "<0xE2>",
        "<0x98>", "<0x83>",
    ];
    let scores: Vec<f32> = (0..tokens.len()).map(|i| -(i as f32)).collect();
    let mut types = vec![1i32; tokens.len()];
    types[..3].copy_from_slice(&[2, 3, 3]);
    types[11..].iter_mut().for_each(|t| *t = 6);
    GgufWriter::new()
        .kv("general.architecture", Value::String(arch.into()))
        .kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv("tokenizer.ggml.tokens", strings(&tokens))
        .kv("tokenizer.ggml.scores", Value::Array(Array::F32(scores)))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(1))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(2))
        .kv("tokenizer.ggml.unknown_token_id", Value::U32(0))
        .kv("tokenizer.ggml.add_space_prefix", Value::Bool(true))
        .to_bytes()
}

/// A `.npy` file: header version `version`, `descr`, `shape` as Python writes it, then `data`.
fn npy_file(version: u8, descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}\n");
    let mut out = vec![0x93, b'N', b'U', b'M', b'P', b'Y', version, 0];
    if version == 1 {
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(data);
    out
}

fn npy_seeds() -> Vec<Vec<u8>> {
    let bytes = |n: usize| (0..n).map(|i| (i * 29) as u8).collect::<Vec<u8>>();
    vec![
        npy_file(1, "<f4", "(2, 3)", &bytes(24)),
        npy_file(1, "<f8", "(4,)", &bytes(32)),
        npy_file(1, "<i4", "()", &bytes(4)),
        npy_file(1, "<i8", "(0,)", &[]),
        npy_file(2, "<f8", "(1, 1, 2)", &bytes(16)),
    ]
}

/// Little-endian bytes of integer ids, `width` bytes each.
fn id_bytes(ids: &[u32], width: usize) -> Vec<u8> {
    ids.iter()
        .flat_map(|&i| u64::from(i).to_le_bytes()[..width].to_vec())
        .collect()
}

/// One prompt's ids as `[n]` `<i8` and as a batch of one `[1, n]` `<i4`.
fn ids_seeds() -> Vec<Vec<u8>> {
    let ids = [1, 15043, 3186, 29991, 2];
    vec![
        npy_file(1, "<i8", "(5,)", &id_bytes(&ids, 8)),
        npy_file(1, "<i4", "(1, 5)", &id_bytes(&ids, 4)),
    ]
}

/// A dump `diverge` accepts: file names of the layout and others, the rows `[2, 16]`, the ids of
/// [`super::DUMP_IDS`], a float32 tensor of [`super::DUMP_SHAPE`].
fn dump_seed() -> Vec<u8> {
    let names = "q_L0.npy\nk_L12.npy\nattn_L3.npy\nlogits.npy\nids.npy\nnotes.npy\nq_L01.npy\n";
    let n: usize = super::DUMP_SHAPE.iter().product();
    let values: Vec<u8> = (0..n)
        .flat_map(|i| (i as f32 / 7.0).to_le_bytes())
        .collect();
    let parts = [
        names.as_bytes().to_vec(),
        br#"{"rows": [2, 16], "engine": "other"}"#.to_vec(),
        npy_file(1, "<i8", "(16,)", &id_bytes(&super::DUMP_IDS, 8)),
        npy_file(1, "<f4", "(2, 4, 4)", &values),
    ];
    parts.join(super::PART_SEPARATOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_parses_and_the_models_resolve() {
        for target in Target::ALL {
            for (i, seed) in synthetic(target).iter().enumerate() {
                let result = target.run(seed);
                let must_pass = match target {
                    Target::Resolve => i < SYNTHETIC_ARCHS.len(),
                    // After the models and the every-type file: the three tokenizers.
                    Target::Tokenizer => i
                        .checked_sub(SYNTHETIC_ARCHS.len())
                        .is_some_and(|j| (1..=3).contains(&j)),
                    // Hostile directories; the example scan is the file seed that passes.
                    Target::ScanDir => false,
                    _ => true,
                };
                assert!(
                    !must_pass || result.is_ok(),
                    "{target:?} seed {i}: {result:?}"
                );
            }
        }
    }
}
