//! p-RoPE (*Round and Round We Go*, Section 6.1 and Appendix D): keep the rotation on the fraction `p` of the
//! highest frequencies and none on the rest. As in the paper's `apply_p_rope`, the number of rotating chunks is
//! `⌊p · d/2⌋`, and the rotating chunks keep their RoPE frequencies. `p = 0` is NoPE, `p = 1` is RoPE. The
//! reversed variant keeps the rotation on the lowest frequencies instead.
//!
//! Masks are per chunk (0 = fastest) and feed [`RopeTable::rotate_masked`].

use crate::rope::{RopeSpec, RopeTable};

use super::head::dot;

/// Number of rotating chunks of p-RoPE: `⌊p · n_chunks⌋`, `p` clamped to `[0, 1]` (NaN counts as 0).
pub fn rotating_chunks(n_chunks: usize, p: f64) -> usize {
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
    ((p * n_chunks as f64).floor() as usize).min(n_chunks)
}

/// p-RoPE's mask: the first (fastest) `⌊p · n_chunks⌋` chunks rotate.
pub fn p_rope_mask(n_chunks: usize, p: f64) -> Vec<bool> {
    let kept = rotating_chunks(n_chunks, p);
    (0..n_chunks).map(|l| l < kept).collect()
}

/// Reversed p-RoPE's mask: the last (slowest) `⌊p · n_chunks⌋` chunks rotate.
pub fn reversed_p_rope_mask(n_chunks: usize, p: f64) -> Vec<bool> {
    let mut mask = p_rope_mask(n_chunks, p);
    mask.reverse();
    mask
}

/// The masked-RoPE logit `(R_mask^i q)·(R_mask^j k)`, rotating through `table` (positions `i, j < n_pos`).
pub fn masked_logit(
    table: &RopeTable<f64>,
    mask: &[bool],
    q: &[f64],
    i: usize,
    k: &[f64],
    j: usize,
) -> f64 {
    let (mut q, mut k) = (q.to_vec(), k.to_vec());
    table.rotate_masked(&mut q, i, mask);
    table.rotate_masked(&mut k, j, mask);
    dot(&q, &k)
}

/// The part of the dot product `x·y` carried by chunk `l` (its two coordinates under `spec`'s pairing).
pub fn chunk_contribution(spec: &RopeSpec, x: &[f64], y: &[f64], l: usize) -> f64 {
    let (a, b) = spec.chunk_dims(l);
    x[a] * y[a] + x[b] * y[b]
}
