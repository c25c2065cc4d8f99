//! The streaming pass of a scan: every prompt of a set runs once, through one composed capture that feeds the
//! attention map (first prompt only), the slash scores and the vector statistics.
//!
//! A prompt's sums are added to the set's totals as each head ends, prompt after prompt. A sharded scan
//! (`super::shard`) measures each of its prompts alone ([`measure_prompt`]) and its merge adds them to the totals
//! in prompt order ([`SetMeasures::absorb`]): the same additions in the same order, so one run and merged shards
//! give the same bits.

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
            .then(|| {
                let kv: Vec<usize> = c.layers.iter().map(|l| l.n_kv_heads).collect();
                VectorStatsCapture::new(c.n_layers, c.n_heads, &kv, params.runs(Analysis::Rank))
            }),
    }
}

/// Runs one prompt, adding its measures into `into` (the captures add as heads end, so no second copy of the
/// sums is made); `first` marks the first prompt of its set, whose attention map is kept.
fn add_prompt<T: Real>(
    model: &Model<T>,
    ids: &[u32],
    first: bool,
    params: &ScanParams,
    into: SetMeasures,
) -> Result<SetMeasures> {
    let c = &model.config;
    let map = (first && into.slash.is_some())
        .then(|| AttentionMapCapture::new(c.n_layers, c.n_heads, params.map_size));
    let mut pass = (map, (into.slash, into.vectors));
    model.forward(ids, &ForwardOptions::default(), &mut pass)?;
    let (map, (slash, vectors)) = pass;
    Ok(SetMeasures {
        slash,
        map: into.map.or(map),
        vectors,
    })
}

/// The measures of one prompt alone (what a shard stores per prompt); `first` marks the first prompt of its
/// set, whose attention map is kept. Adding them to a set's totals with [`SetMeasures::absorb`] adds the same
/// values in the same order as running the prompt into the totals ([`measure_set`]).
pub fn measure_prompt<T: Real>(
    model: &Model<T>,
    ids: &[u32],
    first: bool,
    params: &ScanParams,
) -> Result<SetMeasures> {
    add_prompt(model, ids, first, params, empty(model, params))
}

/// Runs every prompt once, into the set's totals; `progress` receives the number of prompts done.
pub fn measure_set<T: Real>(
    model: &Model<T>,
    prompts: &[Vec<u32>],
    params: &ScanParams,
    progress: &dyn Fn(u64),
) -> Result<SetMeasures> {
    let mut total = empty(model, params);
    for (p, ids) in prompts.iter().enumerate() {
        total = add_prompt(model, ids, p == 0, params, total)?;
        progress(p as u64 + 1);
    }
    Ok(total)
}
