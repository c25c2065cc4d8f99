//! The canonical tasks of *Decoupling Positional and Symbolic Attention* as single-head constructions
//! (reconstructed statements of its Theorems 2–5 and 7; see `theory/ps-*.md` for what was assumed).
//!
//! A context of `m` symbols sits at positions `0..m`; the query token at position `m` attends over the context
//! keys only (its own key is left out, as Theorem 1 leaves out `j = n`). A head *solves* an instance at precision
//! `ε` when it puts more than `1 − ε` of its attention on the answer position.
//!
//! * Index: the query token names a position `t`; the answer is position `t`.
//! * Retrieval: the query token is a symbol that occurs once in the context; the answer is where it occurs.

use super::head::{dot, Rotation};
use crate::analysis::softmax::softmax;

/// The single-angle positional Index head's pre-RoPE query for index `t` in a context of `m`:
/// `q = A (cos(g (t − m)), sin(g (t − m)))`. With every key equal to [`INDEX_KEY`], the query at `m` gives the key at
/// `j` the logit `A cos(g (t − j))`, largest at `j = t`.
pub fn index_query(g: f64, amplitude: f64, m: usize, t: usize) -> [f64; 2] {
    let angle = g * (t as f64 - m as f64);
    [amplitude * angle.cos(), amplitude * angle.sin()]
}

/// The Index head's key, the same for every token (which is what makes the head positional).
pub const INDEX_KEY: [f64; 2] = [1.0, 0.0];

/// The weight the single-angle Index head (frequency `g`, amplitude `A`) puts on the answer `t` of a context of
/// `m`, computed by rotating the query and keys and taking the softmax over the context keys.
pub fn index_answer_weight(g: f64, amplitude: f64, m: usize, t: usize) -> f64 {
    let rotation = Rotation::single_frequency(g);
    let query = rotation.at(&index_query(g, amplitude, m, t), m);
    let logits: Vec<f64> = (0..m)
        .map(|j| dot(&query, &rotation.at(&INDEX_KEY, j)))
        .collect();
    softmax(&logits)[t]
}

/// The answer weights `α(t)`, `t ∈ 0..m`, of the single-angle Index head: the curve Theorem 7 is about.
pub fn index_answer_profile(g: f64, amplitude: f64, m: usize) -> Vec<f64> {
    (0..m)
        .map(|t| index_answer_weight(g, amplitude, m, t))
        .collect()
}

/// The competitors' relative logits `cos(g (t − j))`, `j ≠ t`, of answer `t` (the logit of `t` itself is `A`).
pub fn index_competitor_cosines(g: f64, m: usize, t: usize) -> Vec<f64> {
    (0..m)
        .filter(|&j| j != t)
        .map(|j| (g * (t as f64 - j as f64)).cos())
        .collect()
}

/// The exact retrieval amplitude of the NoPE head with orthonormal symbol embeddings (`q = A e_s`, `k_j = e_{x_j}`):
/// the answer has logit `A`, the `m − 1` others 0, so its weight `e^A / (e^A + m − 1)` exceeds `1 − ε` exactly
/// when `A > ln((m − 1)(1 − ε) / ε)`.
pub fn retrieval_required_amplitude(m: usize, eps: f64) -> f64 {
    ((m as f64 - 1.0) * (1.0 - eps) / eps).ln()
}

/// Whether `values` is U-shaped: strictly decreasing to a minimum, then strictly increasing, with at most one
/// tie, at the bottom (two equal middle values), and at least three values.
pub fn is_u_shaped(values: &[f64]) -> bool {
    if values.len() < 3 {
        return false;
    }
    let steps: Vec<std::cmp::Ordering> = values.windows(2).map(|w| w[1].total_cmp(&w[0])).collect();
    let descending = steps.iter().take_while(|s| s.is_lt()).count();
    let rest = &steps[descending..];
    let rising = match rest.first() {
        Some(s) if s.is_eq() => &rest[1..],
        _ => rest,
    };
    descending > 0 && !rising.is_empty() && rising.iter().all(|s| s.is_gt())
}
