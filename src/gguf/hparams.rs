//! Typed access to a model's architecture hyper-parameters (`{arch}.*` metadata keys).

use super::file::GgufFile;
use super::value::{Array, Value};
use crate::error::{Error, Result};
use serde::Serialize;

/// The largest count a hyper-parameter key may hold (context lengths, sizes, head counts, windows): llama.cpp
/// reads each into 32 bits, and a value above it cannot describe a model that runs anywhere.
pub const MAX_COUNT: u64 = u32::MAX as u64;

/// RoPE base llama.cpp assumes when `{arch}.rope.freq_base` is absent.
pub const DEFAULT_ROPE_BASE: f64 = 10_000.0;

/// The hyper-parameters of a decoder-only transformer, read from GGUF metadata.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hparams {
    /// `general.architecture` (`llama`, `gemma3`, ...).
    pub architecture: String,
    /// `{arch}.block_count`.
    pub n_layers: usize,
    /// `{arch}.embedding_length` (model width).
    pub n_embd: usize,
    /// `{arch}.feed_forward_length` of layer 0, when present.
    pub n_ff: Option<usize>,
    /// `{arch}.feed_forward_length` per layer, where the file gives one per layer (an array).
    pub n_ff_per_layer: Option<Vec<usize>>,
    /// `{arch}.attention.head_count`.
    pub n_heads: usize,
    /// `{arch}.attention.head_count_kv` of layer 0 (defaults to `n_heads`).
    pub n_kv_heads: usize,
    /// `{arch}.attention.head_count_kv` per layer, where the file gives one per layer (an array).
    pub kv_heads_per_layer: Option<Vec<usize>>,
    /// `{arch}.attention.key_length_swa`: the sliding layers' head dimension where it differs (Gemma 4).
    pub head_dim_swa: Option<usize>,
    /// `{arch}.attention.value_length_swa`.
    pub value_dim_swa: Option<usize>,
    /// `{arch}.rope.dimension_count_swa`.
    pub rope_dim_swa: Option<usize>,
    /// `{arch}.attention.shared_kv_layers`: how many last layers attend over earlier layers' keys and values.
    pub shared_kv_layers: Option<usize>,
    /// `{arch}.embedding_length_per_layer_input`: the width of each layer's per-layer input (Gemma 4).
    pub per_layer_input: Option<usize>,
    /// `{arch}.interleave_moe_layer_step`: every how many layers a mixture of experts replaces the dense block
    /// (Llama 4).
    pub moe_every: Option<usize>,
    /// `{arch}.leading_dense_block_count`: the first layers keep a dense feed-forward block (DeepSeek).
    pub leading_dense: Option<usize>,
    /// `{arch}.expert_shared_count`: shared experts every token runs (DeepSeek).
    pub n_experts_shared: Option<usize>,
    /// `{arch}.expert_weights_scale`: multiplier of the routed experts' weights (DeepSeek).
    pub expert_weights_scale: Option<f64>,
    /// `{arch}.expert_weights_norm`: whether the chosen experts' weights are renormalised (DeepSeek).
    pub expert_weights_norm: Option<bool>,
    /// `{arch}.expert_gating_func`: 1 softmax, 2 sigmoid (DeepSeek).
    pub expert_gating_func: Option<usize>,
    /// `{arch}.expert_group_count`: groups of experts a router first chooses among (DeepSeek).
    pub expert_groups: Option<usize>,
    /// `{arch}.expert_group_used_count`: groups a router keeps (DeepSeek).
    pub expert_groups_used: Option<usize>,
    /// `{arch}.attention.q_lora_rank`: the rank of low-rank queries (DeepSeek's MLA), when they are.
    pub q_lora_rank: Option<usize>,
    /// `{arch}.attention.kv_lora_rank`: the width of the latent keys and values are decompressed from (MLA).
    pub kv_lora_rank: Option<usize>,
    /// `{arch}.attention.key_length_mla`: an MLA head's query/key dimension (unrotated and rotated parts).
    pub head_dim_mla: Option<usize>,
    /// `{arch}.attention.value_length_mla`: an MLA head's value dimension.
    pub value_dim_mla: Option<usize>,
    /// `{arch}.attention.key_length` (defaults to `n_embd / n_heads`).
    pub head_dim: usize,
    /// `{arch}.attention.value_length` (defaults to `head_dim`).
    pub value_dim: usize,
    /// `{arch}.rope.freq_base` (defaults to [`DEFAULT_ROPE_BASE`]).
    pub rope_base: f64,
    /// `{arch}.rope.dimension_count` (defaults to `head_dim`).
    pub rope_dim: usize,
    /// `{arch}.rope.freq_base_swa`: RoPE base of the sliding-window layers, when present.
    pub rope_base_swa: Option<f64>,
    /// The `{arch}.rope.scaling.*` keys, as stored.
    pub rope_scaling: RopeScalingKeys,
    /// `{arch}.context_length`.
    pub context_length: usize,
    /// `{arch}.attention.sliding_window`, when present.
    pub sliding_window: Option<usize>,
    /// `{arch}.attention.sliding_window_pattern`: per layer, whether it uses the sliding window, when present.
    pub sliding_window_pattern: Option<Vec<bool>>,
    /// `{arch}.attention.layer_norm_rms_epsilon`, when present.
    pub rms_eps: Option<f64>,
    /// `{arch}.attention.layer_norm_epsilon`, when present.
    pub norm_eps: Option<f64>,
    /// `{arch}.attn_logit_softcapping`, when present.
    pub attn_softcap: Option<f64>,
    /// `{arch}.final_logit_softcapping`, when present.
    pub final_softcap: Option<f64>,
    /// Vocabulary size: length of `tokenizer.ggml.tokens`, else `{arch}.vocab_size`.
    pub vocab_size: Option<usize>,
    /// `{arch}.use_parallel_residual` (GPT-NeoX), when present.
    pub parallel_residual: Option<bool>,
    /// `{arch}.embedding_scale` (Granite's embedding multiplier), when present.
    pub embedding_scale: Option<f64>,
    /// `{arch}.residual_scale` (Granite's residual multiplier), when present.
    pub residual_scale: Option<f64>,
    /// `{arch}.logit_scale` (Granite's logits divisor), when present.
    pub logit_scale: Option<f64>,
    /// `{arch}.attention.scale` (the multiplier of `q·k` in place of `head_dim^-1/2`), when present.
    pub attention_scale: Option<f64>,
    /// `{arch}.expert_count`: experts of a mixture-of-experts feed-forward block, when present.
    pub n_experts: Option<usize>,
    /// `{arch}.expert_used_count`: experts each token is routed to, when present.
    pub n_experts_used: Option<usize>,
    /// `{arch}.expert_feed_forward_length`: each expert's feed-forward width, when present.
    pub n_ff_expert: Option<usize>,
}

/// The `{arch}.rope.scaling.*` keys of a file (llama.cpp's names), each checked to be finite and positive.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RopeScalingKeys {
    /// `rope.scaling.type`: `none`, `linear`, `yarn`, `longrope`, ...
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `rope.scaling.factor`.
    pub factor: Option<f64>,
    /// `rope.scaling.original_context_length`.
    pub original_context: Option<usize>,
    /// `rope.scaling.attn_factor` (LongRoPE's magnitude as the converter writes it).
    pub attn_factor: Option<f64>,
    /// `rope.scaling.yarn_beta_fast`.
    pub yarn_beta_fast: Option<f64>,
    /// `rope.scaling.yarn_beta_slow`.
    pub yarn_beta_slow: Option<f64>,
    /// `rope.scaling.yarn_ext_factor`.
    pub yarn_ext_factor: Option<f64>,
    /// `rope.scaling.yarn_attn_factor` (HF's explicit `attention_factor`).
    pub yarn_attn_factor: Option<f64>,
    /// `rope.scaling.yarn_log_multiplier`: DeepSeek's `0.1 · mscale_all_dim`.
    pub yarn_log_multiplier: Option<f64>,
}

impl RopeScalingKeys {
    fn read(file: &GgufFile, arch: &str) -> Result<Self> {
        let key = |k: &str| format!("{arch}.rope.scaling.{k}");
        let positive = |k: &str| file.get_positive_f64(&key(k));
        Ok(Self {
            kind: file.get_str(&key("type"))?.map(str::to_string),
            factor: positive("factor")?,
            original_context: file.get_count(&key("original_context_length"))?,
            attn_factor: positive("attn_factor")?,
            yarn_beta_fast: positive("yarn_beta_fast")?,
            yarn_beta_slow: positive("yarn_beta_slow")?,
            yarn_ext_factor: positive("yarn_ext_factor")?,
            yarn_attn_factor: positive("yarn_attn_factor")?,
            yarn_log_multiplier: positive("yarn_log_multiplier")?,
        })
    }
}

impl Hparams {
    /// Layer `i`'s key/value heads.
    pub fn kv_heads_of(&self, i: usize) -> usize {
        self.kv_heads_per_layer
            .as_ref()
            .and_then(|v| v.get(i).copied())
            .unwrap_or(self.n_kv_heads)
    }

    /// Layer `i`'s feed-forward width, when the file states one.
    pub fn n_ff_of(&self, i: usize) -> Option<usize> {
        self.n_ff_per_layer
            .as_ref()
            .and_then(|v| v.get(i).copied())
            .or(self.n_ff)
    }
}

impl Hparams {
    /// Reads the hyper-parameters of `file`; a missing required key is an error naming it.
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let architecture = file.architecture()?.to_string();
        let key = |k: &str| format!("{architecture}.{k}");
        let req = |k: &str| {
            file.get_count(&key(k))?
                .ok_or_else(|| Error::MissingKey(key(k)))
        };
        let n_layers = req("block_count")?;
        let n_embd = req("embedding_length")?;
        let heads_per_layer = file.get_per_layer(&key("attention.head_count"), n_layers)?;
        if heads_per_layer
            .as_deref()
            .is_some_and(|v| v.iter().any(|&n| n != v[0]))
        {
            return Err(Error::BadValue {
                key: key("attention.head_count"),
                problem: "per-layer query head counts that differ between layers are not supported"
                    .into(),
            });
        }
        let n_heads = file
            .get_first_count(&key("attention.head_count"), heads_per_layer.as_deref())?
            .ok_or_else(|| Error::MissingKey(key("attention.head_count")))?;
        if n_heads == 0 {
            return Err(Error::BadValue {
                key: key("attention.head_count"),
                problem: "is zero".into(),
            });
        }
        let kv_heads_per_layer = file.get_per_layer(&key("attention.head_count_kv"), n_layers)?;
        let n_kv_heads = file
            .get_first_count(
                &key("attention.head_count_kv"),
                kv_heads_per_layer.as_deref(),
            )?
            .unwrap_or(n_heads);
        let n_ff_per_layer = file.get_per_layer(&key("feed_forward_length"), n_layers)?;
        let n_ff = file.get_first_count(&key("feed_forward_length"), n_ff_per_layer.as_deref())?;
        let head_dim = match file.get_count(&key("attention.key_length"))? {
            Some(d) => d,
            None if n_embd % n_heads == 0 => n_embd / n_heads,
            None => return Err(Error::MissingKey(key("attention.key_length"))),
        };
        let value_dim = file
            .get_count(&key("attention.value_length"))?
            .unwrap_or(head_dim);
        let rope_dim = file
            .get_count(&key("rope.dimension_count"))?
            .unwrap_or(head_dim);
        // The key is read (and its type checked) even when the tokens give the size.
        let vocab_key = file.get_count(&key("vocab_size"))?;
        let vocab_size = match file.get("tokenizer.ggml.tokens").and_then(Value::as_array) {
            Some(tokens) => Some(tokens.len()),
            None => vocab_key,
        };
        Ok(Self {
            n_layers,
            n_embd,
            n_ff,
            n_ff_per_layer,
            n_heads,
            n_kv_heads,
            kv_heads_per_layer,
            head_dim,
            value_dim,
            rope_base: file
                .get_positive_f64(&key("rope.freq_base"))?
                .unwrap_or(DEFAULT_ROPE_BASE),
            rope_dim,
            rope_base_swa: file.get_positive_f64(&key("rope.freq_base_swa"))?,
            rope_scaling: RopeScalingKeys::read(file, &architecture)?,
            context_length: req("context_length")?,
            sliding_window: file.get_count(&key("attention.sliding_window"))?,
            sliding_window_pattern: file.get_bools(&key("attention.sliding_window_pattern"))?,
            rms_eps: file.get_f64(&key("attention.layer_norm_rms_epsilon"))?,
            norm_eps: file.get_f64(&key("attention.layer_norm_epsilon"))?,
            attn_softcap: file.get_f64(&key("attn_logit_softcapping"))?,
            final_softcap: file.get_f64(&key("final_logit_softcapping"))?,
            vocab_size,
            parallel_residual: file.get_bool(&key("use_parallel_residual"))?,
            embedding_scale: file.get_positive_f64(&key("embedding_scale"))?,
            residual_scale: file.get_positive_f64(&key("residual_scale"))?,
            logit_scale: file.get_positive_f64(&key("logit_scale"))?,
            attention_scale: file.get_positive_f64(&key("attention.scale"))?,
            head_dim_swa: file.get_count(&key("attention.key_length_swa"))?,
            value_dim_swa: file.get_count(&key("attention.value_length_swa"))?,
            rope_dim_swa: file.get_count(&key("rope.dimension_count_swa"))?,
            shared_kv_layers: file.get_count(&key("attention.shared_kv_layers"))?,
            per_layer_input: file.get_count(&key("embedding_length_per_layer_input"))?,
            moe_every: file.get_count(&key("interleave_moe_layer_step"))?,
            leading_dense: file.get_count(&key("leading_dense_block_count"))?,
            n_experts_shared: file.get_count(&key("expert_shared_count"))?,
            expert_weights_scale: file.get_f64(&key("expert_weights_scale"))?,
            expert_weights_norm: file.get_bool(&key("expert_weights_norm"))?,
            expert_gating_func: file.get_count(&key("expert_gating_func"))?,
            expert_groups: file.get_count(&key("expert_group_count"))?,
            expert_groups_used: file.get_count(&key("expert_group_used_count"))?,
            q_lora_rank: file.get_count(&key("attention.q_lora_rank"))?,
            kv_lora_rank: file.get_count(&key("attention.kv_lora_rank"))?,
            head_dim_mla: file.get_count(&key("attention.key_length_mla"))?,
            value_dim_mla: file.get_count(&key("attention.value_length_mla"))?,
            n_experts: file.get_count(&key("expert_count"))?,
            n_experts_used: file.get_count(&key("expert_used_count"))?,
            n_ff_expert: file.get_count(&key("expert_feed_forward_length"))?,
            architecture,
        })
    }
}

impl GgufFile {
    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")?
            .ok_or_else(|| Error::MissingKey("general.architecture".into()))
    }

    /// A non-negative integer metadata value that fits `usize`; `Ok(None)` when the key is absent.
    pub fn get_usize(&self, key: &str) -> Result<Option<usize>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|x| usize::try_from(x).ok())
                .map(Some)
                .ok_or_else(|| Error::BadValue {
                    key: key.into(),
                    problem: format!("expected a non-negative integer, found {v:?}"),
                }),
        }
    }

    /// A count of the model's hyper-parameters: a non-negative integer of at most [`MAX_COUNT`]; `Ok(None)`
    /// when the key is absent.
    pub fn get_count(&self, key: &str) -> Result<Option<usize>> {
        match self.get_usize(key)? {
            Some(n) if n as u64 > MAX_COUNT => Err(Error::BadValue {
                key: key.into(),
                problem: format!(
                    "{n} is above {MAX_COUNT} (must fit the 32 bits llama.cpp reads it into)"
                ),
            }),
            n => Ok(n),
        }
    }

    /// A numeric metadata value as f64; `Ok(None)` when the key is absent.
    pub fn get_f64(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| Error::BadValue {
                key: key.into(),
                problem: format!("expected a number, found {v:?}"),
            }),
        }
    }

    /// A finite, strictly positive numeric value as f64, also finite and positive when rounded to f32 (the
    /// precision GGUF stores these values in, and llama.cpp reads them in); `Ok(None)` when the key is absent.
    pub fn get_positive_f64(&self, key: &str) -> Result<Option<f64>> {
        match self.get_f64(key)? {
            Some(x) if !(x.is_finite() && x > 0.0) => Err(Error::BadValue {
                key: key.into(),
                problem: format!("{x} is not a finite positive number"),
            }),
            Some(x) if !((x as f32).is_finite() && x as f32 > 0.0) => Err(Error::BadValue {
                key: key.into(),
                problem: format!(
                    "{x:e} is {} in f32 (must be finite and positive when rounded to f32)",
                    x as f32
                ),
            }),
            v => Ok(v),
        }
    }

    /// A boolean metadata value; `Ok(None)` when the key is absent.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(Error::BadValue {
                key: key.into(),
                problem: format!("expected a boolean, found {}", type_name(v)),
            }),
        }
    }

    /// An array of booleans; `Ok(None)` when the key is absent.
    pub fn get_bools(&self, key: &str) -> Result<Option<Vec<bool>>> {
        let Some(array) = self.get_array(key)? else {
            return Ok(None);
        };
        array.to_bools().map(Some).ok_or_else(|| Error::BadValue {
            key: key.into(),
            problem: "expected an array of booleans".into(),
        })
    }

    /// A string metadata value; `Ok(None)` when the key is absent.
    pub fn get_str(&self, key: &str) -> Result<Option<&str>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| Error::BadValue {
                key: key.into(),
                problem: format!("expected a string, found {}", type_name(v)),
            }),
        }
    }

    /// An array metadata value, in full; `Ok(None)` when the key is absent.
    pub fn get_array(&self, key: &str) -> Result<Option<&Array>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_array().map(Some).ok_or_else(|| Error::BadValue {
                key: key.into(),
                problem: format!("expected an array, found {}", type_name(v)),
            }),
        }
    }

    /// A head count stored either as one integer or as a per-layer array, one entry per layer of `n_layers`
    /// (as llama.cpp requires), whose entries are all equal.
    /// A count stated as one entry per layer (an array of `n_layers` counts, each at most [`MAX_COUNT`]);
    /// `Ok(None)` when the key is absent or states one count for every layer ([`GgufFile::get_first_count`]
    /// reads it: no vector is made from a layer count not yet checked against the tensors).
    fn get_per_layer(&self, key: &str, n_layers: usize) -> Result<Option<Vec<usize>>> {
        match self.get(key) {
            Some(Value::Array(a)) if a.len() != n_layers => Err(Error::BadValue {
                key: key.into(),
                problem: format!(
                    "{} entries for {n_layers} layers (must be one entry per layer)",
                    a.len()
                ),
            }),
            Some(Value::Array(a)) => {
                let v = a.to_i64s().unwrap_or_default();
                if v.len() != n_layers || v.iter().any(|x| !(0..=MAX_COUNT as i64).contains(x)) {
                    return Err(Error::BadValue {
                        key: key.into(),
                        problem: format!("must hold {n_layers} integers from 0 to {MAX_COUNT}"),
                    });
                }
                Ok(Some(v.into_iter().map(|x| x as usize).collect()))
            }
            _ => Ok(None),
        }
    }

    /// Layer 0's entry of a per-layer count ([`GgufFile::get_per_layer`]), or the count itself when the file
    /// states one for every layer (also with no layers).
    fn get_first_count(&self, key: &str, per_layer: Option<&[usize]>) -> Result<Option<usize>> {
        match self.get(key) {
            Some(Value::Array(_)) => Ok(per_layer.and_then(|v| v.first().copied())),
            _ => self.get_count(key),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Bool(_) => "a bool",
        Value::F32(_) | Value::F64(_) => "a float",
        _ => "an integer",
    }
}
