//! `ropescope reference`: the golden reference of a forward pass, as `.npy` files.

use super::args::{parse_layers, parse_rows};
use super::prompt::{staged_with_prompt, PromptArgs};
use crate::gguf::GgufFile;
use crate::io::npy::NpyElement;
use crate::io::staged::{Record, StagedDir};
use crate::model::{Arithmetic, Model};
use crate::numeric::{Precision, Real};
use crate::reference::write::{write_reference, ReferenceRequest};
use std::path::PathBuf;

/// Arguments of `ropescope reference`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file.
    model: PathBuf,
    /// The prompt: token ids, or a text for the model's own tokenizer.
    #[command(flatten)]
    prompt: PromptArgs,
    /// Layers to capture: `all` or a comma-separated list.
    #[arg(long, default_value = "all")]
    layers: String,
    /// Query rows of attention and logits, `A..B` (default: every position).
    #[arg(long)]
    rows: Option<String>,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F64)]
    precision: Precision,
    /// How the weight products are computed (`ggml` needs `--precision f32`).
    #[arg(long, value_enum, default_value_t = Arithmetic::Exact)]
    arithmetic: Arithmetic,
    /// Output directory, written whole when complete; an existing non-empty directory is refused unless
    /// `--force`, and one that is or holds an input always.
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing reference directory (one with its `meta.json`), whole, when the new output is
    /// complete; any other non-empty directory is still refused.
    #[arg(long)]
    force: bool,
}

fn run_in<T: Real + NpyElement>(
    args: &Args,
    file: &GgufFile,
    ids: &[u32],
    staged: StagedDir,
) -> anyhow::Result<()> {
    let model = Model::<T>::load_with(file, args.arithmetic)?;
    let layers = parse_layers(&args.layers, model.config.n_layers)?;
    let rows = match &args.rows {
        Some(r) => parse_rows(r)?,
        None => 0..ids.len(),
    };
    model.validate(ids)?;
    write_reference(
        &model,
        &args.model,
        ids,
        &ReferenceRequest {
            layers,
            rows,
            command: std::env::args().collect(),
        },
        staged.path(),
    )?;
    staged.commit()?;
    eprintln!(
        "wrote {} ({} tokens, {})",
        args.out.display(),
        ids.len(),
        T::NAME
    );
    Ok(())
}

/// Runs `reference`; the output directory is checked and staged before anything is read.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (staged, file, ids) = staged_with_prompt(
        &args.model,
        &args.prompt,
        &args.out,
        args.force,
        Record::REFERENCE,
    )?;
    match args.precision {
        Precision::F64 => run_in::<f64>(&args, &file, &ids, staged),
        Precision::F32 => run_in::<f32>(&args, &file, &ids, staged),
    }
}
