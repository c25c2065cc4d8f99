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
//! DeepSeek V3's additions: low-rank queries (`attention.q_lora_rank`: `attn_q_a`, normed, then `attn_q_b`) and
//! its router (`expert_gating_func` 2): sigmoids, the choice on the sigmoids plus `exp_probs_b` within the best
//! `expert_group_used_count` of `expert_group_count` groups. Refused by name: groups with the softmax router
//! (DeepSeek V2's 236B, whose group rule HF and llama.cpp compute differently).

use super::with_pairing;
use crate::error::{Error, Result};
use crate::gguf::Hparams;
use crate::model::config::{Mla, ModelConfig, Moe, Routing};
use crate::rope::{Pairing, Scaling};

/// Configuration of a DeepSeek V2 or V3 model.
pub fn config(base: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let arch = &h.architecture;
    let refuse = |what: &str| Error::NotImplemented {
        what: what.into(),
        hint: "; DeepSeek-V2-Lite's and V3's routers run".into(),
    };
    let groups = h.expert_groups.unwrap_or(1).max(1);
    let normalize = h.expert_weights_norm.unwrap_or(false);
    let routing = match h.expert_gating_func.unwrap_or(1) {
        1 if groups > 1 => return Err(refuse("group-limited routing with the softmax router (expert_group_count)")),
        1 => Routing::SoftmaxTopK { normalize },
        2 => {
            let groups_used = h.expert_groups_used.unwrap_or(groups);
            let experts = h.n_experts.unwrap_or(0);
            if groups_used == 0 || groups_used > groups || !experts.is_multiple_of(groups) {
                return Err(Error::BadValue {
                    key: format!("{arch}.expert_group_used_count"),
                    problem: format!(
                        "{groups_used} of {groups} groups over {experts} experts (must be 1 to the group count, \
                         the groups dividing the experts)"
                    ),
                });
            }
            Routing::SigmoidGrouped {
                groups,
                groups_used,
                normalize,
            }
        }
        other => return Err(refuse(&format!("expert_gating_func {other}"))),
    };
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
    c.mla = Some(Mla {
        kv_lora_rank,
        q_lora_rank: h.q_lora_rank.filter(|&r| r > 0),
    });
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
    let moe = super::moe::experts(h, c.n_ff, routing)?;
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
