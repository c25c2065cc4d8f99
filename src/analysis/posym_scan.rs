//! Positional and symbolic scores of every head and of every head's 2-D chunk heads, from block swaps
//! (Decoupling Positional and Symbolic Attention; the scores themselves are [`super::posym`]'s).
//!
//! For each prompt the query is its last token `n`; its context is the positions `keep_first..n`, cut into
//! `m` contiguous blocks (the prompt's last tokens are dropped so that the context is a multiple of `m`).
//! The first `keep_first` positions (BOS, the usual attention sink) stay in place and outside the blocks;
//! the attention of the query over the context is renormalised to sum to 1, so that `τ` acts on the
//! context's share of attention however much a sink takes. One forward pass reads the unswapped attention,
//! then one per pair of blocks `a < b` reads it with the two blocks' tokens exchanged
//! ([`posym::block_swap_permutation`]): `1 + m(m−1)/2` passes per prompt. [`posym::block_swap_scores`]
//! aggregates them per head.
//!
//! Per frequency: the 2-D head that keeps only chunk `l` has logits `a_l[n, j] = scale · (q_n^(l) · k_j^(l))`
//! from the post-RoPE vectors (no soft-capping) and attention `softmax` over the visible context keys; it is
//! scored the same way. Every chunk is scored: its cost is `O(T)` per chunk and head per pass, negligible
//! next to the forward pass. Only the last query row is captured (one row per head, never `T × T`), and only
//! the `m` block masses of each row are kept between passes.

use super::correlation::pearson;
use super::posym::{self, block_masses, block_swap_scores, SwapScores};
use super::softmax::softmax;
use crate::capture::{AttentionBlock, Capture, HeadCapture, HeadInfo, HeadVectors, LayerPlan};
use crate::error::{Error, Result};
use crate::model::{ForwardOptions, Model};
use crate::numeric::Real;
use rayon::prelude::*;
use serde::Serialize;
use std::ops::Range;

/// Default number of leading positions kept out of the blocks: one, the BOS token.
pub const DEFAULT_KEEP_FIRST: usize = 1;

/// Parameters of the block-swap scan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PosymParams {
    /// Number of blocks `m` ([`posym::DEFAULT_BLOCK_COUNT`]).
    pub m: usize,
    /// Temperature `τ` of the swap weights `softmax(|d_a − d_b| / τ)` ([`posym::DEFAULT_SWAP_TEMPERATURE`]).
    pub tau: f64,
    /// Leading positions that are never moved and not part of the context ([`DEFAULT_KEEP_FIRST`]).
    pub keep_first: usize,
}

impl Default for PosymParams {
    fn default() -> Self {
        Self {
            m: posym::DEFAULT_BLOCK_COUNT,
            tau: posym::DEFAULT_SWAP_TEMPERATURE,
            keep_first: DEFAULT_KEEP_FIRST,
        }
    }
}

/// Scores of every head and chunk. Each value is the mean over prompts where the scores are defined
/// (`None`, written as null, when they are defined on none: e.g. a head whose context attention is zero).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PosymReport {
    /// Context length (keys in the blocks) used for each prompt, a multiple of `m`.
    pub context_lengths: Vec<usize>,
    /// `s_pos`, `[layer][head]`.
    pub s_pos: Vec<Vec<Option<f64>>>,
    /// `s_sym`, `[layer][head]`.
    pub s_sym: Vec<Vec<Option<f64>>>,
    /// `s_pos` of the 2-D head of each chunk, `[layer][head][chunk]` (chunk 0 = fastest).
    pub chunk_s_pos: Vec<Vec<Vec<Option<f64>>>>,
    /// `s_sym` of the 2-D head of each chunk, `[layer][head][chunk]`.
    pub chunk_s_sym: Vec<Vec<Vec<Option<f64>>>>,
    /// Pearson correlation of `s_pos` and `s_sym` over the heads where both are defined (the paper's
    /// positional–symbolic anti-correlation); `None` with fewer than two such heads or no variance.
    pub pos_sym_correlation: Option<f64>,
}

/// Forward passes [`run`] does: `1 + m(m−1)/2` per prompt.
pub fn passes(n_prompts: usize, params: &PosymParams) -> u64 {
    (n_prompts * (1 + params.m * params.m.saturating_sub(1) / 2)) as u64
}

/// Runs the block-swap scan on every prompt.
pub fn run<T: Real>(
    model: &Model<T>,
    prompts: &[Vec<u32>],
    params: &PosymParams,
    progress: &dyn Fn(u64),
) -> Result<PosymReport> {
    let (m, c) = (params.m, &model.config);
    if prompts.is_empty() || m < 2 || params.tau.is_nan() || params.tau <= 0.0 {
        return Err(Error::Argument(
            "the block-swap scan needs prompts, m ≥ 2 and τ > 0".into(),
        ));
    }
    let n_chunks = c.n_chunks();
    let mut acc = Accumulator::new(c.n_layers, c.n_heads, n_chunks);
    let mut context_lengths = Vec::with_capacity(prompts.len());
    let mut done = 0u64;
    for prompt in prompts {
        let n_ctx = prompt.len().saturating_sub(params.keep_first + 1) / m * m;
        if n_ctx == 0 {
            return Err(Error::Argument(format!(
                "a prompt of {} tokens has no context of m = {m} blocks after {} kept positions",
                prompt.len(),
                params.keep_first
            )));
        }
        let ids = &prompt[..params.keep_first + n_ctx + 1];
        let context = params.keep_first..params.keep_first + n_ctx;
        let mut perms: Vec<Vec<usize>> = vec![(0..n_ctx).collect()];
        for a in 0..m {
            for b in a + 1..m {
                perms.extend(posym::block_swap_permutation(n_ctx, m, a, b));
            }
        }
        let mut masses = PromptMasses::new(perms.len(), c.n_layers * c.n_heads, n_chunks, m);
        let swapped = |perm: &[usize]| {
            let mut swapped = ids.to_vec();
            for (p, &src) in perm.iter().enumerate() {
                swapped[context.start + p] = ids[context.start + src];
            }
            swapped
        };
        let capture = || LastRowCapture::new(context.clone(), c.n_layers * c.n_heads, c.n_heads, m);
        let opts = ForwardOptions::default();
        // The unswapped pass keeps its keys and values; a swap of blocks a < b changes no position before
        // block a, so its pass starts there (the same bits as a whole pass; tests/engine/prefix.rs).
        let mut cap = capture();
        let prefix = model
            .forward_keeping_prefix(&swapped(&perms[0]), &opts, &mut cap)?
            .1;
        masses.store(0, &cap.heads);
        done += 1;
        progress(done);
        // The swaps [`super::PASSES_AT_ONCE`] at a time, after the unswapped pass has packed every matrix they
        // use (or found it does not fit): a pass never waits on a matrix the other is packing.
        for (group, swaps) in perms[1..].chunks(super::PASSES_AT_ONCE).enumerate() {
            let heads: Vec<Result<Vec<HeadMasses>>> = swaps
                .par_iter()
                .map(|perm| {
                    let mut cap = capture();
                    model.forward_from_prefix(&swapped(perm), &opts, &mut cap, &prefix)?;
                    Ok(cap.heads)
                })
                .collect();
            for (i, heads) in heads.into_iter().enumerate() {
                masses.store(1 + group * super::PASSES_AT_ONCE + i, &heads?);
            }
            done += swaps.len() as u64;
            progress(done);
        }
        acc.add(&perms, &masses, params);
        context_lengths.push(n_ctx);
    }
    Ok(acc.finish(context_lengths))
}

/// The last query's block masses of one head in one pass: the head's and each chunk's.
#[derive(Clone, Debug, Default)]
struct HeadMasses {
    head: Option<Vec<f64>>,
    chunks: Vec<Option<Vec<f64>>>,
}

/// The block masses of every pass, head and chunk of one prompt, in one allocation made before the passes.
/// Kept as small vectors per head instead, they would live across passes among the forward pass's large
/// short-lived buffers and pin the allocator's pages: the process grew by about 30 MB a pass (1.5 GB peak for
/// SmolLM2's 58 passes, against 31 MB of live heap).
struct PromptMasses {
    m: usize,
    n_all: usize,
    /// Slots per head: the head's own masses, then one per chunk.
    n_slots: usize,
    /// `[pass][head][slot][block]`.
    data: Vec<f64>,
    /// `[pass][head][slot]`: whether the masses are defined.
    defined: Vec<bool>,
}

impl PromptMasses {
    fn new(passes: usize, n_all: usize, n_chunks: usize, m: usize) -> Self {
        let n_slots = 1 + n_chunks;
        Self {
            m,
            n_all,
            n_slots,
            data: vec![0.0; passes * n_all * n_slots * m],
            defined: vec![false; passes * n_all * n_slots],
        }
    }

    fn slot(&self, pass: usize, head: usize, slot: usize) -> usize {
        (pass * self.n_all + head) * self.n_slots + slot
    }

    /// Stores the masses of one pass, `heads` indexed like the capture's.
    fn store(&mut self, pass: usize, heads: &[HeadMasses]) {
        for (h, hm) in heads.iter().enumerate() {
            let chunks = hm.chunks.iter().map(Option::as_ref);
            for (slot, masses) in std::iter::once(hm.head.as_ref()).chain(chunks).enumerate() {
                let i = self.slot(pass, h, slot);
                if let Some(b) = masses.filter(|b| b.len() == self.m) {
                    self.defined[i] = true;
                    self.data[i * self.m..(i + 1) * self.m].copy_from_slice(b);
                }
            }
        }
    }

    /// The masses of `head` in `slot` (0: the head, `1 + l`: chunk `l`) in each pass, in pass order.
    fn series(&self, head: usize, slot: usize) -> Vec<Option<&[f64]>> {
        let passes = self.defined.len() / (self.n_all * self.n_slots);
        (0..passes)
            .map(|p| {
                let i = self.slot(p, head, slot);
                self.defined[i].then(|| &self.data[i * self.m..(i + 1) * self.m])
            })
            .collect()
    }
}

/// A row of `n_ctx` keys whose block masses are `masses`, each spread evenly over its block:
/// [`block_swap_scores`] reads rows only through [`block_masses`], which recovers `masses`.
fn spread(masses: &[f64], n_ctx: usize) -> Vec<f64> {
    let len = n_ctx / masses.len();
    masses
        .iter()
        .flat_map(|&d| std::iter::repeat_n(d / len as f64, len))
        .collect()
}

/// The scores of one head (or chunk) from its masses in each pass, passes in `perms` order.
fn scores(
    perms: &[Vec<usize>],
    masses: &[Option<&[f64]>],
    params: &PosymParams,
) -> Option<SwapScores> {
    let n_ctx = perms[0].len();
    let mut next = 0;
    block_swap_scores(n_ctx, params.m, params.tau, |perm| {
        // `block_swap_scores` asks for the passes in the order they were run; check rather than trust it.
        let found = perms.get(next).filter(|p| p.as_slice() == perm);
        next += 1;
        match (found, masses.get(next - 1).copied().flatten()) {
            (Some(_), Some(d)) => spread(d, n_ctx),
            _ => Vec::new(),
        }
    })
}

/// Sums of scores over prompts.
struct Accumulator {
    n_heads: usize,
    head: Vec<Mean>,
    chunk: Vec<Vec<Mean>>,
}

/// Running mean of `(s_pos, s_sym)` where defined.
#[derive(Clone, Copy, Debug, Default)]
struct Mean {
    pos: f64,
    sym: f64,
    n: usize,
}

impl Mean {
    fn add(&mut self, s: Option<SwapScores>) {
        if let Some(s) = s {
            self.pos += s.s_pos;
            self.sym += s.s_sym;
            self.n += 1;
        }
    }
    fn get(&self) -> Option<SwapScores> {
        let n = self.n as f64;
        (self.n > 0).then(|| SwapScores {
            s_pos: self.pos / n,
            s_sym: self.sym / n,
        })
    }
}

impl Accumulator {
    fn new(n_layers: usize, n_heads: usize, n_chunks: usize) -> Self {
        Self {
            n_heads,
            head: vec![Mean::default(); n_layers * n_heads],
            chunk: vec![vec![Mean::default(); n_chunks]; n_layers * n_heads],
        }
    }

    /// Adds one prompt: its masses in the passes of `perms`.
    fn add(&mut self, perms: &[Vec<usize>], masses: &PromptMasses, params: &PosymParams) {
        for (h, mean) in self.head.iter_mut().enumerate() {
            mean.add(scores(perms, &masses.series(h, 0), params));
        }
        for (h, chunks) in self.chunk.iter_mut().enumerate() {
            for (l, mean) in chunks.iter_mut().enumerate() {
                mean.add(scores(perms, &masses.series(h, 1 + l), params));
            }
        }
    }

    fn finish(self, context_lengths: Vec<usize>) -> PosymReport {
        let pick = |means: &[Mean], f: fn(SwapScores) -> f64| -> Vec<Vec<Option<f64>>> {
            means
                .chunks(self.n_heads)
                .map(|layer| layer.iter().map(|m| m.get().map(f)).collect())
                .collect()
        };
        let pick_chunks = |f: fn(SwapScores) -> f64| -> Vec<Vec<Vec<Option<f64>>>> {
            self.chunk
                .chunks(self.n_heads)
                .map(|layer| {
                    layer
                        .iter()
                        .map(|chunks| chunks.iter().map(|m| m.get().map(f)).collect())
                        .collect()
                })
                .collect()
        };
        let (pos, sym): (Vec<f64>, Vec<f64>) = self
            .head
            .iter()
            .filter_map(|m| m.get().map(|s| (s.s_pos, s.s_sym)))
            .unzip();
        PosymReport {
            context_lengths,
            s_pos: pick(&self.head, |s| s.s_pos),
            s_sym: pick(&self.head, |s| s.s_sym),
            chunk_s_pos: pick_chunks(|s| s.s_pos),
            chunk_s_sym: pick_chunks(|s| s.s_sym),
            pos_sym_correlation: pearson(&pos, &sym),
        }
    }
}

/// Keeps, for every head, the last query's block masses over the context: the head's (from the engine's
/// probabilities) and each chunk's (from the post-RoPE vectors).
struct LastRowCapture {
    context: Range<usize>,
    n_heads: usize,
    m: usize,
    heads: Vec<HeadMasses>,
}

impl LastRowCapture {
    fn new(context: Range<usize>, n_all: usize, n_heads: usize, m: usize) -> Self {
        Self {
            context,
            n_heads,
            m,
            heads: vec![HeadMasses::default(); n_all],
        }
    }
}

/// Per-head state of a [`LastRowCapture`].
struct LastRowHead {
    context: Range<usize>,
    m: usize,
    masses: HeadMasses,
}

impl LastRowHead {
    /// Block masses of `weights` (over the context keys), renormalised to sum to 1; `None` when all are 0.
    fn masses(&self, weights: Vec<f64>) -> Option<Vec<f64>> {
        let total: f64 = weights.iter().sum();
        (total > 0.0)
            .then(|| block_masses(&weights, self.m))
            .flatten()
            .map(|b| b.into_iter().map(|x| x / total).collect())
    }
}

impl<T: Real> HeadCapture<T> for LastRowHead {
    fn vectors(&mut self, info: &HeadInfo, v: &HeadVectors<'_, T>) {
        let query = self.context.end;
        let first = info.first_visible(query);
        let q = v.q.row(query);
        let visible: Vec<usize> = self.context.clone().filter(|&j| j >= first).collect();
        self.masses.chunks = (0..info.rope.n_chunks())
            .map(|l| {
                let (a, b) = info.rope.chunk_dims(l);
                let logits: Vec<f64> = visible
                    .iter()
                    .map(|&j| {
                        let k = v.k.row(j);
                        info.scale * (q[a] * k[a] + q[b] * k[b]).to_f64_exact()
                    })
                    .collect();
                let mut weights = vec![0.0; self.context.len()];
                for (&j, p) in visible.iter().zip(softmax(&logits)) {
                    weights[j - self.context.start] = p;
                }
                self.masses(weights)
            })
            .collect();
    }

    fn block(&mut self, _info: &HeadInfo, b: &AttentionBlock<'_, T>) {
        let query = self.context.end;
        if !b.rows.contains(&query) {
            return;
        }
        let row = b.probs_row(query);
        let weights = self
            .context
            .clone()
            .map(|j| {
                if b.cols.contains(&j) {
                    row[j - b.cols.start].to_f64_exact()
                } else {
                    0.0
                }
            })
            .collect();
        self.masses.head = self.masses(weights);
    }
}

impl<T: Real> Capture<T> for LastRowCapture {
    type Head = LastRowHead;

    fn plan(&self, _layer: usize) -> LayerPlan {
        LayerPlan {
            vectors: true,
            attention: true,
            ..LayerPlan::default()
        }
    }

    fn begin_head(&self, _info: &HeadInfo) -> LastRowHead {
        LastRowHead {
            context: self.context.clone(),
            m: self.m,
            masses: HeadMasses::default(),
        }
    }

    fn end_head(&mut self, info: &HeadInfo, head: LastRowHead) {
        self.heads[info.layer * self.n_heads + info.head] = head.masses;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::window_example;

    /// On a sliding-window layer the last row's block starts after key 0: each probability still lands on its
    /// own key (column `c` of the block is key `cols.start + c`), and the keys before the window get none.
    #[test]
    fn a_window_block_puts_each_probability_on_its_own_key() {
        let (info, block) = (window_example::head(), window_example::last_row());
        // Context keys 0–7 in m = 4 blocks of two; query 8 sees keys 4 to 8.
        assert_eq!(info.first_visible(8), 4);
        let mut head = LastRowHead {
            context: 0..8,
            m: 4,
            masses: HeadMasses::default(),
        };
        head.block(&info, &block);
        // Keys 4–7 hold 0.1 + 0.2 and 0.3 + 0.15 of the context's 0.75 (key 8 is the query's own, outside it).
        let got = head.masses.head.expect("masses");
        for (g, w) in got.iter().zip([0.0, 0.0, 0.4, 0.6]) {
            assert!((g - w).abs() < 1e-15, "{got:?}");
        }
    }

    /// A head that gives the context no attention (a window that ends before it) has no block masses, not
    /// masses divided by zero; otherwise the masses are the blocks' shares of the context's attention.
    #[test]
    fn a_head_without_attention_on_the_context_has_no_masses() {
        let head = LastRowHead {
            context: 0..8,
            m: 4,
            masses: HeadMasses::default(),
        };
        assert_eq!(head.masses(vec![0.0; 8]), None);
        let shares = head.masses(vec![0.5, 0.5, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]);
        assert_eq!(shares, Some(vec![0.25, 0.25, 0.0, 0.5]));
    }
}
