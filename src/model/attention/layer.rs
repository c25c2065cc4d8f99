//! What every head kernel of a layer reads: the layer's queries, keys and values, its shape, and one head's
//! view of them with the two products of attention.

use crate::capture::HeadInfo;
use crate::linalg::gemm;
use super::super::ops::softcap;
use crate::numeric::Real;
use crate::profile::{count_flops, time, Step};
use std::ops::Range;

/// Query rows per attention block: the unit of work and of capture. Fixed, so results do not depend on the
/// number of threads.
pub const ROW_BLOCK: usize = 128;

/// One layer's projected queries, keys and values, `[T, heads · dim]` row-major each. In a pass resumed
/// after its first [`LayerShape::first_row`] rows, the queries of those rows are not computed (zero).
pub struct LayerQkv<'a, T> {
    /// Queries after RoPE.
    pub q: &'a [T],
    /// Keys after RoPE.
    pub k: &'a [T],
    /// Values.
    pub v: &'a [T],
    /// Queries before RoPE (empty unless the plan captures vectors).
    pub q_pre: &'a [T],
    /// Keys before RoPE (empty unless the plan captures vectors).
    pub k_pre: &'a [T],
}

/// Shapes shared by all heads of a layer.
pub struct LayerShape<'a> {
    /// Number of positions.
    pub n_tokens: usize,
    /// The first query row computed: 0, or in a resumed pass the first position after the reused prefix.
    /// Attention is computed, and handed to the capture, for rows `first_row..n_tokens` only.
    pub first_row: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Optional soft-capping of the logits.
    pub softcap: Option<f64>,
    /// Each query head's sink logit, where the layer has sinks ([`HeadInfo::sink`]).
    pub sinks: Option<&'a [f64]>,
}

/// One head's operands: its rows of the queries, its key/value head's transposed keys and values.
pub(super) struct HeadView<'a, T> {
    q: &'a [T],
    q_stride: usize,
    keys_t: &'a [T],
    ldk: usize,
    v: &'a [T],
    v_stride: usize,
    head_dim: usize,
    value_dim: usize,
    scale: T,
    softcap: Option<f64>,
}

impl<'a, T: Real> HeadView<'a, T> {
    /// Head `info`'s operands in a layer's `qkv`, with the layer's transposed keys `(keys_t, ldk)`
    /// (`attention::transposed_keys`).
    pub(super) fn new(
        qkv: &LayerQkv<'a, T>,
        (keys_t, ldk): (&'a [T], usize),
        shape: &LayerShape<'_>,
        info: &HeadInfo,
    ) -> Self {
        let (d, dv) = (info.head_dim, info.value_dim);
        HeadView {
            q: &qkv.q[info.head * d..],
            q_stride: shape.n_heads * d,
            keys_t: &keys_t[info.kv_head * d * ldk..][..d * ldk],
            ldk,
            v: &qkv.v[info.kv_head * dv..],
            v_stride: shape.n_kv_heads * dv,
            head_dim: d,
            value_dim: dv,
            scale: T::of_f64(info.scale),
            softcap: shape.softcap,
        }
    }

    /// `out[r · cols.len() + c]` = the soft-capped `scale · q kᵀ` of query `rows.start + r` and key
    /// `cols.start + c`.
    pub(super) fn scores(&self, rows: Range<usize>, cols: Range<usize>, out: &mut [T]) {
        let (nr, nc, d) = (rows.len(), cols.len(), self.head_dim);
        time(Step::Scores, || {
            gemm(
                out,
                nc,
                &self.q[rows.start * self.q_stride..],
                self.q_stride,
                &self.keys_t[cols.start..],
                self.ldk,
                (nr, nc, d),
                self.scale,
            );
            if let Some(c) = self.softcap {
                softcap(out, c);
            }
        });
        count_flops(Step::Scores, 2 * nr * nc * d);
    }

    /// `out[r · value_dim + c] = Σ_j weights[r · ld + j] · v[keys.start + j][c]` over the keys `keys`, for the
    /// `out.len() / value_dim` rows of `weights` (row stride `ld`).
    pub(super) fn values(&self, weights: &[T], ld: usize, keys: Range<usize>, out: &mut [T]) {
        let (nr, dv) = (out.len() / self.value_dim, self.value_dim);
        time(Step::Values, || {
            gemm(
                out,
                dv,
                weights,
                ld,
                &self.v[keys.start * self.v_stride..],
                self.v_stride,
                (nr, dv, keys.len()),
                T::one(),
            )
        });
        count_flops(Step::Values, 2 * nr * dv * keys.len());
    }
}
