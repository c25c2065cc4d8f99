//! `ropescope train`: the training experiments of [`crate::train`], with a progress bar; learning curves and
//! final metrics as JSON, attention maps as `.npy`.

use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use crate::io::{npy, write_json};
use crate::train::canonical::{self, tasks::Task, CanonicalConfig};
use crate::train::gate::ChunkGate;
use crate::train::sdh::{self, data::EmbeddingGeometry, SdhConfig};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};

/// The experiment to run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Experiment {
    /// Slash-dominant head emergence (Demystifying the Slash Pattern).
    Sdh,
    /// Index task: output the symbol at a given position (positional).
    Index,
    /// Retrieval task: output the value bound to a query key (symbolic).
    Retrieval,
    /// Partial induction: output the value bound to the last occurrence of a key (mixed).
    Induction,
}

/// Placement of the token embeddings of the `sdh` experiment.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Embeddings {
    /// On a cone around a shared axis (the paper's condition).
    Cone,
    /// Isotropic random directions (condition broken).
    Isotropic,
}

/// Arguments of `ropescope train`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which experiment.
    experiment: Experiment,
    /// RoPE chunks the head may use, as a list of chunks and ranges (`0,3-5`; chunk 0 is the fastest).
    #[arg(long)]
    gate: Option<String>,
    /// Number of full-batch training steps (default: the experiment's documented default).
    #[arg(long)]
    steps: Option<usize>,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Token embeddings (`sdh` only).
    #[arg(long, value_enum, default_value_t = Embeddings::Cone)]
    embeddings: Embeddings,
    /// Directory for the outputs, written whole when complete; an existing non-empty directory is refused
    /// unless `--force`.
    #[arg(long)]
    out: PathBuf,
    /// Replace the outputs of an earlier experiment (a directory with their `metrics.json`), whole, when the new
    /// outputs are complete; any other non-empty directory is still refused.
    #[arg(long)]
    force: bool,
}

/// Runs `train`: the output directory is taken before training and put in place whole after it.
pub fn run(args: Args) -> anyhow::Result<()> {
    let staged = StagedDir::begin(
        &args.out,
        &Staging {
            force: args.force,
            inputs: &Inputs::default(),
            records: &[Record::TRAIN],
        },
    )?;
    let dir = staged.path();
    match args.experiment {
        Experiment::Sdh => run_sdh(&args, dir),
        Experiment::Index => run_canonical(&args, Task::Index, dir),
        Experiment::Retrieval => run_canonical(&args, Task::Retrieval, dir),
        Experiment::Induction => run_canonical(&args, Task::Induction, dir),
    }?;
    println!("outputs in {}", staged.commit()?.display());
    Ok(())
}

fn progress_bar(steps: usize, name: &str) -> ProgressBar {
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} steps, {elapsed} (eta {eta})")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_message(name.to_string());
    bar
}

fn run_sdh(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let mut config = SdhConfig {
        seed: args.seed,
        ..SdhConfig::default()
    };
    if let Some(steps) = steps_arg(args)? {
        config.steps = steps;
    }
    if let Some(spec) = &args.gate {
        config.gate = Some(gate_arg(spec, config.head_dim / 2)?);
    }
    if args.embeddings == Embeddings::Isotropic {
        config.embeddings = EmbeddingGeometry::Isotropic;
    }
    let bar = progress_bar(config.steps, "sdh");
    let outcome = sdh::run(&config, &mut |done| bar.set_position(done as u64))?;
    bar.finish();
    let r = &outcome.report;
    write_json(&dir.join("curve.json"), &r.curve).context("writing curve.json")?;
    write_map(
        dir,
        "attention_in_distribution.npy",
        config.train_len,
        &outcome.map_in_distribution,
    )?;
    write_map(
        dir,
        "attention_uniform_tokens.npy",
        config.train_len,
        &outcome.map_uniform_tokens,
    )?;
    write_map(
        dir,
        "attention_uniform_tokens_longer.npy",
        config.ood_len,
        &outcome.map_uniform_tokens_longer,
    )?;
    write_json(&dir.join("metrics.json"), r).context("writing metrics.json")?;
    println!(
        "slash score at Δ={} (max over other offsets): {:.3} ({:.3}) in distribution, {:.3} ({:.3}) on uniform tokens, \
         {:.3} ({:.3}) on uniform tokens of length {}; σ1²/Σσ² of Q {:.3}, of K {:.3}",
        config.offset,
        r.in_distribution.at_offset,
        r.in_distribution.max_other,
        r.uniform_tokens.at_offset,
        r.uniform_tokens.max_other,
        r.uniform_tokens_longer.at_offset,
        r.uniform_tokens_longer.max_other,
        config.ood_len,
        r.q_rank_one.sigma1_share,
        r.k_rank_one.sigma1_share
    );
    Ok(())
}

/// Largest `--steps`: 100 000, a hundred times the longest default (1000); every step is a full-batch pass with
/// its gradients, and the experiments' curves settle long before.
pub const MAX_TRAIN_STEPS: usize = 100_000;

fn steps_arg(args: &Args) -> anyhow::Result<Option<usize>> {
    match args.steps {
        Some(0) => refuse!("--steps must be at least 1"),
        Some(n) if n > MAX_TRAIN_STEPS => {
            refuse!("--steps {n} is out of range: 1 to {MAX_TRAIN_STEPS}")
        }
        steps => Ok(steps),
    }
}

/// The `--gate` of a head with `n_chunks` chunks.
fn gate_arg(spec: &str, n_chunks: usize) -> anyhow::Result<ChunkGate> {
    ChunkGate::parse(spec, n_chunks)
        .map_err(|e| crate::Error::Argument(format!("--gate {spec}: {e}")).into())
}

fn run_canonical(args: &Args, task: Task, dir: &Path) -> anyhow::Result<()> {
    if args.embeddings != Embeddings::Cone {
        refuse!("--embeddings applies to `sdh` only");
    }
    let mut config = CanonicalConfig {
        seed: args.seed,
        ..CanonicalConfig::for_task(task)
    };
    if let Some(steps) = steps_arg(args)? {
        config.steps = steps;
    }
    if let Some(spec) = &args.gate {
        config.gate = gate_arg(spec, config.head_dim / 2)?;
    }
    let bar = progress_bar(config.steps, task.name());
    let outcome = canonical::run(&config, &mut |done| bar.set_position(done as u64))?;
    bar.finish();
    let r = &outcome.report;
    write_json(&dir.join("curve.json"), &r.curve).context("writing curve.json")?;
    let len = config.sizes.context_len;
    write_map(
        dir,
        "attention_by_answer_position.npy",
        len,
        &outcome.attention_by_answer_position,
    )?;
    write_json(&dir.join("metrics.json"), r).context("writing metrics.json")?;
    let by_pos: Vec<String> = r
        .accuracy_by_answer_position
        .iter()
        .map(|a| format!("{a:.2}"))
        .collect();
    println!(
        "{} with chunks {} (rad/position {:?}): test accuracy {:.3} (train {:.3}); by answer position [{}]; \
         edge minus middle {:+.3}; positional score {:.3}, symbolic score {:.3}",
        task.name(),
        config.gate,
        r.gate_frequencies,
        r.test_accuracy,
        r.train_accuracy,
        by_pos.join(" "),
        r.edge_minus_middle,
        r.scores.positional,
        r.scores.symbolic
    );
    Ok(())
}

fn write_map(dir: &Path, name: &str, n: usize, data: &[f64]) -> anyhow::Result<()> {
    npy::write(&dir.join(name), &[n, n], data).with_context(|| format!("writing {name}"))
}
