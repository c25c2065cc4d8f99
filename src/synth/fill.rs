//! What a synthetic tensor holds, chosen by its name so that activations stay in the range of a trained model.
//!
//! The rule, for a model of `L` layers and width `d` (`fan_in` is a weight's `dims[0]`, the length it is
//! multiplied along):
//! - norm weights (`*norm.weight`, QK-norms included) are 1, so RMSNorm outputs have unit RMS (GGUF stores
//!   Gemma's `1 + w` already, so 1 is right for every family);
//! - token embeddings are N(0, 1/d), the usual initialisation (0.016 at d = 4096): a tied output head then gives
//!   logits of about N(0, 1), as an untied one does. The residual stream starts at RMS `r = 1/√d`, or `r = 1`
//!   in the Gemma family, which multiplies embeddings by `√d`;
//! - every other matrix is N(0, 1/fan_in), which keeps a unit-RMS input at unit RMS: queries and keys have unit
//!   entries, so attention logits `q·k/√d_head` are about N(0, 1) and attention is neither uniform nor one-hot;
//! - the two projections that write into the residual stream (`attn_output`, `ffn_down`) are further scaled by
//!   `r/√(2L)`, so the `2L` residual additions together add about the stream's own variance (GPT-2's
//!   initialisation): the stream's RMS stays between `r` and about `√2 r` through the depth, and no block's
//!   output swamps the token's embedding. Where post-norms normalise each block's output before the addition
//!   (`post_attention_norm`, `post_ffw_norm`: Gemma 2 and 3), their weights are `r/√(2L)` instead of 1, for the
//!   same effect;
//! - biases are N(0, [`BIAS_STD`]²);
//! - RoPE factor tensors (`rope_freqs.weight`, `rope_factors_*`) are not random: they are copied from the source
//!   file, or computed for a named shape.
//!
//! Any other one-dimensional tensor has no meaning ropescope knows how to fill, and is refused by name.

use crate::error::{Error, Result};

/// Standard deviation of synthetic biases.
pub const BIAS_STD: f32 = 0.1;

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
}

impl ModelScale {
    /// The scale of a model of architecture `arch` (`general.architecture`).
    pub fn new(arch: &str, n_layers: usize, n_embd: usize) -> Self {
        Self {
            n_layers,
            n_embd,
            // As `model::arch::gemma` does for `gemma`, `gemma2` and `gemma3`.
            embeddings_scaled: arch.starts_with("gemma"),
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
    let fan_in = dims.first().copied().unwrap_or(1).max(1) as f32;
    let residual_share = model.stream_rms() / (2.0 * model.n_layers.max(1) as f32).sqrt();
    if name.ends_with("post_attention_norm.weight") || name.ends_with("post_ffw_norm.weight") {
        return Ok(Fill::Constant(residual_share));
    }
    if name.ends_with("norm.weight") {
        return Ok(Fill::Constant(1.0));
    }
    if name.ends_with(".bias") {
        return Ok(Fill::Gaussian { std: BIAS_STD });
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
    if name.ends_with("attn_output.weight") || name.ends_with("ffn_down.weight") {
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
        let err = fill_for("blk.0.attn_sinks", &[8], ModelScale::new("llama", 2, 8)).unwrap_err();
        assert!(err.to_string().contains("blk.0.attn_sinks"), "{err}");
    }
}
