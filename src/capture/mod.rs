//! Capture of everything attention computes, designed for streaming.
//!
//! The engine calls a [`Capture`] as it runs. For each layer it first asks for a [`LayerPlan`] (what to hand
//! out); then, for every query head, it opens a [`HeadCapture`] ([`Capture::begin_head`]), feeds it the head's
//! vectors once ([`HeadVectors`]: pre- and post-RoPE q and k, v) and its attention one block of query rows at a
//! time ([`AttentionBlock`]: logits and probabilities), then its output, and hands it back
//! ([`Capture::end_head`]). Heads run in parallel, each `HeadCapture` on one thread; `end_head` is called in
//! head order, so reductions are deterministic. After a layer, a capture whose plan asks for it receives the
//! residual stream the layer leaves ([`Capture::residual`]). An analysis that reduces per block never holds a T × T
//! matrix; [`CollectSink`] keeps everything for small cases. A pair `(a, b)` of captures is a capture, so
//! several analyses share one forward pass.

mod collect;
mod compose;

pub use collect::{CollectHead, CollectSink, HeadRecord};
pub use compose::PairHead;

use crate::numeric::Real;
use crate::rope::RopeSpec;
use std::ops::Range;

/// What the engine should hand out for one layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerPlan {
    /// Call [`HeadCapture::vectors`] with q, k (pre and post RoPE) and v.
    pub vectors: bool,
    /// Call [`HeadCapture::block`] with logits and probabilities.
    pub attention: bool,
    /// Give every block all `T` key columns (logits of masked keys included) rather than only the columns that
    /// some row of the block can see. Costs up to twice the work of the logits and the softmax.
    pub full_rows: bool,
    /// Call [`HeadCapture::output`] with the head's output (attention-weighted values).
    pub output: bool,
    /// Call [`Capture::residual`] with the residual stream after the layer (no head is opened for it).
    pub residual: bool,
    /// Call [`Capture::latent`] with the layer's normed key/value latent, where it has latent attention.
    pub latent: bool,
}

impl LayerPlan {
    /// Whether anything is captured per head (vectors, attention or output), so that heads must be opened.
    pub fn any(&self) -> bool {
        self.vectors || self.attention || self.output
    }
}

/// Identity and geometry of one query head in one layer.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadInfo {
    /// Layer index (0-based).
    pub layer: usize,
    /// Query head index.
    pub head: usize,
    /// The key/value head this query head reads (grouped-query attention).
    pub kv_head: usize,
    /// Query/key head dimension.
    pub head_dim: usize,
    /// Value head dimension.
    pub value_dim: usize,
    /// Number of positions in the sequence.
    pub n_tokens: usize,
    /// The layer's rotary embedding (base, pairing, rotated dims): use [`RopeSpec::chunk_dims`] to index
    /// chunks by frequency.
    pub rope: RopeSpec,
    /// Sliding-window size of the layer: key `j` is visible from query `i` when `i − window < j ≤ i`.
    pub window: Option<usize>,
    /// Chunked attention (Llama 4's RoPE layers): key `j` is visible from query `i` only when both lie in the
    /// same block of `chunk` positions, `⌊j / chunk⌋ = ⌊i / chunk⌋`.
    pub chunk: Option<usize>,
    /// The head's learned sink logit (GPT-OSS): one more entry in every row's softmax, attached to no key and no
    /// value. A row's probabilities over its keys then sum to `1 −` the mass the sink took
    /// ([`AttentionBlock::sink_mass`]).
    pub sink: Option<f64>,
    /// Multiplier applied to `q·k` before soft-capping.
    pub scale: f64,
}

impl HeadInfo {
    /// Query head `head` of a layer described by `self` (head 0's template), with `n_heads` query heads reading
    /// `n_kv_heads` key/value heads in groups, and the layer's sink logits if it has them.
    pub fn of_head(
        &self,
        head: usize,
        n_heads: usize,
        n_kv_heads: usize,
        sinks: Option<&[f64]>,
    ) -> Self {
        HeadInfo {
            head,
            kv_head: head / (n_heads / n_kv_heads),
            sink: sinks.map(|s| s[head]),
            ..self.clone()
        }
    }

    /// First key position visible from query `i`.
    pub fn first_visible(&self, i: usize) -> usize {
        let window = self.window.map_or(0, |w| (i + 1).saturating_sub(w));
        let chunk = self.chunk.map_or(0, |c| i / c * c);
        window.max(chunk)
    }
}

/// Rows of one head inside a matrix whose rows hold all heads side by side (`[T, n_heads · dim]`).
#[derive(Clone, Copy, Debug)]
pub struct HeadRows<'a, T> {
    data: &'a [T],
    stride: usize,
    offset: usize,
    dim: usize,
}

impl<'a, T> HeadRows<'a, T> {
    /// View of head `head` (of width `dim`) in `data`, whose rows are `stride` apart.
    pub fn new(data: &'a [T], stride: usize, head: usize, dim: usize) -> Self {
        Self {
            data,
            stride,
            offset: head * dim,
            dim,
        }
    }

    /// Number of rows (positions).
    pub fn len(&self) -> usize {
        self.data.len() / self.stride
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Width of a row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The vector at position `i`.
    pub fn row(&self, i: usize) -> &'a [T] {
        let start = i * self.stride + self.offset;
        &self.data[start..start + self.dim]
    }

    /// The underlying storage, its row stride and this head's offset in a row (for matrix products).
    pub fn raw(&self) -> (&'a [T], usize, usize) {
        (self.data, self.stride, self.offset)
    }
}

/// A head's per-position vectors, in the model's own coordinate order (see [`HeadInfo::rope`]).
#[derive(Clone, Copy, Debug)]
pub struct HeadVectors<'a, T> {
    /// Queries before RoPE (after QK-norm where the model has it).
    pub q_pre: HeadRows<'a, T>,
    /// Keys of the head's KV head before RoPE (after QK-norm).
    pub k_pre: HeadRows<'a, T>,
    /// Queries after RoPE.
    pub q: HeadRows<'a, T>,
    /// Keys after RoPE.
    pub k: HeadRows<'a, T>,
    /// Values of the head's KV head.
    pub v: HeadRows<'a, T>,
}

/// Attention of one head for a block of query rows.
///
/// `logits` and `probs` are row-major `rows.len() × cols.len()`. Logits are scaled and soft-capped but not
/// masked: every entry is the real `scale · q_i·k_j` (capped), also for keys the row cannot see.
/// Probabilities are exactly zero for keys outside `[first_visible(i), i]`. A head with a sink
/// ([`HeadInfo::sink`]) gives each row's sink mass beside them.
#[derive(Clone, Debug)]
pub struct AttentionBlock<'a, T> {
    /// Query positions of the block.
    pub rows: Range<usize>,
    /// Key positions covered by the block's columns.
    pub cols: Range<usize>,
    /// Attention logits.
    pub logits: &'a [T],
    /// Attention probabilities.
    pub probs: &'a [T],
    /// Per row, the probability the head's sink took (empty for a head without a sink).
    pub sink_mass: &'a [T],
}

impl<'a, T: Copy> AttentionBlock<'a, T> {
    /// Probabilities of query `i` (which must be in `rows`) over the block's columns.
    pub fn probs_row(&self, i: usize) -> &'a [T] {
        let n = self.cols.len();
        let r = i - self.rows.start;
        &self.probs[r * n..(r + 1) * n]
    }

    /// The mass the sink took from query `i`'s row (which must be in `rows`), `None` for a head without a sink.
    pub fn sink_mass(&self, i: usize) -> Option<T> {
        self.sink_mass.get(i - self.rows.start).copied()
    }

    /// Logits of query `i` (which must be in `rows`) over the block's columns.
    pub fn logits_row(&self, i: usize) -> &'a [T] {
        let n = self.cols.len();
        let r = i - self.rows.start;
        &self.logits[r * n..(r + 1) * n]
    }
}

/// Receives one head's data on the thread that computes it.
pub trait HeadCapture<T: Real>: Send {
    /// The head's vectors, once (only when the layer plan asks for them).
    fn vectors(&mut self, _info: &HeadInfo, _vectors: &HeadVectors<'_, T>) {}
    /// One block of query rows, in increasing row order (only when the plan asks for attention).
    fn block(&mut self, _info: &HeadInfo, _block: &AttentionBlock<'_, T>) {}
    /// The head's output `Σ_j p_ij v_j` for every position (only when the plan asks for it).
    fn output(&mut self, _info: &HeadInfo, _out: HeadRows<'_, T>) {}
}

/// A subscriber to the engine's attention, layer by layer and head by head.
pub trait Capture<T: Real>: Sync {
    /// Per-head state handed to the computing thread.
    type Head: HeadCapture<T>;
    /// What to capture in `layer`.
    fn plan(&self, layer: usize) -> LayerPlan;
    /// Opens a head of a layer whose plan captures something.
    fn begin_head(&self, info: &HeadInfo) -> Self::Head;
    /// Takes a finished head back; called in head order.
    fn end_head(&mut self, info: &HeadInfo, head: Self::Head);
    /// The residual stream `[T, n_embd]` (row-major) after `layer`, its attention and feed-forward blocks added
    /// (only when the plan asks for it).
    fn residual(&mut self, _layer: usize, _stream: &[T]) {}
    /// The normed key/value latent `[rows, kv_lora_rank]` (row-major) of a latent-attention layer (DeepSeek's
    /// MLA), of the positions the pass computes (all of them but in a pass resumed from a prefix), from which
    /// every head's unrotated key part and values are decompressed (only when the plan asks for it).
    fn latent(&mut self, _layer: usize, _latent: &[T]) {}
}

/// Captures nothing: the plain forward pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCapture;

impl<T: Real> HeadCapture<T> for NoCapture {}

impl<T: Real> Capture<T> for NoCapture {
    type Head = NoCapture;
    fn plan(&self, _layer: usize) -> LayerPlan {
        LayerPlan::default()
    }
    fn begin_head(&self, _info: &HeadInfo) -> NoCapture {
        NoCapture
    }
    fn end_head(&mut self, _info: &HeadInfo, _head: NoCapture) {}
}

/// A sliding-window example for the captures' unit tests: a block of attention that starts after key 0.
#[cfg(test)]
pub(crate) mod window_example {
    use super::{AttentionBlock, HeadInfo};
    use crate::rope::{Pairing, RopeSpec};

    /// Query 8's probabilities over keys 4 to 8.
    pub(crate) const PROBS: [f64; 5] = [0.1, 0.2, 0.3, 0.15, 0.25];

    /// Head 0 of a one-layer, 9-position sequence with a window of 5: query 8 sees keys 4 to 8.
    pub(crate) fn head() -> HeadInfo {
        HeadInfo {
            layer: 0,
            head: 0,
            kv_head: 0,
            head_dim: 4,
            value_dim: 4,
            n_tokens: 9,
            rope: RopeSpec::new(4, 1e4, Pairing::HalfSplit),
            window: Some(5),
            chunk: None,
            sink: None,
            scale: 1.0,
        }
    }

    /// Query 8's block: one row over keys 4 to 8, column `c` being key `4 + c` ([`PROBS`]).
    pub(crate) fn last_row() -> AttentionBlock<'static, f64> {
        AttentionBlock {
            rows: 8..9,
            cols: 4..9,
            logits: &[0.0; 5],
            probs: &PROBS,
            sink_mass: &[],
        }
    }
}
