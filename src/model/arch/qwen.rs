//! `qwen2` (biases on Q, K, V), `qwen3` (no biases; RMSNorm of each query and key head) and `qwen3moe` (Qwen 3
//! with a mixture of experts in place of every feed-forward block). Half-split RoPE, SiLU-gated feed-forward.
//! Biases are loaded whenever the file has them.
//!
//! Qwen 3 MoE renormalises the chosen experts' weights (HF's `norm_topk_prob`, true in every released
//! configuration); the converter writes no key for it and llama.cpp's loader always renormalises, as ropescope
//! does ([`super::assumptions`]).

use crate::error::Result;
use crate::gguf::Hparams;
use crate::model::config::{ModelConfig, QkNorm, Routing};

/// Configuration of a Qwen 2 (`qk_norm = false`) or Qwen 3 (`qk_norm = true`, per head) model.
pub fn config(mut base: ModelConfig, qk_norm: bool) -> ModelConfig {
    if qk_norm {
        base.qk_norm = QkNorm::PerHead;
    }
    base
}

/// Configuration of a Qwen 3 MoE model: Qwen 3 with a mixture of experts in every layer, routed by a softmax
/// over every expert whose chosen weights are renormalised.
pub fn config_moe(base: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let mut c = config(base, true);
    let routing = Routing::SoftmaxTopK { normalize: true };
    c.moe = Some(super::moe::experts(h, c.n_ff, routing)?);
    Ok(c)
}
