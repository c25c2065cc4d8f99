//! A command's prompt, given as token ids or as text for the model's own tokenizer, and its output directory
//! staged before the model or the prompt is read (`reference`, `head`).

use super::args::TextSource;
use super::OrArgument;
use crate::gguf::GgufFile;
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use std::path::Path;

/// A prompt on the command line: `--ids`, or `--text` / `--file` for the model's own tokenizer.
#[derive(clap::Args, Debug)]
pub(super) struct PromptArgs {
    /// Token ids: a comma-separated list (`1,2,3`) or a `.npy` file of integers.
    #[arg(long, conflicts_with_all = ["text", "file"])]
    ids: Option<String>,
    /// Or a text (`--text TEXT`, `--file PATH`) for the model's own tokenizer (BOS added as the model specifies).
    #[command(flatten)]
    source: TextSource,
}

/// Token ids from a comma-separated list or a `.npy` file of integers (any path that exists, a link to nothing
/// included, is read as one).
pub(super) fn read_ids(spec: &str) -> anyhow::Result<Vec<u32>> {
    let to_u32 =
        |v: i64| u32::try_from(v).or_argument(|| format!("token id {v} is not a valid id"));
    if spec.ends_with(".npy") || Path::new(spec).symlink_metadata().is_ok() {
        return Ok(crate::io::token_ids::read_file(Path::new(spec))?);
    }
    if spec.contains(std::path::MAIN_SEPARATOR) {
        refuse!("{spec}: no such file (and not a comma-separated list of token ids)");
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
fn prompt_ids(file: &GgufFile, prompt: &PromptArgs) -> anyhow::Result<Vec<u32>> {
    let source = &prompt.source;
    Ok(match (prompt.ids.as_deref(), source.read()?) {
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

/// Stages `out` (refusing it where it is or holds the model, a prompt file or another command's output, as
/// `record` says), then opens the model and reads the prompt: `--ids` as given, or the text tokenized.
pub(super) fn staged_with_prompt(
    model: &Path,
    prompt: &PromptArgs,
    out: &Path,
    force: bool,
    record: Record,
) -> anyhow::Result<(StagedDir, GgufFile, Vec<u32>)> {
    let inputs = Inputs::new(
        [Some(model), prompt.source.file.as_deref()]
            .into_iter()
            .flatten()
            .chain(prompt.ids.as_deref().map(Path::new)),
    );
    let staged = StagedDir::begin(
        out,
        &Staging {
            force,
            inputs: &inputs,
            records: &[record],
        },
    )?;
    let file = GgufFile::open(model)?;
    let ids = prompt_ids(&file, prompt)?;
    Ok((staged, file, ids))
}
