//! `gemma2` and `gemma3`: half-split RoPE, GELU (tanh) feed-forward, embeddings scaled by `sqrt(n_embd)`,
//! RMSNorm after the attention and feed-forward blocks as well as before. GGUF stores Gemma's norm weights
//! already as `1 + w`, so the plain RMSNorm applies.

use super::super::config::ModelConfig;
use crate::gguf::Hparams;
use crate::model::config::Activation;

/// Gemma 3: every [`GEMMA3_GLOBAL_EVERY`]-th layer (5, 11, 17, ...) is global with the file's RoPE base.
pub const GEMMA3_GLOBAL_EVERY: usize = 6;
/// Gemma 3: RoPE base of the local (sliding-window) layers; the file does not hold it.
pub const GEMMA3_LOCAL_ROPE_BASE: f64 = 10_000.0;
/// Gemma 3: `query_pre_attn_scalar`; the attention scale is its inverse square root. The file does not hold it.
pub const GEMMA3_QUERY_PRE_ATTN_SCALAR: f64 = 256.0;

fn gemma_common(mut c: ModelConfig) -> ModelConfig {
    c.activation = Activation::GeluTanh;
    c.embed_scale = Some((c.n_embd as f64).sqrt());
    c.post_norms = true;
    c
}

/// Gemma 3: QK-norm; local layers use a sliding window and base [`GEMMA3_LOCAL_ROPE_BASE`], global layers full
/// attention and the file's base.
pub fn config_gemma3(base: ModelConfig) -> ModelConfig {
    let mut c = gemma_common(base);
    c.qk_norm = true;
    c.attn_scale = 1.0 / GEMMA3_QUERY_PRE_ATTN_SCALAR.sqrt();
    for (i, layer) in c.layers.iter_mut().enumerate() {
        if (i + 1) % GEMMA3_GLOBAL_EVERY != 0 {
            layer.rope.base = GEMMA3_LOCAL_ROPE_BASE;
            layer.rope_base = GEMMA3_LOCAL_ROPE_BASE;
        } else {
            layer.window = None;
        }
    }
    c
}

/// Gemma 2: attention and final logit soft-capping from the file; even layers (0, 2, ...) use the sliding
/// window, odd layers are global. The attention scale is `1/sqrt(head_dim)` (llama.cpp's choice for the 2B and
/// 9B models; the file does not hold `query_pre_attn_scalar`).
pub fn config_gemma2(base: ModelConfig, h: &Hparams) -> ModelConfig {
    let mut c = gemma_common(base);
    c.attn_softcap = h.attn_softcap;
    c.final_softcap = h.final_softcap;
    for (i, layer) in c.layers.iter_mut().enumerate() {
        if i % 2 == 1 {
            layer.window = None;
        }
    }
    c
}
