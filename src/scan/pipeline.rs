//! The scan as one library call: [`run`] takes a [`ScanRequest`] from a model file to a complete output
//! directory (or one shard of it), [`merge`] folds shards into the directory one unsharded scan writes. The
//! command line, the Python package and the tests all call these two; nothing here knows their syntax.
//!
//! Order of work: the output directory is staged first (a bad target fails before any work), the request is
//! checked against the model (prompt lengths, memory, the analyses' needs), the prompts are built, the
//! analyses run, the files are written with `meta.json` last, the report is drawn from the files, and the
//! staged directory is renamed into place.

use super::analyse::{analyse, ScanOutcome};
use super::format::{files, Meta, ModelMeta, PromptSetMeta, Prompts, StepTime, FORMAT_VERSION};
use super::params::{Analysis, ScanParams};
use super::progress::Progress;
use super::prompts::{natural_prompts, random_prompts, Prompt, BUILTIN_TEXTS};
use super::shard::{self, Shard, ShardDir, ShardRecord, SHARD_FORMAT_VERSION};
use super::{external, memory, output, report_text};
use crate::error::{Context, Error, Result};
use crate::gguf::GgufFile;
use crate::io::hashing::sha256_file;
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use crate::model::{Arithmetic, LayerConfig, Model, ModelConfig};
use crate::numeric::{Precision, Real};
use crate::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Everything a scan needs besides its output directory.
#[derive(Clone, Debug)]
pub struct ScanRequest {
    /// The GGUF model file.
    pub model: PathBuf,
    /// Prompt files: UTF-8 text, tokenized with the model's tokenizer, or `.npy` token ids used as they are
    /// (not both); empty: the built-in texts.
    pub prompts: Vec<PathBuf>,
    /// Natural prompts (default: one per text or file); as many random prompts are made.
    pub count: Option<usize>,
    /// Arithmetic precision of the forward passes.
    pub precision: Precision,
    /// How the forward passes multiply by the weights (`Ggml` needs f32).
    pub arithmetic: Arithmetic,
    /// The analyses and the measurement parameters, the prompt length among them.
    pub params: ScanParams,
    /// Only this shard of the work, written as partial results for [`merge`].
    pub shard: Option<Shard>,
    /// Replace an existing scan or shard directory (one holding its completion record) when the new one is
    /// complete.
    pub force: bool,
    /// The command that asked for the scan, argument by argument, recorded in `meta.json`.
    pub command: Vec<String>,
    /// Memory for weight matrices kept dequantized and packed between the scan's passes
    /// ([`Model::keep_packed_weights`]; [`DEFAULT_PACKED_WEIGHT_BYTES`]), at most half of the memory the
    /// pre-flight finds left beside the passes' own; no result depends on it.
    pub packed_weight_bytes: usize,
}

/// Default of [`ScanRequest::packed_weight_bytes`]: 1 GiB, every layer of SmolLM2-135M and Gemma 3 270M in f32.
pub const DEFAULT_PACKED_WEIGHT_BYTES: usize = 1 << 30;

impl ScanRequest {
    /// A scan of `model` with the built-in prompts and every default.
    pub fn new(model: impl Into<PathBuf>) -> Self {
        Self {
            model: model.into(),
            prompts: Vec::new(),
            count: None,
            precision: Precision::F32,
            arithmetic: Arithmetic::Exact,
            params: ScanParams::default(),
            shard: None,
            force: false,
            command: Vec::new(),
            packed_weight_bytes: DEFAULT_PACKED_WEIGHT_BYTES,
        }
    }

    /// Refuses parameters that no model could honour.
    fn check(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.params.kappa) {
            return Err(Error::parameter("kappa", "must be between 0 and 1"));
        }
        if self.params.prompt_length == 0 {
            return Err(Error::parameter("length", "must be at least 1"));
        }
        if self.count == Some(0) {
            return Err(Error::parameter("count", "must be at least 1"));
        }
        Ok(())
    }
}

/// Shards to fold by [`merge`].
#[derive(Clone, Debug)]
pub struct MergeRequest {
    /// The shard directories, all N of them, in any order.
    pub shards: Vec<PathBuf>,
    /// The model file, when it is not where the shards recorded it (its sha256 must match theirs).
    pub model: Option<PathBuf>,
    /// Replace an existing scan directory (one holding its `meta.json`) when the new one is complete.
    pub force: bool,
    /// The command that asked for the merge, recorded in `meta.json`.
    pub command: Vec<String>,
}

/// What a scan or a merge wrote.
#[derive(Clone, Debug)]
pub struct ScanSummary {
    /// The output directory, complete.
    pub out: PathBuf,
    /// Its `report.html`; `None` for a shard.
    pub report: Option<PathBuf>,
    /// The ranked summary the directory holds as text; empty for a shard.
    pub text: String,
    /// What the summary warns of (analyses that found nothing to measure, and the like).
    pub warnings: Vec<String>,
    /// The shard written and its number of tasks; `None` for a whole scan.
    pub shard: Option<(Shard, usize)>,
    /// Wall-clock seconds of this call.
    pub seconds: f64,
}

/// Runs the scan `req` describes and writes it whole into `out`: a scan directory with its report
/// (`fixtures/scan/FORMAT.md`), or with `req.shard` that shard's partial results (`fixtures/scan/SHARDS.md`).
/// `out` stays as it was unless the call succeeds.
pub fn run(req: &ScanRequest, out: &Path, progress: &dyn Progress) -> Result<ScanSummary> {
    let start = Instant::now();
    let inputs = Inputs::new(std::iter::once(&req.model).chain(&req.prompts));
    let staged = StagedDir::begin(
        out,
        &Staging {
            force: req.force,
            inputs: &inputs,
            records: &[Record::SCAN, Record::SHARD],
        },
    )?;
    let file = GgufFile::open(&req.model)?;
    req.check()?;
    match req.precision {
        Precision::F32 => run_in::<f32>(req, &file, progress, start, staged),
        Precision::F64 => run_in::<f64>(req, &file, progress, start, staged),
    }
}

fn run_in<T: Real>(
    req: &ScanRequest,
    file: &GgufFile,
    progress: &dyn Progress,
    start: Instant,
    staged: StagedDir,
) -> Result<ScanSummary> {
    let model = Model::<T>::load_with(file, req.arithmetic).context("loading the model")?;
    let params = &req.params;
    let natural = natural_set(req, file, &model)?;
    let longest = natural.iter().map(|p| p.ids.len()).max().unwrap_or(0);
    let retained = memory::retained_bytes(&model, longest, params);
    for p in &natural {
        model
            .validate_with_capture(&p.ids, retained, memory::REDUCE)
            .with_context(|| format!("prompt '{}'", p.source))?;
        if params.delta_max >= p.ids.len() {
            return Err(Error::parameter(
                "delta_max",
                format!(
                    "({}) must be below every prompt's length (prompt '{}' has {} tokens)",
                    params.delta_max,
                    p.source,
                    p.ids.len()
                ),
            ));
        }
    }
    // Packed weights take at most half of what the pre-flight finds left beside the passes' own memory.
    let room = model
        .memory_left(longest, retained)?
        .map_or(usize::MAX, |left| {
            usize::try_from(left / 2).unwrap_or(usize::MAX)
        });
    model.keep_packed_weights(req.packed_weight_bytes.min(room));
    let lengths: Vec<(usize, &str)> = natural
        .iter()
        .map(|p| (p.ids.len(), p.source.as_str()))
        .collect();
    external::check_prompt_lengths(&params.analyses, &lengths)?;
    let bos = Tokenizer::from_gguf(file).ok().and_then(|t| t.bos_id());
    let random = random_prompts(&natural, model.config.vocab_size, bos, params.seed);
    let with_random = params.runs(Analysis::Intrinsic);
    let mut prompt_sets = vec![set_meta("natural", &natural)];
    if with_random {
        prompt_sets.push(set_meta("random", &random));
    }
    let ids = |ps: &[Prompt]| ps.iter().map(|p| p.ids.clone()).collect::<Vec<_>>();
    let prompts = Prompts {
        natural: ids(&natural),
        random: if with_random {
            ids(&random)
        } else {
            Vec::new()
        },
    };
    let mut meta = Meta {
        format_version: FORMAT_VERSION,
        ropescope_version: env!("CARGO_PKG_VERSION").into(),
        model_file: req.model.display().to_string(),
        model_sha256: sha256_file(&req.model)?,
        model: model_meta(&model),
        precision: T::NAME.into(),
        arithmetic: req.arithmetic,
        prompt_sets,
        parameters: params.clone(),
        analyses: params
            .analyses
            .iter()
            .map(|a| a.name().to_string())
            .collect(),
        elapsed_seconds: 0.0,
        step_seconds: Vec::new(),
        command: req.command.clone(),
        complete: false,
    };
    if let Some(shard) = req.shard {
        return write_shard(
            &model, &prompts, params, shard, meta, start, staged, progress,
        );
    }
    let outcome = analyse(&model, &prompts.natural, &prompts.random, params, progress)?;
    meta.elapsed_seconds = start.elapsed().as_secs_f64();
    meta.step_seconds = outcome.step_seconds.clone();
    meta.complete = true;
    write_scan(&model, outcome, params, &meta, &prompts, staged, start)
}

/// A warning for each natural prompt that starts over with its own text (the texts hold fewer tokens than the
/// prompt length, so the continuation wraps around): the scan would otherwise measure a repeated text in
/// silence.
fn continued(meta: &Meta) -> Vec<String> {
    let Some(set) = meta.prompt_sets.iter().find(|s| s.name == "natural") else {
        return Vec::new();
    };
    (set.repeats_from.iter().zip(&set.lengths).zip(&set.sources))
        .filter_map(|((from, len), source)| Some((from.as_ref()?, len, source)))
        .map(|(from, len, source)| {
            format!(
                "prompt '{source}' starts over at token {from} of {len}: the prompt texts hold fewer tokens than \
                 --length, so from there it repeats; give longer texts or a shorter --length"
            )
        })
        .collect()
}

/// The shape `meta.json` records of `model`.
fn model_meta<T: Real>(model: &Model<T>) -> ModelMeta {
    let c = &model.config;
    ModelMeta {
        architecture: c.architecture.clone(),
        n_layers: c.n_layers,
        n_heads: c.n_heads,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.max_head_dim(),
        value_dim: c.max_value_dim(),
        kv_heads: each_layer(c, |l| l.n_kv_heads),
        head_dims: each_layer(c, LayerConfig::head_dim),
        value_dims: each_layer(c, |l| l.value_dim),
        n_chunks: c.n_chunks(),
        rotated_chunks: if c.layers.iter().all(|l| l.rope.n_chunks() == c.n_chunks()) {
            Vec::new()
        } else {
            c.layers.iter().map(|l| l.rope.n_chunks()).collect()
        },
        rope_bases: c.layers.iter().map(|l| l.rope.base).collect(),
        windows: c.layers.iter().map(|l| l.window).collect(),
        chunks: match c.layers.iter().any(|l| l.chunk.is_some()) {
            true => c.layers.iter().map(|l| l.chunk).collect(),
            false => Vec::new(),
        },
        context_length: c.context_length,
        vocab_size: c.vocab_size,
    }
}

/// `f` of each layer, or nothing where every layer has the same.
fn each_layer(c: &ModelConfig, f: impl Fn(&LayerConfig) -> usize) -> Vec<usize> {
    let v: Vec<usize> = c.layers.iter().map(f).collect();
    match v.windows(2).all(|w| w[0] == w[1]) {
        true => Vec::new(),
        false => v,
    }
}

/// A prompt set as `meta.json` describes it.
fn set_meta(name: &str, prompts: &[Prompt]) -> PromptSetMeta {
    PromptSetMeta {
        repeats_from: match prompts.iter().any(|p| p.repeats_from.is_some()) {
            true => prompts.iter().map(|p| p.repeats_from).collect(),
            false => Vec::new(),
        },
        name: name.into(),
        count: prompts.len(),
        lengths: prompts.iter().map(|p| p.ids.len()).collect(),
        sources: prompts.iter().map(|p| p.source.clone()).collect(),
    }
}

/// Folds the shards `req` names into the directory one unsharded scan writes, with its report, into `out`.
pub fn merge(req: &MergeRequest, out: &Path, progress: &dyn Progress) -> Result<ScanSummary> {
    let start = Instant::now();
    let shards = shard::open_shards(&req.shards)?;
    let meta = &shards[0].record.meta;
    let model_path = req
        .model
        .clone()
        .unwrap_or_else(|| PathBuf::from(&meta.model_file));
    let inputs = Inputs::new(req.shards.iter().chain([&model_path]));
    let staged = StagedDir::begin(
        out,
        &Staging {
            force: req.force,
            inputs: &inputs,
            records: &[Record::SCAN],
        },
    )?;
    let sha = sha256_file(&model_path).context("the shards' model")?;
    if sha != meta.model_sha256 {
        return Err(Error::bad_data(
            &model_path,
            format!(
                "not the model the shards scanned (sha256 {sha}, theirs {})",
                meta.model_sha256
            ),
        ));
    }
    let file = GgufFile::open(&model_path)?;
    match Precision::from_name(&meta.precision) {
        Some(Precision::F32) => merge_in::<f32>(req, &file, &shards, progress, start, staged),
        Some(Precision::F64) => merge_in::<f64>(req, &file, &shards, progress, start, staged),
        None => Err(Error::bad_data(
            &shards[0].dir,
            format!(
                "unknown precision '{}' (expected f32 or f64)",
                meta.precision
            ),
        )),
    }
}

fn merge_in<T: Real>(
    req: &MergeRequest,
    file: &GgufFile,
    shards: &[ShardDir],
    progress: &dyn Progress,
    start: Instant,
    staged: StagedDir,
) -> Result<ScanSummary> {
    let arithmetic = shards[0].record.meta.arithmetic;
    let model = Model::<T>::load_with(file, arithmetic).context("loading the model")?;
    let outcome = shard::merge(&model, shards, progress)?;
    let mut meta = shards[0].record.meta.clone();
    meta.elapsed_seconds = shards
        .iter()
        .map(|s| s.record.meta.elapsed_seconds)
        .sum::<f64>()
        + start.elapsed().as_secs_f64();
    meta.step_seconds = outcome.step_seconds.clone();
    meta.command = req.command.clone();
    meta.complete = true;
    let params = shard::params_of(&meta)?;
    write_scan(
        &model,
        outcome,
        &params,
        &meta,
        &shards[0].prompts,
        staged,
        start,
    )
}

/// Writes the shard `shard` of the scan `meta` describes into `staged`, `shard.json` last.
#[allow(clippy::too_many_arguments)]
fn write_shard<T: Real>(
    model: &Model<T>,
    prompts: &Prompts,
    params: &ScanParams,
    shard: Shard,
    mut meta: Meta,
    start: Instant,
    staged: StagedDir,
    progress: &dyn Progress,
) -> Result<ScanSummary> {
    let dir = staged.path();
    crate::io::write_json(&dir.join(files::PROMPTS), prompts)?;
    let tasks = shard::run_shard(
        model,
        &prompts.natural,
        &prompts.random,
        params,
        shard,
        dir,
        progress,
    )?;
    meta.elapsed_seconds = start.elapsed().as_secs_f64();
    meta.step_seconds = tasks
        .iter()
        .map(|t| StepTime {
            step: t.task.clone(),
            seconds: t.seconds,
        })
        .collect();
    let record = ShardRecord {
        shard_format_version: SHARD_FORMAT_VERSION,
        shard: shard.index,
        of: shard.count,
        meta,
        tasks,
        complete: true,
    };
    shard::write_record(dir, &record)?;
    let out = staged.commit()?;
    Ok(ScanSummary {
        out,
        report: None,
        text: String::new(),
        warnings: Vec::new(),
        shard: Some((shard, record.tasks.len())),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Writes a whole scan's directory and its report; `meta` is complete. The measures are dropped once their
/// files are written, before the report reads the files back.
fn write_scan<T: Real>(
    model: &Model<T>,
    mut outcome: ScanOutcome,
    params: &ScanParams,
    meta: &Meta,
    prompts: &Prompts,
    staged: StagedDir,
    start: Instant,
) -> Result<ScanSummary> {
    outcome.summary.warnings.extend(continued(meta));
    let c = &model.config;
    let mut title =
        format!(
        "ropescope scan of {} ({}, {} layers × {} heads, {}): {} natural{} prompts of {} tokens",
        meta.model_file,
        c.architecture,
        c.n_layers,
        c.n_heads,
        meta.precision,
        prompts.natural.len(),
        if outcome.random.is_some() { " and random" } else { "" },
        meta.parameters.prompt_length
    );
    let nope: Vec<String> = (c.layers.iter().enumerate())
        .filter(|(_, l)| !l.rope.rotates())
        .map(|(i, _)| i.to_string())
        .collect();
    if !nope.is_empty() {
        title.push_str(&format!(
            "\nNoPE layers (no rotation; the report sets them against the RoPE layers): {}",
            nope.join(", ")
        ));
    }
    let text = report_text::render(&outcome.summary, &title);
    let warnings = outcome.summary.warnings.clone();
    output::write(staged.path(), model, &outcome, params, meta, prompts, &text)?;
    drop(outcome);
    crate::report::write_report(staged.path())?;
    let out = staged.commit()?;
    Ok(ScanSummary {
        report: Some(out.join("report.html")),
        out,
        text,
        warnings,
        shard: None,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The natural prompts: built-in texts, or the request's files (text or `.npy` ids). The prompt length is
/// at most the model's context, and the memory pre-flight passes before the prompts are built.
fn natural_set<T: Real>(
    req: &ScanRequest,
    file: &GgufFile,
    model: &Model<T>,
) -> Result<Vec<Prompt>> {
    let preflight =
        |count: usize, longest: usize| memory::preflight(model, &req.params, count, longest);
    let (npy, texts): (Vec<&PathBuf>, Vec<&PathBuf>) = req
        .prompts
        .iter()
        .partition(|p| p.extension().is_some_and(|e| e == "npy"));
    if !npy.is_empty() {
        if !texts.is_empty() {
            return Err(Error::Argument(
                "give prompts either as text files or as .npy token ids, not both".into(),
            ));
        }
        let prompts = npy
            .iter()
            .map(|p| {
                let ids = crate::io::token_ids::read_file(p)?;
                Ok(Prompt {
                    source: p.display().to_string(),
                    repeats_from: None,
                    ids,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let count = req.count.unwrap_or(prompts.len());
        preflight(
            count,
            prompts.iter().map(|p| p.ids.len()).max().unwrap_or(0),
        )?;
        return Ok(prompts.into_iter().cycle().take(count).collect());
    }
    let texts: Vec<(String, String)> = if texts.is_empty() {
        BUILTIN_TEXTS
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    } else {
        texts
            .iter()
            .map(|p| {
                let t = crate::io::input_file::read_text(p)?;
                if t.trim().is_empty() {
                    return Err(Error::Argument(format!(
                        "prompt file {} holds no text",
                        p.display()
                    )));
                }
                Ok((p.display().to_string(), t))
            })
            .collect::<Result<_>>()?
    };
    let (length, context_length) = (req.params.prompt_length, model.config.context_length);
    if length > context_length {
        return Err(Error::parameter(
            "length",
            format!("{length} is out of range: 1 to {context_length} (the model's context length)"),
        ));
    }
    let count = req.count.unwrap_or(texts.len());
    preflight(count, length)?;
    let tokenizer = Tokenizer::from_gguf(file)
        .context("the model's tokenizer is needed for text prompts (or give .npy token ids)")?;
    natural_prompts(&tokenizer, &texts, count, length)
}
