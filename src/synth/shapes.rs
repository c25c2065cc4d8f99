//! Built-in shapes of the papers' models, of ropescope's two small test models and of the architectures whose
//! attention departs furthest from the papers' (GPT-OSS's sinks, DeepSeek's latent attention, Gemma 4's two
//! kinds of layers), for `synth` when no real header is at hand. Hyper-parameters are those of each model's HF
//! `config.json` (`table.rs`), written with the keys and tensors llama.cpp's converter writes.
//!
//! A named shape carries no real tokenizer: its vocabulary is GPT-2's 256 byte tokens, a BOS control token, and
//! placeholder tokens up to the model's vocabulary size, with no merges, so any text tokenizes to one token per
//! byte and every id of the model is a valid token.

use super::fill::{fill_for, is_rope_factors, Fill, ModelScale};
use crate::error::Result;
use crate::gguf::{Array, Value};
use crate::rope::Llama3;
use crate::synth::{
    SyntheticExperts, SyntheticGemma4, SyntheticMla, SyntheticModel, SyntheticYarn,
};
use crate::tokenizer::byte_chars;

mod table;

pub use table::NAMED_SHAPES;

/// How a named shape's RoPE is scaled.
#[derive(Clone, Debug)]
pub enum NamedRope {
    /// No scaling.
    Plain,
    /// Llama 3's band scaling, written as llama.cpp does: the tensor `rope_freqs.weight` of divisors.
    Llama3(Llama3),
    /// Linear scaling by this factor (Gemma 3 4B's global layers).
    Linear(f32),
    /// YaRN, written as the `rope.scaling.*` keys.
    Yarn(SyntheticYarn),
    /// Proportional RoPE on the global layers (Gemma 4): the first `rot_dim` dimensions of each head rotate (HF's
    /// `partial_rotary_factor` times the head dimension), written as llama.cpp does: `rope_freqs.weight`, 1 for a
    /// rotating chunk and 1e30 for the others.
    Proportional {
        /// Rotated dimensions of a global head.
        rot_dim: usize,
    },
}

/// A built-in model shape.
#[derive(Clone, Debug)]
pub struct NamedShape {
    /// The name `synth --like` takes.
    pub name: &'static str,
    /// `general.architecture`.
    pub arch: &'static str,
    /// Layers.
    pub n_layers: usize,
    /// Residual width.
    pub n_embd: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (DeepSeek's latent attention: one per query head, which the file states as one).
    pub n_kv_heads: usize,
    /// Head dimension (DeepSeek's: the query and key heads, unrotated and rotated parts; Gemma 4's: the global
    /// layers').
    pub head_dim: usize,
    /// Rotated dimensions of each head, where only part of it rotates (`None`: the whole head).
    pub rope_dim: Option<usize>,
    /// Feed-forward width (of the dense blocks).
    pub n_ff: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Context length.
    pub context_length: usize,
    /// RoPE base (of the global layers, where layers differ).
    pub rope_base: f32,
    /// Norm epsilon (RMSNorm's, or LayerNorm's for `gptneox`).
    pub norm_eps: f32,
    /// Sliding window of the local layers.
    pub sliding_window: Option<u32>,
    /// Attention and final logit soft-capping (Gemma 2).
    pub softcaps: Option<(f32, f32)>,
    /// Whether the output head is the embedding matrix.
    pub tied: bool,
    /// RoPE scaling.
    pub rope: NamedRope,
    /// The mixture of experts in place of every feed-forward block (after the leading dense layers), if any.
    pub experts: Option<SyntheticExperts>,
    /// Multi-head latent attention (DeepSeek), if the model has it.
    pub mla: Option<SyntheticMla>,
    /// Gemma 4's layout, for `gemma4`.
    pub gemma4: Option<SyntheticGemma4>,
}

/// A named shape's header: its metadata, and its tensors as (name, ggml dims, fill).
pub type ShapeHeader = (Vec<(String, Value)>, Vec<(String, Vec<u64>, Fill)>);

/// Id of the BOS control token in a named shape's vocabulary (right after the 256 byte tokens).
const BOS_ID: u32 = 256;

impl NamedShape {
    /// The built-in shape called `name`.
    pub fn find(name: &str) -> Option<&'static NamedShape> {
        NAMED_SHAPES.iter().find(|s| s.name == name)
    }

    fn as_synthetic(&self) -> SyntheticModel {
        let mut m = SyntheticModel::new(self.arch);
        m.n_layers = self.n_layers;
        m.n_embd = self.n_embd;
        m.n_heads = self.n_heads;
        m.n_kv_heads = self.n_kv_heads;
        m.head_dim = self.head_dim;
        m.rope_dim = self.rope_dim.unwrap_or(self.head_dim);
        m.n_ff = self.n_ff;
        m.vocab = self.vocab;
        m.context_length = self.context_length;
        m.rope_base = self.rope_base;
        m.sliding_window = self.sliding_window;
        m.softcaps = self.softcaps;
        m.tied = self.tied;
        m.experts = self.experts;
        m.mla = self.mla;
        m.gemma4 = self.gemma4;
        m.yarn = match self.rope {
            NamedRope::Yarn(y) => Some(y),
            _ => None,
        };
        m.rope_factors = match &self.rope {
            NamedRope::Llama3(scaling) => Some(
                scaling
                    .divisors(self.rope_base as f64, self.head_dim)
                    .into_iter()
                    .map(|d| d as f32)
                    .collect(),
            ),
            NamedRope::Proportional { rot_dim } => Some(SyntheticModel::proportional_factors(
                self.head_dim,
                *rot_dim,
            )),
            _ => None,
        };
        m
    }

    /// Metadata and tensors (name, ggml dims, fill) of the shape.
    pub fn header(&self) -> Result<ShapeHeader> {
        let model = self.as_synthetic();
        let a = self.arch;
        let mut metadata: Vec<(String, Value)> = model
            .metadata()
            .into_iter()
            .filter(|(k, _)| !k.starts_with("tokenizer.") && !k.contains(".attention.layer_norm_"))
            .collect();
        metadata.insert(
            1,
            (
                "general.name".into(),
                Value::String(format!("ropescope synth {} (random weights)", self.name)),
            ),
        );
        let eps_key = match a {
            "gptneox" => "layer_norm_epsilon",
            _ => "layer_norm_rms_epsilon",
        };
        metadata.push((
            format!("{a}.attention.{eps_key}"),
            Value::F32(self.norm_eps),
        ));
        match self.rope {
            NamedRope::Linear(factor) => {
                metadata.push((
                    format!("{a}.rope.scaling.type"),
                    Value::String("linear".into()),
                ));
                metadata.push((format!("{a}.rope.scaling.factor"), Value::F32(factor)));
            }
            // Written by the synthetic model: YaRN as keys, the others as `rope_freqs.weight`.
            NamedRope::Plain
            | NamedRope::Llama3(_)
            | NamedRope::Yarn(_)
            | NamedRope::Proportional { .. } => {}
        }
        metadata.extend(self.tokenizer());
        let mut tensors = Vec::new();
        let scale = ModelScale {
            writers_per_layer: 2 + self.gemma4.is_some_and(|g| g.per_layer_input > 0) as usize,
            ..ModelScale::new(self.arch, self.n_layers, self.n_embd)
        };
        for (name, dims, _) in model.tensor_shapes() {
            let fill = match &model.rope_factors {
                Some(factors) if is_rope_factors(&name) => Fill::Values(factors.clone()),
                _ => fill_for(&name, &dims, scale)?,
            };
            tensors.push((name, dims, fill));
        }
        Ok((metadata, tensors))
    }

    /// The byte-level vocabulary described in the module documentation.
    fn tokenizer(&self) -> Vec<(String, Value)> {
        let alphabet = byte_chars();
        let mut tokens: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
        tokens.push("<|bos|>".into());
        tokens.extend((tokens.len()..self.vocab).map(|i| format!("<|synth_{i}|>")));
        let mut types = vec![1i32; self.vocab];
        types[BOS_ID as usize] = 3;
        vec![
            ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
            ("tokenizer.ggml.pre".into(), Value::String("default".into())),
            (
                "tokenizer.ggml.tokens".into(),
                Value::Array(Array::String(tokens)),
            ),
            (
                "tokenizer.ggml.token_type".into(),
                Value::Array(Array::I32(types)),
            ),
            (
                "tokenizer.ggml.merges".into(),
                Value::Array(Array::String(Vec::new())),
            ),
            ("tokenizer.ggml.bos_token_id".into(), Value::U32(BOS_ID)),
            ("tokenizer.ggml.add_bos_token".into(), Value::Bool(true)),
        ]
    }
}
