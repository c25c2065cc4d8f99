//! Slash and sink scores of every head, streamed from attention blocks over a set of prompts.
//!
//! Each block adds `S[i, i−Δ]` (`Δ = 0..=Δmax`) and `S[i, 0]` for its rows into per-head sums, so no `T × T`
//! matrix is kept. At the end of a head the prompt's scores (`SlashScore(Δ)` as in [`super::slash`], and the
//! sink score, the mean of `S[i, 0]` over rows `i = 1..N−1`) are added to running sums over prompts. Use one
//! [`SlashCapture`] for every forward pass of a prompt set; [`SlashCapture::scores`] gives `E_P[SlashScore(Δ)]`.
//!
//! A head with a learned sink (GPT-OSS: a logit attached to no key) also adds the mean over its rows of the mass
//! the sink took, which the probabilities over real keys leave out ([`SlashCapture::learned_sinks`]).

use crate::capture::{AttentionBlock, Capture, HeadCapture, HeadInfo, LayerPlan};
use crate::numeric::Real;

/// Running slash and sink scores of every head over a prompt set.
#[derive(Clone, Debug)]
pub struct SlashCapture {
    pub(crate) n_heads: usize,
    pub(crate) delta_max: usize,
    /// `[L·H, Δmax+1]` sums over prompts of `SlashScore(Δ)`.
    pub(crate) score_sums: Vec<f64>,
    /// `[L·H, Δmax+1]` number of prompts with a `Δ`-th sub-diagonal.
    pub(crate) score_counts: Vec<u32>,
    /// `[L·H]` sums over prompts of the sink score.
    pub(crate) sink_sums: Vec<f64>,
    /// `[L·H]` number of prompts with at least two tokens.
    pub(crate) sink_counts: Vec<u32>,
    /// `[L·H]` sums over prompts of the mean learned-sink mass of a row.
    pub(crate) learned_sink_sums: Vec<f64>,
    /// `[L·H]` number of prompts whose pass gave the head a learned sink.
    pub(crate) learned_sink_counts: Vec<u32>,
}

impl SlashCapture {
    /// Slash scores at `Δ = 0..=delta_max` for a model of `n_layers × n_heads` heads.
    pub fn new(n_layers: usize, n_heads: usize, delta_max: usize) -> Self {
        let cells = n_layers * n_heads;
        Self {
            n_heads,
            delta_max,
            score_sums: vec![0.0; cells * (delta_max + 1)],
            score_counts: vec![0; cells * (delta_max + 1)],
            sink_sums: vec![0.0; cells],
            sink_counts: vec![0; cells],
            learned_sink_sums: vec![0.0; cells],
            learned_sink_counts: vec![0; cells],
        }
    }

    /// `[L, H, Δmax+1]` row-major: `E_P[SlashScore(Δ)]` over the prompts that have a `Δ`-th sub-diagonal
    /// (0 where none has).
    pub fn scores(&self) -> Vec<f64> {
        mean(&self.score_sums, &self.score_counts)
    }

    /// `[L, H]` row-major: mean attention on key 0 from queries `1..N`, over prompts.
    pub fn sinks(&self) -> Vec<f64> {
        mean(&self.sink_sums, &self.sink_counts)
    }

    /// `[L, H]` row-major: the mean over rows and prompts of the mass a learned sink took; `None` when no head
    /// has one.
    pub fn learned_sinks(&self) -> Option<Vec<f64>> {
        (self.learned_sink_counts.iter().any(|&c| c > 0))
            .then(|| mean(&self.learned_sink_sums, &self.learned_sink_counts))
    }

    /// The largest `Δ` scored.
    pub fn delta_max(&self) -> usize {
        self.delta_max
    }

    /// Adds the sums of `other` (the same heads and `Δmax`, later prompts) to these. Folding the captures of
    /// single prompts in prompt order gives, bit for bit, the capture that ran over all of them (each cell adds
    /// the same values in the same order; cells a prompt did not reach add an exact 0).
    pub fn absorb(&mut self, other: &SlashCapture) {
        let add = |a: &mut [f64], b: &[f64]| a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        add(&mut self.score_sums, &other.score_sums);
        add(&mut self.sink_sums, &other.sink_sums);
        add(&mut self.learned_sink_sums, &other.learned_sink_sums);
        let count = |a: &mut [u32], b: &[u32]| a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        count(&mut self.score_counts, &other.score_counts);
        count(&mut self.sink_counts, &other.sink_counts);
        count(&mut self.learned_sink_counts, &other.learned_sink_counts);
    }
}

fn mean(sums: &[f64], counts: &[u32]) -> Vec<f64> {
    sums.iter()
        .zip(counts)
        .map(|(&s, &c)| if c == 0 { 0.0 } else { s / c as f64 })
        .collect()
}

/// One head's sums over the current prompt.
pub struct SlashHead {
    diagonals: Vec<f64>,
    first_column: f64,
    /// Sum over rows of the learned sink's mass, `None` for a head without one.
    learned_sink: Option<f64>,
}

impl<T: Real> HeadCapture<T> for SlashHead {
    fn block(&mut self, _info: &HeadInfo, block: &AttentionBlock<'_, T>) {
        let cols = &block.cols;
        for i in block.rows.clone() {
            let row = block.probs_row(i);
            for (delta, sum) in self.diagonals.iter_mut().enumerate().take(i + 1) {
                let j = i - delta;
                if cols.contains(&j) {
                    *sum += row[j - cols.start].to_f64_exact();
                }
            }
            if i >= 1 && cols.contains(&0) {
                self.first_column += row[0].to_f64_exact();
            }
            if let Some(mass) = block.sink_mass(i) {
                *self.learned_sink.get_or_insert(0.0) += mass.to_f64_exact();
            }
        }
    }
}

impl<T: Real> Capture<T> for SlashCapture {
    type Head = SlashHead;

    fn plan(&self, _layer: usize) -> LayerPlan {
        LayerPlan {
            attention: true,
            ..LayerPlan::default()
        }
    }

    fn begin_head(&self, _info: &HeadInfo) -> SlashHead {
        SlashHead {
            diagonals: vec![0.0; self.delta_max + 1],
            first_column: 0.0,
            learned_sink: None,
        }
    }

    fn end_head(&mut self, info: &HeadInfo, head: SlashHead) {
        let n = info.n_tokens;
        let cell = info.layer * self.n_heads + info.head;
        let width = self.delta_max + 1;
        for (delta, sum) in head.diagonals.iter().enumerate().filter(|(d, _)| *d < n) {
            self.score_sums[cell * width + delta] += sum / (n - delta) as f64;
            self.score_counts[cell * width + delta] += 1;
        }
        if n > 1 {
            self.sink_sums[cell] += head.first_column / (n - 1) as f64;
            self.sink_counts[cell] += 1;
        }
        if let Some(mass) = head.learned_sink {
            self.learned_sink_sums[cell] += mass / n as f64;
            self.learned_sink_counts[cell] += 1;
        }
    }
}
