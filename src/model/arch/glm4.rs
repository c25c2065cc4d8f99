//! `glm4` (GLM-4): RMSNorm before and after both the attention and the feed-forward blocks (as Gemma 2), q/k/v
//! biases, gate and up fused in one `ffn_up.weight` (gate rows first), SiLU, and RoPE over the first
//! `rope.dimension_count` dims of each head (half of it in every release) on adjacent pairs `(2l, 2l + 1)`:
//! HF's GLM-4 interleaves its cosines itself, and the converter keeps the rows as they are.

use super::with_pairing;
use crate::model::config::ModelConfig;
use crate::rope::Pairing;

/// Configuration of a GLM-4 model.
pub fn config(base: ModelConfig) -> ModelConfig {
    let mut c = with_pairing(base, Pairing::Adjacent);
    c.post_norms = true;
    c
}
