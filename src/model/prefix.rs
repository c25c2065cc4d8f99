//! What a forward pass keeps for a later pass over a sequence that starts the same way: every layer's keys and
//! values. In a causal model the states of the first positions depend on those tokens alone, so a pass over a
//! sequence sharing its first `p` tokens with an earlier one (a block-swap pass of the positional/symbolic
//! scan and its unswapped pass) can take their keys and values as they were and compute positions `p..` only,
//! with the same operations for every element it computes (tested bit for bit against the whole pass).

use crate::error::{Error, Result};
use crate::model::ForwardOptions;
use crate::numeric::Real;
use rayon::prelude::*;

/// One layer's keys after RoPE, keys before RoPE and values, `[T, n_kv_heads · dim]` row-major each.
#[derive(Clone)]
pub(crate) struct LayerKv<T> {
    pub(crate) k: Vec<T>,
    pub(crate) k_pre: Vec<T>,
    pub(crate) v: Vec<T>,
}

/// The keys and values of every layer and position of one forward pass, with the tokens and options that
/// produced them ([`crate::model::Model::forward_keeping_prefix`]).
pub struct PrefixKv<T> {
    ids: Vec<u32>,
    rope_keep: Option<Vec<Vec<bool>>>,
    pub(crate) layers: Vec<LayerKv<T>>,
}

impl<T> PrefixKv<T> {
    pub(crate) fn new(
        ids: Vec<u32>,
        rope_keep: Option<Vec<Vec<bool>>>,
        layers: Vec<LayerKv<T>>,
    ) -> Self {
        Self {
            ids,
            rope_keep,
            layers,
        }
    }

    /// How many leading positions of a pass over `ids` with `opts` can be taken from this one: the tokens
    /// both share, but never the last position (a pass computes at least one). Errors when the passes differ
    /// in length (RoPE's scaling may depend on it) or in their RoPE mask.
    pub(crate) fn reusable_rows(&self, ids: &[u32], opts: &ForwardOptions) -> Result<usize> {
        if ids.len() != self.ids.len() || opts.rope_keep != self.rope_keep {
            return Err(Error::Argument(format!(
                "a pass over {} tokens cannot start from the keys and values of a pass over {} tokens{}",
                ids.len(),
                self.ids.len(),
                if opts.rope_keep != self.rope_keep {
                    " with another RoPE mask"
                } else {
                    ""
                }
            )));
        }
        let shared = ids
            .iter()
            .zip(&self.ids)
            .take_while(|(a, b)| a == b)
            .count();
        Ok(shared.min(ids.len().saturating_sub(1)))
    }
}

/// Elements copied per task by [`after`]: a few microseconds of copying each.
const COPY_CHUNK: usize = 1 << 14;

/// `before` (or, for `None`, `len_before` zeros) followed by `rows`, the whole sequence's rows of a tensor a
/// resumed pass computed from its first new position. Written on the worker threads: a resumed pass joins
/// several megabytes a layer so, and on the calling thread the workers waited for each copy.
pub(crate) fn after<T: Real>(before: Option<&[T]>, len_before: usize, rows: &[T]) -> Vec<T> {
    let n = len_before + rows.len();
    let mut out = Vec::with_capacity(n);
    let (head, tail) = out.spare_capacity_mut()[..n].split_at_mut(len_before);
    rayon::join(
        || match before {
            Some(b) => head
                .par_chunks_mut(COPY_CHUNK)
                .zip(b[..len_before].par_chunks(COPY_CHUNK))
                .for_each(|(d, s)| d.iter_mut().zip(s).for_each(|(d, &s)| _ = d.write(s))),
            None => head
                .par_chunks_mut(COPY_CHUNK)
                .for_each(|d| d.iter_mut().for_each(|d| _ = d.write(T::zero()))),
        },
        || {
            tail.par_chunks_mut(COPY_CHUNK)
                .zip(rows.par_chunks(COPY_CHUNK))
                .for_each(|(d, s)| d.iter_mut().zip(s).for_each(|(d, &s)| _ = d.write(s)))
        },
    );
    // SAFETY: every one of the `n` elements was written above.
    unsafe { out.set_len(n) };
    out
}
