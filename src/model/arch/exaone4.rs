//! `exaone4` (EXAONE 4.0): no norm before the blocks, RMSNorm after the attention and feed-forward blocks, QK-norm
//! per head, half-split RoPE. A file that states a sliding window (EXAONE 4.0 32B) is a hybrid: the sliding
//! layers (`attention.sliding_window_pattern`, else three of every four, [`EXAONE4_GLOBAL_EVERY`]) rotate with
//! the file's RoPE, and the global layers are NoPE layers, as HF's `Exaone4Attention` does. Without a window
//! (EXAONE 4.0 1.2B) every layer rotates and attends globally.
//!
//! llama.cpp's loader applies the window and the NoPE layers only to a 64-layer file (the 32B model) and runs any
//! other file with global RoPE layers throughout; ropescope follows the file, as HF does (a finding of
//! `fixtures/converted/LLAMACPP.md`).

use crate::error::Result;
use crate::gguf::Hparams;
use crate::model::config::{ModelConfig, QkNorm};

/// EXAONE 4.0 32B: without a stated pattern, layers 3, 7, 11, ... are global (and NoPE), the others slide.
pub const EXAONE4_GLOBAL_EVERY: usize = 4;

/// Configuration of an EXAONE 4.0 model.
pub fn config(mut c: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    c.qk_norm = QkNorm::PerHead;
    c.pre_norms = false;
    c.post_norms = true;
    if h.sliding_window.is_none() && h.sliding_window_pattern.is_none() {
        return Ok(c);
    }
    super::sliding_rope_global_nope(&mut c, h, EXAONE4_GLOBAL_EVERY)?;
    Ok(c)
}
