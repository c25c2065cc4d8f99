//! The measuring step of a scan: the streaming analyses on every prompt, the cone, then the multi-pass
//! analyses on the heads the summary tabulates, each stage timed and reported to a [`Progress`].

use super::measure::{measure_set, SetMeasures};
use super::params::{Analysis, ScanParams};
use super::progress::Progress;
use super::{claims, external, format, summary};
use crate::analysis::embedding_cone::{embedding_cone, EmbeddingCone};
use crate::error::Result;
use crate::model::Model;
use crate::numeric::Real;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Everything a scan measured.
pub struct ScanOutcome {
    /// The streaming measures on the natural prompts.
    pub natural: SetMeasures,
    /// The same on the random prompts (`intrinsic` only).
    pub random: Option<SetMeasures>,
    /// The cone analysis.
    pub cone: Option<EmbeddingCone>,
    /// Reports of the multi-pass analyses, by CLI name.
    pub external: BTreeMap<String, serde_json::Value>,
    /// The per-head summary.
    pub summary: format::Summary,
    /// Wall-clock time of each step, in the order run.
    pub step_seconds: Vec<format::StepTime>,
}

/// The work of one stage, given its progress callback.
type StageBody<'a> = dyn FnMut(&dyn Fn(u64)) -> Result<()> + 'a;

/// Runs stages with their progress bars and records how long each took.
pub(super) struct Stages<'a> {
    progress: &'a dyn Progress,
    times: Vec<format::StepTime>,
}

impl<'a> Stages<'a> {
    pub(super) fn new(progress: &'a dyn Progress, times: Vec<format::StepTime>) -> Self {
        Self { progress, times }
    }

    /// Runs `f`, a stage of `total` steps named `name`.
    pub(super) fn run(&mut self, name: &str, total: usize, f: &mut StageBody<'_>) -> Result<()> {
        let start = std::time::Instant::now();
        self.progress.begin(name, total as u64);
        let r = f(&|n| self.progress.set(n));
        self.progress.end();
        self.record(name, start.elapsed().as_secs_f64());
        r
    }

    pub(super) fn record(&mut self, name: &str, seconds: f64) {
        self.times.push(format::StepTime {
            step: name.to_string(),
            seconds,
        });
    }
}

/// The measures a scan takes before its multi-pass analyses.
pub struct Streamed {
    /// The streaming measures on the natural prompts.
    pub natural: SetMeasures,
    /// The same on the random prompts (`intrinsic` only).
    pub random: Option<SetMeasures>,
    /// The cone analysis.
    pub cone: Option<EmbeddingCone>,
}

/// Runs the selected analyses of `params` on `natural` and `random` prompts (the random set is used only by
/// `intrinsic`).
pub fn analyse<T: Real>(
    model: &Model<T>,
    natural: &[Vec<u32>],
    random: &[Vec<u32>],
    params: &ScanParams,
    progress: &dyn Progress,
) -> Result<ScanOutcome> {
    let mut stages = Stages::new(progress, Vec::new());
    let mut natural_m = None;
    stages.run("natural prompts", natural.len(), &mut |bar| {
        natural_m = Some(measure_set(model, natural, params, bar)?);
        Ok(())
    })?;
    let mut random_m = None;
    if params.runs(Analysis::Intrinsic) {
        stages.run("random prompts", random.len(), &mut |bar| {
            random_m = Some(measure_set(model, random, params, bar)?);
            Ok(())
        })?;
    }
    let mut cone = None;
    if params.runs(Analysis::Cone) {
        stages.run("cone", 1, &mut |bar| {
            cone = Some(cone_analysis(model, params));
            bar(1);
            Ok(())
        })?;
    }
    let streamed = Streamed {
        natural: natural_m.expect("the stage ran"),
        random: random_m,
        cone,
    };
    finish(model, natural, streamed, params, BTreeMap::new(), stages)
}

/// A multi-pass analysis's report made elsewhere (by a shard), with the seconds it took.
pub type GivenReport = (serde_json::Value, f64);

/// Builds the summary of the streamed measures, runs the multi-pass analyses in `params` order (taking those
/// in `given` as they are), and labels every head.
pub(super) fn finish<T: Real>(
    model: &Model<T>,
    natural: &[Vec<u32>],
    streamed: Streamed,
    params: &ScanParams,
    mut given: BTreeMap<String, GivenReport>,
    mut stages: Stages<'_>,
) -> Result<ScanOutcome> {
    let Streamed {
        natural: natural_m,
        random: random_m,
        cone,
    } = streamed;
    let mut summary = summary::build(model, &natural_m, random_m.as_ref(), cone.as_ref(), params);
    let mut external = BTreeMap::new();
    for &a in params
        .analyses
        .iter()
        .filter(|&&a| external::is_external(a))
    {
        if let Some((report, seconds)) = given.remove(a.name()) {
            stages.record(a.name(), seconds);
            external.insert(a.name().to_string(), report);
            continue;
        }
        let Some(ext) = external::runner::<T>(a) else {
            continue;
        };
        let heads = summary::tabulated_heads(&summary);
        let prompts = &natural[..natural.len().min(external::MULTI_PASS_PROMPTS)];
        let passes = (ext.passes)(prompts.len(), &heads);
        if passes == 0 {
            // Nothing to compute (no target head): the empty report is written and warned of, with no bar.
            let start = std::time::Instant::now();
            external.insert(
                a.name().to_string(),
                (ext.run)(model, prompts, &heads, &|_| {})?,
            );
            stages.record(a.name(), start.elapsed().as_secs_f64());
            continue;
        }
        stages.run(a.name(), passes as usize, &mut |bar| {
            external.insert(
                a.name().to_string(),
                (ext.run)(model, prompts, &heads, bar)?,
            );
            Ok(())
        })?;
    }
    summary::attach_external(&mut summary, &external, model, params);
    let n_tokens = natural.first().map_or(0, Vec::len);
    let frequencies = model.config.chunk_frequencies(n_tokens);
    summary.claims = claims::evaluate(&claims::ClaimInputs {
        summary: &summary,
        params,
        frequencies: &frequencies,
    });
    Ok(ScanOutcome {
        natural: natural_m,
        random: random_m,
        cone,
        external,
        summary,
        step_seconds: stages.times,
    })
}

/// The cone analysis on the seed's sample of the vocabulary.
pub(super) fn cone_analysis<T: Real>(model: &Model<T>, params: &ScanParams) -> EmbeddingCone {
    embedding_cone(model, &cone_sample(model, params))
}

/// The vocabulary rows of the cone analysis: `cone_tokens` distinct ids, uniform, from the seed.
fn cone_sample<T: Real>(model: &Model<T>, params: &ScanParams) -> Vec<u32> {
    let vocab = model.config.vocab_size;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut ids: Vec<u32> =
        rand::seq::index::sample(&mut rng, vocab, params.cone_tokens.min(vocab))
            .into_iter()
            .map(|i| i as u32)
            .collect();
    ids.sort_unstable();
    ids
}
