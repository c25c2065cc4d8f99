//! The families whose blocks the common fields of [`SyntheticModel`] do not describe, each with the metadata keys
//! and tensors llama.cpp's converter writes for it: GPT-OSS (attention sinks, biases on the projections and on
//! the experts), DeepSeek (multi-head latent attention, shared experts after dense leading layers) and Gemma 4
//! (sliding and global layers of different head dimensions, keys and values shared by the last layers, per-layer
//! inputs).

use super::{SyntheticExperts, SyntheticModel, TensorShape};
use crate::gguf::{Array, Value};

/// The `rope_freqs.weight` divisor of a chunk that does not rotate, as the converter writes it for Gemma 4's
/// proportional RoPE.
const NOT_ROTATED: f32 = 1e30;

/// YaRN RoPE scaling, written as the converter writes HF's `rope_scaling` (`rope.scaling.*` keys).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticYarn {
    /// `factor`: the context extension.
    pub factor: f32,
    /// `original_max_position_embeddings`.
    pub original_context: usize,
    /// `beta_fast`.
    pub beta_fast: f32,
    /// `beta_slow`.
    pub beta_slow: f32,
    /// `rope.scaling.yarn_log_multiplier`, DeepSeek's `0.1 · mscale_all_dim`, when the model has one.
    pub log_multiplier: Option<f32>,
}

/// DeepSeek's multi-head latent attention (without low-rank queries, as DeepSeek-V2-Lite): each head's key is
/// `head_dim` wide, of which the last `rope_dim` rotate (one rotated part shared by every head); keys' unrotated
/// parts and values are decompressed per head from a normed latent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntheticMla {
    /// `kv_lora_rank`: the width of the latent.
    pub kv_lora_rank: usize,
    /// `v_head_dim`: each head's value dimension.
    pub value_dim: usize,
}

/// Gemma 4's layout: the model's `head_dim`, `rope_base` and `rope_factors` are the global layers' (HF's
/// `global_head_dim` and full-attention RoPE); the sliding layers rotate their whole, narrower heads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticGemma4 {
    /// Head dimension of the sliding layers (HF's `head_dim`).
    pub head_dim_swa: usize,
    /// RoPE base of the sliding layers.
    pub rope_base_swa: f32,
    /// Every how many layers one is global, the last of each period (0: none).
    pub global_every: usize,
    /// How many last layers attend over the keys and values of the last earlier layer of their kind
    /// (`num_kv_shared_layers`).
    pub shared_kv_layers: usize,
    /// Whether those layers' feed-forward blocks are twice `n_ff` wide (`use_double_wide_mlp`).
    pub double_wide: bool,
    /// Width of each layer's per-layer input (`hidden_size_per_layer_input`; 0: none).
    pub per_layer_input: usize,
    /// Soft-cap of the final logits.
    pub final_softcap: f32,
}

impl SyntheticGemma4 {
    /// Whether layer `i` uses the sliding window.
    fn slides(&self, i: usize) -> bool {
        // (A multiple of 0 is 0 alone: with `global_every` 0 every layer slides.)
        !(i + 1).is_multiple_of(self.global_every)
    }
}

impl SyntheticModel {
    /// Proportional RoPE's divisors for heads of `head_dim` of which the first `rot_dim` dimensions rotate: 1 for
    /// each rotating chunk, 1e30 for the others (llama.cpp's `rope_freqs.weight` for Gemma 4's global layers).
    pub fn proportional_factors(head_dim: usize, rot_dim: usize) -> Vec<f32> {
        (0..head_dim / 2)
            .map(|c| if c < rot_dim / 2 { 1.0 } else { NOT_ROTATED })
            .collect()
    }

    /// Sets the defaults of the families of this module (the other families have none beyond the common ones).
    pub(super) fn family_defaults(&mut self) {
        let experts = |n_ff, shared, leading_dense| SyntheticExperts {
            count: 4,
            used: 2,
            n_ff,
            shared,
            leading_dense,
        };
        let yarn = |factor, original_context, log_multiplier| SyntheticYarn {
            factor,
            original_context,
            beta_fast: 32.0,
            beta_slow: 1.0,
            log_multiplier,
        };
        match self.arch.as_str() {
            "gpt-oss" => {
                self.sliding_window = Some(8);
                self.experts = Some(experts(self.n_ff, 0, 0));
                self.yarn = Some(yarn(32.0, 16, None));
            }
            "deepseek2" => {
                (self.head_dim, self.rope_dim, self.n_kv_heads) = (12, 4, self.n_heads);
                self.mla = Some(SyntheticMla {
                    kv_lora_rank: 16,
                    value_dim: 8,
                });
                self.experts = Some(experts(16, 2, 1));
                self.yarn = Some(yarn(4.0, 128, Some(0.0707)));
            }
            "gemma4" => {
                (self.head_dim, self.rope_dim, self.rope_base) = (16, 16, 1_000_000.0);
                self.sliding_window = Some(8);
                self.rope_factors = Some(Self::proportional_factors(16, 4));
                self.gemma4 = Some(SyntheticGemma4 {
                    head_dim_swa: 8,
                    rope_base_swa: 10_000.0,
                    global_every: 2,
                    shared_kv_layers: 0,
                    double_wide: false,
                    per_layer_input: 4,
                    final_softcap: 30.0,
                });
            }
            _ => {}
        }
    }

    /// `feed_forward_length`: one width, or one per layer where Gemma 4's shared-KV layers are twice as wide.
    pub(super) fn feed_forward_length(&self) -> Value {
        match self.gemma4 {
            Some(g) if g.double_wide => Value::Array(Array::I32(
                (0..self.n_layers)
                    .map(|i| (self.n_ff * self.ffn_widening(i, g)) as i32)
                    .collect(),
            )),
            _ => Value::U32(self.n_ff as u32),
        }
    }

    /// 2 on Gemma 4's double-wide layers, else 1.
    fn ffn_widening(&self, i: usize, g: SyntheticGemma4) -> usize {
        match g.double_wide && i + g.shared_kv_layers >= self.n_layers {
            true => 2,
            false => 1,
        }
    }

    /// Appends the keys of YaRN scaling and of this module's families to the common metadata `m`.
    pub(super) fn family_metadata(&self, m: &mut Vec<(String, Value)>) {
        let a = &self.arch;
        let u = |v: usize| Value::U32(v as u32);
        if let Some(y) = self.yarn {
            m.push((
                format!("{a}.rope.scaling.type"),
                Value::String("yarn".into()),
            ));
            m.push((format!("{a}.rope.scaling.factor"), Value::F32(y.factor)));
            m.push((
                format!("{a}.rope.scaling.original_context_length"),
                u(y.original_context),
            ));
            m.push((
                format!("{a}.rope.scaling.yarn_beta_fast"),
                Value::F32(y.beta_fast),
            ));
            m.push((
                format!("{a}.rope.scaling.yarn_beta_slow"),
                Value::F32(y.beta_slow),
            ));
            if let Some(l) = y.log_multiplier {
                m.push((
                    format!("{a}.rope.scaling.yarn_log_multiplier"),
                    Value::F32(l),
                ));
            }
        }
        match a.as_str() {
            "gpt-oss" => {
                // The converter writes no rotated-dimension count for GPT-OSS, whose heads rotate whole.
                let key = format!("{a}.rope.dimension_count");
                m.retain(|(k, _)| *k != key);
            }
            "deepseek2" => {
                m.push((format!("{a}.vocab_size"), u(self.vocab)));
                if let Some(mla) = self.mla {
                    m.push((format!("{a}.attention.kv_lora_rank"), u(mla.kv_lora_rank)));
                    m.push((format!("{a}.attention.key_length_mla"), u(self.head_dim)));
                    m.push((format!("{a}.attention.value_length_mla"), u(mla.value_dim)));
                }
                if let Some(x) = self.experts {
                    m.push((format!("{a}.leading_dense_block_count"), u(x.leading_dense)));
                    m.push((format!("{a}.expert_shared_count"), u(x.shared)));
                    // DeepSeek-V2-Lite's router: a softmax over every expert in one group, the chosen experts'
                    // weights neither renormalised (no `expert_weights_norm`) nor scaled.
                    m.push((format!("{a}.expert_weights_scale"), Value::F32(1.0)));
                    m.push((format!("{a}.expert_gating_func"), u(1)));
                    m.push((format!("{a}.expert_group_count"), u(1)));
                    m.push((format!("{a}.expert_group_used_count"), u(1)));
                }
            }
            "gemma4" => {
                if let Some(g) = self.gemma4 {
                    let pattern = (0..self.n_layers).map(|i| g.slides(i)).collect();
                    m.extend([
                        (
                            format!("{a}.rope.freq_base_swa"),
                            Value::F32(g.rope_base_swa),
                        ),
                        (
                            format!("{a}.final_logit_softcapping"),
                            Value::F32(g.final_softcap),
                        ),
                        (
                            format!("{a}.attention.shared_kv_layers"),
                            u(g.shared_kv_layers),
                        ),
                        (
                            format!("{a}.embedding_length_per_layer_input"),
                            u(g.per_layer_input),
                        ),
                        (
                            format!("{a}.attention.sliding_window_pattern"),
                            Value::Array(Array::Bool(pattern)),
                        ),
                        (format!("{a}.attention.key_length_swa"), u(g.head_dim_swa)),
                        (format!("{a}.attention.value_length_swa"), u(g.head_dim_swa)),
                        (format!("{a}.rope.dimension_count_swa"), u(g.head_dim_swa)),
                    ]);
                }
            }
            _ => {}
        }
    }

    /// Tensors after the token embeddings and before the blocks: Gemma 4's per-layer embeddings.
    pub(super) fn family_inputs(&self) -> Vec<TensorShape> {
        match self.per_layer_input() {
            0 => Vec::new(),
            p => vec![(
                "per_layer_token_embd.weight".into(),
                vec![(self.n_layers * p) as u64, self.vocab as u64],
                false,
            )],
        }
    }

    /// Tensors after the final norm: Gemma 4's projection of the stream to per-layer inputs, and its norm.
    pub(super) fn family_outputs(&self) -> Vec<TensorShape> {
        match self.per_layer_input() {
            0 => Vec::new(),
            p => vec![
                (
                    "per_layer_model_proj.weight".into(),
                    vec![self.n_embd as u64, (self.n_layers * p) as u64],
                    false,
                ),
                ("per_layer_proj_norm.weight".into(), vec![p as u64], true),
            ],
        }
    }

    fn per_layer_input(&self) -> usize {
        self.gemma4.map_or(0, |g| g.per_layer_input)
    }

    /// The tensors of block `i` for this module's families; `None` for the common block.
    pub(super) fn family_block(&self, i: usize) -> Option<Vec<TensorShape>> {
        match self.arch.as_str() {
            "gpt-oss" => Some(self.gpt_oss_block(i)),
            "deepseek2" => self.mla.map(|mla| self.deepseek2_block(i, mla)),
            "gemma4" => self.gemma4.map(|g| self.gemma4_block(i, g)),
            _ => None,
        }
    }

    fn gpt_oss_block(&self, i: usize) -> Vec<TensorShape> {
        let (d, hd) = (self.n_embd as u64, self.head_dim as u64);
        let (q, kv) = (self.n_heads as u64 * hd, self.n_kv_heads as u64 * hd);
        let n = |s: &str| format!("blk.{i}.{s}");
        let mut t = vec![
            (n("attn_norm.weight"), vec![d], true),
            (n("attn_q.weight"), vec![d, q], false),
            (n("attn_q.bias"), vec![q], false),
            (n("attn_k.weight"), vec![d, kv], false),
            (n("attn_k.bias"), vec![kv], false),
            (n("attn_v.weight"), vec![d, kv], false),
            (n("attn_v.bias"), vec![kv], false),
            (n("attn_output.weight"), vec![q, d], false),
            (n("attn_output.bias"), vec![d], false),
            (n("attn_sinks.weight"), vec![self.n_heads as u64], false),
            // The feed-forward block's pre-norm, under the name the converter gives it.
            (n("post_attention_norm.weight"), vec![d], true),
        ];
        if let Some(x) = self.experts {
            t.extend(routed_experts(i, d, x, true));
        }
        t
    }

    fn deepseek2_block(&self, i: usize, mla: SyntheticMla) -> Vec<TensorShape> {
        let (d, h, hd) = (
            self.n_embd as u64,
            self.n_heads as u64,
            self.head_dim as u64,
        );
        let (r, rank, vd) = (
            self.rope_dim as u64,
            mla.kv_lora_rank as u64,
            mla.value_dim as u64,
        );
        let n = |s: &str| format!("blk.{i}.{s}");
        let mut t = vec![
            (n("attn_norm.weight"), vec![d], true),
            (n("attn_q.weight"), vec![d, h * hd], false),
            (n("attn_kv_a_mqa.weight"), vec![d, rank + r], false),
            (n("attn_kv_a_norm.weight"), vec![rank], true),
            (
                n("attn_k_b.weight"),
                vec![hd.saturating_sub(r), rank, h],
                false,
            ),
            (n("attn_v_b.weight"), vec![rank, vd, h], false),
            (n("attn_output.weight"), vec![h * vd, d], false),
            (n("ffn_norm.weight"), vec![d], true),
        ];
        match self.experts {
            Some(x) if i >= x.leading_dense => {
                t.extend(routed_experts(i, d, x, false));
                if x.shared > 0 {
                    let sf = (x.shared * x.n_ff) as u64;
                    t.push((n("ffn_gate_shexp.weight"), vec![d, sf], false));
                    t.push((n("ffn_up_shexp.weight"), vec![d, sf], false));
                    t.push((n("ffn_down_shexp.weight"), vec![sf, d], false));
                }
            }
            _ => t.extend(gated_ffn(i, d, self.n_ff as u64)),
        }
        t
    }

    fn gemma4_block(&self, i: usize, g: SyntheticGemma4) -> Vec<TensorShape> {
        let d = self.n_embd as u64;
        let hd = match g.slides(i) {
            true => g.head_dim_swa,
            false => self.head_dim,
        } as u64;
        let (q, kv) = (self.n_heads as u64 * hd, self.n_kv_heads as u64 * hd);
        let own_kv = i + g.shared_kv_layers < self.n_layers;
        let n = |s: &str| format!("blk.{i}.{s}");
        let mut t = vec![
            (n("attn_norm.weight"), vec![d], true),
            (n("attn_q.weight"), vec![d, q], false),
        ];
        if own_kv {
            t.push((n("attn_k.weight"), vec![d, kv], false));
            t.push((n("attn_v.weight"), vec![d, kv], false));
        }
        t.push((n("attn_q_norm.weight"), vec![hd], true));
        if own_kv {
            t.push((n("attn_k_norm.weight"), vec![hd], true));
        }
        t.push((n("attn_output.weight"), vec![q, d], false));
        t.push((n("post_attention_norm.weight"), vec![d], true));
        t.push((n("ffn_norm.weight"), vec![d], true));
        let ff = (self.n_ff * self.ffn_widening(i, g)) as u64;
        t.extend(gated_ffn(i, d, ff));
        t.push((n("post_ffw_norm.weight"), vec![d], true));
        if g.per_layer_input > 0 {
            let p = g.per_layer_input as u64;
            t.push((n("inp_gate.weight"), vec![d, p], false));
            t.push((n("proj.weight"), vec![p, d], false));
            t.push((n("post_norm.weight"), vec![d], true));
        }
        // The layer's scale of the whole stream, a gain around 1 (HF's `layer_scalar`).
        t.push((n("layer_output_scale.weight"), vec![1], true));
        t
    }
}

/// A gated feed-forward block of width `ff` in block `i`.
fn gated_ffn(i: usize, d: u64, ff: u64) -> Vec<TensorShape> {
    vec![
        (format!("blk.{i}.ffn_gate.weight"), vec![d, ff], false),
        (format!("blk.{i}.ffn_up.weight"), vec![d, ff], false),
        (format!("blk.{i}.ffn_down.weight"), vec![ff, d], false),
    ]
}

/// The router and the experts' 3-D projections of block `i`, each followed by its bias when `biases`.
pub(super) fn routed_experts(
    i: usize,
    d: u64,
    x: SyntheticExperts,
    biases: bool,
) -> Vec<TensorShape> {
    let (e, xf) = (x.count as u64, x.n_ff as u64);
    let n = |s: &str| format!("blk.{i}.{s}");
    let mut t = Vec::new();
    for (name, dims, bias) in [
        ("ffn_gate_inp", vec![d, e], vec![e]),
        ("ffn_gate_exps", vec![d, xf, e], vec![xf, e]),
        ("ffn_up_exps", vec![d, xf, e], vec![xf, e]),
        ("ffn_down_exps", vec![xf, d, e], vec![d, e]),
    ] {
        t.push((n(&format!("{name}.weight")), dims, false));
        if biases {
            t.push((n(&format!("{name}.bias")), bias, false));
        }
    }
    t
}
