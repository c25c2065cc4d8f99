//! The streaming pass of a scan: every prompt of a set runs once, through one composed capture that feeds the
//! attention map (first prompt only), the slash scores and the vector statistics.
//!
//! Each prompt is measured on its own ([`measure_prompt`]) and folded into the set's totals in prompt order
//! ([`SetMeasures::absorb`]); a sharded scan (`super::shard`) measures its prompts the same way and its merge
//! folds them in the same order, so one run and merged shards give the same bits.

use super::params::{Analysis, ScanParams};
use crate::analysis::attention_map::AttentionMapCapture;
use crate::analysis::slash_stream::SlashCapture;
use crate::analysis::vector_stats::VectorStatsCapture;
use crate::error::Result;
use crate::model::{ForwardOptions, Model};
use crate::numeric::Real;

/// What the streaming pass measured on one prompt set (`None` for analyses not selected).
#[derive(Clone, Debug)]
pub struct SetMeasures {
    /// Slash and sink scores.
    pub slash: Option<SlashCapture>,
    /// Attention maps of the set's first prompt.
    pub map: Option<AttentionMapCapture>,
    /// Sums of pre-RoPE q, k and v (rank, Fourier, frequency usage).
    pub vectors: Option<VectorStatsCapture>,
}

impl SetMeasures {
    /// Adds the measures of the next prompt(s): sums add, the attention map stays the first prompt's.
    pub fn absorb(&mut self, next: SetMeasures) {
        if let (Some(a), Some(b)) = (&mut self.slash, &next.slash) {
            a.absorb(b);
        }
        if let (Some(a), Some(b)) = (&mut self.vectors, next.vectors) {
            a.absorb(b);
        }
        if self.map.is_none() {
            self.map = next.map;
        }
    }
}

/// Whether the streaming pass measures slash scores (and the attention map), and vector sums.
fn wanted(params: &ScanParams) -> (bool, bool) {
    let slash = params.runs(Analysis::Slash) || params.runs(Analysis::Intrinsic);
    let vectors = [Analysis::Rank, Analysis::Fourier, Analysis::Frequency]
        .iter()
        .any(|&a| params.runs(a));
    (slash, vectors)
}

/// The empty measures of a set, before any prompt.
pub fn empty<T: Real>(model: &Model<T>, params: &ScanParams) -> SetMeasures {
    let c = &model.config;
    let (slash, vectors) = wanted(params);
    SetMeasures {
        slash: slash.then(|| SlashCapture::new(c.n_layers, c.n_heads, params.delta_max)),
        map: None,
        vectors: vectors
            .then(|| VectorStatsCapture::new(c.n_layers, c.n_heads, params.runs(Analysis::Rank))),
    }
}

/// Runs one prompt; `first` marks the first prompt of its set, whose attention map is kept.
pub fn measure_prompt<T: Real>(
    model: &Model<T>,
    ids: &[u32],
    first: bool,
    params: &ScanParams,
) -> Result<SetMeasures> {
    let c = &model.config;
    let empty = empty(model, params);
    let map = (first && empty.slash.is_some())
        .then(|| AttentionMapCapture::new(c.n_layers, c.n_heads, params.map_size));
    let mut pass = (map, (empty.slash, empty.vectors));
    model.forward(ids, &ForwardOptions::default(), &mut pass)?;
    let (map, (slash, vectors)) = pass;
    Ok(SetMeasures {
        slash,
        map,
        vectors,
    })
}

/// Runs every prompt once; `progress` receives the number of prompts done.
pub fn measure_set<T: Real>(
    model: &Model<T>,
    prompts: &[Vec<u32>],
    params: &ScanParams,
    progress: &dyn Fn(u64),
) -> Result<SetMeasures> {
    let mut total = empty(model, params);
    for (p, ids) in prompts.iter().enumerate() {
        total.absorb(measure_prompt(model, ids, p == 0, params)?);
        progress(p as u64 + 1);
    }
    Ok(total)
}
