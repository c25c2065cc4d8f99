//! A sink that keeps everything the engine hands out for chosen layers and rows (for small cases, the golden
//! reference output and tests).

use super::{AttentionBlock, Capture, HeadCapture, HeadInfo, HeadRows, HeadVectors, LayerPlan};
use crate::linalg::gather_columns;
use crate::numeric::Real;
use std::ops::Range;

/// Everything captured for one query head of one layer.
#[derive(Clone, Debug, Default)]
pub struct HeadRecord<T> {
    /// Which head this is.
    pub info: Option<HeadInfo>,
    /// `[T, d]` queries before RoPE, model coordinate order.
    pub q_pre: Vec<T>,
    /// `[T, d]` keys before RoPE.
    pub k_pre: Vec<T>,
    /// `[T, d]` queries after RoPE.
    pub q: Vec<T>,
    /// `[T, d]` keys after RoPE.
    pub k: Vec<T>,
    /// `[T, d_v]` values.
    pub v: Vec<T>,
    /// `[R, T]` attention logits of the kept rows (scaled, soft-capped, unmasked).
    pub logits: Vec<T>,
    /// `[R, T]` attention probabilities of the kept rows.
    pub probs: Vec<T>,
    /// `[R]` the mass the head's sink took from each kept row (empty without a sink).
    pub sink_mass: Vec<T>,
    /// `[T, d_v]` head output.
    pub output: Vec<T>,
}

/// Collects whole heads and the residual stream after each of a set of layers, keeping attention rows `rows`
/// over all `T` keys.
#[derive(Clone, Debug)]
pub struct CollectSink<T> {
    layers: Vec<usize>,
    rows: Range<usize>,
    /// Records of every captured head, ordered by layer then head.
    pub records: Vec<HeadRecord<T>>,
    /// `(layer, [T, n_embd] residual stream after it)` for every captured layer, in layer order.
    pub residuals: Vec<(usize, Vec<T>)>,
    /// `(layer, [T, kv_lora_rank] normed latent)` for every captured latent-attention layer, in layer order.
    pub latents: Vec<(usize, Vec<T>)>,
}

impl<T: Real> CollectSink<T> {
    /// Collects layers `layers` and query rows `rows` (clipped to the sequence).
    pub fn new(layers: Vec<usize>, rows: Range<usize>) -> Self {
        Self {
            layers,
            rows,
            records: Vec::new(),
            residuals: Vec::new(),
            latents: Vec::new(),
        }
    }

    /// The record of `(layer, head)`, if captured.
    pub fn get(&self, layer: usize, head: usize) -> Option<&HeadRecord<T>> {
        self.records.iter().find(|r| {
            r.info
                .as_ref()
                .is_some_and(|i| i.layer == layer && i.head == head)
        })
    }

    /// The residual stream `[T, n_embd]` after `layer`, if captured.
    pub fn residual_of(&self, layer: usize) -> Option<&[T]> {
        self.residuals
            .iter()
            .find(|(l, _)| *l == layer)
            .map(|(_, x)| x.as_slice())
    }

    /// The normed key/value latent of latent-attention layer `layer`, if captured.
    pub fn latent_of(&self, layer: usize) -> Option<&[T]> {
        self.latents
            .iter()
            .find(|(l, _)| *l == layer)
            .map(|(_, x)| x.as_slice())
    }
}

/// The rows of `rows` one after another ([`gather_columns`]).
fn flatten<T: Copy>(rows: &HeadRows<'_, T>) -> Vec<T> {
    let (data, stride, offset) = rows.raw();
    gather_columns(data, stride, offset..offset + rows.dim())
}

/// Per-head state of a [`CollectSink`].
pub struct CollectHead<T> {
    rows: Range<usize>,
    record: HeadRecord<T>,
}

impl<T: Real> HeadCapture<T> for CollectHead<T> {
    fn vectors(&mut self, _info: &HeadInfo, v: &HeadVectors<'_, T>) {
        self.record.q_pre = flatten(&v.q_pre);
        self.record.k_pre = flatten(&v.k_pre);
        self.record.q = flatten(&v.q);
        self.record.k = flatten(&v.k);
        self.record.v = flatten(&v.v);
    }

    fn block(&mut self, info: &HeadInfo, b: &AttentionBlock<'_, T>) {
        let t = info.n_tokens;
        debug_assert_eq!(b.cols, 0..t, "CollectSink asks for full rows");
        for i in b.rows.clone().filter(|i| self.rows.contains(i)) {
            self.record.logits.extend_from_slice(b.logits_row(i));
            self.record.probs.extend_from_slice(b.probs_row(i));
            self.record.sink_mass.extend(b.sink_mass(i));
        }
    }

    fn output(&mut self, _info: &HeadInfo, out: HeadRows<'_, T>) {
        self.record.output = flatten(&out);
    }
}

impl<T: Real> Capture<T> for CollectSink<T> {
    type Head = CollectHead<T>;

    fn plan(&self, layer: usize) -> LayerPlan {
        let on = self.layers.contains(&layer);
        LayerPlan {
            vectors: on,
            attention: on,
            full_rows: on,
            output: on,
            residual: on,
            latent: on,
        }
    }

    fn begin_head(&self, info: &HeadInfo) -> CollectHead<T> {
        let rows = self.rows.start.min(info.n_tokens)..self.rows.end.min(info.n_tokens);
        // The attention rows arrive block by block: allocate them once rather than growing as they come.
        let kept = rows.len() * info.n_tokens;
        CollectHead {
            rows,
            record: HeadRecord {
                info: Some(info.clone()),
                logits: Vec::with_capacity(kept),
                probs: Vec::with_capacity(kept),
                ..Default::default()
            },
        }
    }

    fn end_head(&mut self, _info: &HeadInfo, head: CollectHead<T>) {
        self.records.push(head.record);
    }

    fn residual(&mut self, layer: usize, stream: &[T]) {
        self.residuals.push((layer, stream.to_vec()));
    }

    fn latent(&mut self, layer: usize, latent: &[T]) {
        self.latents.push((layer, latent.to_vec()));
    }
}
