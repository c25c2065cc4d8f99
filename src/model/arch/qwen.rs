//! `qwen2` (biases on Q, K, V), `qwen3` (no biases; RMSNorm of each query and key head) and `qwen3moe` (Qwen 3
//! with a mixture of experts in place of every feed-forward block). Half-split RoPE, SiLU-gated feed-forward.
//! Biases are loaded whenever the file has them.
//!
//! Qwen 3 MoE renormalises the chosen experts' weights (HF's `norm_topk_prob`, true in every released
//! configuration); the converter writes no key for it and llama.cpp's loader always renormalises, as ropescope
//! does ([`super::assumptions`]).

use crate::error::{Error, Result};
use crate::gguf::Hparams;
use crate::model::config::{ModelConfig, Moe, QkNorm, Routing};

/// Configuration of a Qwen 2 (`qk_norm = false`) or Qwen 3 (`qk_norm = true`, per head) model.
pub fn config(mut base: ModelConfig, qk_norm: bool) -> ModelConfig {
    if qk_norm {
        base.qk_norm = QkNorm::PerHead;
    }
    base
}

/// Configuration of a Qwen 3 MoE model: Qwen 3 with `expert_count` experts per layer, `expert_used_count` per
/// token, each `expert_feed_forward_length` wide (`feed_forward_length / expert_used_count` when absent, as
/// llama.cpp reads it).
pub fn config_moe(base: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let mut c = config(base, true);
    let arch = &h.architecture;
    let count = |v: Option<usize>, key: &str| {
        v.filter(|&n| n > 0).ok_or_else(|| Error::BadValue {
            key: format!("{arch}.{key}"),
            problem: "is absent or 0 (a mixture of experts needs at least one)".into(),
        })
    };
    let n_experts = count(h.n_experts, "expert_count")?;
    let n_used = count(h.n_experts_used, "expert_used_count")?;
    if n_used > n_experts {
        return Err(Error::BadValue {
            key: format!("{arch}.expert_used_count"),
            problem: format!("{n_used} is above expert_count {n_experts}"),
        });
    }
    let n_ff = match h.n_ff_expert {
        Some(n) => n,
        None => c.n_ff / n_used,
    };
    c.moe = Some(Moe {
        n_experts,
        n_used,
        n_ff: count(Some(n_ff), "expert_feed_forward_length")?,
        routing: Routing::SoftmaxTopK { normalize: true },
    });
    Ok(c)
}
