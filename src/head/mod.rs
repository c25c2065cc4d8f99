//! One head on one prompt (`ropescope head`): the head's attention at full resolution, its slash profile, its
//! chunk norms and the Fourier decomposition of its logit, measured as the scan measures them but for a prompt
//! and a head a user chooses, and written as arrays, CSV tables, square figures and a terminal picture
//! ([`write`]).

pub mod write;

use crate::analysis::fourier::{logit_spectrum, ChunkTerm};
use crate::analysis::slash::slash_score;
use crate::capture::CollectSink;
use crate::error::{Error, Result};
use crate::model::{ForwardOptions, Model};
use crate::numeric::Real;
use crate::rope::RopeSpec;
use std::ops::Range;

/// Default largest offset `Δ` of the slash profile (cut to half the prompt, so that every score averages at
/// least half of its rows).
pub const DEFAULT_DELTA_MAX: usize = 32;

/// Which head, on which tokens.
#[derive(Clone, Debug)]
pub struct HeadRequest {
    /// Layer.
    pub layer: usize,
    /// Query head.
    pub head: usize,
    /// The prompt's token ids.
    pub ids: Vec<u32>,
    /// Positions of the map to keep, for queries and keys alike (all by default).
    pub window: Option<Range<usize>>,
    /// Largest `Δ` of the slash profile.
    pub delta_max: usize,
}

/// What one head does on one prompt (float64 sums of the engine's values).
#[derive(Clone, Debug)]
pub struct HeadView {
    /// The layer.
    pub layer: usize,
    /// The query head.
    pub head: usize,
    /// The key/value head it reads.
    pub kv_head: usize,
    /// Prompt length `T`.
    pub n_tokens: usize,
    /// The positions of `map`.
    pub window: Range<usize>,
    /// Attention of the window's queries over the window's keys, row-major `W × W` (masked entries 0).
    pub map: Vec<f64>,
    /// `SlashScore(Δ)` over the whole prompt for `Δ = 0..=delta_max` (cut to `(T − 1) / 2`).
    pub slash: Vec<f64>,
    /// Mean attention on key 0 from queries `1..T`.
    pub sink: f64,
    /// Mean mass of a row the head's learned sink takes (GPT-OSS), if it has one.
    pub learned_sink: Option<f64>,
    /// Each chunk's frequency (rad/token, chunk 0 fastest; 0 for a chunk that does not turn).
    pub frequencies: Vec<f64>,
    /// Mean `‖q^(l)‖` and `‖k^(l)‖` over the prompt's pre-RoPE queries and keys, per chunk.
    pub chunk_norms: (Vec<f64>, Vec<f64>),
    /// The logit of the mean pre-RoPE query and key, chunk by chunk (amplitude `A_l` and phase `φ_l`).
    pub spectrum: Vec<ChunkTerm>,
    /// Amplitude `|q̄_u| |k̄_u|` of the coordinates that never turn (0 for full RoPE).
    pub unrotated_amplitude: f64,
}

impl HeadView {
    /// The offset in `0..=delta_max` with the largest slash score, and that score.
    pub fn best(&self) -> (usize, f64) {
        self.slash
            .iter()
            .copied()
            .enumerate()
            .fold((0, f64::NEG_INFINITY), |b, (d, s)| if s > b.1 { (d, s) } else { b })
    }
}

/// Mean norm of each chunk of `rows` (`T` rows of `d`).
fn mean_chunk_norms(rows: &[f64], d: usize, spec: &RopeSpec) -> Vec<f64> {
    let t = (rows.len() / d).max(1) as f64;
    (0..spec.n_chunks())
        .map(|l| {
            let (a, b) = spec.chunk_dims(l);
            rows.chunks(d).map(|r| r[a].hypot(r[b])).sum::<f64>() / t
        })
        .collect()
}

/// Mean of `rows` (`T` rows of `d`).
fn mean_row(rows: &[f64], d: usize) -> Vec<f64> {
    let t = (rows.len() / d).max(1) as f64;
    (0..d)
        .map(|c| rows.chunks(d).map(|r| r[c]).sum::<f64>() / t)
        .collect()
}

/// Runs `model` on the request's prompt and measures its head.
pub fn measure<T: Real>(model: &Model<T>, req: &HeadRequest) -> Result<HeadView> {
    let c = &model.config;
    if req.layer >= c.n_layers || req.head >= c.n_heads {
        return Err(Error::Argument(format!(
            "head L{}H{} does not exist: the model has {} layers of {} heads",
            req.layer, req.head, c.n_layers, c.n_heads
        )));
    }
    model.validate(&req.ids)?;
    let t = req.ids.len();
    let window = req.window.clone().unwrap_or(0..t);
    if window.start >= window.end || window.end > t {
        return Err(Error::Argument(format!(
            "window {}..{} is not inside the prompt's {t} positions",
            window.start, window.end
        )));
    }
    let mut sink = CollectSink::<T>::new(vec![req.layer], 0..t);
    model.forward(&req.ids, &ForwardOptions::default(), &mut sink)?;
    let record = sink
        .get(req.layer, req.head)
        .ok_or_else(|| Error::Internal("the captured head is missing".into()))?;
    let info = record
        .info
        .as_ref()
        .ok_or_else(|| Error::Internal("the captured head has no identity".into()))?;
    let f64s = |v: &[T]| v.iter().map(|x| x.to_f64_exact()).collect::<Vec<f64>>();
    let probs = f64s(&record.probs);
    let (q, k) = (f64s(&record.q_pre), f64s(&record.k_pre));
    let spec = &info.rope;
    let d = info.head_dim;
    let map = window
        .clone()
        .flat_map(|i| probs[i * t + window.start..i * t + window.end].to_vec())
        .collect();
    let slash = (0..=req.delta_max.min((t - 1) / 2))
        .filter_map(|delta| slash_score(&probs, t, delta))
        .collect();
    let sink_score = match t {
        1 => 0.0,
        _ => (1..t).map(|i| probs[i * t]).sum::<f64>() / (t - 1) as f64,
    };
    let learned_sink = (!record.sink_mass.is_empty())
        .then(|| f64s(&record.sink_mass).iter().sum::<f64>() / t as f64);
    let spectrum = logit_spectrum(spec, &mean_row(&q, d), &mean_row(&k, d));
    Ok(HeadView {
        layer: req.layer,
        head: req.head,
        kv_head: info.kv_head,
        n_tokens: t,
        window,
        map,
        slash,
        sink: sink_score,
        learned_sink,
        frequencies: spec.inv_freq.clone(),
        chunk_norms: (mean_chunk_norms(&q, d, spec), mean_chunk_norms(&k, d, spec)),
        unrotated_amplitude: spectrum.unrotated_amplitude,
        spectrum: spectrum.terms,
    })
}
