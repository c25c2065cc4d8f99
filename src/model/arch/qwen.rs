//! `qwen2` (biases on Q, K, V) and `qwen3` (no biases; RMSNorm of each query and key head).
//! Half-split RoPE, SiLU-gated feed-forward. Biases are loaded whenever the file has them.

use crate::model::config::{ModelConfig, QkNorm};

/// Configuration of a Qwen 2 (`qk_norm = false`) or Qwen 3 (`qk_norm = true`, per head) model.
pub fn config(mut base: ModelConfig, qk_norm: bool) -> ModelConfig {
    if qk_norm {
        base.qk_norm = QkNorm::PerHead;
    }
    base
}
