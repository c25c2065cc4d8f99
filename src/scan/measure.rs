//! The streaming pass of a scan: every prompt of a set runs once, through one composed capture that feeds the
//! attention map (first prompt only), the slash scores and the vector statistics.

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

/// Runs every prompt once; `progress` receives the number of prompts done.
pub fn measure_set<T: Real>(
    model: &Model<T>,
    prompts: &[Vec<u32>],
    params: &ScanParams,
    progress: &dyn Fn(u64),
) -> Result<SetMeasures> {
    let c = &model.config;
    let (layers, heads) = (c.n_layers, c.n_heads);
    let wants_slash = params.runs(Analysis::Slash) || params.runs(Analysis::Intrinsic);
    let wants_vectors = [Analysis::Rank, Analysis::Fourier, Analysis::Frequency]
        .iter()
        .any(|&a| params.runs(a));
    let mut slash = wants_slash.then(|| SlashCapture::new(layers, heads, params.delta_max));
    let mut map = None;
    let mut vectors =
        wants_vectors.then(|| VectorStatsCapture::new(layers, heads, params.runs(Analysis::Rank)));
    for (p, ids) in prompts.iter().enumerate() {
        let map_now = (p == 0 && wants_slash)
            .then(|| AttentionMapCapture::new(layers, heads, params.map_size));
        let mut pass = (map_now, (slash, vectors));
        model.forward(ids, &ForwardOptions::default(), &mut pass)?;
        let (map_done, (s, v)) = pass;
        map = map.or(map_done);
        (slash, vectors) = (s, v);
        progress(p as u64 + 1);
    }
    Ok(SetMeasures {
        slash,
        map,
        vectors,
    })
}
