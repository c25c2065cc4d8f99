//! Sharded scans: `scan --shard K/N` does a deterministic share of a scan's work and writes it as partial
//! results; [`merge`] folds any complete set of shards into the outcome one unsharded scan gives, bit for bit.
//! The shard directory is described in `fixtures/scan/SHARDS.md`.
//!
//! The work is cut into tasks, listed in a fixed order ([`tasks`]): each natural prompt, each random prompt,
//! the cone, and each multi-pass analysis that does not depend on the heads' labels; task `i` belongs to shard
//! `i mod N`. A prompt's task writes the sums its forward pass adds (`super::partial`); the merge adds them in
//! prompt order, which is the order and arithmetic of an unsharded scan. The Cauchy–Schwarz tables are made
//! for the heads the merged slash scores label, so the merge runs them.

use super::analyse::{cone_analysis, finish, ScanOutcome, Stages, Streamed};
use super::format::{Meta, Prompts, StepTime};
use super::params::{Analysis, ScanParams};
use super::progress::Progress;
use super::{external, measure, partial, read_back};
use crate::analysis::embedding_cone::EmbeddingCone;
use crate::error::{Error, Result};
use crate::io::write_json;
use crate::model::Model;
use crate::numeric::Real;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Version of the shard directory layout (`shard_format_version` in `shard.json`).
pub const SHARD_FORMAT_VERSION: u32 = 1;
/// The record of a shard, written last.
pub const SHARD_FILE: &str = "shard.json";
/// The cone analysis's result in a shard.
const CONE_FILE: &str = "cone.json";

/// Largest number of shards `N` of `--shard K/N`: 65 536. A merge names every shard directory on its command
/// line, and the scan's number of tasks bounds `N` again when the shard runs ([`run_shard`]).
pub const MAX_SHARDS: usize = 65_536;

/// Which share of the work a scan does: shard `index` of `count` (0-based, as Slurm's array task ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

impl Shard {
    /// Shard `index` of `count`, with `0 ≤ index < count ≤ 65536` (`MAX_SHARDS`).
    pub fn new(index: usize, count: usize) -> Result<Self> {
        Self::checked(index, count)
            .map_err(|problem| Error::parameter("shard", format!("{index}/{count}: {problem}")))
    }

    /// The shard, or what is wrong with `index` and `count`.
    fn checked(index: usize, count: usize) -> std::result::Result<Self, String> {
        if index >= count {
            return Err(EXPECTED_K_OF_N.into());
        }
        if count > MAX_SHARDS {
            return Err(format!("N = {count} is out of range: 1 to {MAX_SHARDS}"));
        }
        Ok(Self { index, count })
    }
}

/// What a shard's `K/N` must be.
const EXPECTED_K_OF_N: &str = "expected K/N with 0 ≤ K < N (e.g. 0/4 for the first of four shards)";

impl std::str::FromStr for Shard {
    type Err = Error;

    /// Parses `K/N` as [`Shard::new`] takes it; the error does not repeat the text (a parser of arguments
    /// names it).
    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::Argument(EXPECTED_K_OF_N.into());
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            k.trim().parse::<usize>().map_err(|_| bad())?,
            n.trim().parse::<usize>().map_err(|_| bad())?,
        );
        Self::checked(index, count).map_err(Error::Argument)
    }
}

/// One unit of a scan's work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    /// The forward pass of natural prompt `p`.
    Natural(usize),
    /// The forward pass of random prompt `p`.
    Random(usize),
    /// The cone analysis.
    Cone,
    /// A multi-pass analysis.
    External(Analysis),
}

impl Task {
    /// The task's name in `shard.json`: `natural/3`, `random/0`, `cone`, or the analysis's CLI name.
    pub fn name(&self) -> String {
        match self {
            Task::Natural(p) => format!("natural/{p}"),
            Task::Random(p) => format!("random/{p}"),
            Task::Cone => "cone".into(),
            Task::External(a) => a.name().into(),
        }
    }

    /// The scan step the task's time counts towards (`step_seconds`).
    fn step(&self) -> &'static str {
        match self {
            Task::Natural(_) => "natural prompts",
            Task::Random(_) => "random prompts",
            Task::Cone => "cone",
            Task::External(a) => a.name(),
        }
    }
}

/// Whether the multi-pass analysis `a` is made for heads chosen by the labels, so that it can only run once
/// every prompt's slash scores are merged.
fn needs_labels(a: Analysis) -> bool {
    a == Analysis::CauchySchwarz
}

/// Every task of a scan with `params` on `n_natural` and `n_random` prompts, in the order that assigns them.
pub fn tasks(params: &ScanParams, n_natural: usize, n_random: usize) -> Vec<Task> {
    let mut out: Vec<Task> = (0..n_natural).map(Task::Natural).collect();
    if params.runs(Analysis::Intrinsic) {
        out.extend((0..n_random).map(Task::Random));
    }
    if params.runs(Analysis::Cone) {
        out.push(Task::Cone);
    }
    out.extend(
        params
            .analyses
            .iter()
            .filter(|&&a| external::is_external(a) && external::is_built(a) && !needs_labels(a))
            .map(|&a| Task::External(a)),
    );
    out
}

/// The tasks of `shard`.
pub fn shard_tasks(shard: Shard, all: &[Task]) -> Vec<Task> {
    all.iter()
        .enumerate()
        .filter(|(i, _)| i % shard.count == shard.index)
        .map(|(_, t)| *t)
        .collect()
}

/// One task a shard did, in `shard.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TaskRecord {
    /// [`Task::name`].
    pub task: String,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// `shard.json`: what a shard is part of and what it did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardRecord {
    /// [`SHARD_FORMAT_VERSION`].
    pub shard_format_version: u32,
    /// This shard's index, `0..of`.
    pub shard: usize,
    /// Number of shards of the scan.
    pub of: usize,
    /// The `meta.json` the whole scan will have (model, precision, arithmetic, prompt sets, parameters,
    /// analyses); `elapsed_seconds`, `step_seconds` and `command` are this shard's, and `complete` is `false`.
    pub meta: Meta,
    /// The tasks done, in order.
    pub tasks: Vec<TaskRecord>,
    /// `true`: every file of the tasks was written before this record.
    pub complete: bool,
}

/// Directory of a prompt's measures in a shard.
fn prompt_dir(dir: &Path, set: &str, p: usize) -> PathBuf {
    dir.join(set).join(format!("p{p:05}"))
}

/// File of a multi-pass analysis's report in a shard.
fn external_file(dir: &Path, a: Analysis) -> PathBuf {
    dir.join("external").join(format!("{}.json", a.name()))
}

/// Runs the tasks of `shard` and writes their results into `dir` (which exists); returns what was done. The
/// caller writes `shard.json` ([`write_record`]).
pub fn run_shard<T: Real>(
    model: &Model<T>,
    natural: &[Vec<u32>],
    random: &[Vec<u32>],
    params: &ScanParams,
    shard: Shard,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<Vec<TaskRecord>> {
    let all = tasks(params, natural.len(), random.len());
    if shard.count > all.len() {
        return Err(Error::parameter(
            "shard",
            format!(
                "{}/{}: N = {} is out of range: 1 to {}, the number of tasks of this scan (every shard must \
                 have one)",
                shard.index,
                shard.count,
                shard.count,
                all.len()
            ),
        ));
    }
    let mine = shard_tasks(shard, &all);
    let mut records = Vec::new();
    let mut stages = Stages::new(progress, Vec::new());
    let mut steps: Vec<&str> = mine.iter().map(Task::step).collect();
    steps.dedup();
    for step in steps {
        let todo: Vec<Task> = mine.iter().copied().filter(|t| t.step() == step).collect();
        let total = match todo[0] {
            Task::External(a) => external::runner::<T>(a)
                .map(|e| (e.passes)(natural.len().min(external::MULTI_PASS_PROMPTS), &[]))
                .unwrap_or(0) as usize,
            _ => todo.len(),
        };
        stages.run(step, total, &mut |bar| {
            for (i, &task) in todo.iter().enumerate() {
                let start = std::time::Instant::now();
                run_task(model, natural, random, params, task, dir, bar)?;
                if !matches!(task, Task::External(_)) {
                    bar(i as u64 + 1);
                }
                records.push(TaskRecord {
                    task: task.name(),
                    seconds: start.elapsed().as_secs_f64(),
                });
            }
            Ok(())
        })?;
    }
    Ok(records)
}

fn run_task<T: Real>(
    model: &Model<T>,
    natural: &[Vec<u32>],
    random: &[Vec<u32>],
    params: &ScanParams,
    task: Task,
    dir: &Path,
    bar: &dyn Fn(u64),
) -> Result<()> {
    match task {
        Task::Natural(p) | Task::Random(p) => {
            let (set, ids) = match task {
                Task::Natural(_) => ("natural", &natural[p]),
                _ => ("random", &random[p]),
            };
            let m = measure::measure_prompt(model, ids, p == 0, params)?;
            partial::write(&prompt_dir(dir, set, p), model, &m)
        }
        Task::Cone => write_json(&dir.join(CONE_FILE), &cone_analysis(model, params)),
        Task::External(a) => {
            let ext = external::runner::<T>(a)
                .ok_or_else(|| Error::Internal(format!("{} is not built", a.name())))?;
            let prompts = &natural[..natural.len().min(external::MULTI_PASS_PROMPTS)];
            let report = (ext.run)(model, prompts, &[], bar)?;
            let path = external_file(dir, a);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            write_json(&path, &report)
        }
    }
}

/// Writes `shard.json`, the last file of a shard.
pub fn write_record(dir: &Path, record: &ShardRecord) -> Result<()> {
    write_json(&dir.join(SHARD_FILE), record)
}

/// Reads a JSON file of a shard directory.
fn read_json<R: serde::de::DeserializeOwned>(path: &Path) -> Result<R> {
    crate::io::read_json(path, "shard")
}

/// Reads a shard's cone result, checking it covers every head of the model with finite angles and the number
/// of tokens the parameters sample.
fn read_cone<T: Real>(path: &Path, model: &Model<T>, params: &ScanParams) -> Result<EmbeddingCone> {
    let cone: EmbeddingCone = read_json(path)?;
    let c = &model.config;
    let heads = c.n_layers * c.n_heads;
    let finite = |s: &Option<crate::analysis::embedding_cone::Spread>| {
        s.is_none_or(|s| s.mean_angle.is_finite() && s.max_angle.is_finite())
    };
    let fits = cone.queries.len() == heads
        && cone.keys.len() == heads
        && cone.n_tokens == params.cone_tokens.min(c.vocab_size)
        && finite(&cone.embeddings)
        && cone.queries.iter().chain(&cone.keys).all(finite);
    if !fits {
        return Err(Error::bad_data(path, format!("not the cone of this model's {heads} heads and {} sampled tokens, or an angle is not finite", params.cone_tokens.min(c.vocab_size)
        )));
    }
    Ok(cone)
}

/// A shard directory read for merging.
#[derive(Debug)]
pub struct ShardDir {
    /// Where it is.
    pub dir: PathBuf,
    /// Its `shard.json`.
    pub record: ShardRecord,
    /// Its `prompts.json`.
    pub prompts: Prompts,
}

/// The fields of `meta` that must agree between the shards of one scan (all but the run's own).
fn identity(meta: &Meta) -> Result<serde_json::Value> {
    let mut v = external::json(meta)?;
    if let Some(o) = v.as_object_mut() {
        for run_field in [
            "model_file",
            "elapsed_seconds",
            "step_seconds",
            "command",
            "complete",
        ] {
            o.remove(run_field);
        }
    }
    Ok(v)
}

/// Checks the record and prompts of the shard directory `dir` before anything is done with them: the meta as a
/// scan directory's ([`read_back::check_meta`]), the shard count `of` at most the tasks that meta implies (a
/// shard beyond them has nothing to do, and `scan --shard` refuses it), the index inside `0..of`, and the
/// prompts as the meta records them ([`read_back::check_prompts`]).
pub fn check_shard(record: &ShardRecord, prompts: &Prompts, dir: &Path) -> Result<()> {
    let file = &dir.join(SHARD_FILE);
    let meta = &record.meta;
    read_back::check_meta(meta, file)?;
    let count = |name: &str| read_back::prompt_set(meta, name).map_or(0, |s| s.count);
    let n_tasks = tasks(&params_of(meta)?, count("natural"), count("random")).len();
    if !(1..=n_tasks).contains(&record.of) {
        return Err(Error::bad_data(file, format!("of is {}, outside the allowed 1..={n_tasks} (the scan's tasks: a shard beyond them has \
             nothing to do)", record.of
        )));
    }
    if record.shard >= record.of {
        return Err(Error::bad_data(
            file,
            format!(
                "shard is {}, outside the allowed 0..={} (of is {})",
                record.shard,
                record.of - 1,
                record.of
            ),
        ));
    }
    read_back::check_prompts(prompts, meta, &dir.join(super::format::files::PROMPTS))
}

/// Reads the shard directories `dirs` and checks they are one complete scan's shards: each complete and of
/// this format, all with the same model (by sha256), precision, arithmetic, prompts, parameters, analyses and
/// number of shards, every index present once, and each holding exactly its tasks. Returns them by index.
pub fn open_shards(dirs: &[PathBuf]) -> Result<Vec<ShardDir>> {
    if dirs.is_empty() {
        return Err(Error::Argument(
            "merge needs at least one shard directory".into(),
        ));
    }
    let mut shards = Vec::new();
    for dir in dirs {
        let path = dir.join(SHARD_FILE);
        if !path.exists() {
            return Err(Error::bad_data(
                dir,
                format!("not a shard directory (no {SHARD_FILE}): a sharded scan writes one"),
            ));
        }
        let record: ShardRecord = read_json(&path)?;
        if record.shard_format_version != SHARD_FORMAT_VERSION {
            return Err(Error::bad_data(
                path,
                format!(
                    "shard format version {}, this ropescope merges version {SHARD_FORMAT_VERSION}",
                    record.shard_format_version
                ),
            ));
        }
        if !record.complete {
            return Err(Error::bad_data(path, "not a complete shard record"));
        }
        let prompts = read_json(&dir.join(super::format::files::PROMPTS))?;
        check_shard(&record, &prompts, dir)?;
        shards.push(ShardDir {
            dir: dir.clone(),
            record,
            prompts,
        });
    }
    shards.sort_by_key(|s| s.record.shard);
    let first = &shards[0];
    let of = first.record.of;
    let id = identity(&first.record.meta)?;
    for s in &shards {
        if s.record.of != of {
            return Err(Error::bad_data(
                &s.dir,
                format!(
                    "shard {}/{} does not belong with {}'s {of} shards",
                    s.record.shard,
                    s.record.of,
                    first.dir.display()
                ),
            ));
        }
        let other = identity(&s.record.meta)?;
        if other != id {
            let differs = id
                .as_object()
                .and_then(|a| {
                    a.iter()
                        .find(|(k, v)| other.get(k.as_str()) != Some(v))
                        .map(|(k, _)| k.clone())
                })
                .unwrap_or_else(|| "meta".into());
            return Err(Error::bad_data(
                &s.dir,
                format!(
                    "a shard of another scan (its {differs} differs from {}'s)",
                    first.dir.display()
                ),
            ));
        }
        if s.prompts != first.prompts {
            return Err(Error::bad_data(
                &s.dir,
                format!(
                    "a shard of another scan (its prompts differ from {}'s)",
                    first.dir.display()
                ),
            ));
        }
    }
    for pair in shards.windows(2) {
        if pair[0].record.shard == pair[1].record.shard {
            return Err(Error::bad_data(
                &pair[1].dir,
                format!(
                    "shard {}/{of} given twice (also {})",
                    pair[0].record.shard,
                    pair[0].dir.display()
                ),
            ));
        }
    }
    let present: Vec<usize> = shards.iter().map(|s| s.record.shard).collect();
    let missing: Vec<String> = (0..of)
        .filter(|k| !present.contains(k))
        .map(|k| format!("{k}/{of}"))
        .collect();
    if !missing.is_empty() {
        return Err(Error::bad_data(
            &first.dir,
            format!(
                "a shard of {of}, given without shard{} {}",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ),
        ));
    }
    Ok(shards)
}

/// The scan parameters recorded in a scan's or shard's meta, its analyses included.
pub fn params_of(meta: &Meta) -> Result<ScanParams> {
    Ok(ScanParams {
        analyses: Analysis::parse_list(&meta.analyses.join(","))?,
        ..meta.parameters.clone()
    })
}

/// Folds the shards (from [`open_shards`]) into the outcome of the whole scan: the prompts' measures added in
/// prompt order, the cone and multi-pass reports taken from the shards that made them, the Cauchy–Schwarz
/// tables (if selected) computed here. Step times are the sums of the shards' task times.
pub fn merge<T: Real>(
    model: &Model<T>,
    shards: &[ShardDir],
    progress: &dyn Progress,
) -> Result<ScanOutcome> {
    let meta = &shards[0].record.meta;
    let params = params_of(meta)?;
    let prompts = &shards[0].prompts;
    let all = tasks(&params, prompts.natural.len(), prompts.random.len());
    let mut owner: BTreeMap<String, &ShardDir> = BTreeMap::new();
    for s in shards {
        let expected: Vec<String> = shard_tasks(
            Shard {
                index: s.record.shard,
                count: s.record.of,
            },
            &all,
        )
        .iter()
        .map(Task::name)
        .collect();
        let done: Vec<String> = s.record.tasks.iter().map(|t| t.task.clone()).collect();
        if done != expected {
            return Err(Error::bad_data(
                &s.dir,
                format!(
                    "shard {}/{} records tasks [{}], its share is [{}]",
                    s.record.shard,
                    s.record.of,
                    done.join(", "),
                    expected.join(", ")
                ),
            ));
        }
        for t in &expected {
            owner.insert(t.clone(), s);
        }
    }
    let mut seconds: BTreeMap<&str, f64> = BTreeMap::new();
    for s in shards {
        for t in &s.record.tasks {
            let step = all
                .iter()
                .find(|a| a.name() == t.task)
                .map(Task::step)
                .unwrap_or("");
            *seconds.entry(step).or_default() += t.seconds;
        }
    }
    let fold = |set: &str, ids: &[Vec<u32>], make: fn(usize) -> Task| -> Result<_> {
        let mut total = measure::empty(model, &params);
        for (p, prompt) in ids.iter().enumerate() {
            let dir = prompt_dir(&owner[&make(p).name()].dir, set, p);
            total.absorb(partial::read(&dir, model, &params, prompt.len(), p == 0)?);
        }
        Ok(total)
    };
    let mut times = Vec::new();
    let mut time = |step: &str| {
        times.push(StepTime {
            step: step.into(),
            seconds: seconds.get(step).copied().unwrap_or(0.0),
        })
    };
    time("natural prompts");
    let natural = fold("natural", &prompts.natural, Task::Natural)?;
    let random = match params.runs(Analysis::Intrinsic) {
        true => {
            time("random prompts");
            Some(fold("random", &prompts.random, Task::Random)?)
        }
        false => None,
    };
    let cone: Option<EmbeddingCone> = match params.runs(Analysis::Cone) {
        true => {
            time("cone");
            Some(read_cone(
                &owner[&Task::Cone.name()].dir.join(CONE_FILE),
                model,
                &params,
            )?)
        }
        false => None,
    };
    let mut given = BTreeMap::new();
    for t in &all {
        if let Task::External(a) = t {
            let report = read_json(&external_file(&owner[&t.name()].dir, *a))?;
            given.insert(
                a.name().to_string(),
                (report, seconds.get(a.name()).copied().unwrap_or(0.0)),
            );
        }
    }
    let streamed = Streamed {
        natural,
        random,
        cone,
    };
    finish(
        model,
        &prompts.natural,
        streamed,
        &params,
        given,
        Stages::new(progress, times),
    )
}
