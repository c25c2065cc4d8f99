//! The memory a scan keeps beyond one forward pass, estimated from the configuration before any work, so that
//! a scan the machine cannot hold is refused at once (with what it needs, what is available and what reduces it)
//! instead of failing after hours.
//!
//! Counted: what each prompt set's streaming measures keep for the whole scan (slash and sink sums per `Δ`,
//! the first prompt's attention map and its block sums, the vector sums and `d × d` Gram matrices), twice when
//! random prompts run, plus the largest transient of the multi-pass analyses (the ablation's `[T − 1, vocab]`
//! logits, the positional/symbolic scan's kept keys and values). One forward pass's own working memory is [`Model::activation_bytes`], added by the caller's check.
//! Measured peaks stay below `activation + retained + the model's memory map` (README, Memory).

use super::params::{Analysis, ScanParams};
use crate::model::Model;
use crate::numeric::Real;

/// Bytes of an `f64`.
const F64: u64 = 8;

/// Bytes the scan of prompts no longer than `longest` keeps in memory beyond one forward pass.
pub fn retained_bytes<T: Real>(model: &Model<T>, longest: usize, params: &ScanParams) -> u64 {
    let c = &model.config;
    let heads = (c.n_layers * c.n_heads) as u64;
    let (d, dv) = (c.head_dim as u64, c.value_dim as u64);
    let mut per_set = 0u64;
    if params.runs(Analysis::Slash) || params.runs(Analysis::Intrinsic) {
        let side = longest.min(params.map_size) as u64;
        // Sums and counts per Δ and the sink; the map's f64 block sums and its f32 output.
        per_set += heads * (params.delta_max as u64 + 2) * 2 * F64;
        per_set += heads * side * side * (F64 + 4);
    }
    if [Analysis::Rank, Analysis::Fourier, Analysis::Frequency]
        .iter()
        .any(|&a| params.runs(a))
    {
        // Sums, unit sums and chunk norms of q, k, v; Gram and unit Gram matrices of q and k with `rank`.
        let grams = if params.runs(Analysis::Rank) {
            2 * 2 * d * d
        } else {
            0
        };
        per_set += heads * ((2 * 2 * d + 2 * dv + d + dv) + grams) * F64;
    }
    let sets = if params.runs(Analysis::Intrinsic) {
        2
    } else {
        1
    };
    let size = std::mem::size_of::<T>() as u64;
    let ablation = if params.runs(Analysis::Ablation) {
        longest.saturating_sub(1) as u64 * c.vocab_size as u64 * size
    } else {
        0
    };
    // The unswapped pass's keys (after and before RoPE) and values of every layer, kept for the swaps.
    let posym = if params.runs(Analysis::Posym) {
        let kv = c.n_kv_heads as u64 * (2 * d + dv);
        c.n_layers as u64 * longest as u64 * kv * size
    } else {
        0
    };
    // The multi-pass analyses run one after another: the larger of their transients.
    per_set * sets + ablation.max(posym)
}
