//! The finiteness guard of the forward pass. From finite weights and values every tensor the pass computes is
//! finite, in f64 and in f32 (real models stay many orders of magnitude below f32's range), so a NaN or an
//! infinity is never a result: it comes from a file whose weights or hyper-parameters are wrong (or from a
//! defect). The pass checks each tensor it computes as soon as it is computed and stops at the first
//! non-finite one, naming it, so that no output (reference arrays, scan measures) is written from it.
//!
//! The cost is one read of each checked tensor, against the matrix products that made it (a product of width
//! `d` reads each output's inputs `d` times); the profiler's step `Check` measures it.

use crate::error::{Error, Result};
use crate::numeric::Real;
use crate::profile::{time, Step};
use rayon::prelude::*;

/// Where in the model a checked tensor belongs: a layer, or a stage outside the layers.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Site {
    /// Layer `l`.
    Layer(usize),
    /// The token embeddings (before the first layer).
    Embeddings,
    /// The output head (final norm, unembedding, soft-capping).
    OutputHead,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Site::Layer(l) => write!(f, "layer {l}"),
            Site::Embeddings => write!(f, "the token embeddings"),
            Site::OutputHead => write!(f, "the output head"),
        }
    }
}

/// Elements checked per task: reading memory is what a check costs, and two cores read it about twice as fast.
/// Large enough that a task's scheduling is a small part of its time (about 15 µs of reading in f32).
const CHUNK: usize = 1 << 16;

/// Whether some element of `values` is not finite. Every element is read: the compiler vectorizes this fold,
/// where a search that stops at the first non-finite element (`any`) reads one element per iteration, 3× slower
/// in f32 on AVX-512 and SSE2 alike (the non-finite case, an error, may take as long as it likes).
fn has_non_finite<T: Real>(values: &[T]) -> bool {
    values.iter().fold(false, |bad, v| bad | !v.is_finite())
}

/// The index of the first element of `values` that is not finite.
fn first_non_finite<T: Real>(values: &[T]) -> Option<usize> {
    let chunk = values.par_chunks(CHUNK).position_first(has_non_finite)?;
    let start = chunk * CHUNK;
    values[start..]
        .iter()
        .position(|v| !v.is_finite())
        .map(|i| start + i)
}

/// Refuses `values`, rows of `width` elements for positions `first_row..`, when one is not finite
/// ([`Error::NonFinite`], naming `stage` at `site`, the position and element of the first).
pub(crate) fn ensure_finite<T: Real>(
    values: &[T],
    width: usize,
    first_row: usize,
    site: Site,
    stage: &str,
) -> Result<()> {
    let first = time(Step::Check, || first_non_finite(values));
    let Some(i) = first else {
        return Ok(());
    };
    let v = values[i].to_f64_exact();
    Err(Error::NonFinite {
        stage: stage.to_string(),
        at: site.to_string(),
        value: if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        },
        position: first_row + i / width.max(1),
        element: i % width.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_non_finite_element_is_found_in_any_chunk() {
        let mut values = vec![1.5f32; 3 * CHUNK + 5];
        assert_eq!(first_non_finite(&values), None);
        // Each earlier than the last: the first chunk that has one, and the first of that chunk.
        for (at, bad) in [
            (3 * CHUNK + 4, f32::NAN),
            (CHUNK + 7, f32::INFINITY),
            (CHUNK, f32::NAN),
            (CHUNK - 1, f32::NEG_INFINITY),
            (0, f32::NAN),
        ] {
            values[at] = bad;
            assert_eq!(first_non_finite(&values), Some(at));
        }
        // The extremes of the finite values pass, in f64 too.
        let edges = [f64::MAX, f64::MIN, f64::MIN_POSITIVE / 4.0, -0.0, 0.0];
        assert_eq!(first_non_finite(&edges), None);
        assert_eq!(first_non_finite(&[f32::MAX, f32::MIN, 1e-45]), None);
        assert_eq!(first_non_finite(&[0.0, f64::NEG_INFINITY]), Some(1));
    }

    #[test]
    fn the_first_non_finite_element_is_named_by_position_and_element() {
        assert!(ensure_finite(&[1.0f64, -2.0, 0.0], 3, 0, Site::Embeddings, "x").is_ok());
        let values = [0.0f32, 1.0, 2.0, 3.0, f32::NEG_INFINITY, f32::NAN];
        let e = ensure_finite(&values, 2, 10, Site::Layer(4), "post-RoPE keys").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("post-RoPE keys of layer 4 holds -inf at position 12, element 0"),
            "{text}"
        );
        assert_eq!(e.kind(), crate::ErrorKind::BadFile);
        let e = ensure_finite(&[f64::NAN], 1, 0, Site::OutputHead, "logits").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("logits of the output head holds NaN at position 0"));
        let e = ensure_finite(&[f64::INFINITY], 1, 0, Site::OutputHead, "logits").unwrap_err();
        assert!(e.to_string().contains("holds inf"));
    }
}
