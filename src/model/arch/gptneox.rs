//! `gptneox` (GPT-NeoX, Pythia): LayerNorm with biases, attention and feed-forward in parallel on the block's
//! input (`use_parallel_residual`, sequential when the file says `false`), fused `attn_qkv` with biases
//! (the converter reorders HF's per-head `[q, k, v]` rows into all queries, all keys, all values), biases on
//! the output projection and the plain feed-forward block (`down(gelu(up(x)))`), half-split RoPE over the first
//! `rope.dimension_count` dims of each head (Pythia: 25%), no GQA, untied output.
//!
//! The file does not name the activation: HF's `GPTNeoXConfig` of every release uses `gelu`, the error-function
//! GELU, which the engine applies ([`super::assumptions`]); llama.cpp computes the tanh approximation instead.

use crate::error::Result;
use crate::gguf::Hparams;
use crate::model::config::{Activation, ModelConfig, Residual};

/// Configuration of a GPT-NeoX model.
pub fn config(mut c: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    c.residual = match h.parallel_residual {
        Some(false) => Residual::Sequential,
        _ => Residual::Parallel,
    };
    c.activation = Activation::GeluErf;
    Ok(c)
}
