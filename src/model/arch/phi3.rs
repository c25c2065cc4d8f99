//! `phi3`: half-split RoPE over `rope.dimension_count` dims (partial rotary when smaller than the head), fused
//! `attn_qkv` and fused `ffn_up` (gate rows first, then up rows), SiLU, optional sliding window. The fused
//! tensors are split at load time (see `model::weights`).

use crate::model::config::ModelConfig;

/// Configuration of a Phi-3 model.
pub fn config(base: ModelConfig) -> ModelConfig {
    base
}
