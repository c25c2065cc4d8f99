//! `gpt-oss` (OpenAI's GPT-OSS): every head has a learned sink logit (`attn_sinks`), sliding-window and global
//! layers alternate, RoPE is YaRN over half-split pairs with the correction range left unrounded, and every
//! feed-forward block is a mixture of experts with biases, routed by a softmax over the chosen logits and
//! activated by a clamped SwiGLU. Q, K, V and the output projection have biases.
//!
//! The converter writes no key for the layer pattern, the unrounded YaRN range, the router rule or the SwiGLU's
//! constants: the engine assumes them as HF's `GptOssConfig` fixes them for every release
//! ([`super::assumptions`]). llama.cpp's loader assumes the same except the YaRN range, which it rounds.
//! The feed-forward block's pre-norm is the tensor the converter names `post_attention_norm`.

use super::Hybrid;
use crate::error::Result;
use crate::gguf::Hparams;
use crate::model::config::{Activation, ModelConfig, Routing};
use crate::rope::Scaling;

/// The SwiGLU's sigmoid slope, `swiglu_alpha` of every GPT-OSS configuration (and llama.cpp's constant).
pub const SWIGLU_ALPHA: f64 = 1.702;
/// The SwiGLU's clamp, `swiglu_limit` of every GPT-OSS configuration (and llama.cpp's constant).
pub const SWIGLU_LIMIT: f64 = 7.0;

/// Configuration of a GPT-OSS model: layers 0, 2, 4, ... slide, odd layers are global.
pub fn config(mut c: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let sliding = super::sliding_layers(h, |i| i % 2 == 0)?;
    let hybrid = Hybrid {
        sliding_base: h.rope_base,
        sliding_scaled: true,
        global_nope: false,
    };
    super::apply_hybrid(&mut c, &sliding, hybrid);
    for layer in &mut c.layers {
        if let Scaling::Yarn(y) = &mut layer.rope.scaling {
            y.truncate = false;
        }
    }
    c.sinks = true;
    c.ffn_norm_tensor = "post_attention_norm";
    c.activation = Activation::ClampedSwiglu {
        alpha: SWIGLU_ALPHA,
        limit: SWIGLU_LIMIT,
    };
    c.moe = Some(super::moe::experts(h, c.n_ff, Routing::TopKSoftmax)?);
    Ok(c)
}
