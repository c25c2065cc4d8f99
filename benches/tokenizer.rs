//! Tokenizer speed on the two real models (`fixtures/models.sh`): building each tokenizer from its GGUF, and
//! encoding about 3,000 words (the tokenizer fixtures' texts, repeated).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ropescope::gguf::GgufFile;
use ropescope::tokenizer::Tokenizer;
use std::path::PathBuf;

fn model(file: &str) -> PathBuf {
    let root = std::env::var_os("ROPESCOPE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/ropescope")
        });
    root.join("models").join(file)
}

/// About 3,000 words of mixed text: every text of the tokenizer fixture, repeated.
fn text() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tokenizer/expected_smollm2.json");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("fixture")).expect("json");
    let texts: Vec<&str> = json["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c["text"].as_str().expect("text"))
        .collect();
    texts.join(" ").repeat(20)
}

fn tokenizer(c: &mut Criterion) {
    let text = text();
    let mut group = c.benchmark_group("tokenizer");
    group.sample_size(10);
    for (name, file) in [
        ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        ("gemma3", "gemma-3-270m-q4_k_m.gguf"),
    ] {
        let gguf = GgufFile::open(model(file)).expect("run fixtures/models.sh first");
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("{name}/build"), |b| {
            b.iter(|| Tokenizer::from_gguf(&gguf).expect("tokenizer"))
        });
        let tok = Tokenizer::from_gguf(&gguf).expect("tokenizer");
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("{name}/encode"), |b| {
            b.iter(|| tok.encode(&text, false).expect("encode"))
        });
    }
    group.finish();
}

criterion_group!(benches, tokenizer);
criterion_main!(benches);
