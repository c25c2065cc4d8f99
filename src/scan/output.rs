//! Writes a scan's output directory (layout in `fixtures/scan/FORMAT.md`), every file atomically.

use super::analyse::ScanOutcome;
use super::format::{files, Meta, Prompts};
use super::measure::SetMeasures;
use super::params::{Analysis, ScanParams};
use super::summary::mean_spectrum;
use crate::analysis::vector_stats::{HeadSums, RowSums};
use crate::error::{Error, Result};
use crate::io::{npy, write_atomic, write_json};
use crate::model::Model;
use crate::numeric::Real;
use std::path::Path;

/// Writes `summary.json`, `summary.txt`, `prompts.json`, the CSV tables (`tables/`), every array of the analyses that ran, and last
/// `meta.json` (whose `complete` marks a finished scan), into `dir` (created if needed).
pub fn write<T: Real>(
    dir: &Path,
    model: &Model<T>,
    outcome: &ScanOutcome,
    params: &ScanParams,
    meta: &Meta,
    prompts: &Prompts,
    summary_text: &str,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    write_json(&dir.join(files::SUMMARY), &outcome.summary)?;
    write_json(&dir.join(files::PROMPTS), prompts)?;
    write_atomic(&dir.join(files::SUMMARY_TEXT), |w| {
        w.write_all(summary_text.as_bytes())
    })?;
    super::tables::write(dir, &outcome.summary)?;
    let c = &model.config;
    let grid = [c.n_layers, c.n_heads];
    write_set(dir, "natural", &outcome.natural, grid, params)?;
    if let Some(r) = &outcome.random {
        write_set(dir, "random", r, grid, params)?;
    }
    if params.runs(Analysis::Frequency) || params.runs(Analysis::Fourier) {
        let n_chunks = c.n_chunks();
        // A layer that rotates fewer chunks (none on a NoPE layer) has NaN for the others.
        let freqs: Vec<f64> = c
            .chunk_frequencies(meta.parameters.prompt_length)
            .iter()
            .flat_map(|f| (0..n_chunks).map(|k| f.get(k).copied().unwrap_or(f64::NAN)))
            .collect();
        npy::write_with_absent(
            &dir.join(files::CHUNK_FREQUENCY),
            &[c.n_layers, n_chunks],
            &freqs,
        )?;
    }
    if let Some(cone) = &outcome.cone {
        for (name, spreads) in [(files::CONE_Q, &cone.queries), (files::CONE_K, &cone.keys)] {
            let data: Vec<f64> = spreads
                .iter()
                .flat_map(|s| match s {
                    Some(s) => [s.mean_angle, s.max_angle],
                    None => [f64::NAN, f64::NAN],
                })
                .collect();
            npy::write_with_absent(&dir.join(name), &[grid[0], grid[1], 2], &data)?;
        }
    }
    for (name, report) in &outcome.external {
        write_json(
            &dir.join(format!("{}.json", name.replace('-', "_"))),
            report,
        )?;
    }
    write_json(&dir.join(files::META), meta)
}

fn write_set(
    dir: &Path,
    set: &str,
    m: &SetMeasures,
    [layers, heads]: [usize; 2],
    params: &ScanParams,
) -> Result<()> {
    let path = |pattern: &str| dir.join(files::for_set(pattern, set));
    if let Some(s) = &m.slash {
        let width = s.delta_max() + 1;
        npy::write(&path(files::SLASH), &[layers, heads, width], &s.scores())?;
        npy::write(&path(files::SINK), &[layers, heads], &s.sinks())?;
        if let Some(learned) = s.learned_sinks() {
            npy::write(&path(files::LEARNED_SINK), &[layers, heads], &learned)?;
        }
    }
    if let Some(map) = &m.map {
        let side = map.side();
        npy::write(
            &path(files::ATTENTION_MAP),
            &[layers, heads, side, side],
            map.maps(),
        )?;
    }
    let Some(v) = &m.vectors else {
        return Ok(());
    };
    let all: Vec<&HeadSums> = (0..layers)
        .flat_map(|l| (0..heads).map(move |h| (l, h)))
        .filter_map(|(l, h)| v.head(l, h))
        .collect();
    if all.len() != layers * heads {
        return Ok(());
    }
    let stack = |pattern: &str, f: &dyn Fn(&HeadSums) -> Vec<f64>| -> Result<()> {
        let rows: Vec<Vec<f64>> = all.iter().map(|s| f(s)).collect();
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        let data: Vec<f64> = rows
            .iter()
            .flat_map(|r| {
                r.iter()
                    .copied()
                    .chain(std::iter::repeat_n(f64::NAN, width - r.len()))
            })
            .collect();
        npy::write_with_absent(&path(pattern), &[layers, heads, width], &data)
    };
    if params.runs(Analysis::Frequency) {
        stack(files::CHUNK_NORMS_Q, &|s| s.q.mean_chunk_norms())?;
        stack(files::CHUNK_NORMS_K, &|s| s.k.mean_chunk_norms())?;
        stack(files::CHUNK_NORMS_V, &|s| s.v.mean_chunk_norms())?;
    }
    if params.runs(Analysis::Rank) {
        let sv = |r: &RowSums| r.singular_values().unwrap_or_default();
        stack(files::SINGULAR_VALUES_Q, &|s| sv(&s.q))?;
        stack(files::SINGULAR_VALUES_K, &|s| sv(&s.k))?;
    }
    if params.runs(Analysis::Fourier) {
        let terms = |s: &HeadSums, f: fn(&crate::analysis::fourier::ChunkTerm) -> f64| {
            mean_spectrum(s)
                .map(|sp| sp.terms.iter().map(f).collect())
                .unwrap_or_default()
        };
        stack(files::FOURIER_AMPLITUDE, &|s| terms(s, |t| t.amplitude))?;
        stack(files::FOURIER_PHASE, &|s| terms(s, |t| t.phase))?;
    }
    Ok(())
}
