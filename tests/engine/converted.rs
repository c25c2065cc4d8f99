//! Every supported family and RoPE variant against HF transformers in float64, on files this repository did
//! not write: tiny random HF models converted to GGUF by llama.cpp's own `convert_hf_to_gguf.py`
//! (`fixtures/converted/`, made by `make_converted.py`; its README lists what each variant activates and shows
//! that switching the feature off moves attention by 0.03–1.0). Tolerances: `tests/support/src/fidelity.rs`.
//!
//! Each test is named after the pitfall it pins (the README's "RoPE variants" table lists them).

use ropescope::gguf::GgufFile;
use ropescope::io::npy::Array;
use ropescope::model::Model;
use ropescope_test_support::fidelity::{
    check_case_with, Case, F32Bars, F32_BARS, F64_ATTN_MAX_ABS, F64_LOGITS_REL_MAX_ABS,
};
use ropescope_test_support::paths;
use std::path::{Path, PathBuf};

fn variant_dir(variant: &str) -> PathBuf {
    paths::fixture(&format!("converted/{variant}"))
}

/// f32 bars of the two variants whose scores f32 itself cannot keep below NMSE 1e-10: `gemma2-27b` runs 46
/// layers and `gemma3-4b`'s scores reach 18 (ropescope's f32 scores NMSE up to 1.6e-10). gemma2-27b's attention
/// bar is HF's own float32 distance, as for every variant ([`check_variant_with`]): 4.6e-5, where ropescope's
/// f32 is at 2.4e-5.
const F32_BARS_DEEP: F32Bars = F32Bars {
    other_nmse: 1e-9,
    ..F32_BARS
};

/// gemma3-4b, the one variant where ropescope's f32 attention is further from float64 than HF's float32: 1.5e-5
/// against 1.1e-5, on the global layer whose scores reach 18 (it was 1.7e-5 before the residual stream was kept
/// in f64). The bar is the measured figure, so a regression still fails.
const F32_BARS_GEMMA3_4B: F32Bars = F32Bars {
    attn_max_abs: 1.5e-5,
    ..F32_BARS_DEEP
};

/// gemma4, where ropescope's f32 attention is further from float64 than HF's float32 on the last layer: 1.6e-5
/// against 9.0e-6 (layer 5, whose queries carry the stream's f32 rounding of five layers, NMSE 2.5e-12, into
/// scores up to 17; the earlier layers are within 1e-5). The bar is the measured figure, so a regression still
/// fails.
const F32_BARS_GEMMA4: F32Bars = F32Bars {
    attn_max_abs: 1.7e-5,
    ..F32_BARS
};

/// HF transformers' own float32 attention distance from float64 on `variant`: the largest over its cases and
/// captured layers (`fixtures/converted/HF_FLOAT32.json`, made by `hf_float32.py`).
fn hf_float32_attention(variant: &str) -> f64 {
    let text = std::fs::read_to_string(paths::fixture("converted/HF_FLOAT32.json")).unwrap();
    let all: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = all["variants"][variant]
        .as_object()
        .unwrap_or_else(|| panic!("{variant}: not in HF_FLOAT32.json"));
    cases
        .values()
        .flat_map(|layers| layers.as_object().unwrap().values())
        .map(|v| v.as_f64().unwrap())
        .fold(0.0, f64::max)
}

/// Both precisions on every case of a converted variant, f32 with the default bars.
fn check_variant(variant: &str) {
    check_variant_with(variant, F32_BARS);
}

/// The case directories of a variant, sorted.
fn cases_of(variant: &str) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(variant_dir(variant))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("meta.json").is_file())
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "{variant}: no case");
    cases
}

/// Copies the case file `name` from `from` to `to`, its q and k files (HF's adjacent pairs) reordered to
/// half-split order over each head's first `rot` dims (the whole head when `None`), as `reference` writes them.
fn interleaved_to_half_split(name: &str, from: &Path, to: &Path, rot: Option<usize>) {
    if !(name.starts_with('q') || name.starts_with('k')) {
        std::fs::copy(from, to).unwrap();
        return;
    }
    let a = Array::read(from).unwrap();
    let d = *a.shape.last().unwrap();
    let r = rot.unwrap_or(d);
    let half: Vec<f64> = a
        .to_f64()
        .chunks(d)
        .flat_map(|head| {
            let (rotated, rest) = head.split_at(r);
            let evens = rotated.iter().step_by(2);
            let odds = rotated.iter().skip(1).step_by(2);
            evens.chain(odds).chain(rest).copied().collect::<Vec<_>>()
        })
        .collect();
    ropescope::io::npy::write(to, &a.shape, &half).unwrap();
}

/// The cases of `variant` in the reference layout: the fixtures themselves, or copies under `dir` where HF lays q
/// and k out otherwise (adjacent pairs: cohere2, llama4, glm4; `[nope | rope]` heads: deepseek2, deepseek3).
pub(crate) fn cases_in_reference_layout(variant: &str, dir: &Path) -> Vec<PathBuf> {
    match variant {
        "deepseek2" | "deepseek3" => latent_attention_cases(variant, dir),
        "cohere2" | "llama4" | "glm4" => copied_cases(variant, dir, |name, from, to| {
            to_reference_layout(variant, name, from, to)
        }),
        _ => cases_of(variant),
    }
}

/// Copies the file `name` of a pass of `variant` from `from` to `to` in the reference layout.
fn to_reference_layout(variant: &str, name: &str, from: &Path, to: &Path) {
    match variant {
        "cohere2" | "llama4" => interleaved_to_half_split(name, from, to, None),
        "glm4" => interleaved_to_half_split(name, from, to, Some(8)),
        "deepseek2" | "deepseek3" => latent_to_reference_layout(name, from, to),
        _ => {
            std::fs::copy(from, to).unwrap();
        }
    }
}

/// Asserts that the router ids file `from` holds at least 4 distinct experts: routing that differs between tokens.
fn assert_routes_vary(name: &str, from: &Path) {
    let mut ids = Array::read(from).unwrap().to_i64().unwrap();
    ids.sort_unstable();
    ids.dedup();
    assert!(ids.len() >= 4, "{name}: experts {ids:?}");
}

/// Copies of `variant`'s case directories under `dir`: `file(name, from, to)` writes (or skips) each file.
fn copied_cases(
    variant: &str,
    dir: &Path,
    mut file: impl FnMut(&str, &Path, &Path),
) -> Vec<PathBuf> {
    cases_of(variant)
        .iter()
        .map(|case| {
            let copy = dir.join(case.file_name().unwrap());
            std::fs::create_dir(&copy).unwrap();
            for entry in std::fs::read_dir(case).unwrap() {
                let from = entry.unwrap().path();
                let name = from.file_name().unwrap().to_string_lossy().into_owned();
                file(&name, &from, &copy.join(&name));
            }
            copy
        })
        .collect()
}

/// Both precisions on every case of a converted variant, f32 with the bars `f32` except that the attention bar
/// is HF's own float32 distance where that is larger (smollm3 2.4e-5 at layer 7, olmo3 2.4e-5 at layer 3,
/// exaone4 1.5e-5; ropescope's f32 is within 1e-5 on all three): never further from float64 than HF's float32,
/// and within the bar wherever HF's float32 is.
fn check_variant_with(variant: &str, f32: F32Bars) {
    let bars = F32Bars {
        attn_max_abs: f32.attn_max_abs.max(hf_float32_attention(variant)),
        ..f32
    };
    check_cases(variant, &cases_of(variant), bars);
}

/// Both precisions of `variant`'s model on copies of its cases (reordered or trimmed as the test says), f32 held to
/// HF's own float32 distance where that is above the default bar.
fn check_copies(variant: &str, copies: &[PathBuf]) {
    let bars = F32Bars {
        attn_max_abs: F32_BARS.attn_max_abs.max(hf_float32_attention(variant)),
        ..F32_BARS
    };
    check_cases(variant, copies, bars);
}

/// Both precisions of `variant`'s model on the case directories `cases`.
fn check_cases(variant: &str, cases: &[PathBuf], f32: F32Bars) {
    let path = variant_dir(variant).join("model.gguf");
    let file = GgufFile::open(&path).unwrap();
    let m64 = Model::<f64>::load(&file).unwrap();
    for case in cases {
        check_case_with(&m64, &path, case, f32);
    }
    let m32 = Model::<f32>::load(&file).unwrap();
    for case in cases {
        check_case_with(&m32, &path, case, f32);
    }
}

#[test]
fn llama_plain_rope_with_adjacent_pairs_and_gqa() {
    check_variant("llama");
}

#[test]
fn llama3_scaling_from_rope_freqs_matches_hf_float64() {
    check_variant("llama-llama3");
}

#[test]
fn linear_scaling() {
    check_variant("llama-linear");
}

#[test]
fn yarn_ramp_and_magnitude_past_the_original_context() {
    check_variant("llama-yarn");
}

#[test]
fn yarn_on_qwen2_with_biases() {
    check_variant("qwen2-yarn");
}

#[test]
fn qwen2_biases_and_half_split_pairs() {
    check_variant("qwen2");
}

#[test]
fn qwen3_qk_norm_before_rope() {
    check_variant("qwen3");
}

#[test]
fn partial_rotary_frequencies_over_the_rotated_dims() {
    check_variant("phi3-partial");
}

#[test]
fn longrope_factors_chosen_by_sequence_length_with_attention_factor() {
    // Two cases: T = 32 (short factors) and T = 48 (long factors), original context 32.
    check_variant("phi3-longrope");
}

#[test]
fn gemma1_scale_by_head_dim_not_width_over_heads() {
    check_variant("gemma");
}

#[test]
fn gemma2_soft_caps_window_and_query_scalar() {
    check_variant("gemma2");
}

#[test]
fn gemma2_27b_query_pre_attn_scalar_is_width_over_heads() {
    check_variant_with("gemma2-27b", F32_BARS_DEEP);
}

#[test]
fn gemma3_head_dim_not_256_and_per_layer_type_bases() {
    check_variant("gemma3");
}

#[test]
fn gemma3_linear_scaling_on_global_layers_only() {
    check_cases("gemma3-4b", &cases_of("gemma3-4b"), F32_BARS_GEMMA3_4B);
}

/// SmolLM3: layers 3 and 7 of 8 rotate nothing (HF's `no_rope_layers`, which the converter does not write and
/// llama.cpp's loader assumes every 4th layer); rotating them moves their attention by up to 1.0.
#[test]
fn smollm3_nope_layers_rotate_nothing() {
    check_variant("smollm3");
}

/// OLMo 2: no pre-norms, post-norms on both blocks, QK-norm over each token's whole projection (a per-head norm
/// with the same gains moves attention by 0.98).
#[test]
fn olmo2_post_norms_and_qk_norm_over_the_whole_projection() {
    check_variant("olmo2");
}

/// OLMo 3 (GGUF `olmo2`): three sliding layers of four, YaRN on the global layer only.
#[test]
fn olmo3_sliding_pattern_and_yarn_on_global_layers_only() {
    check_variant("olmo3");
}

/// GPT-NeoX (Pythia): a quarter of each head rotates, attention and feed-forward in parallel, LayerNorm and
/// biases everywhere, GELU with the error function.
#[test]
fn gptneox_partial_rotation_parallel_blocks_and_layer_norm() {
    check_variant("gptneox");
}

/// Phi-2: 40% of each head rotates, one LayerNorm shared by the parallel attention and feed-forward blocks, an
/// output head with a bias.
#[test]
fn phi2_partial_rotation_and_shared_norm_parallel_blocks() {
    check_variant("phi2");
}

/// Granite: embedding, attention, residual and logit multipliers from the file.
#[test]
fn granite_multipliers() {
    check_variant("granite");
}

/// EXAONE 4.0 (hybrid, as the 32B model): sliding layers rotate, global layers are NoPE layers; no pre-norms,
/// post-norms, QK-norm per head.
#[test]
fn exaone4_sliding_rope_layers_and_global_nope_layers() {
    check_variant("exaone4");
}

/// The same hybrid in 64 layers, the only layer count for which llama.cpp applies it.
#[test]
fn exaone4_at_the_32b_layer_count() {
    check_variant("exaone4-32b");
}

/// Cohere 2 (Command R7B): sliding layers rotate adjacent pairs, the global layer is a NoPE layer, one bias-free
/// LayerNorm feeds parallel attention and feed-forward blocks, logits × `logit_scale`. HF computes q and k in
/// Cohere's adjacent order and `reference` writes every model's in half-split order (chunk `l` = dims
/// `(l, l + d/2)`), so the case's q and k files are reordered the same way (into a copy) before the comparison.
#[test]
fn cohere2_adjacent_pairs_nope_global_layers_and_parallel_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let copies = cases_in_reference_layout("cohere2", tmp.path());
    check_copies("cohere2", &copies);
}

/// Qwen 3 MoE: 8 experts, 2 per token, the chosen weights renormalised; the router picks different experts for
/// different tokens (the case's `router_ids_L{l}.npy`, which `reference` does not write: the comparison reads a
/// copy of the case without them, after checking that they hold at least 4 distinct experts per layer).
#[test]
fn qwen3_moe_routes_tokens_to_their_top_two_experts() {
    let tmp = tempfile::tempdir().unwrap();
    let copies = copied_cases("qwen3-moe", tmp.path(), |name, from, to| {
        if name.starts_with("router_ids_") {
            assert_routes_vary(name, from);
        }
        if !name.starts_with("router_") {
            std::fs::copy(from, to).unwrap();
        }
    });
    check_copies("qwen3-moe", &copies);
}

/// GPT-OSS: every head's sink takes a share of each row (the case's `sink_L{l}.npy`, `[H, T]`, compared as the
/// sink column `reference` writes, `[H, T, 1]`; at least a tenth of the rows give it more than 5%); sliding and
/// global layers alternate; YaRN's ramp between unrounded ends; the router takes the top 2 of its biased logits
/// and weights them by a softmax over those two (at least 4 distinct experts per layer); the experts' clamped
/// SwiGLU with biases; biases on Q, K, V and the output.
#[test]
fn gpt_oss_sinks_unrounded_yarn_and_clamped_experts() {
    let tmp = tempfile::tempdir().unwrap();
    let copies = copied_cases("gpt-oss", tmp.path(), |name, from, to| {
        if name.starts_with("router_ids_") {
            assert_routes_vary(name, from);
        } else if name.starts_with("sink_") {
            let a = Array::read(from).unwrap();
            let mass = a.to_f64();
            let taken = mass.iter().filter(|&&m| m > 0.05).count();
            assert!(
                taken * 10 >= mass.len(),
                "{name}: {taken} rows of {}",
                mass.len()
            );
            let column = [a.shape.clone(), vec![1]].concat();
            ropescope::io::npy::write(to, &column, &mass).unwrap();
        } else if !name.starts_with("router_") {
            std::fs::copy(from, to).unwrap();
        }
    });
    check_copies("gpt-oss", &copies);
}

/// Gemma 4 (E2B/E4B style): sliding layers with heads of 16 rotating whole, global layers with heads of 32
/// where proportional RoPE rotates 4 of 16 chunks (dims 0–3 and 16–19, at `1e6^(−2l/32)`) and the rest pass
/// through; per-layer inputs; layers 3–5 attend over the keys and values of layers 1 and 2; wider feed-forward
/// blocks there; values normed without gains; a per-layer scale of the stream; logits soft-capped.
#[test]
fn gemma4_proportional_rope_shared_keys_and_per_layer_inputs() {
    check_variant_with("gemma4", F32_BARS_GEMMA4);
}

/// Gemma 4 (31B style): the global layers take their values from their keys' projection and have one key/value
/// head where the sliding layers have two (a per-layer `head_count_kv`).
#[test]
fn gemma4_31b_keys_as_values_and_per_layer_kv_heads() {
    check_variant("gemma4-31b");
}

/// Llama 4: layers 0–2 rotate adjacent pairs with Llama 3 scaling, norm q and k per head without gains and attend
/// within chunks; layer 3 is a NoPE layer with full attention and the attention temperature; layers 1 and 3 are
/// mixtures of experts (sigmoid weights on the chosen experts' inputs, a shared expert). The fixture's chunk (16)
/// and temperature step (8) are HF's settings the file cannot state: the model is loaded as the file says (Scout's
/// 8192 for both, as llama.cpp) and given those two numbers, the only change.
#[test]
fn llama4_chunked_rope_layers_nope_temperature_and_input_weighted_experts() {
    let tmp = tempfile::tempdir().unwrap();
    let copies = copied_cases("llama4", tmp.path(), |name, from, to| {
        if name.starts_with("router_ids_") {
            assert_routes_vary(name, from);
        }
        if !name.starts_with("router_") {
            interleaved_to_half_split(name, from, to, None);
        }
    });
    let path = variant_dir("llama4").join("model.gguf");
    let file = GgufFile::open(&path).unwrap();
    let bars = F32Bars {
        attn_max_abs: F32_BARS.attn_max_abs.max(hf_float32_attention("llama4")),
        ..F32_BARS
    };
    let mut m64 = Model::<f64>::load(&file).unwrap();
    assert!(m64.config.layers[3].temperature.is_some() && m64.config.layers[0].chunk == Some(8192));
    with_llama4_hf_settings(&mut m64);
    let mut m32 = Model::<f32>::load(&file).unwrap();
    with_llama4_hf_settings(&mut m32);
    for case in &copies {
        check_case_with(&m64, &path, case, bars);
        check_case_with(&m32, &path, case, bars);
    }
}

/// The llama4 fixture's model given HF's chunk (16) and temperature step (8), which the file cannot state (it is
/// loaded with Scout's 8192 for both, as llama.cpp).
pub(crate) fn with_llama4_hf_settings<T: ropescope::numeric::Real>(m: &mut Model<T>) {
    let hf: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(variant_dir("llama4").join("hf_config.json")).unwrap(),
    )
    .unwrap();
    let chunk = hf["attention_chunk_size"].as_u64().unwrap() as usize;
    let floor = hf["floor_scale"].as_f64().unwrap();
    assert_eq!((chunk, floor), (16, 8.0));
    for layer in &mut m.config.layers {
        if layer.chunk.is_some() {
            layer.chunk = Some(chunk);
        }
        if let Some(t) = &mut layer.temperature {
            t.floor = floor;
        }
    }
}

/// Copies of a DeepSeek variant's cases under `dir` as `reference` writes them (`latent_to_reference_layout`); its
/// routers choose at least 4 distinct experts per layer.
fn latent_attention_cases(variant: &str, dir: &Path) -> Vec<PathBuf> {
    copied_cases(variant, dir, |name, from, to| {
        if name.starts_with("router_ids_") {
            assert_routes_vary(name, from);
        }
        latent_to_reference_layout(name, from, to)
    })
}

/// Copies the DeepSeek case file `name` from `from` to `to` as `reference` writes it: the case's q and k are HF's
/// per head `[nope | rope]` with the rope part (`ROPE` dims) in adjacent order, `reference` writes `[rope | nope]`
/// (the rotated part first, half-split). The case's routers, latent and shared key part (`router_*`, `k_rope_*`)
/// are not among `reference`'s quantities and are skipped (HF's shared rotated key part is every head's k_pre
/// rotated part, which is compared).
fn latent_to_reference_layout(name: &str, from: &Path, to: &Path) {
    const ROPE: usize = 8;
    if name.starts_with("router_") || name.starts_with("k_rope_") {
        return;
    }
    if !(name.starts_with('q') || name.starts_with('k')) || name.starts_with("kv_latent_") {
        std::fs::copy(from, to).unwrap();
        return;
    }
    let a = Array::read(from).unwrap();
    let d = *a.shape.last().unwrap();
    let reordered: Vec<f64> = a
        .to_f64()
        .chunks(d)
        .flat_map(|head| {
            let (nope, rope) = head.split_at(d - ROPE);
            let evens = rope.iter().step_by(2);
            let odds = rope.iter().skip(1).step_by(2);
            evens.chain(odds).chain(nope).copied().collect::<Vec<_>>()
        })
        .collect();
    ropescope::io::npy::write(to, &a.shape, &reordered).unwrap();
}

/// DeepSeek-V2-Lite's layout: multi-head latent attention (each head's key and value decompressed from one normed
/// latent, one rotated key part shared by all heads), YaRN whose magnitude is in the score scale `(1 + 0.1 m ln
/// s)² / √20` rather than on cos and sin, layer 0 dense, then experts (softmax, top 2, not renormalised) beside two
/// shared experts.
#[test]
fn deepseek2_latent_attention_yarn_score_scale_and_shared_experts() {
    let tmp = tempfile::tempdir().unwrap();
    let copies = latent_attention_cases("deepseek2", tmp.path());
    check_copies("deepseek2", &copies);
}

/// DeepSeek V3's layout: queries through a normed rank-32 bottleneck; the router's sigmoids, the choice on them
/// plus a selection bias within the 2 best of 4 groups (a group scored by its two best), the top 3 renormalised
/// and scaled by 2.5; one shared expert.
#[test]
fn deepseek3_low_rank_queries_and_grouped_sigmoid_routing() {
    let tmp = tempfile::tempdir().unwrap();
    let copies = latent_attention_cases("deepseek3", tmp.path());
    check_copies("deepseek3", &copies);
}

/// Gemma 4 (26B-A4B style): 8 experts (top 2) beside every dense feed-forward block, each through its own norms;
/// the router reads the residual stream normed without gains, times its own scale and `n_embd^−½`; the chosen
/// weights renormalised and multiplied by each expert's scale. Keys as values on the global layers.
#[test]
fn gemma4_moe_experts_beside_the_dense_block() {
    let tmp = tempfile::tempdir().unwrap();
    let copies = copied_cases("gemma4-moe", tmp.path(), |name, from, to| {
        if name.starts_with("router_ids_") {
            assert_routes_vary(name, from);
        }
        if !name.starts_with("router_") {
            std::fs::copy(from, to).unwrap();
        }
    });
    check_copies("gemma4-moe", &copies);
}

/// GLM-4: half of each head rotates, on adjacent pairs (HF interleaves its own cosines; the case's q and k are in
/// that order and are reordered as for cohere2, over the rotated dims only); pre- and post-norms, q/k/v biases,
/// fused gate and up.
#[test]
fn glm4_partial_rotation_on_adjacent_pairs() {
    let tmp = tempfile::tempdir().unwrap();
    let copies = cases_in_reference_layout("glm4", tmp.path());
    check_copies("glm4", &copies);
}

/// llama.cpp's converter writes Mistral as `llama` and drops its sliding window (16 here), so no reader of the
/// file can know it: rows before the window fills match HF, later rows do not. This pins the finding; if a
/// converter starts writing the window, the second assertion fails and the variant joins the others.
#[test]
fn mistral_matches_before_the_window_the_converter_drops() {
    const WINDOW: usize = 16;
    let dir = variant_dir("mistral");
    let path = dir.join("model.gguf");
    let file = GgufFile::open(&path).unwrap();
    assert!(file.get("llama.attention.sliding_window").is_none());
    let case_dir = dir.join("main");
    let case = Case::read(&case_dir);
    let model = Model::<f64>::load(&file).unwrap();
    let out = tempfile::tempdir().unwrap();
    ropescope::reference::write::write_reference(
        &model,
        &path,
        &case.ids,
        &ropescope::reference::write::ReferenceRequest {
            layers: case.layers.clone(),
            rows: case.rows.clone(),
            command: Vec::new(),
        },
        out.path(),
    )
    .unwrap();
    let read = |d: &std::path::Path, f: &str| Array::read(&d.join(f)).unwrap().to_f64();
    let (ours, theirs) = (
        read(out.path(), "logits.npy"),
        read(&case_dir, "logits.npy"),
    );
    let vocab = ours.len() / case.ids.len();
    let max_logit = theirs.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let diff = |rows: std::ops::Range<usize>| {
        rows.flat_map(|r| r * vocab..(r + 1) * vocab)
            .map(|i| (ours[i] - theirs[i]).abs())
            .fold(0.0f64, f64::max)
    };
    assert!(
        diff(0..WINDOW) <= F64_LOGITS_REL_MAX_ABS * max_logit,
        "{}",
        diff(0..WINDOW)
    );
    assert!(diff(WINDOW..case.ids.len()) > 0.1 * max_logit);
    for &l in &case.layers {
        let f = format!("attn_L{l}.npy");
        let (a, b) = (read(out.path(), &f), read(&case_dir, &f));
        let t = case.ids.len();
        let worst = (0..a.len())
            .filter(|i| (i / t) % t < WINDOW)
            .map(|i| (a[i] - b[i]).abs())
            .fold(0.0f64, f64::max);
        assert!(worst <= F64_ATTN_MAX_ABS, "layer {l}: {worst:e}");
    }
}
