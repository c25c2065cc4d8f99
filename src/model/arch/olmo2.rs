//! `olmo2` (OLMo 2 and OLMo 3): no norm before the blocks, RMSNorm after the attention and feed-forward blocks
//! (before the residual add), QK-norm over each token's whole query and key projections (one gain per
//! coordinate, not per head), half-split RoPE, SiLU-gated feed-forward.
//!
//! OLMo 3 adds sliding-window layers: the file's `attention.sliding_window_pattern` when present, else every
//! [`OLMO3_GLOBAL_EVERY`]-th layer global (llama.cpp's loader); the sliding layers rotate with
//! `rope.freq_base_swa` (the global base when absent) and without the file's scaling, which applies to the
//! global layers only (HF's `Olmo3` and llama.cpp both).

use crate::error::Result;
use crate::gguf::Hparams;
use crate::model::config::{ModelConfig, QkNorm};

/// OLMo 3: without a stated pattern, layers 3, 7, 11, ... are global and the others slide.
pub const OLMO3_GLOBAL_EVERY: usize = 4;

/// Configuration of an OLMo 2 / OLMo 3 model.
pub fn config(mut c: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    c.qk_norm = QkNorm::Projection;
    c.pre_norms = false;
    c.post_norms = true;
    let sliding = if c.layers.iter().any(|l| l.window.is_some()) || h.sliding_window_pattern.is_some() {
        super::sliding_layers(h, |i| (i + 1) % OLMO3_GLOBAL_EVERY != 0)?
    } else {
        vec![false; c.n_layers]
    };
    let hybrid = super::Hybrid {
        sliding_base: h.rope_base_swa.unwrap_or(h.rope_base),
        sliding_scaled: false,
        global_nope: false,
    };
    super::apply_hybrid(&mut c, &sliding, hybrid);
    Ok(c)
}
