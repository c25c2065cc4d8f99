//! The complete, architecture-resolved description of a model's forward pass.

use crate::rope::{Pairing, RopeSpec, Scaling};
use serde::Serialize;

/// Non-linearity of the feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    /// `x · sigmoid(x)` (llama, qwen, mistral, phi3).
    Silu,
    /// GELU, tanh approximation (gemma, phi2's `gelu_new`).
    GeluTanh,
    /// ggml's GELU (`GGML_GELU_FP16`, under [`super::Arithmetic::Ggml`]): the tanh approximation evaluated in
    /// float32 at the float16 rounding of the input and rounded to float16, by table; 0 at or below −10, the
    /// input itself at or above 10.
    GeluTanhF16Table,
    /// GELU with the error function, `½x(1 + erf(x/√2))` (gptneox).
    GeluErf,
    /// GPT-OSS's clamped SwiGLU of a gate `g` and an up projection `u`: `g ← min(g, limit)`,
    /// `u ← clamp(u, −limit, limit)`, then `(u + 1) · g · σ(alpha · g)`.
    ClampedSwiglu {
        /// The sigmoid's slope.
        alpha: f64,
        /// The clamp.
        limit: f64,
    },
}

/// The normalisation of the blocks and of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Norm {
    /// RMSNorm, `x / sqrt(mean(x²) + ε) · w`.
    Rms,
    /// LayerNorm, `(x − mean) / sqrt(var + ε) · w + b` (gptneox, phi2).
    Layer,
}

/// How a block's attention and feed-forward reach the residual stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Residual {
    /// `x ← x + attn(norm₁(x))`, then `x ← x + ffn(norm₂(x))`.
    Sequential,
    /// `x ← x + (attn(norm₁(x)) + ffn(norm₂(x)))`, both reading the block's input (gptneox).
    Parallel,
    /// As `Parallel`, with one norm for both (phi2: `ffn(norm₁(x))`).
    ParallelSharedNorm,
}

/// How the output logits are scaled, in the operation HF applies (a division and a multiplication by the
/// reciprocal round differently).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogitScale {
    /// `logits / d` (Granite).
    Divide(f64),
    /// `logits · m` (Cohere).
    Multiply(f64),
}

/// How a router turns a token's logits (one per expert) into the experts it runs and their weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Softmax over every expert, the `n_used` most probable, their probabilities renormalised to sum 1 when
    /// `normalize` (Qwen 3 MoE).
    SoftmaxTopK {
        /// Whether the chosen experts' weights are renormalised.
        normalize: bool,
    },
    /// The `n_used` largest logits, then a softmax over those alone (GPT-OSS).
    TopKSoftmax,
    /// The `n_used` largest logits, each weighted by its own sigmoid, not renormalised (Llama 4).
    TopKSigmoid,
    /// DeepSeek V3: the sigmoid of every logit; the choice on the sigmoids plus the router's selection bias,
    /// first of the `groups_used` best of `groups` groups of consecutive experts (a group scored by the sum of
    /// its two best), then the `n_used` best within them; the chosen experts weighted by their unbiased
    /// sigmoids, renormalised to sum 1 when `normalize`.
    SigmoidGrouped {
        /// Groups of consecutive experts (1: no group choice).
        groups: usize,
        /// Groups kept.
        groups_used: usize,
        /// Whether the chosen weights are renormalised.
        normalize: bool,
    },
}

/// A mixture-of-experts feed-forward block: a router scores every expert per token, the `n_used` best are run
/// (each a gated feed-forward block of width `n_ff` with the model's activation), and their outputs are summed
/// weighted as the [`Routing`] says.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Moe {
    /// Experts per layer.
    pub n_experts: usize,
    /// Experts each token is routed to.
    pub n_used: usize,
    /// Each expert's feed-forward width.
    pub n_ff: usize,
    /// From router logits to chosen experts and weights.
    pub routing: Routing,
    /// Whether a chosen expert's weight multiplies its input rather than its output (Llama 4).
    pub weights_input: bool,
    /// The width of the shared expert every token also runs (Llama 4; DeepSeek's shared experts as one block),
    /// when the model has one.
    pub n_ff_shared: Option<usize>,
    /// Multiplier of the routed experts' weights (DeepSeek's `routed_scaling_factor`; 1 elsewhere).
    pub scale: f64,
    /// Gemma 4's block: the experts run beside the layer's dense feed-forward block, each through its own
    /// norms, the router reading the residual stream (normed without gains, times its own per-channel scale and
    /// `n_embd^−½`), each chosen weight multiplied by its expert's scale.
    pub beside_dense: bool,
}

/// Multi-head latent attention (DeepSeek V2/V3): each token's keys and values are decompressed per head from one
/// latent of `kv_lora_rank` (normed), beside one rotated key part of `rot_dim` shared by every head; the queries
/// are projected directly or through a normed rank-`q_lora_rank` bottleneck. In the
/// engine each head's queries and keys are laid out rotated part first, `[rope | nope]`, so the layer's RoPE
/// rotates the first `rot_dim` dimensions as any partial rotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Mla {
    /// Width of the latent.
    pub kv_lora_rank: usize,
    /// Rank of the queries' bottleneck (DeepSeek V3), when they have one.
    pub q_lora_rank: Option<usize>,
}

/// The feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeedForward {
    /// `down(act(gate(x)) · up(x))`.
    Gated,
    /// `down(act(up(x)))` (gptneox, phi2).
    Plain,
}

/// A layer's rotary embedding as the file states it: everything but the sequence length, on which LongRoPE's
/// frequencies depend ([`LayerRope::spec`] resolves it). A layer that rotates nothing (`rot_dim` 0) is a NoPE
/// layer: its queries and keys carry no position ([`LayerRope::nope`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerRope {
    /// Head dimension.
    pub head_dim: usize,
    /// Rotated dimensions (partial rotary when below `head_dim`).
    pub rot_dim: usize,
    /// Frequency base before scaling.
    pub base: f64,
    /// Coordinate pairing of the file's Q/K weights.
    #[serde(serialize_with = "pairing_name")]
    pub pairing: Pairing,
    /// Frequency scaling.
    pub scaling: Scaling,
}

fn pairing_name<S: serde::Serializer>(p: &Pairing, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.name())
}

impl LayerRope {
    /// The rotary embedding of this layer for a sequence of `n_tokens` positions.
    pub fn spec(&self, n_tokens: usize) -> RopeSpec {
        RopeSpec::scaled(
            self.head_dim,
            self.rot_dim,
            self.base,
            self.pairing,
            &self.scaling,
            n_tokens,
        )
    }

    /// Number of rotating chunks.
    pub fn n_chunks(&self) -> usize {
        self.rot_dim / 2
    }

    /// Whether the layer rotates at all (`false` on a NoPE layer).
    pub fn rotates(&self) -> bool {
        self.rot_dim > 0
    }

    /// This layer made a NoPE layer: nothing rotates, no scaling (the base is kept for the record).
    pub fn nope(mut self) -> Self {
        self.rot_dim = 0;
        self.scaling = Scaling::None;
        self
    }
}

/// The RMSNorm a model applies to its queries and keys before RoPE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QkNorm {
    /// No QK-norm.
    None,
    /// Each head normalised on its own, with `head_dim` gains shared by the heads (qwen3, gemma3).
    PerHead,
    /// Each head normalised on its own without gains, on the layers that rotate only (Llama 4, whose HF code
    /// norms after RoPE: the rotation keeps each head's mean square, so the order changes rounding only).
    Unit,
    /// The whole projection of a token normalised as one vector, with one gain per coordinate
    /// (`n_heads · head_dim` for queries, `n_kv_heads · head_dim` for keys: olmo2).
    Projection,
}

/// Llama 4's attention temperature: the query at position `p` (from 0) is multiplied by
/// `1 + scale · ln(1 + ⌊(p + 1) / floor⌋)`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Temperature {
    /// Positions per step of the logarithm (`floor_scale`).
    pub floor: f64,
    /// The logarithm's multiplier (`attn_scale`).
    pub scale: f64,
}

impl Temperature {
    /// The multiplier of the query at position `p`.
    pub fn at(&self, p: usize) -> f64 {
        1.0 + self.scale * (1.0 + ((p + 1) as f64 / self.floor).floor()).ln()
    }
}

/// Per-layer attention geometry. The query/key head dimension is the RoPE's ([`LayerConfig::head_dim`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerConfig {
    /// Rotary embedding of this layer.
    pub rope: LayerRope,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Value head dimension.
    pub value_dim: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// The earlier layer whose keys and values this layer attends over instead of projecting its own (Gemma
    /// 4's KV sharing); `None` for a layer with its own.
    pub kv_from: Option<usize>,
    /// Whether this layer's feed-forward block is the model's mixture of experts ([`ModelConfig::moe`]); Llama 4
    /// interleaves them with dense blocks.
    pub experts: bool,
    /// Attention temperature of the queries by position (Llama 4's NoPE layers).
    pub temperature: Option<Temperature>,
    /// Sliding-window size, `None` for global attention.
    pub window: Option<usize>,
    /// Chunked attention: each query sees only the keys of its own block of this many positions (Llama 4's
    /// RoPE layers); `None` for none.
    pub chunk: Option<usize>,
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
    /// Feed-forward width of layer 0 (as `n_kv_heads`).
    pub n_ff: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads of layer 0 (of every layer but in Gemma 4, whose global layers differ: [`LayerConfig`]
    /// has each layer's).
    pub n_kv_heads: usize,
    /// Query/key head dimension of layer 0 (as `n_kv_heads`).
    pub head_dim: usize,
    /// Value head dimension of layer 0 (as `n_kv_heads`).
    pub value_dim: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Maximum context the model was trained for.
    pub context_length: usize,
    /// Epsilon of every norm.
    pub norm_eps: f64,
    /// The normalisation.
    pub norm: Norm,
    /// How attention and feed-forward join the residual stream.
    pub residual: Residual,
    /// The feed-forward block.
    pub feed_forward: FeedForward,
    /// The mixture of experts that replaces the feed-forward block of every layer, if the model has one.
    pub moe: Option<Moe>,
    /// Multiplier of each block's output before it is added to the residual stream (Granite).
    pub residual_scale: Option<f64>,
    /// The scale of the output logits (Granite divides by its `logits_scaling`, Cohere multiplies by its
    /// `logit_scale`).
    pub logit_scale: Option<LogitScale>,
    /// RoPE coordinate pairing of the file's Q/K weights.
    #[serde(skip)]
    pub pairing: Pairing,
    /// Per-layer attention geometry.
    pub layers: Vec<LayerConfig>,
    /// Gemma's `query_pre_attn_scalar`, when the architecture has one (the scale is its inverse square root).
    pub query_pre_attn_scalar: Option<f64>,
    /// Multiplier of `q·k` (`1/sqrt(head_dim)`, or `query_pre_attn_scalar^-1/2`).
    pub attn_scale: f64,
    /// Attention logit soft-capping `c · tanh(x / c)`.
    pub attn_softcap: Option<f64>,
    /// Whether each layer's values are normalised per head by an RMSNorm without gains (Gemma 4).
    pub v_norm: bool,
    /// Whether a layer without a value projection (`attn_v.weight`) takes its values from its keys' projection,
    /// before the keys' norm and RoPE (Gemma 4's `attention_k_eq_v` global layers).
    pub keys_as_values: bool,
    /// Width of each layer's per-layer input (Gemma 4's PLE), when the model has them.
    pub per_layer_input: Option<usize>,
    /// Multi-head latent attention, for DeepSeek's layers.
    pub mla: Option<Mla>,
    /// Whether every head has a learned sink logit (GPT-OSS's `attn_sinks`): one more softmax entry per row,
    /// attached to no key.
    pub sinks: bool,
    /// Output logit soft-capping.
    pub final_softcap: Option<f64>,
    /// Multiplier of the token embeddings (`sqrt(n_embd)` for gemma).
    pub embed_scale: Option<f64>,
    /// Feed-forward non-linearity.
    pub activation: Activation,
    /// RMSNorm of the queries and keys before RoPE.
    pub qk_norm: QkNorm,
    /// RMSNorm of the residual stream before the attention and feed-forward blocks (all but olmo2).
    pub pre_norms: bool,
    /// RMSNorm after the attention and feed-forward blocks, before the residual add (gemma2, gemma3, olmo2).
    pub post_norms: bool,
    /// How the pass multiplies by the weights ([`Model::load_with`](super::Model::load_with)); not read from
    /// the file.
    pub arithmetic: super::Arithmetic,
    /// The GGUF name of each block's feed-forward pre-norm: `ffn_norm`, or `post_attention_norm` where the
    /// converter names it so (GPT-OSS).
    #[serde(skip)]
    pub ffn_norm_tensor: &'static str,
}

impl LayerConfig {
    /// Query/key head dimension.
    pub fn head_dim(&self) -> usize {
        self.rope.head_dim
    }
}

impl ModelConfig {
    /// The norms' ε, with how this configuration's arithmetic computes norms.
    pub fn eps(&self) -> super::NormEps {
        super::NormEps {
            eps: self.norm_eps,
            ggml: self.arithmetic == super::Arithmetic::Ggml,
        }
    }

    /// The widest query/key head dimension of any layer.
    pub fn max_head_dim(&self) -> usize {
        self.layers
            .iter()
            .map(LayerConfig::head_dim)
            .fold(self.head_dim, usize::max)
    }

    /// The widest value head dimension of any layer.
    pub fn max_value_dim(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.value_dim)
            .fold(self.value_dim, usize::max)
    }

    /// The most RoPE chunks (2-D frequency pairs) of any layer: the length of a per-chunk mask or spectrum.
    pub fn n_chunks(&self) -> usize {
        self.layers
            .iter()
            .map(|l| l.rope.n_chunks())
            .max()
            .unwrap_or(0)
    }

    /// Every layer's rotary embedding for a sequence of `n_tokens` positions.
    pub fn rope_specs(&self, n_tokens: usize) -> Vec<RopeSpec> {
        self.layers.iter().map(|l| l.rope.spec(n_tokens)).collect()
    }

    /// Every layer's chunk frequencies (radians per token, chunk 0 fastest; 0 for a chunk that does not turn,
    /// none on a NoPE layer) for a sequence of `n_tokens` positions.
    pub fn chunk_frequencies(&self, n_tokens: usize) -> Vec<Vec<f64>> {
        self.layers
            .iter()
            .map(|l| l.rope.spec(n_tokens).inv_freq)
            .collect()
    }
}
