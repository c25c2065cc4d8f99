//! `ropescope tokenize`: the token ids a model's own tokenizer gives a text.

use super::args::TextSource;
use crate::gguf::GgufFile;
use crate::tokenizer::Tokenizer;
use anyhow::Context;
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `ropescope tokenize`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file whose tokenizer is used.
    model: PathBuf,
    /// What to tokenize: `--text TEXT` or `--file PATH`.
    #[command(flatten)]
    source: TextSource,
    /// Print `{"ids": [...], "tokens": [...]}` instead of one `id<TAB>piece` line per token.
    #[arg(long)]
    json: bool,
    /// Add no BOS/EOS, even where the model's metadata asks for them.
    #[arg(long)]
    no_special: bool,
}

/// What `tokenize --json` prints.
#[derive(Serialize)]
struct Report<'a> {
    ids: &'a [u32],
    tokens: Vec<&'a str>,
}

/// Runs `tokenize`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(text) = args.source.read()? else {
        refuse!("give the text with --text TEXT or --file PATH (- reads stdin)");
    };
    // The tokenizer lives in the metadata: a file cut inside its tensor data serves as well as a whole one.
    let file = GgufFile::open_header(&args.model)?;
    let tokenizer =
        Tokenizer::from_gguf(&file).with_context(|| format!("{}", args.model.display()))?;
    let ids = tokenizer.encode(&text, !args.no_special)?;
    // Every id comes from the vocabulary, so every id has a piece.
    let tokens: Vec<&str> = ids.iter().filter_map(|&id| tokenizer.token(id)).collect();
    if args.json {
        let report = Report { ids: &ids, tokens };
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for (id, piece) in ids.iter().zip(tokens) {
            println!("{id}\t{}", escape_controls(piece));
        }
    }
    Ok(())
}

/// The ids of `text` under the model's own tokenizer, with the special tokens the model's metadata asks for (BOS
/// where `add_bos_token` is set).
pub(super) fn ids_of_text(file: &GgufFile, text: &str) -> anyhow::Result<Vec<u32>> {
    let tokenizer = Tokenizer::from_gguf(file)?;
    Ok(tokenizer.encode(text, true)?)
}

/// A piece with its control characters escaped (`\n`, `\t`, `\r`, `\u{..}`) and backslashes doubled, so that
/// each token stays on one line.
fn escape_controls(piece: &str) -> String {
    let mut out = String::with_capacity(piece.len());
    for c in piece.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape_controls;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            escape_controls("a\n\t\r\\\u{0}▁b"),
            "a\\n\\t\\r\\\\\\u{0}▁b"
        );
    }
}
