//! `ropescope synth`: random-weight files with a real model's exact header, or a named shape's, that the engine
//! runs with activations in a trained model's range.
//!
//! Independent evidence: the headers are compared with the real files (written by llama.cpp's converter), not
//! with this repository's writer; the quantizers are checked against ggml in `tests/engine/quant_quantize.rs`; Llama
//! 3.1's RoPE factors are checked with the engine's recogniser, which is itself checked against HF transformers.

use ropescope::gguf::GgufFile;
use ropescope::model::arch;
use ropescope::model::arch::rope::llama3_of;
use ropescope::quant::GgmlType;
use ropescope::synth::SyntheticModel;
use ropescope::synth::{Fill, NamedShape, Plan, Quant, NAMED_SHAPES};
use ropescope::tokenizer::Tokenizer;
use ropescope_test_support::paths;
use std::path::Path;
use std::process::{Command, Output};

fn ropescope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(args)
        .output()
        .unwrap()
}

fn synth(args: &[&str]) -> Output {
    let out = ropescope(&[&["synth", "--quiet"], args].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// With `--quant keep`, everything before the tensor data (metadata, directory with its offsets, padding) is the
/// real file's, byte for byte, and the file has the real one's size.
#[test]
#[ignore = "slow: synthesizes from the three real models"]
fn keep_copies_each_real_header_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    for name in [paths::SMOLLM2, paths::GEMMA3] {
        let real_path = paths::model(name);
        let out = dir.path().join(name);
        synth(&["--like", s(&real_path), "--out", s(&out), "--seed", "3"]);
        let (real, fake) = (
            std::fs::read(&real_path).unwrap(),
            std::fs::read(&out).unwrap(),
        );
        let header = GgufFile::open(&real_path).unwrap().data_offset() as usize;
        assert_eq!(fake.len(), real.len(), "{name}: size");
        assert!(fake[..header] == real[..header], "{name}: header differs");
        assert!(
            fake[header..] != real[header..],
            "{name}: the weights were copied"
        );
        let (a, b) = (
            GgufFile::open(&real_path).unwrap(),
            GgufFile::open(&out).unwrap(),
        );
        assert_eq!(a.tensors(), b.tensors(), "{name}: tensor directory");
    }
}

/// From the 95 MB head of the real 7B file, the plan is the whole 4.68 GB file: same header bytes, same size.
#[test]
fn keep_plans_the_whole_file_from_a_truncated_header() {
    let path = paths::model(paths::QWEN7B_HEAD);
    let head = GgufFile::open_header(&path).unwrap();
    let plan = Plan::like(&head, Quant::Keep).unwrap();
    assert_eq!(plan.file_size(), head.data_extent().expected_size);
    assert_eq!(plan.file_size(), 4_683_073_248);
    let real = std::fs::read(&path).unwrap();
    let header = plan.header_bytes();
    assert_eq!(header.len() as u64, head.data_offset());
    assert!(header == real[..header.len()]);
    let types: std::collections::BTreeSet<_> = plan.tensors.iter().map(|t| t.ty.name()).collect();
    assert_eq!(
        types.into_iter().collect::<Vec<_>>(),
        ["F32", "Q4_K", "Q6_K"]
    );
}

/// A small qwen2 model (biases included) whose embedding, 32 × 70000, spans three of synth's parallel chunks of
/// about a million values, so that chunking and thread count are exercised.
fn tiny_model(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tiny.gguf");
    let mut model = SyntheticModel::new("qwen2");
    model.vocab = 70_000;
    std::fs::write(&path, model.to_bytes()).unwrap();
    path
}

/// The bytes are a function of the seed alone: the same with one thread or two, different with another seed.
#[test]
fn same_seed_same_bytes_at_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = tiny_model(dir.path());
    let path = |n: &str| dir.path().join(n);
    let run = |threads: &str, seed: &str, out: &str| {
        let out_path = path(out);
        let a = ["--threads", threads, "synth", "--quiet", "--like", s(&tiny)];
        let b = ["--quant", "Q8_0", "--seed", seed, "--out", s(&out_path)];
        let o = ropescope(&[&a[..], &b[..]].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out_path).unwrap()
    };
    let one = run("1", "5", "a.gguf");
    assert!(one == run("2", "5", "b.gguf"));
    assert!(one != run("2", "6", "c.gguf"));
}

/// A forced type whose blocks the rows do not fill falls back as llama-quantize does (Q4_K to Q5_0 on rows of
/// 32, to F16 on the feed-forward's rows of 48), vectors stay F32, and the engine runs the result.
#[test]
fn forced_type_falls_back_on_short_rows_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = tiny_model(dir.path());
    let out = dir.path().join("q4k.gguf");
    let o = synth(&["--like", s(&tiny), "--quant", "Q4_K", "--out", s(&out)]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("written as Q5_0"), "{stderr}");
    let file = GgufFile::open(&out).unwrap();
    for t in file.tensors() {
        let want = match (t.dims.len(), t.dims[0] % 32) {
            (1, _) => GgmlType::F32,
            (_, 0) => GgmlType::Q5_0,
            _ => GgmlType::F16,
        };
        assert_eq!(t.ty, want, "{}", t.name);
    }
    let refdir = dir.path().join("ref");
    let r = ropescope(&["reference", s(&out), "--ids", "1,2,3", "--out", s(&refdir)]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

#[test]
fn every_named_shape_resolves_and_tokenizes_bytes() {
    for shape in NAMED_SHAPES {
        let plan = Plan::named(shape, GgmlType::Q4_K).unwrap();
        let file = GgufFile::header_from_bytes(plan.header_bytes()).unwrap();
        let tokenizer = Tokenizer::from_gguf(&file).unwrap();
        assert_eq!(
            tokenizer.encode("Hi!", true).unwrap(),
            [256, 72, 105, 33],
            "{}",
            shape.name
        );
        let embd = file.tensor("token_embd.weight").unwrap();
        assert_eq!(
            embd.dims,
            [shape.n_embd as u64, shape.vocab as u64],
            "{}",
            shape.name
        );
        if shape.name != "llama-3.1-8b" {
            // (Llama 3.1's configuration needs the data of rope_freqs.weight, checked below.)
            let config = arch::resolve(&file).unwrap();
            assert_eq!(config.n_layers, shape.n_layers, "{}", shape.name);
            assert_eq!(config.n_kv_heads, shape.n_kv_heads, "{}", shape.name);
        }
    }
}

/// Llama 3.1 8B's `rope_freqs.weight` is read by the engine as Llama 3 scaling with Llama 3.1's parameters.
#[test]
fn llama31_rope_factors_are_llama3_scaling() {
    let plan = Plan::named(NamedShape::find("llama-3.1-8b").unwrap(), GgmlType::Q4_K).unwrap();
    let t = plan
        .tensors
        .iter()
        .find(|t| t.name == "rope_freqs.weight")
        .unwrap();
    assert_eq!(t.ty, GgmlType::F32);
    let Fill::Values(v) = &t.fill else {
        panic!("rope_freqs.weight is not given values")
    };
    let stored: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    let l3 = llama3_of(&stored, 500000.0, 128).expect("recognised as Llama 3 scaling");
    assert_eq!((l3.factor, l3.original_context), (8.0, 8192));
}

fn read(dir: &Path, name: &str) -> (Vec<usize>, Vec<f64>) {
    let a = ropescope::io::npy::Array::read(&dir.join(format!("{name}.npy"))).unwrap();
    (a.shape.clone(), a.to_f64())
}

fn rms(v: &[f64]) -> f64 {
    (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt()
}

/// Runs `model` on `ids` and checks the ranges the fill rule promises: logits of RMS about 1 (within 0.5–2), the
/// residual stream's RMS within a factor √2 across the layers, and attention neither uniform nor one-hot (the
/// last row's largest weight, averaged over heads, between twice the uniform weight and 0.9) in `layers`.
fn assert_activations_in_range(model: &Path, ids: &str, n_layers: usize, layers: &[usize]) {
    let dir = tempfile::tempdir().unwrap();
    let r = ropescope(&["reference", s(model), "--ids", ids, "--out", s(dir.path())]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let logit_rms = rms(&read(dir.path(), "logits").1);
    assert!((0.5..2.0).contains(&logit_rms), "logit RMS {logit_rms}");
    let stream: Vec<f64> = (0..n_layers)
        .map(|l| rms(&read(dir.path(), &format!("hidden_L{l}")).1))
        .collect();
    let (lo, hi) = stream
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    assert!(
        hi / lo <= 2f64.sqrt(),
        "residual RMS from {lo} to {hi}: {stream:?}"
    );
    for &layer in layers {
        let (shape, p) = read(dir.path(), &format!("attn_L{layer}"));
        let (heads, n) = (shape[0], shape[1]);
        let mut peak = 0.0;
        for h in 0..heads {
            let row = &p[(h * n + n - 1) * n..(h * n + n) * n];
            peak += row.iter().copied().fold(0.0, f64::max) / heads as f64;
        }
        assert!(
            peak > 2.0 / n as f64 && peak < 0.9,
            "layer {layer}: mean peak weight {peak}"
        );
    }
}

/// A whole named shape written and run, its activations in range (measured: logit RMS 1.00, residual RMS from
/// 0.042 to 0.048).
#[test]
fn a_named_shape_runs_with_activations_in_range() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("smol.gguf");
    synth(&[
        "--like",
        "smollm2-135m",
        "--quant",
        "Q4_0",
        "--out",
        s(&out),
    ]);
    let ids = "256,84,104,101,32,113,117,105,99,107,32,98,114,111,119,110";
    assert_activations_in_range(&out, ids, 30, &[0, 15, 29]);
}

/// Gemma 3's layout (embeddings scaled by √d, post-norms before each residual addition): activations in range
/// too (measured: logit RMS 1.00, residual RMS from 1.03 to 1.37; with post-norm weights of 1 instead, it grew
/// from 1.7 to 5.8).
#[test]
#[ignore = "slow: forward passes at Gemma 3's real size"]
fn gemma3_layout_runs_with_activations_in_range() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gemma.gguf");
    let real = paths::model(paths::GEMMA3);
    synth(&["--like", s(&real), "--out", s(&out)]);
    let ids = "2,100,200,300,400,500,600,700,800,900,1000,1100,1200,1300,1400,1500";
    assert_activations_in_range(&out, ids, 18, &[0, 5, 17]);
}

#[test]
fn refusals_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.gguf");
    std::fs::write(&out, b"keep me").unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--like",
                "smollm2-135m",
                "--quant",
                "Q4_0",
                "--out",
                s(&out),
            ],
            "--force",
        ),
        (
            &[
                "--like",
                "no-such-model",
                "--quant",
                "Q4_0",
                "--out",
                "y.gguf",
            ],
            "llama-3.1-8b",
        ),
        (
            &["--like", "smollm2-135m", "--out", "y.gguf"],
            "--quant TYPE",
        ),
        (
            &[
                "--like",
                "smollm2-135m",
                "--quant",
                "Q3_K",
                "--out",
                "y.gguf",
            ],
            "Q3_K",
        ),
    ];
    for (args, needle) in cases {
        let o = ropescope(&[&["synth"], args].concat());
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    assert!(!Path::new("y.gguf").exists());
}
