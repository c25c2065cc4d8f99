//! `deepseek2` (DeepSeek V2, V2-Lite; the converter writes V3 the same way): multi-head latent attention and a
//! mixture of experts with shared experts after the first `leading_dense_block_count` dense layers.
//!
//! Attention: each head's query (from `attn_q`) has an unrotated part and a rotated part of
//! `rope.dimension_count` dims; the keys' unrotated parts and the values are decompressed per head from one
//! latent (`attn_kv_a_mqa`, normed by `attn_kv_a_norm`; `attn_k_b`, `attn_v_b`), beside one rotated key part
//! shared by every head. RoPE pairs adjacent dims of the file's rows (the converter does not permute), YaRN
//! without magnitude on cos/sin; the score scale is `key_length_mla^−½ · (1 + 0.1 m ln s)²` with `m` the file's
//! `rope.scaling.yarn_log_multiplier / 0.1` in f32 (DeepSeek's `mscale_all_dim`, taken equal to `mscale` as
//! llama.cpp does). The router: softmax over every expert, the top `expert_used_count`, renormalised when
//! `expert_weights_norm`, multiplied by `expert_weights_scale`; the shared experts run as one block of
//! `expert_shared_count` times the experts' width.
//!
//! Refused by name: low-rank queries (`attention.q_lora_rank`, DeepSeek V3 and V2), sigmoid routing and expert
//! groups (V3).

use super::with_pairing;
use crate::error::{Error, Result};
use crate::gguf::Hparams;
use crate::model::config::{Mla, ModelConfig, Moe, Routing};
use crate::rope::{Pairing, Scaling};

/// Configuration of a DeepSeek V2 model with full-rank queries.
pub fn config(base: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let arch = &h.architecture;
    let refuse = |what: &str| Error::NotImplemented {
        what: what.into(),
        hint: "; DeepSeek-V2-Lite's layout (full-rank queries, softmax routing) runs".into(),
    };
    if h.q_lora_rank.is_some_and(|r| r > 0) {
        return Err(refuse("DeepSeek's low-rank queries (attention.q_lora_rank)"));
    }
    if h.expert_gating_func.is_some_and(|g| g != 1) {
        return Err(refuse("a router other than the softmax (expert_gating_func)"));
    }
    if h.expert_groups.is_some_and(|g| g > 1) {
        return Err(refuse("group-limited routing (expert_group_count above 1)"));
    }
    let missing = |key: &str| Error::MissingKey(format!("{arch}.{key}"));
    let kv_lora_rank = h.kv_lora_rank.ok_or_else(|| missing("attention.kv_lora_rank"))?;
    let head_dim = h.head_dim_mla.ok_or_else(|| missing("attention.key_length_mla"))?;
    let value_dim = h.value_dim_mla.ok_or_else(|| missing("attention.value_length_mla"))?;
    let r = h.rope_dim;
    if r % 2 == 1 || r > head_dim || kv_lora_rank == 0 || value_dim == 0 {
        return Err(Error::BadValue {
            key: format!("{arch}.rope.dimension_count"),
            problem: format!(
                "{r} rotated dims of heads of {head_dim} (must be even and at most the head), latent {kv_lora_rank}, \
                 values {value_dim}"
            ),
        });
    }
    let mut c = with_pairing(base, Pairing::Adjacent);
    c.mla = Some(Mla { kv_lora_rank });
    let mut scale = 1.0 / (head_dim as f64).sqrt();
    for layer in &mut c.layers {
        layer.rope.head_dim = head_dim;
        layer.rope.rot_dim = r;
        layer.n_kv_heads = c.n_heads;
        layer.value_dim = value_dim;
        if let Scaling::Yarn(y) = &mut layer.rope.scaling {
            if let Some(multiplier) = h.rope_scaling.yarn_log_multiplier {
                // The magnitude moves from cos and sin into the score scale.
                y.attention_factor = Some(1.0);
                let m = (multiplier as f32 / 0.1f32) as f64;
                let mscale = if y.factor <= 1.0 { 1.0 } else { 0.1 * m * y.factor.ln() + 1.0 };
                scale = 1.0 / (head_dim as f64).sqrt() * mscale * mscale;
            }
        }
    }
    (c.head_dim, c.value_dim, c.n_kv_heads) = (head_dim, value_dim, c.n_heads);
    c.attn_scale = scale;
    let dense = h.leading_dense.unwrap_or(0);
    let moe = super::moe::experts(h, c.n_ff, Routing::SoftmaxTopK {
        normalize: h.expert_weights_norm.unwrap_or(false),
    })?;
    c.moe = Some(Moe {
        n_ff_shared: h.n_experts_shared.filter(|&n| n > 0).map(|n| n * moe.n_ff),
        scale: h.expert_weights_scale.filter(|&s| s != 0.0).unwrap_or(1.0),
        ..moe
    });
    for (i, layer) in c.layers.iter_mut().enumerate() {
        layer.experts = i >= dense;
    }
    Ok(c)
}
