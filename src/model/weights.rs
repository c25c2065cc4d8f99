//! Loading a model's weights from GGUF into dense row-major matrices of the engine's precision.
//!
//! A GGUF weight of dims `[in, out]` (ggml order) is the row-major `out × in` matrix `W` of `y = W x`. Every
//! shape is checked against the configuration before use. Fused tensors (`attn_qkv`, phi3's doubled `ffn_up`)
//! are split into their parts.

use super::config::ModelConfig;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::numeric::Real;
use rayon::prelude::*;

/// The weights of one transformer block. Matrices are row-major `out × in`.
#[derive(Clone, Debug)]
pub struct LayerWeights<T> {
    /// RMSNorm before attention.
    pub attn_norm: Vec<T>,
    /// Query projection, `(n_heads · head_dim) × n_embd`.
    pub wq: Vec<T>,
    /// Key projection, `(n_kv_heads · head_dim) × n_embd`.
    pub wk: Vec<T>,
    /// Value projection, `(n_kv_heads · value_dim) × n_embd`.
    pub wv: Vec<T>,
    /// Optional projection biases (qwen2).
    pub bq: Option<Vec<T>>,
    /// Key bias.
    pub bk: Option<Vec<T>>,
    /// Value bias.
    pub bv: Option<Vec<T>>,
    /// Per-head query and key RMSNorm weights (`head_dim` each), when the model has QK-norm.
    pub qk_norm: Option<(Vec<T>, Vec<T>)>,
    /// Output projection, `n_embd × (n_heads · value_dim)`.
    pub wo: Vec<T>,
    /// RMSNorm after attention (gemma).
    pub post_attn_norm: Option<Vec<T>>,
    /// RMSNorm before the feed-forward block.
    pub ffn_norm: Vec<T>,
    /// Gate projection, `n_ff × n_embd`.
    pub w_gate: Vec<T>,
    /// Up projection, `n_ff × n_embd`.
    pub w_up: Vec<T>,
    /// Down projection, `n_embd × n_ff`.
    pub w_down: Vec<T>,
    /// RMSNorm after the feed-forward block (gemma).
    pub post_ffn_norm: Option<Vec<T>>,
}

/// All weights of a model.
#[derive(Clone, Debug)]
pub struct Weights<T> {
    /// Token embeddings, `vocab × n_embd`.
    pub token_embd: Vec<T>,
    /// Transformer blocks.
    pub layers: Vec<LayerWeights<T>>,
    /// Final RMSNorm.
    pub output_norm: Vec<T>,
    /// Output head, `vocab × n_embd`; `None` when tied to the embeddings.
    pub output: Option<Vec<T>>,
}

/// Reads tensors of one file, checking shapes.
struct Loader<'a> {
    file: &'a GgufFile,
}

impl Loader<'_> {
    fn has(&self, name: &str) -> bool {
        self.file.tensor(name).is_ok()
    }

    /// Tensor `name`, which must have ggml dims `dims`, dequantized to `T`.
    fn load<T: Real>(&self, name: &str, dims: &[usize]) -> Result<Vec<T>> {
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
        Ok(self
            .file
            .dequantize_f32(name)?
            .into_iter()
            .map(T::of_f32)
            .collect())
    }

    fn load_opt<T: Real>(&self, name: &str, dims: &[usize]) -> Result<Option<Vec<T>>> {
        if self.has(name) {
            self.load(name, dims).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A weight matrix `out × in` (ggml dims `[in, out]`).
    fn matrix<T: Real>(&self, name: &str, out: usize, inp: usize) -> Result<Vec<T>> {
        self.load(name, &[inp, out])
    }
}

/// Splits a row-major matrix into consecutive row groups of the given sizes (each row `width` long).
fn split_rows<T>(mut m: Vec<T>, width: usize, sizes: &[usize]) -> Vec<Vec<T>> {
    let mut parts = Vec::with_capacity(sizes.len());
    for &rows in sizes.iter().rev() {
        parts.push(m.split_off(m.len() - rows * width));
    }
    parts.reverse();
    parts
}

fn load_layer<T: Real>(ld: &Loader, c: &ModelConfig, i: usize) -> Result<LayerWeights<T>> {
    let n = |s: &str| format!("blk.{i}.{s}");
    let (d, hd, vd) = (c.n_embd, c.head_dim, c.value_dim);
    let (q_rows, k_rows, v_rows) = (c.n_heads * hd, c.n_kv_heads * hd, c.n_kv_heads * vd);
    let (wq, wk, wv) = if ld.has(&n("attn_qkv.weight")) {
        let fused = ld.matrix(&n("attn_qkv.weight"), q_rows + k_rows + v_rows, d)?;
        let mut p = split_rows(fused, d, &[q_rows, k_rows, v_rows]).into_iter();
        (
            p.next().unwrap_or_default(),
            p.next().unwrap_or_default(),
            p.next().unwrap_or_default(),
        )
    } else {
        (
            ld.matrix(&n("attn_q.weight"), q_rows, d)?,
            ld.matrix(&n("attn_k.weight"), k_rows, d)?,
            ld.matrix(&n("attn_v.weight"), v_rows, d)?,
        )
    };
    let (w_gate, w_up) = if ld.has(&n("ffn_gate.weight")) {
        (
            ld.matrix(&n("ffn_gate.weight"), c.n_ff, d)?,
            ld.matrix(&n("ffn_up.weight"), c.n_ff, d)?,
        )
    } else {
        let fused = ld.matrix(&n("ffn_up.weight"), 2 * c.n_ff, d)?;
        let mut p = split_rows(fused, d, &[c.n_ff, c.n_ff]).into_iter();
        (p.next().unwrap_or_default(), p.next().unwrap_or_default())
    };
    let qk_norm = if c.qk_norm {
        Some((
            ld.load(&n("attn_q_norm.weight"), &[hd])?,
            ld.load(&n("attn_k_norm.weight"), &[hd])?,
        ))
    } else {
        None
    };
    let post = |name: &str, dims: &[usize]| -> Result<Option<Vec<T>>> {
        if c.post_norms {
            ld.load(&n(name), dims).map(Some)
        } else {
            Ok(None)
        }
    };
    Ok(LayerWeights {
        attn_norm: ld.load(&n("attn_norm.weight"), &[d])?,
        wq,
        wk,
        wv,
        bq: ld.load_opt(&n("attn_q.bias"), &[q_rows])?,
        bk: ld.load_opt(&n("attn_k.bias"), &[k_rows])?,
        bv: ld.load_opt(&n("attn_v.bias"), &[v_rows])?,
        qk_norm,
        wo: ld.matrix(&n("attn_output.weight"), d, c.n_heads * vd)?,
        post_attn_norm: post("post_attention_norm.weight", &[d])?,
        ffn_norm: ld.load(&n("ffn_norm.weight"), &[d])?,
        w_gate,
        w_up,
        w_down: ld.matrix(&n("ffn_down.weight"), d, c.n_ff)?,
        post_ffn_norm: post("post_ffw_norm.weight", &[d])?,
    })
}

impl<T: Real> Weights<T> {
    /// Loads and dequantizes every weight of `file` for configuration `c` (layers in parallel).
    pub fn load(file: &GgufFile, c: &ModelConfig) -> Result<Self> {
        let ld = Loader { file };
        let layers = (0..c.n_layers)
            .into_par_iter()
            .map(|i| load_layer(&ld, c, i))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            token_embd: ld.matrix("token_embd.weight", c.vocab_size, c.n_embd)?,
            layers,
            output_norm: ld.load("output_norm.weight", &[c.n_embd])?,
            output: if ld.has("output.weight") {
                Some(ld.matrix("output.weight", c.vocab_size, c.n_embd)?)
            } else {
                None
            },
        })
    }
}
