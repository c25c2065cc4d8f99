//! Architecture conventions: how each supported `general.architecture` maps GGUF metadata to a
//! [`ModelConfig`]. The forward pass itself is shared by all of them.

mod cohere2;
mod deepseek2;
mod exaone4;
pub mod gemma;
mod gemma4;
mod glm4;
mod gpt_oss;
mod gptneox;
mod granite;
pub mod keys;
mod llama;
mod llama4;
mod moe;
mod olmo2;
mod phi2;
mod phi3;
mod qwen;
pub mod rope;
mod smollm3;
pub mod validate;

use super::config::{
    Activation, FeedForward, LayerConfig, LayerRope, ModelConfig, Norm, QkNorm, Residual,
};
use crate::error::{Error, Result};
use crate::gguf::{GgufFile, Hparams};
use crate::rope::Pairing;

/// Architectures the engine runs.
pub const SUPPORTED: &[&str] = &[
    "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "smollm3", "olmo2",
    "gptneox", "phi2", "granite", "exaone4", "cohere2", "qwen3moe", "glm4", "gpt-oss", "gemma4", "llama4", "deepseek2",
];

/// Architectures whose norms are LayerNorms (epsilon `attention.layer_norm_epsilon`); the others use RMSNorm.
const LAYER_NORM: &[&str] = &["gptneox", "phi2", "cohere2"];

/// Architectures whose feed-forward block is plain, `down(act(up(x)))`; the others gate it (in one fused
/// `ffn_up.weight` where a block has no `ffn_gate.weight`: Phi-3).
pub const PLAIN_FEED_FORWARD: &[&str] = &["gptneox", "phi2"];

/// Architectures whose layers may differ in key/value heads and feed-forward width (per-layer arrays in the
/// file); the others are refused such a file.
const PER_LAYER_SHAPES: &[&str] = &["gemma4"];

/// Refuses per-layer key/value head counts or feed-forward widths that differ between layers.
fn refuse_per_layer_shapes(h: &Hparams) -> Result<()> {
    let arch = &h.architecture;
    let differs = |v: &[usize]| v.iter().any(|&x| Some(&x) != v.first());
    if h.kv_heads_per_layer.as_deref().is_some_and(differs) {
        return Err(Error::BadValue {
            key: format!("{arch}.attention.head_count_kv"),
            problem: format!("per-layer head counts that differ between layers are not supported for {arch}"),
        });
    }
    if h.n_ff_per_layer.as_deref().is_some_and(differs) {
        return Err(Error::BadValue {
            key: format!("{arch}.feed_forward_length"),
            problem: format!("per-layer widths that differ between layers are not supported for {arch}"),
        });
    }
    Ok(())
}

/// What the engine assumes for an architecture where the file states nothing (the converter writes no key for
/// it), each saying what llama.cpp's loader does where it differs. `inspect` prints these; the architecture table
/// (`docs/architectures.md`) lists them.
pub fn assumptions(arch: &str) -> &'static [&'static str] {
    match arch {
        "gemma2" => &[
            "query_pre_attn_scalar is n_embd / n_heads on a 46-layer model (Gemma 2 27B), else the head dimension \
             (as llama.cpp)",
            "layers 0, 2, 4, ... use the sliding window, odd layers are global (as llama.cpp)",
        ],
        "gemma3" => &[
            "query_pre_attn_scalar is n_embd / n_heads on a 62-layer model (Gemma 3 27B), else the head dimension \
             (as llama.cpp)",
            "without attention.sliding_window_pattern, every 6th layer is global and the others slide (as \
             llama.cpp)",
            "sliding layers use rope.freq_base_swa (10000 when absent) and no scaling (as llama.cpp)",
        ],
        "smollm3" => &["every 4th layer (3, 7, 11, ...) is a NoPE layer: no rotation (as llama.cpp's loader)"],
        "gptneox" => &[
            "the feed-forward activation is GELU with the error function (HF's `gelu` of every Pythia and \
             GPT-NeoX release; llama.cpp computes its tanh approximation instead)",
        ],
        "phi2" => &[
            "the feed-forward activation is GELU's tanh approximation (HF's `gelu_new` of Phi-2, as llama.cpp)",
        ],
        "olmo2" => &[
            "with attention.sliding_window and no attention.sliding_window_pattern, every 4th layer is global and \
             the others slide (as llama.cpp's loader)",
            "sliding layers use rope.freq_base_swa (the global base when absent) and no scaling (as llama.cpp)",
        ],
        "exaone4" => &[
            "with attention.sliding_window and no attention.sliding_window_pattern, every 4th layer is global and \
             the others slide (as llama.cpp's loader)",
            "the global layers of a file with a window are NoPE layers, as in HF; llama.cpp applies the window \
             and the NoPE layers to a 64-layer file only (EXAONE 4.0 32B) and rotates every layer of any other",
        ],
        "qwen3moe" => &[
            "the chosen experts' weights are renormalised to sum 1 (HF's norm_topk_prob of every Qwen 3 MoE \
             release; llama.cpp's loader does the same)",
        ],
        "deepseek2" => &[
            "RoPE pairs adjacent dims of the rotated part (the file's rows, as llama.cpp)",
            "YaRN's mscale equals the file's mscale_all_dim (yarn_log_multiplier), as llama.cpp: cos and sin keep \
             magnitude 1 and the score scale takes (1 + 0.1 m ln s)^2",
        ],
        "llama4" => &[
            "every 4th layer (3, 7, ...) is a NoPE layer with full attention and its queries multiplied by \
             1 + 0.1 ln(1 + floor((p + 1) / 8192)); the others attend within chunks of 8192 positions (Scout's \
             and Maverick's values, as llama.cpp's loader)",
            "queries and keys of the rotating layers are normed per head without gains, unless the model has 128 \
             experts (Maverick), as llama.cpp",
            "the router's top-k logits are weighted by their own sigmoids, which multiply the experts' inputs, and \
             a shared expert of the experts' width runs on every token (as HF and llama.cpp)",
        ],
        "gemma4" => &[
            "without attention.sliding_window_pattern, every 6th layer is global (HF's default)",
            "the last attention.shared_kv_layers layers attend over the keys and values of the last earlier layer \
             of their own kind (HF's rule; llama.cpp's L - S - 2 and L - S - 1 are the same layers in every \
             release)",
            "attention scale 1, values normed per head without gains, embeddings x sqrt(n_embd), GELU-tanh (as \
             HF and llama.cpp)",
        ],
        "gpt-oss" => &[
            "without attention.sliding_window_pattern, layers 0, 2, 4, ... slide and odd layers are global (as \
             llama.cpp's loader)",
            "YaRN's correction range is not rounded to whole chunks (HF's truncate false of every GPT-OSS release; \
             llama.cpp rounds it)",
            "the router weights the chosen experts by a softmax over their logits alone (as llama.cpp)",
            "the experts' SwiGLU clamps the gate above at 7 and the up projection to [-7, 7], with slope 1.702 (as \
             llama.cpp)",
        ],
        "cohere2" => &[
            "without attention.sliding_window_pattern, every 4th layer is global (and a NoPE layer) and the \
             others slide (as llama.cpp's loader; the converter writes no pattern)",
        ],
        _ => &[],
    }
}

/// Resolves the forward-pass configuration of `file`. An unsupported architecture is rejected before any
/// of its hyper-parameters are read; a key or tensor the architecture does not understand is refused
/// ([`keys::check`]).
pub fn resolve(file: &GgufFile) -> Result<ModelConfig> {
    let config = resolve_unchecked(file)?;
    keys::check(file)?;
    Ok(config)
}

/// [`resolve`] without refusing what the architecture does not understand: for `inspect`, which lists it
/// instead ([`keys::not_understood`]). Never run a model on this configuration.
pub fn resolve_unchecked(file: &GgufFile) -> Result<ModelConfig> {
    let arch = file.architecture()?;
    let configure: fn(ModelConfig, &Hparams) -> Result<ModelConfig> = match arch {
        "llama" | "mistral" => |c, _| Ok(llama::config(c)),
        "qwen2" => |c, _| Ok(qwen::config(c, false)),
        "qwen3" => |c, _| Ok(qwen::config(c, true)),
        "qwen3moe" => qwen::config_moe,
        "glm4" => |c, _| Ok(glm4::config(c)),
        "phi3" => |c, _| Ok(phi3::config(c)),
        "gemma" => |c, _| Ok(gemma::config_gemma(c)),
        "gemma2" => gemma::config_gemma2,
        "gemma3" => gemma::config_gemma3,
        "smollm3" => |c, _| Ok(smollm3::config(c)),
        "olmo2" => olmo2::config,
        "gptneox" => gptneox::config,
        "phi2" => |c, _| Ok(phi2::config(c)),
        "granite" => |c, h| Ok(granite::config(c, h)),
        "exaone4" => exaone4::config,
        "cohere2" => cohere2::config,
        "gpt-oss" => gpt_oss::config,
        "gemma4" => gemma4::config,
        "llama4" => llama4::config,
        "deepseek2" => deepseek2::config,
        other => {
            return Err(Error::BadValue {
                key: "general.architecture".into(),
                problem: format!(
                    "architecture '{other}' is not supported (supported: {})",
                    SUPPORTED.join(", ")
                ),
            })
        }
    };
    let h = Hparams::from_gguf(file)?;
    if !PER_LAYER_SHAPES.contains(&arch) {
        refuse_per_layer_shapes(&h)?;
    }
    validate::check(&h, file)?;
    let base = base_config(&h, file)?;
    configure(base, &h)
}

/// The architecture-independent part: sizes, the file's RoPE (base, rotated dims, scaling) on every layer,
/// half-split pairing, SiLU, the file's sliding window on every layer.
fn base_config(h: &Hparams, file: &GgufFile) -> Result<ModelConfig> {
    let arch = &h.architecture;
    let n_ff = h
        .n_ff
        .ok_or_else(|| Error::MissingKey(format!("{arch}.feed_forward_length")))?;
    let layer_norm = LAYER_NORM.contains(&arch.as_str());
    let (norm, eps, eps_key) = match layer_norm {
        true => (Norm::Layer, h.norm_eps, "layer_norm_epsilon"),
        false => (Norm::Rms, h.rms_eps, "layer_norm_rms_epsilon"),
    };
    let norm_eps = eps.ok_or_else(|| Error::MissingKey(format!("{arch}.attention.{eps_key}")))?;
    let vocab_size = match h.vocab_size {
        Some(v) => v,
        None => file
            .tensor("token_embd.weight")?
            .dims
            .get(1)
            .copied()
            .unwrap_or(0) as usize,
    };
    if vocab_size == 0 {
        return Err(Error::MissingKey("tokenizer.ggml.tokens".into()));
    }
    let rope = LayerRope {
        head_dim: h.head_dim,
        rot_dim: h.rope_dim,
        base: h.rope_base,
        pairing: Pairing::HalfSplit,
        scaling: rope::scaling(file, h)?,
    };
    // Phi-3's converter writes 0 for "no window" (Phi-4 and others); other families' 0 is refused by
    // `validate::RULES`.
    let window = h.sliding_window.filter(|&w| w > 0);
    let layer = |i: usize| LayerConfig {
        rope: rope.clone(),
        n_kv_heads: h.kv_heads_of(i),
        value_dim: h.value_dim,
        n_ff: h.n_ff_of(i).unwrap_or(n_ff),
        kv_from: None,
        experts: true,
        temperature: None,
        window,
        chunk: None,
    };
    Ok(ModelConfig {
        architecture: arch.clone(),
        n_layers: h.n_layers,
        n_embd: h.n_embd,
        n_ff,
        n_heads: h.n_heads,
        n_kv_heads: h.n_kv_heads,
        head_dim: h.head_dim,
        value_dim: h.value_dim,
        vocab_size,
        context_length: h.context_length,
        norm_eps,
        pairing: Pairing::HalfSplit,
        layers: (0..h.n_layers).map(layer).collect(),
        query_pre_attn_scalar: None,
        attn_scale: 1.0 / (h.head_dim as f64).sqrt(),
        attn_softcap: None,
        v_norm: false,
        keys_as_values: false,
        per_layer_input: None,
        mla: None,
        sinks: false,
        ffn_norm_tensor: "ffn_norm",
        final_softcap: None,
        embed_scale: None,
        activation: Activation::Silu,
        norm,
        residual: Residual::Sequential,
        feed_forward: match PLAIN_FEED_FORWARD.contains(&arch.as_str()) {
            true => FeedForward::Plain,
            false => FeedForward::Gated,
        },
        moe: None,
        residual_scale: None,
        logit_scale: None,
        qk_norm: QkNorm::None,
        pre_norms: true,
        post_norms: false,
        arithmetic: Default::default(),
    })
}

/// Sets the pairing of every layer's RoPE.
fn with_pairing(mut c: ModelConfig, pairing: Pairing) -> ModelConfig {
    c.pairing = pairing;
    for l in &mut c.layers {
        l.rope.pairing = pairing;
    }
    c
}

/// How the two layer kinds of a hybrid model rotate: the sliding layers with `sliding_base`, unscaled unless
/// `sliding_scaled`; the global layers with the file's RoPE, or not at all (`global_nope`).
struct Hybrid {
    sliding_base: f64,
    sliding_scaled: bool,
    global_nope: bool,
}

/// Makes the layers `sliding` marks sliding-window layers and the others global ones, rotating as `hybrid` says.
fn apply_hybrid(c: &mut ModelConfig, sliding: &[bool], hybrid: Hybrid) {
    for (layer, &slides) in c.layers.iter_mut().zip(sliding) {
        if slides {
            layer.rope.base = hybrid.sliding_base;
            if !hybrid.sliding_scaled {
                layer.rope.scaling = crate::rope::Scaling::None;
            }
        } else {
            layer.window = None;
            if hybrid.global_nope {
                layer.rope = layer.rope.clone().nope();
            }
        }
    }
}

/// A hybrid whose sliding layers rotate with the file's RoPE (`rope.freq_base_swa` when present) and whose
/// global layers are NoPE layers (EXAONE 4, Cohere 2): the file's pattern, else every `global_every`-th layer
/// global.
fn sliding_rope_global_nope(c: &mut ModelConfig, h: &Hparams, global_every: usize) -> Result<()> {
    let sliding = sliding_layers(h, |i| (i + 1) % global_every != 0)?;
    let hybrid = Hybrid {
        sliding_base: h.rope_base_swa.unwrap_or(h.rope_base),
        sliding_scaled: true,
        global_nope: true,
    };
    apply_hybrid(c, &sliding, hybrid);
    Ok(())
}

/// Which layers use the sliding window: the file's `attention.sliding_window_pattern` when present (one entry
/// per layer), else `default`. A model with sliding layers must state its window.
fn sliding_layers(h: &Hparams, default: impl Fn(usize) -> bool) -> Result<Vec<bool>> {
    let arch = &h.architecture;
    let sliding = match &h.sliding_window_pattern {
        Some(p) if p.len() != h.n_layers => {
            return Err(Error::BadValue {
                key: format!("{arch}.attention.sliding_window_pattern"),
                problem: format!(
                    "{} entries for {} layers (must be one entry per layer)",
                    p.len(),
                    h.n_layers
                ),
            })
        }
        Some(p) => p.clone(),
        None => (0..h.n_layers).map(default).collect(),
    };
    if sliding.iter().any(|&l| l) && h.sliding_window.is_none() {
        return Err(Error::MissingKey(format!(
            "{arch}.attention.sliding_window"
        )));
    }
    Ok(sliding)
}
