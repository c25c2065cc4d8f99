//! A model's weights from GGUF: the matrices as [`WeightMatrix`] views of the file (kept in their encoding), the
//! norm weights and biases as vectors of the engine's precision.
//!
//! A GGUF weight of dims `[in, out]` (ggml order) is the row-major `out × in` matrix `W` of `y = W x`. Every
//! shape and storage type is checked against the configuration at load, so a forward pass cannot meet a bad
//! tensor. Fused tensors (`attn_qkv`, phi3's doubled `ffn_up`) are split into their parts.

use super::arithmetic::Arithmetic;
use super::config::{FeedForward, ModelConfig, Norm, QkNorm, Residual};
use super::matrix::{PanelBudget, WeightMatrix};
use super::ops;
use crate::error::{Error, Result};
use crate::gguf::{GgufFile, TensorInfo};
use crate::numeric::Real;

/// A norm of the residual stream: its kind, gains, and biases where it has them (LayerNorm).
#[derive(Clone, Debug)]
pub struct NormWeights<T> {
    /// RMSNorm or LayerNorm.
    pub kind: Norm,
    /// Gains.
    pub w: Vec<T>,
    /// Biases (a LayerNorm's `b`).
    pub b: Option<Vec<T>>,
}

impl<T: Real> NormWeights<T> {
    /// Every `w.len()`-wide row of `x` (of any precision: the engine keeps the residual stream in f64), normed
    /// in f64 and rounded once to `T`.
    pub fn normed<S: Real>(&self, x: &[S], eps: ops::NormEps) -> Vec<T> {
        match self.kind {
            Norm::Rms => ops::rms_normed(x, &self.w, eps),
            Norm::Layer => ops::layer_normed(x, &self.w, self.b.as_deref(), eps),
        }
    }
}

/// The weights of one transformer block. Matrices are `out × in`.
#[derive(Clone, Debug)]
pub struct LayerWeights<T> {
    /// Norm before attention (absent without pre-norms: olmo2).
    pub attn_norm: Option<NormWeights<T>>,
    /// Query projection, `(n_heads · head_dim) × n_embd`.
    pub wq: WeightMatrix,
    /// Key projection, `(n_kv_heads · head_dim) × n_embd`; `None` on a layer that attends over an earlier
    /// layer's keys and values ([`super::LayerConfig::kv_from`]).
    pub wk: Option<WeightMatrix>,
    /// Value projection, `(n_kv_heads · value_dim) × n_embd`; `None` where the values are the keys' projection
    /// (Gemma 4's global layers), or reused.
    pub wv: Option<WeightMatrix>,
    /// Optional projection biases (qwen2).
    pub bq: Option<Vec<T>>,
    /// Key bias.
    pub bk: Option<Vec<T>>,
    /// Value bias.
    pub bv: Option<Vec<T>>,
    /// Query RMSNorm gains, when the model has QK-norm: `head_dim` for a per-head norm, the projection's width
    /// for a norm over the whole projection. It applies to consecutive segments of its own length.
    pub q_norm: Option<Vec<T>>,
    /// Key RMSNorm gains, as `q_norm` (absent where the keys are reused).
    pub k_norm: Option<Vec<T>>,
    /// Each query head's sink logit (GPT-OSS).
    pub sinks: Option<Vec<f64>>,
    /// Output projection, `n_embd × (n_heads · value_dim)`.
    pub wo: WeightMatrix,
    /// Output projection bias (gptneox, phi2).
    pub bo: Option<Vec<T>>,
    /// RMSNorm after attention (gemma2, gemma3, olmo2).
    pub post_attn_norm: Option<Vec<T>>,
    /// Norm before the feed-forward block (absent without pre-norms, and where the feed-forward block reads
    /// the attention's normed input: phi2).
    pub ffn_norm: Option<NormWeights<T>>,
    /// The feed-forward block: dense, or a mixture of experts.
    pub ffn: FfnWeights<T>,
    /// RMSNorm after the feed-forward block (gemma2, gemma3, olmo2).
    pub post_ffn_norm: Option<Vec<T>>,
    /// The per-layer input block (Gemma 4), when the model has per-layer inputs.
    pub per_layer: Option<PerLayerBlock<T>>,
    /// Multi-head latent attention's key and value weights (DeepSeek), in place of `wk` and `wv`.
    pub mla: Option<MlaWeights<T>>,
    /// Multiplier of the whole residual stream after the block (Gemma 4's `layer_output_scale`).
    pub output_scale: Option<f64>,
}

/// Multi-head latent attention's key and value weights: `kv_a` projects each token to its latent (first
/// `kv_lora_rank` rows, normed by `kv_a_norm`) and the key part every head shares, before RoPE (the last
/// `rot_dim` rows); each head decompresses its unrotated key part and its values from the latent.
#[derive(Clone, Debug)]
pub struct MlaWeights<T> {
    /// `(kv_lora_rank + rot_dim) × n_embd`.
    pub kv_a: WeightMatrix,
    /// RMSNorm gains of the latent.
    pub kv_a_norm: Vec<T>,
    /// Per head, `[kv_lora_rank, nope]` row-major (the converter's `attn_k_b`, HF's key rows transposed):
    /// `k_nope = latentᵀ · k_b`.
    pub k_b: Vec<Vec<T>>,
    /// Per head, the value projection `value_dim × kv_lora_rank` (`attn_v_b`).
    pub v_b: Vec<WeightMatrix>,
    /// The queries' bottleneck `q_lora_rank × n_embd` and its RMSNorm gains (then `wq` is `attn_q_b`).
    pub q_a: Option<(WeightMatrix, Vec<T>)>,
}

/// A block's per-layer input (Gemma 4's PLE): `x ← x + norm(proj(gelu(gate · x) ⊙ p_l))`, with `p_l` the layer's
/// slice of the per-layer inputs ([`PerLayerInputs`]).
#[derive(Clone, Debug)]
pub struct PerLayerBlock<T> {
    /// Gate, `P × n_embd`.
    pub gate: WeightMatrix,
    /// Projection back to the stream, `n_embd × P`.
    pub proj: WeightMatrix,
    /// RMSNorm gains of the projection's output, `n_embd`.
    pub norm: Vec<T>,
}

/// The per-layer inputs of every token (Gemma 4's PLE): for layer `l`, `((norm(W h₀ / √n_embd)_l ⊙ g) +
/// E[id]_l · √P) / √2`, with `h₀` the token's scaled embedding.
#[derive(Clone, Debug)]
pub struct PerLayerInputs<T> {
    /// Per-layer token embeddings, `vocab × (n_layers · P)`.
    pub token_embd: WeightMatrix,
    /// Projection of the embedding, `(n_layers · P) × n_embd`.
    pub model_proj: WeightMatrix,
    /// RMSNorm gains shared by every layer's slice, `P`.
    pub norm: Vec<T>,
}

/// A dense feed-forward block's weights. Matrices are `out × in`.
#[derive(Clone, Debug)]
pub struct DenseFfn<T> {
    /// Gate projection, `n_ff × n_embd` (absent in a plain feed-forward block).
    pub gate: Option<WeightMatrix>,
    /// Up projection, `n_ff × n_embd`.
    pub up: WeightMatrix,
    /// Up projection bias.
    pub b_up: Option<Vec<T>>,
    /// Down projection, `n_embd × n_ff`.
    pub down: WeightMatrix,
    /// Down projection bias.
    pub b_down: Option<Vec<T>>,
}

/// A mixture of experts: the router and each expert's gated feed-forward block, with biases where the model
/// has them (GPT-OSS).
#[derive(Clone, Debug)]
pub struct Experts<T> {
    /// Router, `n_experts × n_embd`: one logit per expert.
    pub router: WeightMatrix,
    /// Router bias, `n_experts`.
    pub router_bias: Option<Vec<T>>,
    /// Bias added to the router's scores to choose experts, not to weight them (DeepSeek V3's
    /// `exp_probs_b`), `n_experts`.
    pub selection_bias: Option<Vec<f64>>,
    /// Per expert, the gate projection `n_ff × n_embd`.
    pub gate: Vec<WeightMatrix>,
    /// Per expert, the up projection `n_ff × n_embd`.
    pub up: Vec<WeightMatrix>,
    /// Per expert, the down projection `n_embd × n_ff`.
    pub down: Vec<WeightMatrix>,
    /// Per expert, the gate, up and down biases (`n_ff`, `n_ff`, `n_embd`).
    pub biases: Option<Vec<[Vec<T>; 3]>>,
    /// The shared expert every token also runs (Llama 4, DeepSeek), boxed as the larger variant of
    /// [`FfnWeights`] would otherwise be.
    pub shared: Option<Box<DenseFfn<T>>>,
    /// Gemma 4's block beside the dense one ([`super::config::Moe::beside_dense`]).
    pub beside: Option<Box<BesideDense<T>>>,
}

/// What Gemma 4's experts add beside the dense feed-forward block: the dense block itself with its own post-norm,
/// the experts' pre- and post-norms, the router's per-channel input scale and each expert's output scale.
#[derive(Clone, Debug)]
pub struct BesideDense<T> {
    /// The dense feed-forward block.
    pub dense: DenseFfn<T>,
    /// RMSNorm gains after the dense block (`post_ffw_norm_1`).
    pub dense_post_norm: Vec<T>,
    /// RMSNorm gains of the experts' input (`pre_ffw_norm_2`).
    pub experts_pre_norm: Vec<T>,
    /// RMSNorm gains after the experts' sum (`post_ffw_norm_2`).
    pub experts_post_norm: Vec<T>,
    /// The router's per-channel input scale (`ffn_gate_inp.scale`).
    pub router_scale: Vec<T>,
    /// Each expert's weight multiplier (`ffn_down_exps.scale`).
    pub expert_scale: Vec<f64>,
}

/// A block's feed-forward weights.
#[derive(Clone, Debug)]
pub enum FfnWeights<T> {
    /// One feed-forward block for every token.
    Dense(DenseFfn<T>),
    /// A mixture of experts.
    Experts(Experts<T>),
}

/// All weights of a model.
#[derive(Clone, Debug)]
pub struct Weights<T> {
    /// Token embeddings, `vocab × n_embd`.
    pub token_embd: WeightMatrix,
    /// Transformer blocks.
    pub layers: Vec<LayerWeights<T>>,
    /// Final norm.
    pub output_norm: NormWeights<T>,
    /// Output head, `vocab × n_embd`; `None` when tied to the embeddings.
    pub output: Option<WeightMatrix>,
    /// Output head bias (phi2).
    pub output_bias: Option<Vec<T>>,
    /// Per-layer inputs (Gemma 4).
    pub per_layer_inputs: Option<PerLayerInputs<T>>,
    /// Memory for the matrices kept packed between products, shared by all of them (none at load).
    pub panel_budget: PanelBudget,
}

/// Reads tensors of one file, checking shapes.
struct Loader<'a> {
    file: &'a GgufFile,
    arithmetic: Arithmetic,
    budget: PanelBudget,
}

impl Loader<'_> {
    fn has(&self, name: &str) -> bool {
        self.file.tensor(name).is_ok()
    }

    /// Tensor `name`, which must have ggml dims `dims` (trailing 1s aside).
    fn checked(&self, name: &str, dims: &[usize]) -> Result<&TensorInfo> {
        let info = self.file.tensor(name)?;
        let want: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        let mut found = info.dims.clone();
        while found.len() > want.len() && found.last() == Some(&1) {
            found.pop();
        }
        if found != want {
            return Err(Error::Shape {
                tensor: name.into(),
                found: info.dims.clone(),
                expected: format!("{want:?}"),
            });
        }
        Ok(info)
    }

    /// Vector `name` of `len` elements, dequantized to `T`.
    fn vector<T: Real>(&self, name: &str, len: usize) -> Result<Vec<T>> {
        self.checked(name, &[len])?;
        Ok(self
            .file
            .dequantize_f32(name)?
            .into_iter()
            .map(T::of_f32)
            .collect())
    }

    /// The norm `{name}.weight` of `len` gains, with `{name}.bias` where the model's norm is a LayerNorm and
    /// the file has one (Cohere's LayerNorms have none).
    fn norm<T: Real>(&self, c: &ModelConfig, name: &str, len: usize) -> Result<NormWeights<T>> {
        Ok(NormWeights {
            kind: c.norm,
            w: self.vector(&format!("{name}.weight"), len)?,
            b: match c.norm {
                Norm::Layer => self.vector_opt(&format!("{name}.bias"), len)?,
                Norm::Rms => None,
            },
        })
    }

    /// The `n` experts' bias vectors of `len` elements each in one tensor `name` (ggml dims `[len, n]`).
    fn expert_vectors<T: Real>(&self, name: &str, len: usize, n: usize) -> Result<Vec<Vec<T>>> {
        self.checked(name, &[len, n])?;
        let all: Vec<T> = self
            .file
            .dequantize_f32(name)?
            .into_iter()
            .map(T::of_f32)
            .collect();
        Ok(all.chunks(len).map(<[T]>::to_vec).collect())
    }

    fn vector_opt<T: Real>(&self, name: &str, len: usize) -> Result<Option<Vec<T>>> {
        if self.has(name) {
            self.vector(name, len).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A weight matrix `out × in` (ggml dims `[in, out]`), left in the file's encoding.
    fn matrix(&self, name: &str, out: usize, inp: usize) -> Result<WeightMatrix> {
        let info = self.checked(name, &[inp, out])?;
        Ok(WeightMatrix::new(name, self.file.tensor_data(info), info.ty, out, inp)?
            .with_arithmetic(self.arithmetic, name)?
            .sharing(&self.budget))
    }

    /// The `n` experts' `out × in` matrices of a 3-D tensor (ggml dims `[in, out, n]`: expert `e`'s rows follow
    /// expert `e − 1`'s), left in the file's encoding.
    fn experts(&self, name: &str, out: usize, inp: usize, n: usize) -> Result<Vec<WeightMatrix>> {
        let info = self.checked(name, &[inp, out, n])?;
        let rows = out.checked_mul(n).ok_or_else(|| Error::Shape {
            tensor: name.into(),
            found: info.dims.clone(),
            expected: format!("[{inp}, {out}, {n}]"),
        })?;
        WeightMatrix::new(name, self.file.tensor_data(info), info.ty, rows, inp)?
            .with_arithmetic(self.arithmetic, name)?
            .sharing(&self.budget)
            .split_rows(&vec![out; n], name)
    }

    /// A fused matrix of `inp` columns split into consecutive row groups of the given sizes.
    fn split(&self, name: &str, inp: usize, sizes: &[usize]) -> Result<Vec<WeightMatrix>> {
        self.matrix(name, sizes.iter().sum(), inp)?
            .split_rows(sizes, name)
    }
}

fn load_layer<T: Real>(ld: &Loader, c: &ModelConfig, i: usize) -> Result<LayerWeights<T>> {
    let n = |s: &str| format!("blk.{i}.{s}");
    let lc = &c.layers[i];
    let (d, hd, vd) = (c.n_embd, lc.head_dim(), lc.value_dim);
    let (q_rows, k_rows, v_rows) = (c.n_heads * hd, lc.n_kv_heads * hd, lc.n_kv_heads * vd);
    let own_kv = lc.kv_from.is_none() && c.mla.is_none();
    let ((wq, wk, wv), (bq, bk, bv)) = if ld.has(&n("attn_qkv.weight")) {
        let [wq, wk, wv]: [WeightMatrix; 3] = ld
            .split(&n("attn_qkv.weight"), d, &[q_rows, k_rows, v_rows])?
            .try_into()
            .expect("three parts");
        let biases = match ld.vector_opt::<T>(&n("attn_qkv.bias"), q_rows + k_rows + v_rows)? {
            Some(b) => {
                let (q, rest) = b.split_at(q_rows);
                let (k, v) = rest.split_at(k_rows);
                (Some(q.to_vec()), Some(k.to_vec()), Some(v.to_vec()))
            }
            None => (None, None, None),
        };
        ((wq, Some(wk), Some(wv)), biases)
    } else {
        let matrix_if = |wanted: bool, name: &str, rows: usize| match wanted {
            true => ld.matrix(&n(name), rows, d).map(Some),
            false => Ok(None),
        };
        let own_v = own_kv && (!c.keys_as_values || ld.has(&n("attn_v.weight")));
        let wq = match c.mla.and_then(|m| m.q_lora_rank) {
            Some(rank) => ld.matrix(&n("attn_q_b.weight"), q_rows, rank)?,
            None => ld.matrix(&n("attn_q.weight"), q_rows, d)?,
        };
        (
            (
                wq,
                matrix_if(own_kv, "attn_k.weight", k_rows)?,
                matrix_if(own_v, "attn_v.weight", v_rows)?,
            ),
            (
                ld.vector_opt(&n("attn_q.bias"), q_rows)?,
                ld.vector_opt(&n("attn_k.bias"), k_rows)?,
                ld.vector_opt(&n("attn_v.bias"), v_rows)?,
            ),
        )
    };
    if wv.is_none() && own_kv && vd != hd {
        return Err(Error::Shape {
            tensor: n("attn_k.weight"),
            found: vec![d as u64, k_rows as u64],
            expected: format!("values of {vd} dims from keys of {hd} (no attn_v.weight)"),
        });
    }
    let ffn = match c.moe.filter(|_| lc.experts) {
        Some(moe) => {
            let (ne, ff) = (moe.n_experts, moe.n_ff);
            // Gemma 4 keeps each expert's gate and up projections in one tensor, gate rows first.
            let (gate, up) = match ld.has(&n("ffn_gate_up_exps.weight")) {
                true => ld
                    .experts(&n("ffn_gate_up_exps.weight"), 2 * ff, d, ne)?
                    .into_iter()
                    .map(|m| {
                        let [g, u]: [WeightMatrix; 2] = m
                            .split_rows(&[ff, ff], "ffn_gate_up_exps.weight")?
                            .try_into()
                            .expect("two parts");
                        Ok((g, u))
                    })
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .unzip(),
                false => (
                    ld.experts(&n("ffn_gate_exps.weight"), ff, d, ne)?,
                    ld.experts(&n("ffn_up_exps.weight"), ff, d, ne)?,
                ),
            };
            let beside = match moe.beside_dense {
                true => Some(Box::new(BesideDense {
                    dense: dense_ffn(ld, c, i)?,
                    dense_post_norm: ld.vector(&n("post_ffw_norm_1.weight"), d)?,
                    experts_pre_norm: ld.vector(&n("pre_ffw_norm_2.weight"), d)?,
                    experts_post_norm: ld.vector(&n("post_ffw_norm_2.weight"), d)?,
                    router_scale: ld.vector(&n("ffn_gate_inp.scale"), d)?,
                    expert_scale: ld.vector(&n("ffn_down_exps.scale"), ne)?,
                })),
                false => None,
            };
            let biases = match ld.has(&n("ffn_gate_exps.bias")) {
                true => {
                    let gate = ld.expert_vectors(&n("ffn_gate_exps.bias"), ff, ne)?;
                    let up = ld.expert_vectors(&n("ffn_up_exps.bias"), ff, ne)?;
                    let down = ld.expert_vectors(&n("ffn_down_exps.bias"), d, ne)?;
                    let each = gate.into_iter().zip(up).zip(down);
                    Some(each.map(|((g, u), dn)| [g, u, dn]).collect())
                }
                false => None,
            };
            FfnWeights::Experts(Experts {
                router: ld.matrix(&n("ffn_gate_inp.weight"), ne, d)?,
                router_bias: ld.vector_opt(&n("ffn_gate_inp.bias"), ne)?,
                selection_bias: ld.vector_opt(&n("exp_probs_b.bias"), ne)?,
                gate,
                up,
                down: ld.experts(&n("ffn_down_exps.weight"), d, ff, ne)?,
                biases,
                shared: match moe.n_ff_shared {
                    Some(width) => Some(Box::new(DenseFfn {
                        gate: Some(ld.matrix(&n("ffn_gate_shexp.weight"), width, d)?),
                        up: ld.matrix(&n("ffn_up_shexp.weight"), width, d)?,
                        b_up: None,
                        down: ld.matrix(&n("ffn_down_shexp.weight"), d, width)?,
                        b_down: None,
                    })),
                    None => None,
                },
                beside,
            })
        }
        None => FfnWeights::Dense(dense_ffn(ld, c, i)?),
    };
    let qk_widths = match c.qk_norm {
        QkNorm::None | QkNorm::Unit => None,
        QkNorm::PerHead => Some((hd, hd)),
        QkNorm::Projection => Some((q_rows, k_rows)),
    };
    let (q_norm, k_norm) = match qk_widths {
        Some((qw, kw)) => (
            Some(ld.vector(&n("attn_q_norm.weight"), qw)?),
            match own_kv {
                true => Some(ld.vector(&n("attn_k_norm.weight"), kw)?),
                false => None,
            },
        ),
        None => (None, None),
    };
    let per_layer = match c.per_layer_input {
        Some(p) => Some(PerLayerBlock {
            gate: ld.matrix(&n("inp_gate.weight"), p, d)?,
            proj: ld.matrix(&n("proj.weight"), d, p)?,
            norm: ld.vector(&n("post_norm.weight"), d)?,
        }),
        None => None,
    };
    let mla = match c.mla {
        Some(m) => {
            let (h, r) = (c.n_heads, lc.rope.rot_dim);
            let nope = hd - r;
            let name = n("attn_k_b.weight");
            ld.checked(&name, &[nope, m.kv_lora_rank, h])?;
            let k_b: Vec<T> = ld.file.dequantize_f32(&name)?.into_iter().map(T::of_f32).collect();
            Some(MlaWeights {
                kv_a: ld.matrix(&n("attn_kv_a_mqa.weight"), m.kv_lora_rank + r, d)?,
                kv_a_norm: ld.vector(&n("attn_kv_a_norm.weight"), m.kv_lora_rank)?,
                k_b: k_b.chunks(m.kv_lora_rank * nope).map(<[T]>::to_vec).collect(),
                v_b: ld.experts(&n("attn_v_b.weight"), vd, m.kv_lora_rank, h)?,
                q_a: match m.q_lora_rank {
                    Some(rank) => Some((
                        ld.matrix(&n("attn_q_a.weight"), rank, d)?,
                        ld.vector(&n("attn_q_a_norm.weight"), rank)?,
                    )),
                    None => None,
                },
            })
        }
        None => None,
    };
    let output_scale = match ld.has(&n("layer_output_scale.weight")) {
        true => Some(ld.vector::<f64>(&n("layer_output_scale.weight"), 1)?[0]),
        false => None,
    };
    let norm_if = |wanted: bool, name: &str| -> Result<Option<Vec<T>>> {
        if wanted {
            ld.vector(&n(name), d).map(Some)
        } else {
            Ok(None)
        }
    };
    let block_norm = |wanted: bool, name: &str| -> Result<Option<NormWeights<T>>> {
        match wanted {
            true => ld.norm(c, &n(name), d).map(Some),
            false => Ok(None),
        }
    };
    let ffn_reads_own_norm = c.pre_norms && c.residual != Residual::ParallelSharedNorm;
    Ok(LayerWeights {
        attn_norm: block_norm(c.pre_norms, "attn_norm")?,
        wq,
        wk,
        wv,
        bq,
        bk,
        bv,
        q_norm,
        k_norm,
        sinks: match c.sinks {
            true => Some(ld.vector(&n("attn_sinks.weight"), c.n_heads)?),
            false => None,
        },
        wo: ld.matrix(&n("attn_output.weight"), d, c.n_heads * vd)?,
        bo: ld.vector_opt(&n("attn_output.bias"), d)?,
        post_attn_norm: norm_if(c.post_norms, "post_attention_norm.weight")?,
        ffn_norm: block_norm(ffn_reads_own_norm, c.ffn_norm_tensor)?,
        ffn,
        post_ffn_norm: norm_if(c.post_norms, "post_ffw_norm.weight")?,
        per_layer,
        mla,
        output_scale,
    })
}

/// Block `i`'s dense feed-forward weights: gate and up apart, fused in one `ffn_up.weight` (Phi-3), or up alone
/// (a plain block).
fn dense_ffn<T: Real>(ld: &Loader, c: &ModelConfig, i: usize) -> Result<DenseFfn<T>> {
    let n = |s: &str| format!("blk.{i}.{s}");
    let (d, n_ff) = (c.n_embd, c.layers[i].n_ff);
    let (gate, up) = match c.feed_forward {
        FeedForward::Plain => (None, ld.matrix(&n("ffn_up.weight"), n_ff, d)?),
        FeedForward::Gated if ld.has(&n("ffn_gate.weight")) => (
            Some(ld.matrix(&n("ffn_gate.weight"), n_ff, d)?),
            ld.matrix(&n("ffn_up.weight"), n_ff, d)?,
        ),
        FeedForward::Gated => {
            let [gate, up]: [WeightMatrix; 2] = ld
                .split(&n("ffn_up.weight"), d, &[n_ff, n_ff])?
                .try_into()
                .expect("two parts");
            (Some(gate), up)
        }
    };
    Ok(DenseFfn {
        gate,
        up,
        b_up: ld.vector_opt(&n("ffn_up.bias"), n_ff)?,
        down: ld.matrix(&n("ffn_down.weight"), d, n_ff)?,
        b_down: ld.vector_opt(&n("ffn_down.bias"), d)?,
    })
}

impl<T: Real> Weights<T> {
    /// Takes every weight of `file` for configuration `c`, checking each tensor's shape and type; matrices stay
    /// in the file's memory map, vectors are dequantized. A file whose tensor data is incomplete is refused.
    pub fn load(file: &GgufFile, c: &ModelConfig) -> Result<Self> {
        file.require_whole_data()?;
        let ld = Loader {
            file,
            arithmetic: c.arithmetic,
            budget: PanelBudget::default(),
        };
        let layers = (0..c.n_layers)
            .map(|i| load_layer(&ld, c, i))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            token_embd: ld.matrix("token_embd.weight", c.vocab_size, c.n_embd)?,
            layers,
            output_norm: ld.norm(c, "output_norm", c.n_embd)?,
            output: if ld.has("output.weight") {
                Some(ld.matrix("output.weight", c.vocab_size, c.n_embd)?)
            } else {
                None
            },
            output_bias: ld.vector_opt("output.bias", c.vocab_size)?,
            per_layer_inputs: match c.per_layer_input {
                Some(p) => {
                    let width = c.n_layers.checked_mul(p).ok_or_else(|| Error::Shape {
                        tensor: "per_layer_token_embd.weight".into(),
                        found: Vec::new(),
                        expected: "n_layers · per-layer input width within usize".into(),
                    })?;
                    Some(PerLayerInputs {
                        token_embd: ld.matrix("per_layer_token_embd.weight", c.vocab_size, width)?,
                        model_proj: ld.matrix("per_layer_model_proj.weight", width, c.n_embd)?,
                        norm: ld.vector("per_layer_proj_norm.weight", p)?,
                    })
                }
                None => None,
            },
            panel_budget: ld.budget.clone(),
        })
    }
}
