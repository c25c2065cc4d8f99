//! What a file says that ropescope does not implement, and every hyper-parameter outside its rule
//! (`src/model/arch/validate.rs`, `gguf::hparams`), is refused by name by `reference` and `scan` before any work,
//! on copies of llama.cpp-converted models (`fixtures/converted/`) with one key or tensor changed; `inspect`
//! lists what it does not understand and reports the RoPE each converted model really applies, checked against
//! HF's own values.

use ropescope::gguf::Value;
use ropescope_test_support::gguf;
use ropescope_test_support::paths;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn converted(variant: &str) -> PathBuf {
    paths::fixture(&format!("converted/{variant}/model.gguf"))
}

/// A copy of the GGUF at `src` with `edit` applied to its metadata list, and `extra` tensors (f32) added.
fn altered(
    src: &Path,
    edit: impl Fn(&mut Vec<(String, Value)>),
    extra: &[(&str, Vec<f32>)],
    dir: &Path,
) -> PathBuf {
    let path = dir.join("altered.gguf");
    gguf::rewrite_gguf(
        src,
        |w| {
            edit(&mut w.metadata);
            for (name, values) in extra {
                *w = std::mem::take(w).tensor_f32(name, &[values.len() as u64], values);
            }
        },
        &path,
    );
    path
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(args)
        .output()
        .unwrap()
}

fn set(key: &str, value: Value) -> impl Fn(&mut Vec<(String, Value)>) + '_ {
    move |m: &mut Vec<(String, Value)>| {
        m.retain(|(k, _)| k != key);
        m.push((key.to_string(), value.clone()));
    }
}

/// `reference` and `scan` fail with exit `code` (4 unsupported, 3 a bad file) naming `needle`, writing no output
/// directory; `inspect` succeeds and, when `listed`, prints it under NOT UNDERSTOOD and in `--json`'s `not_understood`.
fn assert_refused(path: &Path, needle: &str, listed: bool, code: i32) {
    let p = path.to_str().unwrap();
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("o");
    let d = dest.to_str().unwrap();
    for args in [
        vec!["reference", p, "--ids", "5,6,7,8", "--out", d],
        vec![
            "scan", p, "--count", "1", "--length", "16", "--quiet", "--out", d,
        ],
    ] {
        let r = run(&args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!dest.join("meta.json").exists(), "{args:?} wrote output");
    }
    let r = run(&["inspect", p]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("cannot run"), "{text}");
    if listed {
        assert!(
            text.lines()
                .any(|l| l.starts_with("NOT UNDERSTOOD") && l.contains(needle)),
            "{text}"
        );
        let j: serde_json::Value =
            serde_json::from_slice(&run(&["inspect", "--json", p]).stdout).unwrap();
        assert!(j["not_understood"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.as_str().unwrap().contains(needle)));
    }
}

#[test]
fn unknown_rope_key_is_refused_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        &converted("llama"),
        set("llama.rope.scaling.alpha", Value::F32(2.0)),
        &[],
        dir.path(),
    );
    assert_refused(&path, "llama.rope.scaling.alpha", true, 4);
}

#[test]
fn unknown_attention_key_is_refused_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        &converted("gemma3"),
        set("gemma3.attention.scale", Value::F32(0.1)),
        &[],
        dir.path(),
    );
    assert_refused(&path, "gemma3.attention.scale", true, 4);
}

#[test]
fn unimplemented_scaling_type_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        &converted("llama"),
        set("llama.rope.scaling.type", Value::String("dynamic".into())),
        &[],
        dir.path(),
    );
    assert_refused(&path, "llama.rope.scaling.type = 'dynamic'", false, 4);
}

#[test]
fn yarn_key_without_yarn_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        &converted("llama-linear"),
        set("llama.rope.scaling.yarn_beta_fast", Value::F32(16.0)),
        &[],
        dir.path(),
    );
    assert_refused(&path, "llama.rope.scaling.yarn_beta_fast", false, 4);
}

#[test]
fn frequency_factor_tensor_on_an_architecture_without_them_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        &converted("qwen2"),
        |_| {},
        &[("rope_freqs.weight", vec![1.0; 8])],
        dir.path(),
    );
    assert_refused(&path, "tensor rope_freqs.weight", true, 4);
}

#[test]
fn block_count_below_the_blocks_in_the_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = altered(
        &converted("llama"),
        set("llama.block_count", Value::U32(1)),
        &[],
        dir.path(),
    );
    assert_refused(
        &path,
        "'llama.block_count': says 1 blocks, the tensors hold 2",
        false,
        3,
    );
    let r = run(&["inspect", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("NOT UNDERSTOOD  tensor blk.1.")),
        "{text}"
    );
}

fn inspect_rope(variant: &str) -> serde_json::Value {
    inspect(variant)["rope"].clone()
}

/// `inspect --json` of a converted model, which must be runnable.
fn inspect(variant: &str) -> serde_json::Value {
    let r = run(&["inspect", "--json", converted(variant).to_str().unwrap()]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let j: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert!(j["not_understood"].as_array().unwrap().is_empty(), "{j}");
    assert!(j["problem"].is_null(), "{j}");
    j
}

/// `inspect` says which layers are NoPE layers, how the blocks are built, and what it assumes where the file
/// is silent.
#[test]
fn inspect_reports_nope_layers_block_layouts_and_assumptions() {
    let smollm3 = inspect("smollm3");
    let types = smollm3["rope"]["layer_types"].as_array().unwrap();
    let nope: Vec<&serde_json::Value> = types.iter().filter(|t| t["nope"] == true).collect();
    assert_eq!(nope.len(), 1);
    assert_eq!(nope[0]["layers"], serde_json::json!([3, 7]));
    assert_eq!(nope[0]["rot_dim"], 0);
    let assumes = smollm3["assumptions"].as_array().unwrap();
    assert!(assumes[0].as_str().unwrap().contains("every 4th layer"));
    let olmo2 = inspect("olmo2")["block"].clone();
    assert_eq!(olmo2["norm_placement"], "post");
    assert_eq!(olmo2["qk_norm"], "projection");
    let gptneox = inspect("gptneox");
    assert_eq!(gptneox["block"]["norm"], "layer");
    assert_eq!(gptneox["block"]["residual"], "parallel");
    assert_eq!(gptneox["block"]["activation"], "gelu-erf");
    assert_eq!(gptneox["rope"]["rot_dim"], 8);
    let moe = inspect("qwen3-moe")["block"]["moe"].clone();
    assert_eq!(moe["n_experts"], 8);
    assert_eq!(moe["n_used"], 2);
    assert_eq!(moe["routing"]["softmax-top-k"]["normalize"], true);
    let gpt_oss = inspect("gpt-oss")["block"].clone();
    assert_eq!(gpt_oss["sinks"], true);
    assert_eq!(gpt_oss["moe"]["routing"], "top-k-softmax");
    assert_eq!(gpt_oss["activation"]["clamped-swiglu"]["limit"], 7.0);
    let gemma4 = inspect("gemma4")["rope"].clone();
    let global = gemma4["layer_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["layers"][0] == 2)
        .unwrap()
        .clone();
    assert_eq!(global["head_dim"], 32);
    assert_eq!(global["scaling"]["type"], "proportional");
    assert_eq!(global["scaling"]["rotated"], 4);
    assert_eq!(gemma4["layer_types"][0]["head_dim"], 16);
    assert_eq!(
        gemma4["kv_from"],
        serde_json::json!([null, null, null, 1, 1, 2])
    );
    let llama4 = inspect("llama4");
    let chunked = &llama4["rope"]["layer_types"][0];
    assert_eq!(chunked["layers"], serde_json::json!([0, 2]));
    assert_eq!(chunked["chunk"], 8192);
    let nope = llama4["rope"]["layer_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["nope"] == true)
        .unwrap()
        .clone();
    assert_eq!(nope["layers"], serde_json::json!([3]));
    assert_eq!(nope["temperature"]["floor"], 8192.0);
    assert_eq!(nope["experts"], true);
    assert_eq!(llama4["block"]["moe"]["routing"], "top-k-sigmoid");
    assert_eq!(llama4["block"]["moe"]["weights_input"], true);
    let deepseek3 = inspect("deepseek3")["block"].clone();
    assert_eq!(deepseek3["mla"]["kv_lora_rank"], 20);
    assert_eq!(deepseek3["mla"]["q_lora_rank"], 32);
    let grouped = &deepseek3["moe"]["routing"]["sigmoid-grouped"];
    assert_eq!(grouped["groups"], 4);
    assert_eq!(grouped["groups_used"], 2);
    assert_eq!(deepseek3["moe"]["scale"], 2.5);
    assert!(inspect("deepseek2")["block"]["mla"]["q_lora_rank"].is_null());
    assert_eq!(inspect("granite")["block"]["logit_scale"]["divide"], 8.0);
    assert_eq!(inspect("cohere2")["block"]["logit_scale"]["multiply"], 0.25);
    assert!(inspect("llama")["assumptions"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// HF's float64 inverse frequencies of a layer type, from the fixture's meta.json.
fn hf_inv_freq(variant: &str, case: &str, layer_type: &str, key: &str) -> Vec<f64> {
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(paths::fixture(&format!(
            "converted/{variant}/{case}/meta.json"
        )))
        .unwrap(),
    )
    .unwrap();
    meta["rope"][layer_type][key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Relative agreement of inspect's frequencies (printed with serde's shortest round-trip form) with HF's.
const INV_FREQ_REL: f64 = 1e-15;

fn assert_close(ours: &[f64], theirs: &[f64]) {
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(theirs) {
        assert!((a - b).abs() <= INV_FREQ_REL * b.abs(), "{a} vs {b}");
    }
}

#[test]
fn inspect_reports_gemma3_4b_scaling_on_the_global_layer_only() {
    let rope = inspect_rope("gemma3-4b");
    assert_eq!(rope["query_pre_attn_scalar"], 24.0);
    let types = rope["layer_types"].as_array().unwrap();
    assert_eq!(types.len(), 2);
    let local = &types[0];
    assert_eq!(local["layers"], serde_json::json!([0, 1, 2, 3, 4]));
    assert_eq!(local["scaling"]["type"], "none");
    assert_eq!(local["window"], 16);
    assert_close(
        &floats(&local["inv_freq"]),
        &hf_inv_freq("gemma3-4b", "main", "sliding_attention", "inv_freq"),
    );
    let global = &types[1];
    assert_eq!(global["layers"], serde_json::json!([5]));
    assert_eq!(global["scaling"]["type"], "linear");
    assert_eq!(global["scaling"]["factor"], 8.0);
    assert!(global["window"].is_null());
    assert_close(
        &floats(&global["inv_freq"]),
        &hf_inv_freq("gemma3-4b", "main", "full_attention", "inv_freq"),
    );
}

#[test]
fn inspect_reports_longrope_short_and_long_frequencies() {
    let rope = inspect_rope("phi3-longrope");
    let t = &rope["layer_types"][0];
    assert_eq!(t["scaling"]["type"], "longrope");
    assert_eq!(t["long_above"], 32);
    assert_eq!(t["magnitude"], 1.3416407864998738);
    assert_close(
        &floats(&t["inv_freq"]),
        &hf_inv_freq("phi3-longrope", "long", "all", "short_inv_freq"),
    );
    assert_close(
        &floats(&t["inv_freq_long"]),
        &hf_inv_freq("phi3-longrope", "long", "all", "long_inv_freq"),
    );
}

#[test]
fn inspect_reports_llama3_parameters_recovered_from_rope_freqs() {
    let rope = inspect_rope("llama-llama3");
    let t = &rope["layer_types"][0];
    assert_eq!(t["scaling"]["type"], "llama3");
    assert_eq!(t["scaling"]["original_context"], 64);
    assert_eq!(t["scaling"]["factor"], 8.0);
    assert_close(
        &floats(&t["inv_freq"]),
        &hf_inv_freq("llama-llama3", "main", "all", "inv_freq"),
    );
}

#[test]
fn inspect_reports_gemma_query_scalars_by_size() {
    assert_eq!(inspect_rope("gemma2")["query_pre_attn_scalar"], 32.0);
    assert_eq!(inspect_rope("gemma2-27b")["query_pre_attn_scalar"], 8.0);
    assert!(inspect_rope("gemma")["query_pre_attn_scalar"].is_null());
}

/// Every converted variant, sorted.
pub(crate) fn converted_variants() -> Vec<String> {
    let root = paths::fixture("converted");
    let mut variants: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("model.gguf").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    variants.sort();
    variants
}

/// `scan --count 1 --length 64` on every converted model; its `chunk_frequency.npy` holds the frequencies HF
/// rotates by at that length (gemma3-4b's global layer scaled, phi3-longrope's long factors past 32 tokens,
/// Gemma 4's proportional global layers), and `meta.json` each layer's shape where layers differ (Gemma 4).
#[test]
fn scan_runs_on_every_converted_model_with_the_real_frequencies() {
    let variants = converted_variants();
    assert_eq!(variants.len(), 33, "{variants:?}");
    let tmp = tempfile::tempdir().unwrap();
    for v in &variants {
        let out = tmp.path().join(v);
        let r = run(&[
            "scan",
            converted(v).to_str().unwrap(),
            "--count",
            "1",
            "--length",
            "64",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            r.status.success(),
            "{v}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        assert!(out.join("summary.json").is_file() && out.join("report.html").is_file());
        let freqs = ropescope::io::npy::Array::read(&out.join("chunk_frequency.npy")).unwrap();
        let n_chunks = freqs.shape[1];
        let layer = |l: usize| freqs.to_f64()[l * n_chunks..(l + 1) * n_chunks].to_vec();
        match v.as_str() {
            "gemma3-4b" => {
                assert_close(
                    &layer(0),
                    &hf_inv_freq(v, "main", "sliding_attention", "inv_freq"),
                );
                assert_close(
                    &layer(5),
                    &hf_inv_freq(v, "main", "full_attention", "inv_freq"),
                );
            }
            "phi3-longrope" => {
                assert_close(&layer(1), &hf_inv_freq(v, "long", "all", "long_inv_freq"));
            }
            "llama-llama3" | "llama-yarn" | "qwen2-yarn" => {
                assert_close(&layer(0), &hf_inv_freq(v, "main", "all", "inv_freq"));
            }
            "olmo3" => {
                assert_close(
                    &layer(0),
                    &hf_inv_freq(v, "main", "sliding_attention", "inv_freq"),
                );
                assert_close(
                    &layer(3),
                    &hf_inv_freq(v, "main", "full_attention", "inv_freq"),
                );
            }
            "smollm3" => {
                assert_close(&layer(0), &hf_inv_freq(v, "main", "all", "inv_freq"));
                assert!(layer(3).iter().chain(&layer(7)).all(|g| g.is_nan()));
            }
            "gemma4" | "gemma4-31b" | "gemma4-moe" => {
                // Sliding layers: 8 chunks, padded with NaN to the global layers' 16; global layers: 4 turn,
                // 12 stay still (frequency 0, as HF's proportional inv_freq has them).
                let meta: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
                let m = &meta["model"];
                let global = |l: usize| m["windows"][l].is_null();
                let sliding = hf_inv_freq(v, "main", "sliding_attention", "inv_freq");
                assert_close(&layer(0)[..8], &sliding);
                assert!(layer(0)[8..].iter().all(|g| g.is_nan()));
                let first_global = (0..).find(|&l| global(l)).unwrap();
                assert_close(
                    &layer(first_global),
                    &hf_inv_freq(v, "main", "full_attention", "inv_freq"),
                );
                assert_eq!(m["head_dim"], 32, "{v}: the widest layer's");
                for l in 0..m["n_layers"].as_u64().unwrap() as usize {
                    assert_eq!(
                        m["head_dims"][l],
                        if global(l) { 32 } else { 16 },
                        "{v} L{l}"
                    );
                }
                if v != "gemma4" {
                    // Two key/value heads on sliding layers, one on global ones.
                    let kv: Vec<u64> = (m["kv_heads"].as_array().unwrap().iter())
                        .map(|x| x.as_u64().unwrap())
                        .collect();
                    assert!(
                        kv.iter().all(|&k| k == 1 || k == 2) && kv.contains(&1),
                        "{v}: {kv:?}"
                    );
                }
            }
            _ => {}
        }
    }
}

/// Every hyper-parameter rule, each on a converted model with one key altered: (variant, key, value, what the
/// error must say).
#[test]
fn every_hyper_parameter_rule_refuses_an_altered_header() {
    let nan = f32::NAN;
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        ("llama", "llama.block_count", Value::U32(0), "is 0"),
        (
            "llama",
            "llama.block_count",
            Value::U32(3),
            "says 3 blocks, the tensors hold 2",
        ),
        (
            "llama",
            "llama.block_count",
            Value::U64(1 << 40),
            "1099511627776 is above 4294967295",
        ),
        (
            "llama",
            "llama.embedding_length",
            Value::U32(0),
            "the width is 0",
        ),
        (
            "llama",
            "llama.feed_forward_length",
            Value::U32(0),
            "feed-forward width is 0",
        ),
        (
            "gemma",
            "gemma.attention.key_length",
            Value::U32(0),
            "0 is below 2",
        ),
        (
            "gemma",
            "gemma.attention.value_length",
            Value::U32(0),
            "value head dimension is 0",
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
            Value::F32(-1.0),
            "-1 is not a finite positive",
        ),
        (
            "llama",
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(nan),
            "NaN is not a finite positive",
        ),
        (
            "gemma2",
            "gemma2.attn_logit_softcapping",
            Value::F32(0.0),
            "0 is not a finite positive",
        ),
        (
            "gemma2",
            "gemma2.final_logit_softcapping",
            Value::F32(-30.0),
            "-30 is not a finite positive",
        ),
        (
            "gemma2",
            "gemma2.attention.sliding_window",
            Value::U32(0),
            "a window of 0 keys",
        ),
        (
            "llama-yarn",
            "llama.rope.scaling.original_context_length",
            Value::U32(0),
            "original context is 0",
        ),
        (
            "llama",
            "llama.rope.freq_base",
            Value::F32(0.0),
            "0 is not a finite positive",
        ),
        (
            "llama",
            "llama.rope.freq_base",
            Value::F32(-1e4),
            "-10000 is not a finite positive",
        ),
        (
            "llama",
            "llama.rope.freq_base",
            Value::F32(nan),
            "NaN is not a finite positive",
        ),
        (
            "llama",
            "llama.rope.freq_base",
            Value::F32(f32::INFINITY),
            "inf is not a finite positive",
        ),
        (
            "llama-linear",
            "llama.rope.scaling.factor",
            Value::F32(0.0),
            "0 is not a finite positive",
        ),
        (
            "gemma3",
            "gemma3.rope.freq_base_swa",
            Value::F32(nan),
            "NaN is not a finite positive",
        ),
    ];
    for (variant, key, value, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = altered(
            &converted(variant),
            set(key, value.clone()),
            &[],
            dir.path(),
        );
        let r = run(&[
            "reference",
            path.to_str().unwrap(),
            "--ids",
            "5,6,7",
            "--out",
            dir.path().join("o").to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(
            r.status.code(),
            Some(3),
            "{key} = {value:?}: a bad file is exit 3: {err}"
        );
        assert!(
            err.contains(key) && err.contains(needle),
            "{key} = {value:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

/// `reference --layers all` on 4096 tokens of SmolLM2 would keep about 72 GB of results: refused before any
/// work, saying what it needs, what is available and which options reduce it, with no output directory.
#[test]
fn reference_refuses_a_capture_larger_than_memory() {
    let model = paths::model(paths::SMOLLM2);
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<i64> = (0..4096).map(|i| 100 + (i * 37) % 40000).collect();
    let ids_path = dir.path().join("ids.npy");
    ropescope::io::npy::write(&ids_path, &[ids.len()], &ids).unwrap();
    let out = dir.path().join("o");
    let r = run(&[
        "reference",
        model.to_str().unwrap(),
        "--ids",
        ids_path.to_str().unwrap(),
        "--layers",
        "all",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(
        r.status.code(),
        Some(5),
        "not enough memory is exit 5: {err}"
    );
    assert!(
        err.contains("a 4096-token run needs about")
            && err.contains("MiB for the results it keeps")
            && err.contains("MiB are available; capture fewer layers (layers) or rows (rows)"),
        "{err}"
    );
    assert!(!out.exists());
}

/// `expert_count = 0` (written by some converters for dense models) is accepted; any other value is a mixture
/// of experts and refused.
#[test]
fn expert_count_zero_is_dense_and_other_values_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dense = altered(
        &converted("llama"),
        set("llama.expert_count", Value::U32(0)),
        &[],
        dir.path(),
    );
    let out = dir.path().join("o");
    let r = run(&[
        "reference",
        dense.to_str().unwrap(),
        "--ids",
        "5,6,7",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let dir = tempfile::tempdir().unwrap();
    let moe = altered(
        &converted("llama"),
        set("llama.expert_count", Value::U32(8)),
        &[],
        dir.path(),
    );
    assert_refused(&moe, "key llama.expert_count", true, 4);
}
