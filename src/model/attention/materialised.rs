//! One head's attention with every block's scores and probabilities materialised: what a capture of the
//! layer's attention receives, and the f64 engine's only path.

use super::layer::{HeadView, LayerQkv, LayerShape, ROW_BLOCK};
use super::super::ops::masked_softmax;
use crate::capture::{AttentionBlock, HeadCapture, HeadInfo, LayerPlan};
use crate::numeric::Real;
use crate::profile::{time, Step};
use std::ops::Range;

/// One head: for each block of query rows, logits `scale · q kᵀ` (soft-capped), masked softmax (with the
/// head's sink, if any), and `probs · v`, the block handed to the capture if it takes the layer's attention.
/// Returns the head output of rows `first_row..T`, `[T − first_row, value_dim]`.
///
/// Blocks are the same `ROW_BLOCK`-aligned rows, with the same key columns, whatever `first_row` is (a resumed
/// pass computes the tail of the block holding `first_row`), so each computed element goes through the same
/// operations as in a pass from row 0.
pub(super) fn head_attention<T: Real, H: HeadCapture<T>>(
    qkv: &LayerQkv<'_, T>,
    keys_t: (&[T], usize),
    shape: &LayerShape<'_>,
    info: &HeadInfo,
    plan: LayerPlan,
    mut cap: Option<&mut H>,
) -> Vec<T> {
    let view = HeadView::new(qkv, keys_t, shape, info);
    let (t, dv, first) = (shape.n_tokens, info.value_dim, shape.first_row);
    let mut out = vec![T::zero(); (t - first) * dv];
    let mut buffers = Buffers::default();
    for block in (first / ROW_BLOCK * ROW_BLOCK..t).step_by(ROW_BLOCK) {
        let rows = block.max(first)..(block + ROW_BLOCK).min(t);
        let cols = if plan.full_rows {
            0..t
        } else {
            info.first_visible(block)..rows.end
        };
        let rows_out = &mut out[(rows.start - first) * dv..(rows.end - first) * dv];
        self::block(&view, info, (rows.clone(), cols.clone()), &mut buffers, rows_out);
        if let (true, Some(hc)) = (plan.attention, cap.as_deref_mut()) {
            time(Step::Capture, || {
                hc.block(
                    info,
                    &AttentionBlock {
                        rows,
                        cols,
                        logits: &buffers.logits,
                        probs: &buffers.probs,
                        sink_mass: &buffers.sink_mass,
                    },
                )
            });
        }
    }
    out
}

/// A block's logits and probabilities (`rows × cols`, row-major) and each row's sink mass (empty without a
/// sink), reused from block to block.
#[derive(Default)]
pub(super) struct Buffers<T> {
    logits: Vec<T>,
    probs: Vec<T>,
    sink_mass: Vec<T>,
}

impl<T: Real> Buffers<T> {
    /// The logits' buffer, `len` long, as scratch for a tile's scores (`attention::online`), so that the fused
    /// kernel holds no more block matrices per head than the materialising path (beside a block's f64 outputs).
    pub(super) fn scratch(&mut self, len: usize) -> &mut [T] {
        self.logits.resize(len, T::zero());
        &mut self.logits
    }
}

/// One block: the logits of queries `rows` against keys `cols` (which hold every key a row of the block sees),
/// each row's masked softmax (with the head's sink) into `buffers`, and `probs · v` into `out`
/// (`rows.len() × value_dim`).
pub(super) fn block<T: Real>(
    view: &HeadView<'_, T>,
    info: &HeadInfo,
    (rows, cols): (Range<usize>, Range<usize>),
    buffers: &mut Buffers<T>,
    out: &mut [T],
) {
    let (nr, nc) = (rows.len(), cols.len());
    let Buffers {
        logits,
        probs,
        sink_mass,
    } = buffers;
    logits.resize(nr * nc, T::zero());
    probs.resize(nr * nc, T::zero());
    view.scores(rows.clone(), cols.clone(), logits);
    sink_mass.clear();
    let sink = info.sink.map(T::of_f64);
    time(Step::Softmax, || {
        for (r, i) in rows.clone().enumerate() {
            let visible = info.first_visible(i) - cols.start..i + 1 - cols.start;
            let row = r * nc..(r + 1) * nc;
            let mass = masked_softmax(&logits[row.clone()], &mut probs[row], visible, sink);
            if sink.is_some() {
                sink_mass.push(mass);
            }
        }
    });
    // No row of the block sees a key past `rows.end - 1`: full rows only add exact zeros there, so `probs · v`
    // stops at the last visible key whatever the columns.
    view.values(probs, nc, cols.start..rows.end, out);
}
