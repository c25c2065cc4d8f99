//! Causal (optionally sliding-window or chunked, optionally with sinks) multi-head attention with grouped-query
//! heads, computed one block of query rows at a time and handed to a [`Capture`] as it goes. This is the only
//! attention in the crate: [`attend`] runs every head of a layer, each by the materialising kernel
//! ([`materialised`]: every block's scores and probabilities, which captures receive) or, in f32 where no
//! capture takes the layer's attention, by the fused online softmax ([`online`]).

mod layer;
mod materialised;
mod online;

pub use layer::{LayerQkv, LayerShape, ROW_BLOCK};

use crate::capture::{Capture, HeadCapture, HeadInfo, HeadRows, HeadVectors, LayerPlan};
use crate::numeric::Real;
use crate::profile::{time, Step};
use rayon::prelude::*;

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
            let keys = (keys_t.as_slice(), ldk);
            let out = if T::ONLINE_SOFTMAX && !plan.attention {
                online::head_attention(qkv, keys, shape, &info)
            } else {
                materialised::head_attention(qkv, keys, shape, &info, plan, head_cap.as_mut())
            };
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
pub(super) fn transposed_keys<T: Real>(k: &[T], t: usize, n_kv_heads: usize, d: usize) -> (Vec<T>, usize) {
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
