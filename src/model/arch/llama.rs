//! `llama` (SmolLM2, Llama, Mistral in llama layout) and `mistral`.
//!
//! RMSNorm, SiLU-gated feed-forward, optional sliding window from the file. llama.cpp's converter permutes the
//! rows of Q and K so that rotation pairs are adjacent coordinates: RoPE pairs dims `(2l, 2l+1)` here.

use super::with_pairing;
use crate::model::config::ModelConfig;
use crate::rope::Pairing;

/// Configuration of a `llama`-family model.
pub fn config(base: ModelConfig) -> ModelConfig {
    with_pairing(base, Pairing::Adjacent)
}
