//! The slash paper's cone condition on a model's weights: the angular spread of token embeddings around their
//! mean direction, and of their images under each head's query and key projections.
//!
//! The image of embedding `e` under head `h` of layer `l` is `W_Q^(h) norm_l(e) + b` (then `⊙ n_q` with
//! QK-norm, the head's slice of the gains where the norm spans the whole projection), `norm_l` the layer's
//! attention norm, whole (none on a model without pre-norms): the query the head would form if `e` reached it
//! unchanged. At layer 0 these are the forward pass's pre-RoPE queries and keys of the tokens
//! (`tests/scan/embedding_cone.rs`). QK-norm's division by a per-row scalar does not change angles and is
//! omitted. Angles as in [`super::cone`].

use super::cone::{cone_spread, ConeSpread};
use crate::model::config::Norm;
use crate::model::weights::NormWeights;
use crate::model::Model;
use crate::numeric::Real;

/// Mean and largest angle (radians) of a set of vectors to their axis.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    /// Mean angle.
    pub mean_angle: f64,
    /// Largest angle.
    pub max_angle: f64,
}

impl From<&ConeSpread> for Spread {
    fn from(c: &ConeSpread) -> Self {
        Self {
            mean_angle: c.mean_angle,
            max_angle: c.max_angle,
        }
    }
}

/// Cone spreads of sampled embeddings and of their per-head projections.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EmbeddingCone {
    /// Number of embeddings used.
    pub n_tokens: usize,
    /// Spread of the embeddings; `None` when undefined (a zero embedding, or unit vectors that cancel).
    pub embeddings: Option<Spread>,
    /// `[L·H]` spread after W_Q, per query head.
    pub queries: Vec<Option<Spread>>,
    /// `[L·H]` spread after W_K of each query head's KV head (`None` where latent attention has no key projection).
    pub keys: Vec<Option<Spread>>,
}

/// Measures the cone condition on the embeddings of `token_ids` (each below the vocabulary size).
pub fn embedding_cone<T: Real>(model: &Model<T>, token_ids: &[u32]) -> EmbeddingCone {
    let c = &model.config;
    let w = model.weights();
    let n = token_ids.len();
    let rows: Vec<Vec<T>> = token_ids
        .iter()
        .map(|&t| w.token_embd.row(t as usize))
        .collect();
    let embeddings = cone_spread(&rows.iter().map(|r| to_f64(r)).collect::<Vec<_>>());
    let mut queries = Vec::with_capacity(c.n_layers * c.n_heads);
    let mut keys = Vec::with_capacity(c.n_layers * c.n_heads);
    for (l, (lw, lc)) in w.layers.iter().zip(&c.layers).enumerate() {
        let (hd, kvh) = (lc.head_dim(), lc.n_kv_heads);
        // A layer that attends over an earlier layer's keys has that layer's key projection and norm.
        let kl = &w.layers[lc.kv_from.unwrap_or(l)];
        // The norm is applied in full: RMSNorm's division by a per-row scalar would not change the angles of
        // `W x` alone, but it does those of `W x + b`.
        let x: Vec<T> = match &lw.attn_norm {
            Some(norm) => norm.normed(&rows.concat(), c.eps()),
            None => rows.concat(),
        };
        // DeepSeek V3's queries pass through a normed bottleneck first.
        let q = match lw.mla.as_ref().and_then(|m| m.q_a.as_ref()) {
            Some((q_a, norm)) => {
                let bottleneck = NormWeights {
                    kind: Norm::Rms,
                    w: norm.clone(),
                    b: None,
                };
                let a: Vec<T> = bottleneck.normed(&q_a.apply(&x, n, None), c.eps());
                lw.wq.apply(&a, n, lw.bq.as_deref())
            }
            None => lw.wq.apply(&x, n, lw.bq.as_deref()),
        };
        let (qn, kn) = (lw.q_norm.as_deref(), kl.k_norm.as_deref());
        // Latent attention (DeepSeek) has no key projection of the embeddings: its keys' spread is not measured.
        let kv_spreads: Vec<Option<Spread>> = match &kl.wk {
            Some(wk) => {
                let k = wk.apply(&x, n, kl.bk.as_deref());
                (0..kvh)
                    .map(|g| head_spread(&k, n, kvh * hd, g, hd, kn))
                    .collect()
            }
            None => vec![None; kvh],
        };
        for h in 0..c.n_heads {
            queries.push(head_spread(&q, n, c.n_heads * hd, h, hd, qn));
            keys.push(kv_spreads[h / (c.n_heads / kvh)]);
        }
    }
    EmbeddingCone {
        n_tokens: n,
        embeddings: embeddings.as_ref().map(Spread::from),
        queries,
        keys,
    }
}

fn to_f64<T: Real>(x: &[T]) -> Vec<f64> {
    x.iter().map(|v| v.to_f64_exact()).collect()
}

/// Spread of head `h`'s rows (`width` apart, `hd` wide) of `m`, scaled by the QK-norm weights if any.
fn head_spread<T: Real>(
    m: &[T],
    n: usize,
    width: usize,
    h: usize,
    hd: usize,
    norm: Option<&[T]>,
) -> Option<Spread> {
    let vectors: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            let row = to_f64(&m[i * width + h * hd..i * width + (h + 1) * hd]);
            // Gains of a per-head norm serve every head; a whole-projection norm has a slice per head.
            match norm.map(|g| {
                if g.len() == hd {
                    g
                } else {
                    &g[h * hd..(h + 1) * hd]
                }
            }) {
                Some(g) => row
                    .iter()
                    .zip(g)
                    .map(|(v, g)| v * g.to_f64_exact())
                    .collect(),
                None => row,
            }
        })
        .collect();
    cone_spread(&vectors).as_ref().map(Spread::from)
}
