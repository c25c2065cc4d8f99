//! `ropescope scan`: the streaming analyses of a model on natural and random prompts, labels per head, and an
//! output directory of `.npy`/JSON files (`fixtures/scan/FORMAT.md`).

use crate::model::{packed_weight_bytes, Arithmetic};
use crate::numeric::Precision;
use crate::scan::{self, params, Analysis, Progress, ScanParams, ScanRequest, ScanSummary};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
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
    /// How the weight products are computed: `ggml` is llama.cpp's CPU arithmetic (8-bit activations before
    /// each quantized product), for heads as llama.cpp computes them.
    #[arg(long, value_enum, default_value_t = Arithmetic::Exact)]
    arithmetic: Arithmetic,
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
    /// Seed of the random prompts, the cone sample and the claims' bootstrap.
    #[arg(long, default_value_t = params::DEFAULT_SEED)]
    seed: u64,
    /// Do only shard K of N (0 ≤ K < N) of the work and write it as partial results into `--out`, for
    /// `ropescope merge` (`fixtures/scan/SHARDS.md`).
    #[arg(long, value_name = "K/N")]
    shard: Option<crate::scan::shard::Shard>,
    /// Memory (MiB) for weight matrices kept dequantized and packed between the scan's passes, the first
    /// layers' first, and at most half of the memory the pre-flight finds left; 0 dequantizes every weight tile
    /// in every product. No result depends on it.
    #[arg(long, value_name = "MIB", default_value_t = scan::DEFAULT_PACKED_WEIGHT_BYTES >> 20)]
    packed_weights: usize,
    /// Hide the progress bars.
    #[arg(long)]
    quiet: bool,
}

/// Runs `scan`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let req = ScanRequest {
        model: args.model,
        prompts: args.prompts,
        count: args.count,
        precision: args.precision,
        arithmetic: args.arithmetic,
        params: ScanParams {
            analyses: Analysis::parse_list(&args.analyses)?,
            delta_max: args.delta_max,
            kappa: args.kappa,
            seed: args.seed,
            prompt_length: args.length,
            ..ScanParams::default()
        },
        shard: args.shard,
        force: args.force,
        command: std::env::args().collect(),
        packed_weight_bytes: packed_weight_bytes(args.packed_weights)?,
    };
    let done = scan::run(&req, &args.out, &Bars::new(args.quiet))?;
    print_summary(&done);
    Ok(())
}

/// What `scan` and `merge` print when done: warnings and the "wrote" line on stderr, the ranked summary on
/// stdout.
pub(super) fn print_summary(done: &ScanSummary) {
    for w in &done.warnings {
        eprintln!("warning: {w}");
    }
    match (&done.shard, &done.report) {
        (Some((shard, tasks)), _) => eprintln!(
            "wrote shard {}/{} ({tasks} tasks) to {} in {:.1} s",
            shard.index,
            shard.count,
            done.out.display(),
            done.seconds
        ),
        (None, report) => {
            print!("{}", done.text);
            eprintln!(
                "wrote {} (report: {}) in {:.1} s",
                done.out.display(),
                report.as_deref().unwrap_or(&done.out).display(),
                done.seconds
            );
        }
    }
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
