//! `llama4` (Llama 4's text decoder, iRoPE): every 4th layer is a NoPE layer with full causal attention and an
//! attention temperature growing with the position; the other layers rotate adjacent pairs of the file's rows
//! (HF multiplies complex pairs; the converter does not permute), with Llama 3 scaling from `rope_freqs.weight`,
//! norm queries and keys per head without gains, and attend only within their chunk of positions. Every
//! `interleave_moe_layer_step`-th layer is a mixture of experts: the top-k router logits, each weighted by its own
//! sigmoid, multiply the chosen experts' inputs, and a shared expert of the experts' width runs on every token.
//!
//! The converter writes none of the chunk size, the temperature's constants, the NoPE interval or the QK-norm
//! switch; the engine assumes what llama.cpp's loader assumes, which are Llama 4 Scout's and Maverick's values
//! ([`super::assumptions`]).

use super::with_pairing;
use crate::error::Result;
use crate::gguf::Hparams;
use crate::model::config::{ModelConfig, QkNorm, Routing, Temperature};
use crate::rope::Pairing;

/// Every 4th layer (3, 7, 11, ...) is a NoPE layer (HF's `no_rope_layer_interval`, llama.cpp's loader).
pub const LLAMA4_NOPE_EVERY: usize = 4;
/// Positions per attention chunk of the RoPE layers (`attention_chunk_size` of Scout and Maverick).
pub const LLAMA4_CHUNK: usize = 8192;
/// The NoPE layers' temperature (`floor_scale` 8192, `attn_scale` 0.1 of Scout and Maverick).
pub const LLAMA4_TEMPERATURE: Temperature = Temperature {
    floor: 8192.0,
    scale: 0.1,
};
/// The expert count of Llama 4 Maverick, the one release without QK-norm (llama.cpp's rule).
pub const LLAMA4_MAVERICK_EXPERTS: usize = 128;

/// Configuration of a Llama 4 text decoder. A file whose `attention.sliding_window` is 0 (a model without
/// chunked attention) rotates every layer and chunks none, as llama.cpp reads it.
pub fn config(base: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let mut c = with_pairing(base, Pairing::Adjacent);
    let irope = h.sliding_window != Some(0);
    if h.n_experts != Some(LLAMA4_MAVERICK_EXPERTS) {
        c.qk_norm = QkNorm::Unit;
    }
    let step = h.moe_every.unwrap_or(1).max(1);
    let moe = super::moe::experts(h, c.n_ff, Routing::TopKSigmoid)?;
    c.moe = Some(crate::model::config::Moe {
        weights_input: true,
        n_ff_shared: Some(moe.n_ff),
        ..moe
    });
    for (i, layer) in c.layers.iter_mut().enumerate() {
        layer.experts = (i + 1) % step == 0;
        layer.window = None;
        if irope && (i + 1) % LLAMA4_NOPE_EVERY == 0 {
            layer.rope = layer.rope.clone().nope();
            layer.temperature = Some(LLAMA4_TEMPERATURE);
        } else if irope {
            layer.chunk = Some(LLAMA4_CHUNK);
        }
    }
    Ok(c)
}
