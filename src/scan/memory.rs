//! The pre-flight of a scan: its prompt count and the memory it keeps beyond one forward pass, checked from the
//! configuration before any prompt is built, so that a scan the machine cannot hold or finish is refused at once
//! (with what it needs, what is available and what reduces it) instead of failing after hours.
//!
//! Counted: the prompts' token ids; what each prompt set's streaming measures keep for the whole scan (slash
//! and sink sums per `Δ`, the first prompt's attention map and its block sums, the vector sums and `d × d` Gram
//! matrices), twice when random prompts run, plus the largest transient of the multi-pass analyses (the
//! ablation's `[T − 1, vocab]` logits of each pass, the positional/symbolic scan's kept keys and values) and
//! the working memory of the passes they run beside the first ([`crate::analysis::PASSES_AT_ONCE`]). One
//! forward pass's own working memory is [`Model::activation_bytes`], added by [`Model::preflight`].
//! Measured peaks stay below `activation + retained + the model's memory map` (`docs/findings.md`, "Memory").

use super::params::{Analysis, ScanParams};
use crate::analysis::PASSES_AT_ONCE;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::numeric::Real;

/// Largest number of natural prompts of a scan (`--count`, or the prompt files given): 65 536. Each is a
/// forward pass (and its random twin another); a scan of that many prompts of the default length takes days on
/// the smallest supported model, and a larger study is cut into shards (`--shard K/N`) that merge.
pub const MAX_PROMPT_COUNT: usize = 65_536;

/// Bytes of an `f64`.
const F64: u64 = 8;

/// Bytes the scan of prompts no longer than `longest` keeps in memory beyond one forward pass.
pub fn retained_bytes<T: Real>(model: &Model<T>, longest: usize, params: &ScanParams) -> u64 {
    let c = &model.config;
    let heads = (c.n_layers * c.n_heads) as u64;
    // Per-head sums are as wide as the widest layer's heads (Gemma 4's layers differ; the shards pad to it).
    let (d, dv) = (c.max_head_dim() as u64, c.max_value_dim() as u64);
    let mut per_set = 0u64;
    if params.runs(Analysis::Slash) || params.runs(Analysis::Intrinsic) {
        let side = longest.min(params.map_size) as u64;
        // Sums and counts per Δ and the sink; the map's f64 block sums and its f32 output.
        let offsets = (params.delta_max as u64).saturating_add(2);
        per_set = per_set.saturating_add(heads.saturating_mul(offsets).saturating_mul(2 * F64));
        per_set += heads * side * side * (F64 + 4);
    }
    if [Analysis::Rank, Analysis::Fourier, Analysis::Frequency]
        .iter()
        .any(|&a| params.runs(a))
    {
        // Sums, unit sums and chunk norms of q, k, v; Gram and unit Gram matrices of q with `rank`, and of k,
        // whose sums every query head of a key/value group shares.
        let kv_heads: u64 = c.layers.iter().map(|l| l.n_kv_heads as u64).sum();
        let grams = if params.runs(Analysis::Rank) {
            (heads + kv_heads) * 2 * d * d
        } else {
            0
        };
        per_set += (heads * (2 * 2 * d + 2 * dv + d + dv) + grams) * F64;
    }
    let sets = if params.runs(Analysis::Intrinsic) {
        2
    } else {
        1
    };
    let size = std::mem::size_of::<T>() as u64;
    // Their passes run `PASSES_AT_ONCE` at a time: each one's logits, and the working memory of every pass
    // beside the one `Model::preflight` counts.
    let at_once = PASSES_AT_ONCE as u64;
    let ablation = if params.runs(Analysis::Ablation) {
        (longest.saturating_sub(1) as u64).saturating_mul(c.vocab_size as u64 * size * at_once)
    } else {
        0
    };
    let beside = if params.runs(Analysis::Ablation) || params.runs(Analysis::Posym) {
        model.activation_bytes(longest).saturating_mul(at_once - 1)
    } else {
        0
    };
    // The unswapped pass's keys (after and before RoPE) and values of every layer, kept for the swaps.
    let posym = if params.runs(Analysis::Posym) {
        let kv: u64 = (c.layers.iter())
            .map(|l| l.n_kv_heads as u64 * (2 * l.head_dim() as u64 + l.value_dim as u64))
            .sum();
        (longest as u64).saturating_mul(kv * size)
    } else {
        0
    };
    // The multi-pass analyses run one after another: the larger of their transients.
    per_set
        .saturating_mul(sets)
        .saturating_add(ablation.max(posym))
        .saturating_add(beside)
}

/// What reduces a scan's memory, appended to a refusal.
pub const REDUCE: &str =
    "; shorten the prompts (length), leave out analyses (analyses) or give fewer prompts (count)";

/// Bytes the token ids of `count` natural prompts of at most `longest` tokens and as many random ones take,
/// each set held twice (the prompts and the ids the passes read).
pub fn prompt_bytes(count: usize, longest: usize) -> u64 {
    (count as u64)
        .saturating_mul(longest as u64)
        .saturating_mul(2 * 2 * 4)
}

/// Refuses, before any prompt is built, a scan with `params` of `count` natural prompts (and as many random
/// ones) of at most `longest` tokens: `count` outside `1..=`[`MAX_PROMPT_COUNT`] or `Δ_max` not below `longest`
/// ([`Error::Argument`]), prompts longer than the model's context, or more memory than is available
/// ([`Model::preflight`]).
pub fn preflight<T: Real>(
    model: &Model<T>,
    params: &ScanParams,
    count: usize,
    longest: usize,
) -> Result<()> {
    if !(1..=MAX_PROMPT_COUNT).contains(&count) {
        return Err(Error::parameter(
            "count",
            format!("{count} is out of range: 1 to {MAX_PROMPT_COUNT}"),
        ));
    }
    if longest == 0 {
        return Err(Error::Argument("the prompts have no tokens".into()));
    }
    if params.delta_max >= longest {
        return Err(Error::parameter(
            "delta_max",
            format!(
                "{} is out of range: 0 to {} (below the prompts' length of {longest} tokens)",
                params.delta_max,
                longest.saturating_sub(1)
            ),
        ));
    }
    let kept = retained_bytes(model, longest, params).saturating_add(prompt_bytes(count, longest));
    model.preflight(longest, kept, REDUCE)
}
