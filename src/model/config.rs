//! The complete, architecture-resolved description of a model's forward pass.

use crate::rope::{Pairing, RopeSpec};
use serde::Serialize;

/// Non-linearity of the gated feed-forward block (`down(act(gate(x)) * up(x))`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Activation {
    /// `x · sigmoid(x)` (llama, qwen, mistral, phi3).
    Silu,
    /// GELU, tanh approximation (gemma).
    GeluTanh,
}

/// Per-layer attention geometry.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerConfig {
    /// Rotary embedding of this layer.
    #[serde(skip)]
    pub rope: RopeSpec,
    /// RoPE base of this layer (also in `rope`, repeated for serialisation).
    pub rope_base: f64,
    /// Sliding-window size, `None` for global attention.
    pub window: Option<usize>,
}

/// Everything the forward pass needs to know, resolved from GGUF metadata and the architecture's conventions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelConfig {
    /// `general.architecture`.
    pub architecture: String,
    /// Number of layers.
    pub n_layers: usize,
    /// Residual width.
    pub n_embd: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Query/key head dimension.
    pub head_dim: usize,
    /// Value head dimension.
    pub value_dim: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Maximum context the model was trained for.
    pub context_length: usize,
    /// RMSNorm epsilon.
    pub norm_eps: f64,
    /// RoPE coordinate pairing of the file's Q/K weights.
    #[serde(skip)]
    pub pairing: Pairing,
    /// Per-layer attention geometry.
    pub layers: Vec<LayerConfig>,
    /// Multiplier of `q·k` (`1/sqrt(head_dim)`, or `query_pre_attn_scalar^-1/2`).
    pub attn_scale: f64,
    /// Attention logit soft-capping `c · tanh(x / c)`.
    pub attn_softcap: Option<f64>,
    /// Output logit soft-capping.
    pub final_softcap: Option<f64>,
    /// Multiplier of the token embeddings (`sqrt(n_embd)` for gemma).
    pub embed_scale: Option<f64>,
    /// Feed-forward non-linearity.
    pub activation: Activation,
    /// RMSNorm of each query and key head before RoPE (gemma3, qwen3).
    pub qk_norm: bool,
    /// RMSNorm after the attention and feed-forward blocks, before the residual add (gemma2, gemma3).
    pub post_norms: bool,
}

impl ModelConfig {
    /// Query heads per key/value head.
    pub fn group_size(&self) -> usize {
        self.n_heads / self.n_kv_heads
    }

    /// The most RoPE chunks (2-D frequency pairs) of any layer: the length of a per-chunk mask or spectrum.
    pub fn n_chunks(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.rope.n_chunks())
            .max()
            .unwrap_or(0)
    }
}
