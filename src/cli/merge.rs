//! `ropescope merge`: folds the shards of a scan (`scan --shard K/N`) into the directory one unsharded scan
//! writes.

use super::scan::{write_scan, Bars};
use crate::gguf::GgufFile;
use crate::io::hashing::sha256_file;
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use crate::model::Model;
use crate::numeric::{Precision, Real};
use crate::scan::shard::{self, ShardDir};
use anyhow::Context;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `ropescope merge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The shard directories, all N of them, in any order.
    #[arg(required = true, num_args = 1..)]
    shards: Vec<PathBuf>,
    /// Output directory: a scan directory as `scan` writes it (written whole when complete).
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing scan directory (one with its `meta.json`), whole, when the new output is complete;
    /// any other non-empty directory is still refused, and one that is or holds an input always.
    #[arg(long)]
    force: bool,
    /// The model file, when it is not where the shards recorded it (its sha256 must match theirs).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Hide the progress bars.
    #[arg(long)]
    quiet: bool,
}

/// Runs `merge`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let start = Instant::now();
    let shards = shard::open_shards(&args.shards)?;
    let meta = &shards[0].record.meta;
    let model_path = args
        .model
        .clone()
        .unwrap_or_else(|| PathBuf::from(&meta.model_file));
    let inputs = Inputs::new(args.shards.iter().chain([&model_path]));
    let staged = StagedDir::begin(
        &args.out,
        &Staging {
            force: args.force,
            inputs: &inputs,
            records: &[Record::SCAN],
        },
    )?;
    let sha = sha256_file(&model_path).context("the shards' model")?;
    if sha != meta.model_sha256 {
        return Err(crate::Error::BadData(format!(
            "{} is not the model the shards scanned (sha256 {sha}, theirs {})",
            model_path.display(),
            meta.model_sha256
        ))
        .into());
    }
    let file = GgufFile::open(&model_path)?;
    match Precision::from_name(&meta.precision) {
        Some(Precision::F32) => merge_in::<f32>(&args, &file, &shards, start, staged),
        Some(Precision::F64) => merge_in::<f64>(&args, &file, &shards, start, staged),
        None => Err(crate::Error::BadData(format!(
            "{}: unknown precision '{}' (expected f32 or f64)",
            shards[0].dir.display(),
            meta.precision
        ))
        .into()),
    }
}

fn merge_in<T: Real>(
    args: &Args,
    file: &GgufFile,
    shards: &[ShardDir],
    start: Instant,
    staged: StagedDir,
) -> anyhow::Result<()> {
    let model = Model::<T>::load(file).context("loading the model")?;
    let outcome = shard::merge(&model, shards, &Bars::new(args.quiet))?;
    let mut meta = shards[0].record.meta.clone();
    meta.elapsed_seconds = shards
        .iter()
        .map(|s| s.record.meta.elapsed_seconds)
        .sum::<f64>()
        + start.elapsed().as_secs_f64();
    meta.step_seconds = outcome.step_seconds.clone();
    meta.command = std::env::args().collect();
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
