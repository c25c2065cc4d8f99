//! What a synthetic tensor holds, chosen by its name so that activations stay in the range of a trained model.
//!
//! The rule, for a model of `L` layers and width `d` (`fan_in` is a weight's `dims[0]`, the length it is
//! multiplied along):
//! - norm weights (`*norm.weight`, QK-norms included) are 1, so RMSNorm outputs have unit RMS (GGUF stores
//!   Gemma's `1 + w` already, so 1 is right for every family), and so is Gemma 4's scale of the whole stream
//!   after each layer (`layer_output_scale.weight`). Gemma 4 scores `q·k` without `1/√d_head`, so its QK-norm
//!   weights are `d_head^(−1/4)` instead, and its scores are those of the other families;
//! - token embeddings are N(0, 1/d), the usual initialisation (0.016 at d = 4096): a tied output head then gives
//!   logits of about N(0, 1), as an untied one does. The residual stream starts at RMS `r = 1/√d`, or `r = 1`
//!   in the Gemma family, which multiplies embeddings by `√d`;
//! - every other matrix is N(0, 1/fan_in), which keeps a unit-RMS input at unit RMS: queries and keys have unit
//!   entries, so attention logits `q·k/√d_head` are about N(0, 1) and attention is neither uniform nor one-hot.
//!   The fan-in is `dims[0]` but for DeepSeek's `attn_k_b`, whose product with the latent runs along `dims[1]`;
//! - the projections that write into the residual stream ([`STREAM_WRITERS`]: `attn_output`, `ffn_down`, and
//!   the experts' `ffn_down_exps` and `ffn_down_shexp`, whose outputs a mixture weighs into one) are further
//!   scaled by `r/√(kL)`, `k` the blocks adding to the stream in each layer (2, or 3 with Gemma 4's per-layer
//!   inputs), so the `kL` residual additions together add about the stream's own variance (GPT-2's
//!   initialisation): the stream's RMS stays between `r` and about `√2 r` through the depth, and no block's
//!   output swamps the token's embedding. Where post-norms normalise each block's output before the addition
//!   (`post_attention_norm`, `post_ffw_norm`: Gemma 2, 3 and 4; Gemma 4's per-layer input `post_norm`), their
//!   weights are `r/√(kL)` instead of 1, for the same effect. GPT-OSS's `post_attention_norm` is the
//!   feed-forward block's pre-norm under that name, and is 1;
//! - attention sinks (`attn_sinks.weight`, one logit per head) are N(0, 1), on the scale of the attention logits,
//!   so that a sink takes a share of each row as one more key would;
//! - biases are N(0, [`BIAS_STD`]²), those of the stream's writers scaled by `r/√(kL)` as their weights are;
//! - RoPE factor tensors (`rope_freqs.weight`, `rope_factors_*`) are not random: they are copied from the source
//!   file, or computed for a named shape.
//!
//! Any other one-dimensional tensor has no meaning ropescope knows how to fill, and is refused by name.

use crate::error::{Error, Result};

/// Standard deviation of synthetic biases.
pub const BIAS_STD: f32 = 0.1;

/// The projections whose outputs are added to the residual stream.
pub const STREAM_WRITERS: [&str; 4] =
    ["attn_output", "ffn_down", "ffn_down_exps", "ffn_down_shexp"];

/// How a synthetic tensor is filled.
#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    /// Independent N(0, std²) values.
    Gaussian {
        /// Standard deviation.
        std: f32,
    },
    /// Every value the same.
    Constant(f32),
    /// Given values, in ggml order.
    Values(Vec<f32>),
}

/// Whether `name` is a tensor of RoPE factors, whose values come from the model's definition, not from chance.
pub fn is_rope_factors(name: &str) -> bool {
    matches!(
        name,
        "rope_freqs.weight" | "rope_factors_long.weight" | "rope_factors_short.weight"
    )
}

/// What the fills of a model depend on besides a tensor's own name and shape.
#[derive(Clone, Copy, Debug)]
pub struct ModelScale {
    /// Layers, `L`.
    pub n_layers: usize,
    /// Residual width, `d`.
    pub n_embd: usize,
    /// Whether the forward pass multiplies embeddings by `√d` (the Gemma family).
    pub embeddings_scaled: bool,
    /// Whether `post_attention_norm` is the feed-forward block's pre-norm rather than a post-norm of the
    /// attention block's output (GPT-OSS, whose converter names it so).
    pub post_attention_norm_is_pre_norm: bool,
    /// Blocks adding to the residual stream in each layer, `k`: 2 (attention, feed-forward), 3 with Gemma 4's
    /// per-layer inputs (which the caller states).
    pub writers_per_layer: usize,
    /// Whether attention scores are `q·k` after QK-norms, without `1/√d_head` (Gemma 4).
    pub unscaled_scores: bool,
}

impl ModelScale {
    /// The scale of a model of architecture `arch` (`general.architecture`).
    pub fn new(arch: &str, n_layers: usize, n_embd: usize) -> Self {
        Self {
            n_layers,
            n_embd,
            // As `model::arch::gemma` does for `gemma`, `gemma2` and `gemma3`, and `gemma4` for Gemma 4.
            embeddings_scaled: arch.starts_with("gemma"),
            post_attention_norm_is_pre_norm: arch == "gpt-oss",
            writers_per_layer: 2,
            unscaled_scores: arch == "gemma4",
        }
    }

    /// RMS of the residual stream at the input, `r`.
    fn stream_rms(&self) -> f32 {
        if self.embeddings_scaled {
            1.0
        } else {
            1.0 / (self.n_embd.max(1) as f32).sqrt()
        }
    }
}

/// The fill of tensor `name` with ggml dims `dims` in a model of scale `model`, for every tensor but the RoPE
/// factors ([`is_rope_factors`]), which the caller supplies.
pub fn fill_for(name: &str, dims: &[u64], model: ModelScale) -> Result<Fill> {
    let along = match name.ends_with("attn_k_b.weight") {
        true => dims.get(1),
        false => dims.first(),
    };
    let fan_in = along.copied().unwrap_or(1).max(1) as f32;
    let additions = (model.writers_per_layer * model.n_layers).max(1);
    let residual_share = model.stream_rms() / (additions as f32).sqrt();
    let writes_stream = name
        .strip_suffix(".weight")
        .or_else(|| name.strip_suffix(".bias"))
        .is_some_and(|stem| STREAM_WRITERS.iter().any(|w| stem.ends_with(w)));
    let post_norm = match model.post_attention_norm_is_pre_norm {
        true => false,
        false => name.ends_with("post_attention_norm.weight"),
    };
    if post_norm || name.ends_with("post_ffw_norm.weight") || name.ends_with(".post_norm.weight") {
        return Ok(Fill::Constant(residual_share));
    }
    let qk_norm = name.ends_with("attn_q_norm.weight") || name.ends_with("attn_k_norm.weight");
    if qk_norm && model.unscaled_scores {
        return Ok(Fill::Constant(fan_in.powf(-0.25)));
    }
    if name.ends_with("norm.weight") || name.ends_with("layer_output_scale.weight") {
        return Ok(Fill::Constant(1.0));
    }
    if name.ends_with("attn_sinks.weight") {
        return Ok(Fill::Gaussian { std: 1.0 });
    }
    if name.ends_with(".bias") {
        let std = match writes_stream {
            true => BIAS_STD * residual_share,
            false => BIAS_STD,
        };
        return Ok(Fill::Gaussian { std });
    }
    if dims.len() < 2 {
        return Err(Error::Unsupported(format!(
            "tensor '{name}': synth does not know what a one-dimensional tensor of this name holds"
        )));
    }
    if name == "token_embd.weight" {
        return Ok(Fill::Gaussian {
            std: 1.0 / (model.n_embd.max(1) as f32).sqrt(),
        });
    }
    let mut std = 1.0 / fan_in.sqrt();
    if writes_stream {
        std *= residual_share;
    }
    Ok(Fill::Gaussian { std })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_writers_are_scaled_by_depth_and_stream() {
        let llama = ModelScale::new("llama", 32, 4096);
        let q = fill_for("blk.0.attn_q.weight", &[4096, 4096], llama).unwrap();
        let o = fill_for("blk.0.attn_output.weight", &[4096, 4096], llama).unwrap();
        let e = fill_for("token_embd.weight", &[4096, 128256], llama).unwrap();
        assert_eq!(q, Fill::Gaussian { std: 1.0 / 64.0 });
        assert_eq!(
            o,
            Fill::Gaussian {
                std: 1.0 / 64.0 / 8.0 / 64.0
            }
        );
        assert_eq!(e, Fill::Gaussian { std: 1.0 / 64.0 });
        let gemma = ModelScale::new("gemma2", 32, 4096);
        let o = fill_for("blk.0.ffn_down.weight", &[4096, 4096], gemma).unwrap();
        assert_eq!(
            o,
            Fill::Gaussian {
                std: 1.0 / 64.0 / 8.0
            }
        );
    }

    #[test]
    fn family_tensors_follow_the_rule() {
        let oss = ModelScale::new("gpt-oss", 2, 64);
        let share = (1.0 / 8.0) / 2.0;
        let f = |name: &str, dims: &[u64], scale| fill_for(name, dims, scale).unwrap();
        assert_eq!(
            f("blk.0.post_attention_norm.weight", &[64], oss),
            Fill::Constant(1.0)
        );
        assert_eq!(
            f("blk.0.attn_sinks.weight", &[8], oss),
            Fill::Gaussian { std: 1.0 }
        );
        assert_eq!(
            f("blk.0.attn_q.bias", &[8], oss),
            Fill::Gaussian { std: BIAS_STD }
        );
        assert_eq!(
            f("blk.0.ffn_down_exps.bias", &[64, 4], oss),
            Fill::Gaussian {
                std: BIAS_STD * share
            }
        );
        assert_eq!(
            f("blk.1.ffn_down_exps.weight", &[16, 64, 4], oss),
            Fill::Gaussian { std: share / 4.0 }
        );
        let deepseek = ModelScale::new("deepseek2", 2, 64);
        assert_eq!(
            f("blk.0.attn_k_b.weight", &[128, 16, 4], deepseek),
            Fill::Gaussian { std: 0.25 }
        );
        let gemma4 = ModelScale {
            writers_per_layer: 3,
            ..ModelScale::new("gemma4", 3, 64)
        };
        assert_eq!(
            f("blk.0.post_norm.weight", &[64], gemma4),
            Fill::Constant(1.0 / 3.0)
        );
        assert_eq!(
            f("blk.0.post_attention_norm.weight", &[64], gemma4),
            Fill::Constant(1.0 / 3.0)
        );
        assert_eq!(
            f("blk.0.layer_output_scale.weight", &[1], gemma4),
            Fill::Constant(1.0)
        );
        assert_eq!(
            f("blk.0.attn_k_norm.weight", &[256], gemma4),
            Fill::Constant(0.25)
        );
    }

    #[test]
    fn norms_are_one_and_unknown_vectors_are_refused() {
        assert_eq!(
            fill_for(
                "blk.3.attn_k_norm.weight",
                &[128],
                ModelScale::new("qwen3", 28, 2048)
            )
            .unwrap(),
            Fill::Constant(1.0)
        );
        let err = fill_for("blk.0.attn_gates", &[8], ModelScale::new("llama", 2, 8)).unwrap_err();
        assert!(err.to_string().contains("blk.0.attn_gates"), "{err}");
    }
}
