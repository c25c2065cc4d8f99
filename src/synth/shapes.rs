//! Built-in shapes of the papers' models and of ropescope's two small test models, for `synth` when no real
//! header is at hand. Hyper-parameters are those of each model's HF `config.json`, written with the keys
//! llama.cpp's converter writes.
//!
//! A named shape carries no real tokenizer: its vocabulary is GPT-2's 256 byte tokens, a BOS control token, and
//! placeholder tokens up to the model's vocabulary size, with no merges, so any text tokenizes to one token per
//! byte and every id of the model is a valid token.

use super::fill::{fill_for, Fill, ModelScale};
use crate::error::Result;
use crate::gguf::{Array, Value};
use crate::rope::Llama3;
use crate::synth::{SyntheticExperts, SyntheticModel};
use crate::tokenizer::byte_chars;

/// How a named shape's RoPE is scaled.
#[derive(Clone, Debug)]
pub enum NamedRope {
    /// No scaling.
    Plain,
    /// Llama 3's band scaling, written as llama.cpp does: the tensor `rope_freqs.weight` of divisors.
    Llama3(Llama3),
    /// Linear scaling by this factor (Gemma 3 4B's global layers).
    Linear(f32),
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
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Rotated dimensions of each head, where only part of it rotates (`None`: the whole head).
    pub rope_dim: Option<usize>,
    /// Feed-forward width.
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
    /// The mixture of experts in place of every feed-forward block, if any.
    pub experts: Option<SyntheticExperts>,
}

const LLAMA31: Llama3 = Llama3 {
    factor: 8.0,
    low_freq_factor: 1.0,
    high_freq_factor: 4.0,
    original_context: 8192,
};

/// Every built-in shape.
pub const NAMED_SHAPES: &[NamedShape] = &[
    NamedShape {
        name: "llama-3.1-8b",
        arch: "llama",
        n_layers: 32,
        n_embd: 4096,
        n_heads: 32,
        n_kv_heads: 8,
        head_dim: 128,
        rope_dim: None,
        n_ff: 14336,
        vocab: 128256,
        context_length: 131072,
        rope_base: 500000.0,
        norm_eps: 1e-5,
        sliding_window: None,
        softcaps: None,
        tied: false,
        rope: NamedRope::Llama3(LLAMA31),
        experts: None,
    },
    NamedShape {
        name: "qwen2.5-7b",
        arch: "qwen2",
        n_layers: 28,
        n_embd: 3584,
        n_heads: 28,
        n_kv_heads: 4,
        head_dim: 128,
        rope_dim: None,
        n_ff: 18944,
        vocab: 152064,
        context_length: 32768,
        rope_base: 1000000.0,
        norm_eps: 1e-6,
        sliding_window: None,
        softcaps: None,
        tied: false,
        rope: NamedRope::Plain,
        experts: None,
    },
    NamedShape {
        name: "gemma-7b",
        arch: "gemma",
        n_layers: 28,
        n_embd: 3072,
        n_heads: 16,
        n_kv_heads: 16,
        head_dim: 256,
        rope_dim: None,
        n_ff: 24576,
        vocab: 256000,
        context_length: 8192,
        rope_base: 10000.0,
        norm_eps: 1e-6,
        sliding_window: None,
        softcaps: None,
        tied: true,
        rope: NamedRope::Plain,
        experts: None,
    },
    NamedShape {
        name: "gemma-2-2b",
        arch: "gemma2",
        n_layers: 26,
        n_embd: 2304,
        n_heads: 8,
        n_kv_heads: 4,
        head_dim: 256,
        rope_dim: None,
        n_ff: 9216,
        vocab: 256000,
        context_length: 8192,
        rope_base: 10000.0,
        norm_eps: 1e-6,
        sliding_window: Some(4096),
        softcaps: Some((50.0, 30.0)),
        tied: true,
        rope: NamedRope::Plain,
        experts: None,
    },
    NamedShape {
        name: "gemma-3-4b",
        arch: "gemma3",
        n_layers: 34,
        n_embd: 2560,
        n_heads: 8,
        n_kv_heads: 4,
        head_dim: 256,
        rope_dim: None,
        n_ff: 10240,
        vocab: 262208,
        context_length: 131072,
        rope_base: 1000000.0,
        norm_eps: 1e-6,
        sliding_window: Some(1024),
        softcaps: None,
        tied: true,
        rope: NamedRope::Linear(8.0),
        experts: None,
    },
    NamedShape {
        name: "smollm3-3b",
        arch: "smollm3",
        n_layers: 36,
        n_embd: 2048,
        n_heads: 16,
        n_kv_heads: 4,
        head_dim: 128,
        rope_dim: None,
        n_ff: 11008,
        vocab: 128256,
        context_length: 65536,
        rope_base: 5000000.0,
        norm_eps: 1e-6,
        sliding_window: None,
        softcaps: None,
        tied: true,
        rope: NamedRope::Plain,
        experts: None,
    },
    NamedShape {
        name: "olmo-2-7b",
        arch: "olmo2",
        n_layers: 32,
        n_embd: 4096,
        n_heads: 32,
        n_kv_heads: 32,
        head_dim: 128,
        rope_dim: None,
        n_ff: 11008,
        vocab: 100352,
        context_length: 4096,
        rope_base: 500000.0,
        norm_eps: 1e-6,
        sliding_window: None,
        softcaps: None,
        tied: false,
        rope: NamedRope::Plain,
        experts: None,
    },
    NamedShape {
        name: "pythia-1.4b",
        arch: "gptneox",
        n_layers: 24,
        n_embd: 2048,
        n_heads: 16,
        n_kv_heads: 16,
        head_dim: 128,
        rope_dim: Some(32),
        n_ff: 8192,
        vocab: 50304,
        context_length: 2048,
        rope_base: 10000.0,
        norm_eps: 1e-5,
        sliding_window: None,
        softcaps: None,
        tied: false,
        rope: NamedRope::Plain,
        experts: None,
    },
    NamedShape {
        name: "qwen3-30b-a3b",
        arch: "qwen3moe",
        n_layers: 48,
        n_embd: 2048,
        n_heads: 32,
        n_kv_heads: 4,
        head_dim: 128,
        rope_dim: None,
        n_ff: 6144,
        vocab: 151936,
        context_length: 40960,
        rope_base: 1000000.0,
        norm_eps: 1e-6,
        sliding_window: None,
        softcaps: None,
        tied: false,
        rope: NamedRope::Plain,
        experts: Some(SyntheticExperts {
            count: 128,
            used: 8,
            n_ff: 768,
        }),
    },
    NamedShape {
        name: "smollm2-135m",
        arch: "llama",
        n_layers: 30,
        n_embd: 576,
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
        rope_dim: None,
        n_ff: 1536,
        vocab: 49152,
        context_length: 8192,
        rope_base: 100000.0,
        norm_eps: 1e-5,
        sliding_window: None,
        softcaps: None,
        tied: true,
        rope: NamedRope::Plain,
        experts: None,
    },
    NamedShape {
        name: "gemma-3-270m",
        arch: "gemma3",
        n_layers: 18,
        n_embd: 640,
        n_heads: 4,
        n_kv_heads: 1,
        head_dim: 256,
        rope_dim: None,
        n_ff: 2048,
        vocab: 262144,
        context_length: 32768,
        rope_base: 1000000.0,
        norm_eps: 1e-6,
        sliding_window: Some(512),
        softcaps: None,
        tied: true,
        rope: NamedRope::Plain,
        experts: None,
    },
];

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
            NamedRope::Plain | NamedRope::Llama3(_) => {}
            NamedRope::Linear(factor) => {
                metadata.push((
                    format!("{a}.rope.scaling.type"),
                    Value::String("linear".into()),
                ));
                metadata.push((format!("{a}.rope.scaling.factor"), Value::F32(factor)));
            }
        }
        metadata.extend(self.tokenizer());
        let mut tensors = Vec::new();
        if let NamedRope::Llama3(scaling) = &self.rope {
            let divisors = scaling
                .divisors(self.rope_base as f64, self.head_dim)
                .into_iter()
                .map(|d| d as f32)
                .collect::<Vec<_>>();
            tensors.push((
                "rope_freqs.weight".to_string(),
                vec![divisors.len() as u64],
                Fill::Values(divisors),
            ));
        }
        let scale = ModelScale::new(self.arch, self.n_layers, self.n_embd);
        for (name, dims, _) in model.tensor_shapes() {
            let fill = fill_for(&name, &dims, scale)?;
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
