//! `granite` (IBM Granite 3): the `llama` block (adjacent RoPE pairs from the converter's Q/K permutation) with
//! four multipliers from the file: `embedding_scale` on the token embeddings, `attention.scale` in place of
//! `head_dim^-1/2`, `residual_scale` on each block's output before the residual add, and `logit_scale`, which
//! divides the output logits (HF's `embedding_multiplier`, `attention_multiplier`, `residual_multiplier`,
//! `logits_scaling`).

use super::with_pairing;
use crate::gguf::Hparams;
use crate::model::config::{LogitScale, ModelConfig};
use crate::rope::Pairing;

/// Configuration of a Granite model.
pub fn config(base: ModelConfig, h: &Hparams) -> ModelConfig {
    let mut c = with_pairing(base, Pairing::Adjacent);
    c.embed_scale = h.embedding_scale;
    if let Some(s) = h.attention_scale {
        c.attn_scale = s;
    }
    c.residual_scale = h.residual_scale;
    c.logit_scale = h.logit_scale.map(LogitScale::Divide);
    c
}
