//! The mixture-of-experts settings every MoE architecture reads the same way: `expert_count` experts per layer,
//! `expert_used_count` per token, each `expert_feed_forward_length` wide (`feed_forward_length /
//! expert_used_count` when absent, as llama.cpp reads it). The routing rule is the architecture's: no file states
//! it.

use crate::error::{Error, Result};
use crate::gguf::Hparams;
use crate::model::config::{Moe, Routing};

/// The mixture of experts `h` describes, routed by `routing`; `n_ff` is the file's `feed_forward_length`.
pub fn experts(h: &Hparams, n_ff: usize, routing: Routing) -> Result<Moe> {
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
    let n_ff = h.n_ff_expert.unwrap_or(n_ff / n_used);
    Ok(Moe {
        n_experts,
        n_used,
        n_ff: count(Some(n_ff), "expert_feed_forward_length")?,
        routing,
        weights_input: false,
        n_ff_shared: None,
        scale: 1.0,
        beside_dense: false,
    })
}
