//! `ropescope reference`: the golden reference of a forward pass, as `.npy` files.

use super::args::{parse_layers, parse_rows, TextSource};
use super::OrArgument;
use crate::gguf::GgufFile;
use crate::io::inputs::Inputs;
use crate::io::npy::NpyElement;
use crate::io::staged::{Record, StagedDir, Staging};
use crate::model::Model;
use crate::numeric::{Precision, Real};
use crate::reference::write::{write_reference, ReferenceRequest};
use std::path::{Path, PathBuf};

/// Arguments of `ropescope reference`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file.
    model: PathBuf,
    /// Token ids: a comma-separated list (`1,2,3`) or a `.npy` file of integers.
    #[arg(long, conflicts_with_all = ["text", "file"])]
    ids: Option<String>,
    /// Or a text (`--text TEXT`, `--file PATH`) for the model's own tokenizer (BOS added as the model specifies).
    #[command(flatten)]
    source: TextSource,
    /// Layers to capture: `all` or a comma-separated list.
    #[arg(long, default_value = "all")]
    layers: String,
    /// Query rows of attention and logits, `A..B` (default: every position).
    #[arg(long)]
    rows: Option<String>,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F64)]
    precision: Precision,
    /// Output directory, written whole when complete; an existing non-empty directory is refused unless
    /// `--force`, and one that is or holds an input always.
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing reference directory (one with its `meta.json`), whole, when the new output is
    /// complete; any other non-empty directory is still refused.
    #[arg(long)]
    force: bool,
}

/// Token ids from a comma-separated list or a `.npy` file of integers (any path that exists, a link to nothing
/// included, is read as one).
pub(super) fn read_ids(spec: &str) -> anyhow::Result<Vec<u32>> {
    let to_u32 =
        |v: i64| u32::try_from(v).or_argument(|| format!("token id {v} is not a valid id"));
    if spec.ends_with(".npy") || Path::new(spec).symlink_metadata().is_ok() {
        return Ok(crate::io::token_ids::read_file(Path::new(spec))?);
    }
    spec.split(',')
        .map(|s| {
            s.trim()
                .parse::<i64>()
                .or_argument(|| format!("'{s}' is not a token id"))
                .and_then(to_u32)
        })
        .collect()
}

/// The prompt's ids: `--ids` as given, or the text of `--text` / `--file` tokenized by the model's own tokenizer.
pub(super) fn prompt_ids(
    file: &GgufFile,
    ids: Option<&str>,
    source: &TextSource,
) -> anyhow::Result<Vec<u32>> {
    Ok(match (ids, source.read()?) {
        (Some(spec), _) => read_ids(spec)?,
        (None, Some(text)) if text.is_empty() => match &source.file {
            Some(path) => refuse!(
                "{} holds no text: the prompt would be empty",
                path.display()
            ),
            None => refuse!("--text is empty: the prompt would be empty"),
        },
        (None, Some(text)) => super::tokenize::ids_of_text(file, &text)?,
        (None, None) => refuse!("give the prompt with --ids, --text TEXT or --file PATH"),
    })
}

fn run_in<T: Real + NpyElement>(
    args: &Args,
    file: &GgufFile,
    ids: &[u32],
    staged: StagedDir,
) -> anyhow::Result<()> {
    let model = Model::<T>::load(file)?;
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
    let inputs = Inputs::new(
        [Some(args.model.as_path()), args.source.file.as_deref()]
            .into_iter()
            .flatten()
            .chain(args.ids.as_deref().map(Path::new)),
    );
    let staged = StagedDir::begin(
        &args.out,
        &Staging {
            force: args.force,
            inputs: &inputs,
            records: &[Record::REFERENCE],
        },
    )?;
    let file = GgufFile::open(&args.model)?;
    let ids = prompt_ids(&file, args.ids.as_deref(), &args.source)?;
    match args.precision {
        Precision::F64 => run_in::<f64>(&args, &file, &ids, staged),
        Precision::F32 => run_in::<f32>(&args, &file, &ids, staged),
    }
}
