//! `phi2` (Phi-2): LayerNorm with biases, attention and feed-forward in parallel on one shared norm of the
//! block's input, q/k/v and output projections with biases, the plain feed-forward block with biases and
//! GELU's tanh approximation (HF's `gelu_new`, [`super::assumptions`]), half-split RoPE over the first
//! `rope.dimension_count` dims (Phi-2: 40%), an output head with a bias.

use crate::model::config::{Activation, ModelConfig, Residual};

/// Configuration of a Phi-2 model.
pub fn config(mut c: ModelConfig) -> ModelConfig {
    c.residual = Residual::ParallelSharedNorm;
    c.activation = Activation::GeluTanh;
    c
}
