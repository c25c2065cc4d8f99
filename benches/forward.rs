//! Model load and the f32 forward pass at 512 tokens on the cached GGUF models (`fixtures/models.sh`): load
//! (mmap and a check of every tensor; the weights stay quantized), the forward pass with full capture (every
//! layer's q/k/v before and after RoPE, attention logits and probabilities over all rows, head outputs) and
//! without capture.
//!
//! A model whose file is absent is skipped with a note. The side-by-side comparison with HF transformers and
//! llama.cpp is `benches/peers/compare.py`.

#[path = "support/models.rs"]
mod models;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use models::{cached, token_ids, MODELS, TOKENS};
use ropescope::capture::{CollectSink, NoCapture};
use ropescope::gguf::GgufFile;
use ropescope::model::{ForwardOptions, Model};
use std::time::Duration;

fn forward(c: &mut Criterion) {
    for (name, file_name) in MODELS {
        let Some(path) = cached(name, file_name) else {
            continue;
        };
        let mut group = c.benchmark_group(name);
        // Flat sampling: one pass per sample (a forward pass takes about a second), not 1 + 2 + ... + 10.
        group
            .sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(10));
        group.bench_function("load_f32", |b| {
            b.iter(|| {
                let file = GgufFile::open(&path).expect("model file");
                Model::<f32>::load(&file).expect("supported model")
            })
        });
        let file = GgufFile::open(&path).expect("model file");
        let model = Model::<f32>::load(&file).expect("supported model");
        let ids = token_ids(model.config.vocab_size, TOKENS);
        let opts = ForwardOptions {
            logits_rows: 0..TOKENS,
            rope_keep: None,
        };
        let layers: Vec<usize> = (0..model.config.n_layers).collect();
        group.bench_function("forward_f32_512_full_capture", |b| {
            b.iter(|| {
                let mut sink = CollectSink::new(layers.clone(), 0..TOKENS);
                let out = model.forward(&ids, &opts, &mut sink).expect("forward");
                (out, sink)
            })
        });
        group.bench_function("forward_f32_512_no_capture", |b| {
            b.iter(|| model.forward(&ids, &opts, &mut NoCapture).expect("forward"))
        });
        group.finish();
    }
}

criterion_group!(benches, forward);
criterion_main!(benches);
