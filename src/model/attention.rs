//! Causal (optionally sliding-window or chunked, optionally with sinks) multi-head attention with grouped-query heads, computed one block of
//! query rows at a time and handed to a [`Capture`] as it goes. This is the only attention in the crate.

use super::ops::{masked_softmax, softcap};
use crate::capture::{
    AttentionBlock, Capture, HeadCapture, HeadInfo, HeadRows, HeadVectors, LayerPlan,
};
use crate::linalg::gemm;
use crate::numeric::Real;
use crate::profile::{count_flops, time, Step};
use rayon::prelude::*;

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

/// Runs attention for every head of a layer (heads in parallel) and returns the concatenated head outputs of
/// rows `first_row..T`, `[T − first_row, n_heads · value_dim]`. `template` describes head 0; the capture
/// receives every head's info.
pub fn attend<T: Real, C: Capture<T>>(
    qkv: &LayerQkv<'_, T>,
    shape: &LayerShape<'_>,
    template: &HeadInfo,
    plan: LayerPlan,
    capture: &mut C,
) -> Vec<T> {
    let (t, d, dv) = (shape.n_tokens, template.head_dim, template.value_dim);
    let shared: &C = capture;
    let (keys_t, ldk) = time(Step::Scores, || {
        transposed_keys(qkv.k, t, shape.n_kv_heads, d)
    });
    let results: Vec<(HeadInfo, Vec<T>, Option<C::Head>)> = (0..shape.n_heads)
        .into_par_iter()
        .map(|h| {
            let info = template.of_head(h, shape.n_heads, shape.n_kv_heads, shape.sinks);
            let mut head_cap = time(Step::Capture, || {
                plan.any().then(|| shared.begin_head(&info))
            });
            let g = info.kv_head;
            if let (true, Some(hc)) = (plan.vectors, head_cap.as_mut()) {
                let vectors = HeadVectors {
                    q_pre: HeadRows::new(qkv.q_pre, shape.n_heads * d, h, d),
                    k_pre: HeadRows::new(qkv.k_pre, shape.n_kv_heads * d, g, d),
                    q: HeadRows::new(qkv.q, shape.n_heads * d, h, d),
                    k: HeadRows::new(qkv.k, shape.n_kv_heads * d, g, d),
                    v: HeadRows::new(qkv.v, shape.n_kv_heads * dv, g, dv),
                };
                time(Step::Capture, || hc.vectors(&info, &vectors));
            }
            let out = head_attention(qkv, (&keys_t, ldk), shape, &info, plan, head_cap.as_mut());
            if let (true, Some(hc)) = (plan.output, head_cap.as_mut()) {
                time(Step::Capture, || {
                    hc.output(&info, HeadRows::new(&out, dv, 0, dv))
                });
            }
            (info, out, head_cap)
        })
        .collect();

    // The heads' outputs side by side, row by row, in parallel (at long prompts a serial copy left a core idle).
    let width = shape.n_heads * dv;
    let mut out = vec![T::zero(); (t - shape.first_row) * width];
    let head_outs: Vec<(usize, &[T])> = results
        .iter()
        .map(|(info, head_out, _)| (info.head, head_out.as_slice()))
        .collect();
    out.par_chunks_mut(width)
        .enumerate()
        .for_each(|(i, row)| {
            for &(h, head_out) in &head_outs {
                row[h * dv..(h + 1) * dv].copy_from_slice(&head_out[i * dv..(i + 1) * dv]);
            }
        });
    for (info, _, head_cap) in results {
        if let Some(hc) = head_cap {
            time(Step::Capture, || capture.end_head(&info, hc));
        }
    }
    out
}

/// The keys of every key/value head transposed, `[n_kv_heads, d, ld]` with `ld ≥ T` (key `j`'s element `c` at
/// `(g · d + c) · ld + j`), from `k` (`[T, n_kv_heads · d]`), and `ld`. The score products of every block of
/// queries then read keys along rows, with vector loads. `ld` is `T` rounded up to a cache line and one line
/// more, so that the rows of one head, read together, do not all fall in the same cache set, as they would
/// at a power-of-two `T`.
fn transposed_keys<T: Real>(k: &[T], t: usize, n_kv_heads: usize, d: usize) -> (Vec<T>, usize) {
    let line = 64 / std::mem::size_of::<T>();
    let ld = t.next_multiple_of(line) + line;
    // In parallel over bands of `line` rows: a band reads one cache line of every key.
    let mut keys_t = vec![T::zero(); n_kv_heads * d * ld];
    keys_t
        .par_chunks_mut(line * ld)
        .enumerate()
        .for_each(|(band, dst)| {
            let r0 = band * line;
            for (j, key) in k.chunks(n_kv_heads * d).enumerate() {
                for (r, &x) in key[r0..r0 + dst.len() / ld].iter().enumerate() {
                    dst[r * ld + j] = x;
                }
            }
        });
    (keys_t, ld)
}

/// One head: for each block of query rows, logits `scale · q kᵀ` (soft-capped), masked softmax (with the
/// head's sink, if any), and `probs · v`. Returns the head output of rows `first_row..T`, `[T − first_row, value_dim]`.
///
/// Blocks are the same `ROW_BLOCK`-aligned rows, with the same key columns, whatever `first_row` is (a resumed
/// pass computes the tail of the block holding `first_row`), so each computed element goes through the same
/// operations as in a pass from row 0.
fn head_attention<T: Real, H: HeadCapture<T>>(
    qkv: &LayerQkv<'_, T>,
    (keys_t, ldk): (&[T], usize),
    shape: &LayerShape<'_>,
    info: &HeadInfo,
    plan: LayerPlan,
    mut cap: Option<&mut H>,
) -> Vec<T> {
    let (t, d, dv) = (shape.n_tokens, info.head_dim, info.value_dim);
    let (q_stride, v_stride) = (shape.n_heads * d, shape.n_kv_heads * dv);
    let (q_off, v_off) = (info.head * d, info.kv_head * dv);
    let keys_t = &keys_t[info.kv_head * d * ldk..][..d * ldk];
    let scale = T::of_f64(info.scale);
    let first = shape.first_row;
    let mut out = vec![T::zero(); (t - first) * dv];
    let mut logits = Vec::new();
    let mut probs = Vec::new();
    let mut sink_mass = Vec::new();
    let sink = info.sink.map(T::of_f64);
    for block in (first / ROW_BLOCK * ROW_BLOCK..t).step_by(ROW_BLOCK) {
        let (r0, r1) = (block.max(first), (block + ROW_BLOCK).min(t));
        let cols = if plan.full_rows {
            0..t
        } else {
            info.first_visible(block)..r1
        };
        let (nr, nc) = (r1 - r0, cols.len());
        logits.resize(nr * nc, T::zero());
        probs.resize(nr * nc, T::zero());
        time(Step::Scores, || {
            gemm(
                &mut logits,
                nc,
                &qkv.q[r0 * q_stride + q_off..],
                q_stride,
                &keys_t[cols.start..],
                ldk,
                (nr, nc, d),
                scale,
            );
            if let Some(c) = shape.softcap {
                softcap(&mut logits, c);
            }
        });
        count_flops(Step::Scores, 2 * nr * nc * d);
        sink_mass.clear();
        time(Step::Softmax, || {
            for (r, i) in (r0..r1).enumerate() {
                let visible = info.first_visible(i) - cols.start..i + 1 - cols.start;
                let mass = masked_softmax(
                    &logits[r * nc..(r + 1) * nc],
                    &mut probs[r * nc..(r + 1) * nc],
                    visible,
                    sink,
                );
                if sink.is_some() {
                    sink_mass.push(mass);
                }
            }
        });
        // No row of the block sees a key past `r1 - 1`: full rows only add exact zeros there, so `probs · v`
        // stops at the last visible key whatever the plan.
        let used = r1 - cols.start;
        time(Step::Values, || {
            gemm(
                &mut out[(r0 - first) * dv..(r1 - first) * dv],
                dv,
                &probs,
                nc,
                &qkv.v[cols.start * v_stride + v_off..],
                v_stride,
                (nr, dv, used),
                T::one(),
            )
        });
        count_flops(Step::Values, 2 * nr * dv * used);
        if let (true, Some(hc)) = (plan.attention, cap.as_deref_mut()) {
            time(Step::Capture, || {
                hc.block(
                    info,
                    &AttentionBlock {
                        rows: r0..r1,
                        cols,
                        logits: &logits,
                        probs: &probs,
                        sink_mass: &sink_mass,
                    },
                )
            });
        }
    }
    out
}
