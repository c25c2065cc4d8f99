//! `ropescope head`: one head on one prompt, at full resolution, as arrays, CSV tables, square figures and a
//! picture on the terminal.

use super::args::parse_rows;
use super::prompt::PromptArgs;
use crate::gguf::GgufFile;
use crate::head::write::{terminal_map, write, HeadRecord};
use crate::head::{measure, HeadRequest, DEFAULT_DELTA_MAX};
use crate::io::staged::{Record, StagedDir};
use crate::model::Model;
use crate::numeric::{Precision, Real};
use std::path::PathBuf;

/// Rows and columns of the terminal picture of the map.
const TERMINAL_SIDE: usize = 48;

/// Arguments of `ropescope head`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file.
    model: PathBuf,
    /// Layer (0-based).
    #[arg(long)]
    layer: usize,
    /// Query head (0-based).
    #[arg(long)]
    head: usize,
    /// The prompt: token ids, or a text for the model's own tokenizer.
    #[command(flatten)]
    prompt: PromptArgs,
    /// Positions of the map to keep, `A..B`, for queries and keys alike (default: the whole prompt).
    #[arg(long)]
    window: Option<String>,
    /// Largest offset Δ of the slash profile (cut to half the prompt, so that every score averages at least half
    /// of its rows).
    #[arg(long, default_value_t = DEFAULT_DELTA_MAX)]
    delta_max: usize,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F64)]
    precision: Precision,
    /// Output directory, written whole when complete; an existing non-empty directory is refused unless
    /// `--force`, and one that is or holds an input always.
    #[arg(long)]
    out: PathBuf,
    /// Replace an earlier output of `head` (a directory with its `head.json`), whole, when the new one is
    /// complete; any other non-empty directory is still refused.
    #[arg(long)]
    force: bool,
}

fn run_in<T: Real>(
    args: &Args,
    file: &GgufFile,
    ids: Vec<u32>,
    staged: StagedDir,
) -> anyhow::Result<()> {
    let model = Model::<T>::load(file)?;
    let req = HeadRequest {
        layer: args.layer,
        head: args.head,
        ids,
        window: args.window.as_deref().map(parse_rows).transpose()?,
        delta_max: args.delta_max,
    };
    let view = measure(&model, &req)?;
    let name = args
        .model
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let sha = crate::io::hashing::sha256_file(&args.model)?;
    let command: Vec<String> = std::env::args().collect();
    let record = HeadRecord {
        model: (&name, &sha),
        ids: &req.ids,
        precision: T::NAME,
        command: &command,
    };
    write(staged.path(), &view, &record)?;
    staged.commit()?;
    let (delta, score) = view.best();
    println!(
        "L{}H{} (kv {}) on {} tokens: best slash Δ = {delta} ({score:.3}), attention on key 0 {:.3}{}",
        view.layer,
        view.head,
        view.kv_head,
        view.n_tokens,
        view.sink,
        view.learned_sink
            .map_or(String::new(), |m| format!(", learned sink {m:.3}"))
    );
    println!(
        "attention, positions {}..{} (rows: queries, columns: keys; shade ∝ √attention):",
        view.window.start, view.window.end
    );
    print!("{}", terminal_map(&view, TERMINAL_SIDE));
    println!("wrote {}", args.out.display());
    Ok(())
}

/// Runs `head`; the output directory is checked and staged before anything is read.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (staged, file, ids) = super::prompt::staged_with_prompt(
        &args.model,
        &args.prompt,
        &args.out,
        args.force,
        Record::HEAD,
    )?;
    match args.precision {
        Precision::F64 => run_in::<f64>(&args, &file, ids, staged),
        Precision::F32 => run_in::<f32>(&args, &file, ids, staged),
    }
}
