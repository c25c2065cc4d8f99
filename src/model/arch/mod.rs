//! Architecture conventions: how each supported `general.architecture` maps GGUF metadata to a
//! [`ModelConfig`]. The forward pass itself is shared by all of them.

mod gemma;
mod llama;
mod phi3;
mod qwen;

use super::config::{Activation, LayerConfig, ModelConfig};
use crate::error::{Error, Result};
use crate::gguf::{GgufFile, Hparams};
use crate::rope::{Pairing, RopeSpec};

/// Architectures the engine runs.
pub const SUPPORTED: &[&str] = &[
    "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3",
];

/// Resolves the forward-pass configuration of `file`. An unsupported architecture is rejected before any
/// of its hyper-parameters are read.
pub fn resolve(file: &GgufFile) -> Result<ModelConfig> {
    let arch = file.architecture()?;
    let configure: fn(ModelConfig, &Hparams) -> ModelConfig = match arch {
        "llama" | "mistral" => |c, _| llama::config(c),
        "qwen2" => |c, _| qwen::config(c, false),
        "qwen3" => |c, _| qwen::config(c, true),
        "phi3" => |c, _| phi3::config(c),
        "gemma2" => gemma::config_gemma2,
        "gemma3" => |c, _| gemma::config_gemma3(c),
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
    let base = base_config(&h, file)?;
    Ok(configure(base, &h))
}

/// The architecture-independent part: sizes, global RoPE with the file's base, half-split pairing, SiLU.
fn base_config(h: &Hparams, file: &GgufFile) -> Result<ModelConfig> {
    let arch = &h.architecture;
    let n_ff = h
        .n_ff
        .ok_or_else(|| Error::MissingKey(format!("{arch}.feed_forward_length")))?;
    let norm_eps = h
        .rms_eps
        .ok_or_else(|| Error::MissingKey(format!("{arch}.attention.layer_norm_rms_epsilon")))?;
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
    let rope = RopeSpec {
        head_dim: h.head_dim,
        rot_dim: h.rope_dim,
        base: h.rope_base,
        pairing: Pairing::HalfSplit,
    };
    let layer = LayerConfig {
        rope,
        rope_base: h.rope_base,
        window: h.sliding_window,
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
        layers: vec![layer; h.n_layers],
        attn_scale: 1.0 / (h.head_dim as f64).sqrt(),
        attn_softcap: None,
        final_softcap: None,
        embed_scale: None,
        activation: Activation::Silu,
        qk_norm: false,
        post_norms: false,
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
