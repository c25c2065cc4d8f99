//! `gemma4` (Gemma 4's text decoder): sliding-window layers and global layers of different shapes. The sliding
//! layers rotate every pair of their heads (`key_length_swa`, base `rope.freq_base_swa`); the global layers have
//! wider heads (`key_length`), fewer key/value heads where the file gives one count per layer, and proportional
//! RoPE: only the first chunks rotate, at the frequencies `base^(−2l/d)` of the whole head, the rest pass through
//! (the p-RoPE of *Round and Round We Go!*, stated by `rope_freqs.weight`: 1 for a rotating chunk, 1e30 for the
//! others). A global layer without a value projection takes its values from its keys' projection.
//!
//! Around attention and the feed-forward block Gemma 2's pre- and post-norms, with gains as stored (no `1 + w`);
//! QK-norm per head, values normed per head without gains; attention scale 1; GELU-tanh; embeddings × √n_embd;
//! the final logits soft-capped. Where the file has them: per-layer inputs (PLE), added after the feed-forward
//! block; a per-layer scale of the whole stream; the last `attention.shared_kv_layers` layers attend over the keys
//! and values of the last earlier layer of their own kind (HF's rule; llama.cpp takes layer `L − S − 2` for a
//! sliding and `L − S − 1` for a global one, the same layers in every release). The 26B-A4B adds experts beside
//! every dense feed-forward block ([`crate::model::config::Moe::beside_dense`]): a softmax router on the residual
//! stream, the top-k renormalised and multiplied by each expert's scale.

use crate::error::{Error, Result};
use crate::gguf::Hparams;
use crate::model::config::{Activation, ModelConfig, Moe, QkNorm, Routing};
use crate::rope::Scaling;

/// A `rope_freqs.weight` divisor at least this large marks a chunk that does not rotate (the converter writes
/// 1e30; dividing by it would leave angles of `T · 1e−30` rad where HF's are exactly 0).
pub const NOT_ROTATED_MARKER: f64 = 1e29;

/// Every 6th layer is global when the file states no pattern (HF's `Gemma4TextConfig` default).
pub const GEMMA4_GLOBAL_EVERY: usize = 6;

/// Configuration of a Gemma 4 text decoder.
pub fn config(mut c: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let arch = &h.architecture;
    if h.n_experts.is_some_and(|n| n > 0) {
        let routing = Routing::SoftmaxTopK { normalize: true };
        c.moe = Some(Moe {
            beside_dense: true,
            ..super::moe::experts(h, c.n_ff, routing)?
        });
    }
    c.activation = Activation::GeluTanh;
    c.embed_scale = Some((c.n_embd as f64).sqrt());
    c.qk_norm = QkNorm::PerHead;
    c.v_norm = true;
    c.keys_as_values = true;
    c.post_norms = true;
    c.attn_scale = 1.0;
    c.final_softcap = h.final_softcap;
    c.per_layer_input = h.per_layer_input.filter(|&p| p > 0);
    let sliding = super::sliding_layers(h, |i| (i + 1) % GEMMA4_GLOBAL_EVERY != 0)?;
    let global_scaling = proportional(&c.layers[0].rope.scaling, arch)?;
    let head_dim_swa = h.head_dim_swa.unwrap_or(h.head_dim);
    for (layer, &slides) in c.layers.iter_mut().zip(&sliding) {
        if slides {
            layer.rope.head_dim = head_dim_swa;
            layer.rope.rot_dim = h.rope_dim_swa.unwrap_or(head_dim_swa);
            layer.rope.base = h.rope_base_swa.unwrap_or(super::gemma::GEMMA3_LOCAL_ROPE_BASE);
            layer.rope.scaling = Scaling::None;
            layer.value_dim = h.value_dim_swa.unwrap_or(head_dim_swa);
        } else {
            layer.rope.scaling = global_scaling.clone();
            layer.window = None;
        }
        if layer.rope.rot_dim > layer.rope.head_dim || layer.rope.rot_dim % 2 == 1 {
            return Err(Error::BadValue {
                key: format!("{arch}.rope.dimension_count_swa"),
                problem: format!(
                    "{} rotated dimensions on heads of {} (must be even and at most the head dimension)",
                    layer.rope.rot_dim, layer.rope.head_dim
                ),
            });
        }
    }
    let n = c.layers.len();
    let shared = h.shared_kv_layers.unwrap_or(0);
    if shared >= n && shared > 0 {
        return Err(Error::BadValue {
            key: format!("{arch}.attention.shared_kv_layers"),
            problem: format!("{shared} of {n} layers (at least one layer must have its own keys)"),
        });
    }
    for l in n - shared..n {
        let source = (0..n - shared).rev().find(|&j| sliding[j] == sliding[l]);
        c.layers[l].kv_from = Some(source.ok_or_else(|| Error::BadValue {
            key: format!("{arch}.attention.shared_kv_layers"),
            problem: format!(
                "layer {l} reuses keys and values, and no earlier layer of its kind has its own"
            ),
        })?);
    }
    let first = &c.layers[0];
    (c.head_dim, c.value_dim, c.n_kv_heads, c.n_ff) = (
        first.head_dim(),
        first.value_dim,
        first.n_kv_heads,
        first.n_ff,
    );
    Ok(c)
}

/// The global layers' proportional RoPE from the per-chunk divisors of `rope_freqs.weight` (`scaling`): 1 on the
/// rotating chunks, then [`NOT_ROTATED_MARKER`] or more on the others. Any other scaling is refused by name.
fn proportional(scaling: &Scaling, arch: &str) -> Result<Scaling> {
    let refuse = |what: String| Error::NotImplemented {
        what,
        hint: format!("; {arch} rotates its global layers by proportional RoPE only"),
    };
    match scaling {
        Scaling::None => Ok(Scaling::None),
        Scaling::Factors { factors } => {
            let rotated = factors.iter().take_while(|&&f| f == 1.0).count();
            match factors[rotated..].iter().all(|&f| f >= NOT_ROTATED_MARKER) {
                true => Ok(Scaling::Proportional { rotated }),
                false => Err(refuse(format!(
                    "tensor rope_freqs.weight with divisors other than 1 then {NOT_ROTATED_MARKER:e} or more"
                ))),
            }
        }
        other => Err(refuse(format!("RoPE scaling '{}'", other.name()))),
    }
}
