//! `smollm3` (SmolLM3): the `llama` block (RMSNorm, SiLU-gated feed-forward, adjacent RoPE pairs from the
//! converter's Q/K row permutation) with NoPE layers: every [`SMOLLM3_NOPE_EVERY`]-th layer rotates nothing.
//!
//! HF's `SmolLM3Config` states the pattern as `no_rope_layers` (one flag per layer, by default from
//! `no_rope_layer_interval = 4`); llama.cpp's converter writes no key for it and its loader hard-codes the
//! interval 4, so a file cannot say otherwise and the engine assumes what llama.cpp does
//! ([`super::assumptions`]).

use super::with_pairing;
use crate::model::config::ModelConfig;
use crate::rope::Pairing;

/// SmolLM3: layers `i` with `(i + 1) % 4 == 0` (3, 7, 11, ...) are NoPE layers, as in SmolLM3-3B's released
/// configuration and llama.cpp's loader (`n_no_rope_layer_step`).
pub const SMOLLM3_NOPE_EVERY: usize = 4;

/// Configuration of a SmolLM3 model.
pub fn config(base: ModelConfig) -> ModelConfig {
    let mut c = with_pairing(base, Pairing::Adjacent);
    for (i, layer) in c.layers.iter_mut().enumerate() {
        if (i + 1) % SMOLLM3_NOPE_EVERY == 0 {
            layer.rope = layer.rope.clone().nope();
        }
    }
    c
}
