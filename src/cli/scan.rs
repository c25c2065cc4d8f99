//! `ropescope scan`: the streaming analyses of a model on natural and random prompts, labels per head, and an
//! output directory of `.npy`/JSON files (`fixtures/scan/FORMAT.md`).

use super::args::{read_id_file, read_text_file};
use crate::gguf::GgufFile;
use crate::io::hashing::sha256_file;
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use crate::model::Model;
use crate::numeric::{Precision, Real};
use crate::scan::format::{
    files, Meta, ModelMeta, Parameters, PromptSetMeta, Prompts, StepTime, FORMAT_VERSION,
};
use crate::scan::prompts::{natural_prompts, random_prompts, Prompt, BUILTIN_TEXTS};
use crate::scan::shard::{Shard, ShardRecord, SHARD_FORMAT_VERSION};
use crate::scan::{self, params, Analysis, Progress, ScanParams};
use crate::tokenizer::Tokenizer;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// Arguments of `ropescope scan`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file.
    model: PathBuf,
    /// Output directory. It is written whole when the scan completes (until then the previous output, if any,
    /// stays as it was); an existing non-empty directory is refused unless `--force`, and one that is or holds
    /// an input always.
    #[arg(long, default_value = "scan-out")]
    out: PathBuf,
    /// Replace an existing scan or shard directory (one with its `meta.json` or `shard.json`), whole, when the
    /// new output is complete; any other non-empty directory is still refused.
    #[arg(long)]
    force: bool,
    /// Prompt files instead of the built-in texts: UTF-8 text (tokenized with the model's tokenizer) or `.npy`
    /// token ids (used as they are).
    #[arg(long, num_args = 1..)]
    prompts: Vec<PathBuf>,
    /// Tokens per natural prompt (texts are continued cyclically up to it).
    #[arg(long, default_value_t = params::DEFAULT_PROMPT_LENGTH)]
    length: usize,
    /// Number of natural prompts (default: one per text or file); as many random prompts are made.
    #[arg(long)]
    count: Option<usize>,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    precision: Precision,
    /// Analyses, comma-separated (slash, intrinsic, rank, fourier, frequency, posym, detectors,
    /// cauchy-schwarz, cone, ablation) or `all` (every analysis of this build).
    #[arg(long, default_value = "all")]
    analyses: String,
    /// Largest slash offset Δ.
    #[arg(long, default_value_t = params::DEFAULT_DELTA_MAX)]
    delta_max: usize,
    /// κ of (κ, Δ)-slash dominance.
    #[arg(long, default_value_t = params::DEFAULT_KAPPA)]
    kappa: f64,
    /// Seed of the random prompts and of the cone sample.
    #[arg(long, default_value_t = params::DEFAULT_SEED)]
    seed: u64,
    /// Do only shard K of N (0 ≤ K < N) of the work and write it as partial results into `--out`, for
    /// `ropescope merge` (`fixtures/scan/SHARDS.md`).
    #[arg(long, value_name = "K/N")]
    shard: Option<crate::scan::shard::Shard>,
    /// Hide the progress bars.
    #[arg(long)]
    quiet: bool,
}

/// Runs `scan`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let start = Instant::now();
    let inputs = Inputs::new(std::iter::once(&args.model).chain(&args.prompts));
    let staged = StagedDir::begin(
        &args.out,
        &Staging {
            force: args.force,
            inputs: &inputs,
            records: &[Record::SCAN, Record::SHARD],
        },
    )?;
    let file = GgufFile::open(&args.model)?;
    let analyses = Analysis::parse_list(&args.analyses)?;
    if !(0.0..=1.0).contains(&args.kappa) {
        refuse!("--kappa must be between 0 and 1");
    }
    if args.length == 0 {
        refuse!("--length must be at least 1");
    }
    if args.count == Some(0) {
        refuse!("--count must be at least 1");
    }
    let params = ScanParams {
        analyses,
        delta_max: args.delta_max,
        kappa: args.kappa,
        seed: args.seed,
        ..ScanParams::default()
    };
    match args.precision {
        Precision::F32 => run_in::<f32>(&args, &file, &params, start, staged),
        Precision::F64 => run_in::<f64>(&args, &file, &params, start, staged),
    }
}

fn run_in<T: Real>(
    args: &Args,
    file: &GgufFile,
    params: &ScanParams,
    start: Instant,
    staged: StagedDir,
) -> anyhow::Result<()> {
    let model = Model::<T>::load(file).context("loading the model")?;
    let c = &model.config;
    let preflight = |count: usize, longest: usize| -> anyhow::Result<()> {
        Ok(crate::scan::memory::preflight(
            &model, params, count, longest,
        )?)
    };
    let natural = natural_set(args, file, c.context_length, &preflight)?;
    let longest = natural.iter().map(|p| p.ids.len()).max().unwrap_or(0);
    let retained = crate::scan::memory::retained_bytes(&model, longest, params);
    for p in &natural {
        model
            .validate_with_capture(&p.ids, retained, crate::scan::memory::REDUCE)
            .with_context(|| format!("prompt '{}'", p.source))?;
        if params.delta_max >= p.ids.len() {
            refuse!(
                "--delta-max ({}) must be below every prompt's length (prompt '{}' has {} tokens)",
                params.delta_max,
                p.source,
                p.ids.len()
            );
        }
    }
    let lengths: Vec<(usize, &str)> = natural
        .iter()
        .map(|p| (p.ids.len(), p.source.as_str()))
        .collect();
    crate::scan::external::check_prompt_lengths(&params.analyses, &lengths)?;
    let bos = Tokenizer::from_gguf(file).ok().and_then(|t| t.bos_id());
    let random = random_prompts(&natural, c.vocab_size, bos, params.seed);
    let ids = |ps: &[Prompt]| ps.iter().map(|p| p.ids.clone()).collect::<Vec<_>>();
    let (natural_ids, random_ids) = (ids(&natural), ids(&random));
    let bars = Bars::new(args.quiet);
    let set_meta = |name: &str, ps: &[Prompt]| PromptSetMeta {
        name: name.into(),
        count: ps.len(),
        lengths: ps.iter().map(|p| p.ids.len()).collect(),
        sources: ps.iter().map(|p| p.source.clone()).collect(),
    };
    let mut prompt_sets = vec![set_meta("natural", &natural)];
    let with_random = params.runs(Analysis::Intrinsic);
    if with_random {
        prompt_sets.push(set_meta("random", &random));
    }
    let prompts = Prompts {
        natural: natural_ids,
        random: if with_random { random_ids } else { Vec::new() },
    };
    let mut meta = Meta {
        format_version: FORMAT_VERSION,
        ropescope_version: env!("CARGO_PKG_VERSION").into(),
        model_file: args.model.display().to_string(),
        model_sha256: sha256_file(&args.model)?,
        model: ModelMeta {
            architecture: c.architecture.clone(),
            n_layers: c.n_layers,
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            value_dim: c.value_dim,
            n_chunks: c.n_chunks(),
            rope_bases: c.layers.iter().map(|l| l.rope.base).collect(),
            windows: c.layers.iter().map(|l| l.window).collect(),
            context_length: c.context_length,
            vocab_size: c.vocab_size,
        },
        precision: T::NAME.into(),
        prompt_sets,
        parameters: Parameters {
            delta_max: params.delta_max,
            kappa: params.kappa,
            low_band_max_frequency: params.low_band_max_frequency,
            high_band_min_frequency: params.high_band_min_frequency,
            sink_threshold: params.sink_threshold,
            map_size: params.map_size,
            cone_tokens: params.cone_tokens,
            seed: params.seed,
            prompt_length: args.length,
        },
        analyses: params
            .analyses
            .iter()
            .map(|a| a.name().to_string())
            .collect(),
        elapsed_seconds: 0.0,
        step_seconds: Vec::new(),
        command: std::env::args().collect(),
        complete: false,
    };
    if let Some(shard) = args.shard {
        return write_shard(&model, &prompts, params, shard, meta, start, staged, &bars);
    }
    let outcome = scan::run(&model, &prompts.natural, &prompts.random, params, &bars)?;
    meta.elapsed_seconds = start.elapsed().as_secs_f64();
    meta.step_seconds = outcome.step_seconds.clone();
    meta.complete = true;
    write_scan(&model, outcome, params, &meta, &prompts, staged, start)
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
    bars: &Bars,
) -> anyhow::Result<()> {
    let dir = staged.path();
    crate::io::write_json(&dir.join(files::PROMPTS), prompts)?;
    let tasks = scan::shard::run_shard(
        model,
        &prompts.natural,
        &prompts.random,
        params,
        shard,
        dir,
        bars,
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
    scan::shard::write_record(dir, &record)?;
    let out = staged.commit()?;
    eprintln!(
        "wrote shard {}/{} ({} tasks) to {} in {:.1} s",
        shard.index,
        shard.count,
        record.tasks.len(),
        out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Writes a whole scan's directory (`fixtures/scan/FORMAT.md`) and its report, prints the summary; `meta` is
/// complete. Used by `scan` and by `merge`. The measures are dropped once their files are written, before the
/// report reads the files back.
pub(super) fn write_scan<T: Real>(
    model: &Model<T>,
    outcome: scan::ScanOutcome,
    params: &ScanParams,
    meta: &Meta,
    prompts: &Prompts,
    staged: StagedDir,
    start: Instant,
) -> anyhow::Result<()> {
    for w in &outcome.summary.warnings {
        eprintln!("warning: {w}");
    }
    let c = &model.config;
    let title =
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
    let text = scan::report_text::render(&outcome.summary, &title);
    scan::output::write(staged.path(), model, &outcome, params, meta, prompts, &text)?;
    drop(outcome);
    crate::report::write_report(staged.path())?;
    let out = staged.commit()?;
    let report = out.join("report.html");
    print!("{text}");
    eprintln!(
        "wrote {} (report: {}) in {:.1} s",
        out.display(),
        report.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The natural prompts: built-in texts, or the given files (text or `.npy` ids). `--length` is at most
/// `context_length`, and `preflight(count, longest)` passes before the prompts are built.
fn natural_set(
    args: &Args,
    file: &GgufFile,
    context_length: usize,
    preflight: &dyn Fn(usize, usize) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Prompt>> {
    let (npy, texts): (Vec<&PathBuf>, Vec<&PathBuf>) = args
        .prompts
        .iter()
        .partition(|p| p.extension().is_some_and(|e| e == "npy"));
    if !npy.is_empty() {
        if !texts.is_empty() {
            refuse!("give prompts either as text files or as .npy token ids, not both");
        }
        let prompts = npy
            .iter()
            .map(|p| read_ids(p))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let count = args.count.unwrap_or(prompts.len());
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
                let t = read_text_file(p)?;
                if t.trim().is_empty() {
                    refuse!("prompt file {} holds no text", p.display());
                }
                Ok((p.display().to_string(), t))
            })
            .collect::<anyhow::Result<_>>()?
    };
    if args.length > context_length {
        refuse!(
            "--length {} is out of range: 1 to {context_length} (the model's context length)",
            args.length
        );
    }
    let count = args.count.unwrap_or(texts.len());
    preflight(count, args.length)?;
    let tokenizer = Tokenizer::from_gguf(file)
        .context("the model's tokenizer is needed for text prompts (or give .npy token ids)")?;
    Ok(natural_prompts(&tokenizer, &texts, count, args.length)?)
}

/// Token ids from a `.npy` file of integers.
fn read_ids(path: &Path) -> anyhow::Result<Prompt> {
    Ok(Prompt {
        source: path.display().to_string(),
        ids: read_id_file(path)?,
    })
}

/// One indicatif bar per stage on a terminal; otherwise one log line per finished stage with its time.
/// `--quiet` silences both.
pub(super) struct Bars {
    quiet: bool,
    /// stderr is not a terminal: log lines instead of bars.
    log: bool,
    current: Mutex<Option<ProgressBar>>,
    /// The running stage: name, steps, start.
    stage: Mutex<Option<(String, u64, Instant)>>,
}

impl Bars {
    pub(super) fn new(quiet: bool) -> Self {
        use std::io::IsTerminal;
        Self {
            quiet,
            log: !quiet && !std::io::stderr().is_terminal(),
            current: Mutex::new(None),
            stage: Mutex::new(None),
        }
    }
}

impl Progress for Bars {
    fn begin(&self, stage: &str, total: u64) {
        if self.quiet {
            return;
        }
        if let Ok(mut s) = self.stage.lock() {
            *s = Some((stage.to_string(), total, Instant::now()));
        }
        let bar = ProgressBar::new(total).with_message(stage.to_string());
        if let Ok(style) =
            ProgressStyle::with_template("{msg:>16} [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        if let Ok(mut c) = self.current.lock() {
            *c = Some(bar);
        }
    }
    fn set(&self, done: u64) {
        if let Ok(Some(bar)) = self.current.lock().as_deref() {
            bar.set_position(done);
        }
    }
    fn end(&self) {
        if let Ok(mut c) = self.current.lock() {
            if let Some(bar) = c.take() {
                bar.finish();
            }
        }
        if let Ok(Some((stage, total, start))) = self.stage.lock().map(|mut s| s.take()) {
            if self.log {
                eprintln!(
                    "scan: {stage} done ({total} steps) in {:.1} s",
                    start.elapsed().as_secs_f64()
                );
            }
        }
    }
}
