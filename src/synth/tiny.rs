//! Small synthetic models written as GGUF files, for tests: random weights (seeded) in the tensor layout and
//! metadata of any supported architecture, with any tensor replaceable by hand-built values. The families whose
//! blocks the common fields do not describe (GPT-OSS, DeepSeek, Gemma 4) have their layouts in `families.rs`.

mod families;

pub use families::{SyntheticGemma4, SyntheticMla, SyntheticYarn};

use crate::gguf::{Array, GgufWriter, Value};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use std::collections::BTreeMap;

/// The mixture of experts of a synthetic model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntheticExperts {
    /// Experts per layer.
    pub count: usize,
    /// Experts each token is routed to.
    pub used: usize,
    /// Each expert's feed-forward width.
    pub n_ff: usize,
    /// Shared experts every token runs beside the routed ones, as one block `shared · n_ff` wide (DeepSeek).
    pub shared: usize,
    /// Leading layers that keep the dense feed-forward block (DeepSeek's `first_k_dense_replace`).
    pub leading_dense: usize,
}

/// A tensor of a synthetic model: name, ggml dims, and whether it is a gain around 1 (a norm weight, or a
/// layer's output scale).
type TensorShape = (String, Vec<u64>, bool);

/// Shape and conventions of a synthetic model.
#[derive(Clone, Debug)]
pub struct SyntheticModel {
    /// `general.architecture` (any of [`crate::model::SUPPORTED`]).
    pub arch: String,
    /// Layers.
    pub n_layers: usize,
    /// Residual width.
    pub n_embd: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (DeepSeek: one per query head, as HF counts them; the file states one).
    pub n_kv_heads: usize,
    /// Head dimension (DeepSeek: of queries and keys, rotated part included; Gemma 4: of the global layers).
    pub head_dim: usize,
    /// Rotated dims per head (partial rotary when below `head_dim`).
    pub rope_dim: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Context length written to the metadata.
    pub context_length: usize,
    /// RoPE base.
    pub rope_base: f32,
    /// Sliding window written to the metadata (`gpt-oss` and `gemma4`, whose files always state one: 8).
    pub sliding_window: Option<u32>,
    /// Soft-capping (attention, final) written to the metadata: Gemma 2's 50 and 30 by default.
    pub softcaps: Option<(f32, f32)>,
    /// Whether the output head is tied to the embeddings (no `output.weight`).
    pub tied: bool,
    /// Seed of the random weights.
    pub seed: u64,
    /// Tensors given by hand (name → values in ggml order), replacing the random ones.
    pub overrides: BTreeMap<String, Vec<f32>>,
    /// The mixture of experts in place of every feed-forward block (`qwen3moe` and `gpt-oss`: 4 experts, 2 per
    /// token, each `n_ff` wide; `deepseek2`: 4 experts 16 wide, 2 shared, after 1 dense layer; unless changed).
    pub experts: Option<SyntheticExperts>,
    /// YaRN scaling written to the metadata (`gpt-oss`: factor 32 over 16 positions; `deepseek2`: factor 4 over
    /// 128, with DeepSeek-V2-Lite's log multiplier 0.0707).
    pub yarn: Option<SyntheticYarn>,
    /// Per-chunk RoPE divisors, written as the tensor `rope_freqs.weight` (`gemma4`: proportional RoPE rotating a
    /// quarter of the global heads, [`SyntheticModel::proportional_factors`]).
    pub rope_factors: Option<Vec<f32>>,
    /// DeepSeek's multi-head latent attention (`deepseek2`: a latent of 16, values of 8, heads of `head_dim` 12
    /// of which `rope_dim` 4 rotate).
    pub mla: Option<SyntheticMla>,
    /// Gemma 4's sliding and global layers, shared keys and values, per-layer inputs (`gemma4`: every 2nd layer
    /// global, sliding heads of 8 beside global heads of 16 of which 4 dims rotate at base 10⁶, per-layer inputs
    /// of 4, final soft-cap 30, no shared layers).
    pub gemma4: Option<SyntheticGemma4>,
}

impl SyntheticModel {
    /// A two-layer model of architecture `arch` with small random weights.
    pub fn new(arch: &str) -> Self {
        let mut m = Self {
            arch: arch.to_string(),
            n_layers: 2,
            n_embd: 32,
            n_heads: 4,
            n_kv_heads: 2,
            head_dim: 8,
            rope_dim: 8,
            n_ff: 48,
            vocab: 64,
            context_length: 512,
            rope_base: 10_000.0,
            sliding_window: None,
            softcaps: (arch == "gemma2").then_some((50.0, 30.0)),
            tied: arch.starts_with("gemma"),
            seed: 7,
            overrides: BTreeMap::new(),
            experts: (arch == "qwen3moe").then_some(SyntheticExperts {
                count: 4,
                used: 2,
                n_ff: 48,
                shared: 0,
                leading_dense: 0,
            }),
            yarn: None,
            rope_factors: None,
            mla: None,
            gemma4: None,
        };
        m.family_defaults();
        m
    }

    fn has_bias(&self) -> bool {
        matches!(self.arch.as_str(), "qwen2" | "gptneox" | "phi2" | "glm4")
    }
    /// LayerNorm with biases in place of RMSNorm, biases on every projection, a plain feed-forward block.
    fn layer_norm(&self) -> bool {
        matches!(self.arch.as_str(), "gptneox" | "phi2")
    }
    /// A LayerNorm without biases (Cohere).
    fn bias_free_layer_norm(&self) -> bool {
        self.arch == "cohere2"
    }
    /// One norm before the parallel attention and feed-forward blocks.
    fn shared_block_norm(&self) -> bool {
        matches!(self.arch.as_str(), "phi2" | "cohere2")
    }
    fn has_qk_norm(&self) -> bool {
        matches!(
            self.arch.as_str(),
            "qwen3" | "qwen3moe" | "gemma3" | "olmo2" | "exaone4"
        )
    }
    /// Whether the QK-norm spans each token's whole projection (olmo2) rather than each head.
    fn qk_norm_per_projection(&self) -> bool {
        self.arch == "olmo2"
    }
    fn has_pre_norms(&self) -> bool {
        !matches!(self.arch.as_str(), "olmo2" | "exaone4")
    }
    fn has_post_norms(&self) -> bool {
        matches!(
            self.arch.as_str(),
            "gemma2" | "gemma3" | "olmo2" | "exaone4" | "glm4"
        )
    }
    fn fused(&self) -> bool {
        matches!(self.arch.as_str(), "phi3" | "gptneox")
    }

    /// Every tensor as (name, ggml dims, whether it is a gain around 1: a norm weight or a layer's output scale).
    pub fn tensor_shapes(&self) -> Vec<(String, Vec<u64>, bool)> {
        let d = self.n_embd as u64;
        let mut t = Vec::new();
        if let Some(f) = &self.rope_factors {
            t.push(("rope_freqs.weight".to_string(), vec![f.len() as u64], false));
        }
        t.push((
            "token_embd.weight".to_string(),
            vec![d, self.vocab as u64],
            false,
        ));
        t.extend(self.family_inputs());
        for i in 0..self.n_layers {
            match self.family_block(i) {
                Some(block) => t.extend(block),
                None => self.common_block(i, &mut t),
            }
        }
        t.push(("output_norm.weight".to_string(), vec![d], true));
        if self.layer_norm() {
            t.push(("output_norm.bias".to_string(), vec![d], false));
        }
        t.extend(self.family_outputs());
        if !self.tied {
            t.push((
                "output.weight".to_string(),
                vec![d, self.vocab as u64],
                false,
            ));
        }
        if self.arch == "phi2" {
            t.push(("output.bias".to_string(), vec![self.vocab as u64], false));
        }
        t
    }

    /// The tensors of layer `i` of the common pre-norm (or post-norm, or parallel) transformer block.
    fn common_block(&self, i: usize, t: &mut Vec<TensorShape>) {
        let (d, hd, ff) = (self.n_embd as u64, self.head_dim as u64, self.n_ff as u64);
        let (q, kv) = (self.n_heads as u64 * hd, self.n_kv_heads as u64 * hd);
        let n = |s: &str| format!("blk.{i}.{s}");
        if self.has_pre_norms() {
            t.push((n("attn_norm.weight"), vec![d], true));
            if self.layer_norm() {
                t.push((n("attn_norm.bias"), vec![d], false));
            }
        }
        if self.fused() {
            t.push((n("attn_qkv.weight"), vec![d, q + 2 * kv], false));
            if self.has_bias() {
                t.push((n("attn_qkv.bias"), vec![q + 2 * kv], false));
            }
        } else {
            t.push((n("attn_q.weight"), vec![d, q], false));
            t.push((n("attn_k.weight"), vec![d, kv], false));
            t.push((n("attn_v.weight"), vec![d, kv], false));
            if self.has_bias() {
                t.push((n("attn_q.bias"), vec![q], false));
                t.push((n("attn_k.bias"), vec![kv], false));
                t.push((n("attn_v.bias"), vec![kv], false));
            }
        }
        if self.has_qk_norm() {
            let (qn, kn) = if self.qk_norm_per_projection() {
                (q, kv)
            } else {
                (hd, hd)
            };
            t.push((n("attn_q_norm.weight"), vec![qn], true));
            t.push((n("attn_k_norm.weight"), vec![kn], true));
        }
        t.push((n("attn_output.weight"), vec![q, d], false));
        if self.layer_norm() {
            t.push((n("attn_output.bias"), vec![d], false));
        }
        if self.has_post_norms() {
            t.push((n("post_attention_norm.weight"), vec![d], true));
        }
        if self.has_pre_norms() && !self.shared_block_norm() {
            t.push((n("ffn_norm.weight"), vec![d], true));
            if self.layer_norm() {
                t.push((n("ffn_norm.bias"), vec![d], false));
            }
        }
        if let Some(x) = self.experts {
            t.extend(families::routed_experts(i, d, x, false));
        } else if self.layer_norm() {
            t.push((n("ffn_up.weight"), vec![d, ff], false));
            t.push((n("ffn_up.bias"), vec![ff], false));
        } else if matches!(self.arch.as_str(), "phi3" | "glm4") {
            t.push((n("ffn_up.weight"), vec![d, 2 * ff], false));
        } else {
            t.push((n("ffn_gate.weight"), vec![d, ff], false));
            t.push((n("ffn_up.weight"), vec![d, ff], false));
        }
        if self.experts.is_none() {
            t.push((n("ffn_down.weight"), vec![ff, d], false));
        }
        if self.layer_norm() {
            t.push((n("ffn_down.bias"), vec![d], false));
        }
        if self.has_post_norms() {
            t.push((n("post_ffw_norm.weight"), vec![d], true));
        }
    }

    /// The metadata the file carries: the hyper-parameters the engine reads and a placeholder vocabulary.
    pub fn metadata(&self) -> Vec<(String, Value)> {
        let a = &self.arch;
        let u = |v: usize| Value::U32(v as u32);
        // The converter writes latent attention as one key/value head over the latent (llama.cpp's MQA form).
        let (kv_heads, key_length, value_length) = match self.mla {
            Some(mla) => (1, mla.kv_lora_rank + self.rope_dim, mla.kv_lora_rank),
            None => (self.n_kv_heads, self.head_dim, self.head_dim),
        };
        let mut m: Vec<(String, Value)> = vec![
            ("general.architecture".into(), Value::String(a.clone())),
            (format!("{a}.block_count"), u(self.n_layers)),
            (format!("{a}.embedding_length"), u(self.n_embd)),
            (
                format!("{a}.feed_forward_length"),
                self.feed_forward_length(),
            ),
            (format!("{a}.attention.head_count"), u(self.n_heads)),
            (format!("{a}.attention.head_count_kv"), u(kv_heads)),
            (format!("{a}.attention.key_length"), u(key_length)),
            (format!("{a}.attention.value_length"), u(value_length)),
            (format!("{a}.rope.dimension_count"), u(self.rope_dim)),
            (format!("{a}.rope.freq_base"), Value::F32(self.rope_base)),
            (format!("{a}.context_length"), u(self.context_length)),
            (
                match self.layer_norm() || self.bias_free_layer_norm() {
                    true => format!("{a}.attention.layer_norm_epsilon"),
                    false => format!("{a}.attention.layer_norm_rms_epsilon"),
                },
                Value::F32(1e-6),
            ),
            (
                "tokenizer.ggml.tokens".into(),
                Value::Array(Array::String(
                    (0..self.vocab).map(|i| format!("t{i}")).collect(),
                )),
            ),
        ];
        if let Some(sw) = self.sliding_window {
            m.push((format!("{a}.attention.sliding_window"), Value::U32(sw)));
        }
        if a == "gptneox" {
            m.push((format!("{a}.use_parallel_residual"), Value::Bool(true)));
        }
        if let Some(x) = self.experts {
            m.push((format!("{a}.expert_count"), u(x.count)));
            m.push((format!("{a}.expert_used_count"), u(x.used)));
            m.push((format!("{a}.expert_feed_forward_length"), u(x.n_ff)));
        }
        if a == "cohere2" {
            m.push((format!("{a}.logit_scale"), Value::F32(0.25)));
        }
        if a == "granite" {
            // Granite 3's multipliers, in the magnitudes of its 2B release.
            m.push((format!("{a}.embedding_scale"), Value::F32(12.0)));
            m.push((format!("{a}.residual_scale"), Value::F32(0.22)));
            m.push((format!("{a}.logit_scale"), Value::F32(8.0)));
            m.push((format!("{a}.attention.scale"), Value::F32(0.0078125)));
        }
        if let Some((attn, fin)) = self.softcaps {
            m.push((format!("{a}.attn_logit_softcapping"), Value::F32(attn)));
            m.push((format!("{a}.final_logit_softcapping"), Value::F32(fin)));
        }
        self.family_metadata(&mut m);
        m
    }

    /// The GGUF file as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = GgufWriter::new();
        w.metadata = self.metadata();
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        for (name, dims, is_norm) in self.tensor_shapes() {
            let n: u64 = dims.iter().product();
            let given = match (self.overrides.get(&name), &self.rope_factors) {
                (Some(v), _) => Some(v),
                (None, Some(f)) if name == "rope_freqs.weight" => Some(f),
                _ => None,
            };
            let values = match given {
                Some(v) => v.clone(),
                None => {
                    let scale = if is_norm {
                        0.1
                    } else {
                        1.0 / (dims[0] as f32).sqrt()
                    };
                    (0..n)
                        .map(|_| {
                            let z: f32 = rng.sample(StandardNormal);
                            if is_norm {
                                1.0 + scale * z
                            } else {
                                scale * z
                            }
                        })
                        .collect()
                }
            };
            w = w.tensor_f32(&name, &dims, &values);
        }
        w.to_bytes()
    }
}
