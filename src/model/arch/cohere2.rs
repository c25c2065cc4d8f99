//! `cohere2` (Command R7B, Command A): one bias-free LayerNorm shared by attention and feed-forward, which run in
//! parallel on the block's input; SiLU-gated feed-forward; RoPE on adjacent pairs (Cohere's own layout, which the
//! converter keeps); output logits multiplied by `logit_scale`, tied head. Sliding layers (three of every four,
//! [`COHERE2_GLOBAL_EVERY`], or `attention.sliding_window_pattern`) rotate with the file's RoPE
//! (`rope.freq_base_swa` when present); global layers are NoPE layers.
//!
//! The converter writes no layer pattern: like llama.cpp's loader, ropescope assumes every 4th layer global,
//! HF's default `layer_types` ([`super::assumptions`]).

use crate::error::Result;
use crate::gguf::Hparams;
use crate::model::config::{LogitScale, ModelConfig, Residual};
use crate::rope::Pairing;

/// Cohere 2: without a stated pattern, layers 3, 7, 11, ... are global (and NoPE), the others slide.
pub const COHERE2_GLOBAL_EVERY: usize = 4;

/// Configuration of a Cohere 2 model.
pub fn config(base: ModelConfig, h: &Hparams) -> Result<ModelConfig> {
    let mut c = super::with_pairing(base, Pairing::Adjacent);
    c.residual = Residual::ParallelSharedNorm;
    c.logit_scale = h.logit_scale.map(LogitScale::Multiply);
    super::sliding_rope_global_nope(&mut c, h, COHERE2_GLOBAL_EVERY)?;
    Ok(c)
}
