//! `gemma` (Gemma 1), `gemma2` and `gemma3`: half-split RoPE, GELU (tanh) feed-forward, embeddings scaled by
//! `sqrt(n_embd)`; Gemma 2 and 3 also normalise after the attention and feed-forward blocks. GGUF stores
//! Gemma's norm weights already as `1 + w`, so the plain RMSNorm applies.
//!
//! What the file does not hold comes from the real configurations of every released size (HF `config.json`):
//!
//! | model | layers | head dim | `n_embd / n_heads` | `query_pre_attn_scalar` | layer pattern | RoPE |
//! |---|---|---|---|---|---|---|
//! | Gemma 2B / 7B | 18 / 28 | 256 | 256 / 192 | (scale `head_dim^-1/2`) | all global | base 1e4 |
//! | Gemma 2 2B / 9B | 26 / 42 | 256 | 288 / 224 | 256 | even layers local | base 1e4 |
//! | Gemma 2 27B | 46 | 128 | 144 | 144 | even layers local | base 1e4 |
//! | Gemma 3 270M / 1B | 18 / 26 | 256 | 160 / 288 | 256 | 5 local, then 1 global | local 1e4, global 1e6 |
//! | Gemma 3 4B / 12B | 34 / 48 | 256 | 320 / 240 | 256 | 5 local, then 1 global | as 1B, global linear ×8 |
//! | Gemma 3 27B | 62 | 128 | 168 | 168 | 5 local, then 1 global | as 4B |
//!
//! So `query_pre_attn_scalar` is the head dimension except on the 27B models, where it is `n_embd / n_heads`;
//! GGUF has no key for it, and like llama.cpp ropescope recognises the 27B models by their layer count
//! ([`GEMMA2_27B_LAYERS`], [`GEMMA3_27B_LAYERS`]). Gemma 3's local layers use `rope.freq_base_swa` when the file
//! has it (else [`GEMMA3_LOCAL_ROPE_BASE`]) and never the file's scaling, which applies to the global layers
//! only; the layer pattern is `attention.sliding_window_pattern` when present, else every
//! [`GEMMA3_GLOBAL_EVERY`]-th layer is global.

use super::super::config::ModelConfig;
use crate::error::Result;
use crate::gguf::Hparams;
use crate::model::config::{Activation, QkNorm};

/// Gemma 3: every [`GEMMA3_GLOBAL_EVERY`]-th layer (5, 11, 17, ...) is global, unless the file states the
/// pattern (all sizes).
pub const GEMMA3_GLOBAL_EVERY: usize = 6;
/// Gemma 3: RoPE base of the local (sliding-window) layers when the file has no `rope.freq_base_swa` (all sizes).
pub const GEMMA3_LOCAL_ROPE_BASE: f64 = 10_000.0;
/// Layer count of Gemma 2 27B, whose `query_pre_attn_scalar` is `n_embd / n_heads`.
pub const GEMMA2_27B_LAYERS: usize = 46;

/// Gemma 2's attention logit soft-cap where the file does not state one: the default of HF's `Gemma2Config`
/// and of llama.cpp's loader, so a file without the key computes as both do.
pub const GEMMA2_ATTN_SOFTCAP: f64 = 50.0;

/// Gemma 2's final logit soft-cap where the file does not state one (HF's and llama.cpp's default).
pub const GEMMA2_FINAL_SOFTCAP: f64 = 30.0;
/// Layer count of Gemma 3 27B, whose `query_pre_attn_scalar` is `n_embd / n_heads`.
pub const GEMMA3_27B_LAYERS: usize = 62;

fn gemma_common(mut c: ModelConfig) -> ModelConfig {
    c.activation = Activation::GeluTanh;
    c.embed_scale = Some((c.n_embd as f64).sqrt());
    c
}

/// Sets `query_pre_attn_scalar` to `n_embd / n_heads` on a 27B model (`n_layers == layers_27b`), else to the
/// head dimension, and the attention scale to its inverse square root.
fn with_query_scalar(mut c: ModelConfig, layers_27b: usize) -> ModelConfig {
    let scalar = if c.n_layers == layers_27b {
        c.n_embd as f64 / c.n_heads as f64
    } else {
        c.head_dim as f64
    };
    c.query_pre_attn_scalar = Some(scalar);
    c.attn_scale = 1.0 / scalar.sqrt();
    c
}

/// Gemma 1: the common Gemma conventions, global attention everywhere, scale `head_dim^-1/2`.
pub fn config_gemma(base: ModelConfig) -> ModelConfig {
    gemma_common(base)
}

/// Gemma 3: QK-norm, post-norms; local layers use the sliding window, the local base and no scaling, global
/// layers full attention and the file's base and scaling.
pub fn config_gemma3(base: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let mut c = with_query_scalar(gemma_common(base), GEMMA3_27B_LAYERS);
    c.qk_norm = QkNorm::PerHead;
    c.post_norms = true;
    c.final_softcap = h.final_softcap;
    let local = super::sliding_layers(h, |i| (i + 1) % GEMMA3_GLOBAL_EVERY != 0)?;
    let hybrid = super::Hybrid {
        sliding_base: h.rope_base_swa.unwrap_or(GEMMA3_LOCAL_ROPE_BASE),
        sliding_scaled: false,
        global_nope: false,
    };
    super::apply_hybrid(&mut c, &local, hybrid);
    Ok(c)
}

/// Gemma 2: post-norms, attention and final logit soft-capping from the file (HF's and llama.cpp's defaults
/// where it states none); even layers (0, 2, ...) use the
/// sliding window, odd layers are global.
pub fn config_gemma2(base: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let mut c = with_query_scalar(gemma_common(base), GEMMA2_27B_LAYERS);
    c.post_norms = true;
    c.attn_softcap = Some(h.attn_softcap.unwrap_or(GEMMA2_ATTN_SOFTCAP));
    c.final_softcap = Some(h.final_softcap.unwrap_or(GEMMA2_FINAL_SOFTCAP));
    let local = super::sliding_layers(h, |i| i % 2 == 0)?;
    let hybrid = super::Hybrid {
        sliding_base: h.rope_base,
        sliding_scaled: true,
        global_nope: false,
    };
    super::apply_hybrid(&mut c, &local, hybrid);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::config::{FeedForward, LayerConfig, LayerRope, Norm, Residual};
    use crate::rope::{Pairing, Scaling};

    /// A configuration with the sizes of a released model.
    fn sized(n_layers: usize, n_embd: usize, n_heads: usize, head_dim: usize) -> ModelConfig {
        let layer = LayerConfig {
            rope: LayerRope {
                head_dim,
                rot_dim: head_dim,
                base: 10_000.0,
                pairing: Pairing::HalfSplit,
                scaling: Scaling::None,
            },
            n_kv_heads: 1,
            value_dim: head_dim,
            n_ff: 1,
            kv_from: None,
            experts: true,
            temperature: None,
            window: None,
            chunk: None,
        };
        ModelConfig {
            architecture: "gemma2".into(),
            n_layers,
            n_embd,
            n_ff: 1,
            n_heads,
            n_kv_heads: 1,
            head_dim,
            value_dim: head_dim,
            vocab_size: 1,
            context_length: 1,
            norm_eps: 1e-6,
            pairing: Pairing::HalfSplit,
            layers: vec![layer; n_layers],
            query_pre_attn_scalar: None,
            attn_scale: 1.0,
            attn_softcap: None,
            v_norm: false,
            keys_as_values: false,
            per_layer_input: None,
            mla: None,
            sinks: false,
            ffn_norm_tensor: "ffn_norm",
            final_softcap: None,
            embed_scale: None,
            activation: Activation::Silu,
            norm: Norm::Rms,
            residual: Residual::Sequential,
            feed_forward: FeedForward::Gated,
            moe: None,
            residual_scale: None,
            logit_scale: None,
            qk_norm: QkNorm::None,
            pre_norms: true,
            post_norms: false,
            arithmetic: Default::default(),
        }
    }

    /// `query_pre_attn_scalar` of every released Gemma 2 and Gemma 3 size, as its HF `config.json` states it:
    /// (27B layer count of the family, layers, width, heads, head dim, scalar).
    #[test]
    fn query_scalar_of_every_released_size() {
        let g2 = GEMMA2_27B_LAYERS;
        let g3 = GEMMA3_27B_LAYERS;
        let sizes = [
            (g2, 26, 2304, 8, 256, 256.0),
            (g2, 42, 3584, 16, 256, 256.0),
            (g2, 46, 4608, 32, 128, 144.0),
            (g3, 18, 640, 4, 256, 256.0),
            (g3, 26, 1152, 4, 256, 256.0),
            (g3, 34, 2560, 8, 256, 256.0),
            (g3, 48, 3840, 16, 256, 256.0),
            (g3, 62, 5376, 32, 128, 168.0),
        ];
        for (family_27b, layers, embd, heads, hd, want) in sizes {
            let c = with_query_scalar(sized(layers, embd, heads, hd), family_27b);
            assert_eq!(c.query_pre_attn_scalar, Some(want), "{layers} layers");
            assert_eq!(c.attn_scale, 1.0 / want.sqrt());
        }
    }
}
