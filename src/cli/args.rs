//! Argument parsing shared by several subcommands.

use super::OrArgument;
use crate::io::input_file::{read_stream_capped, read_text, MAX_TEXT_BYTES};
use crate::model::Arithmetic;
use crate::numeric::Precision;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// `--precision f32|f64`: the values are [`Precision::name`], each with its line of `--help`.
impl clap::ValueEnum for Precision {
    fn value_variants<'a>() -> &'a [Self] {
        &Precision::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let help = match self {
            Precision::F32 => "Single precision: fast",
            Precision::F64 => "Double precision: every operation in f64 (the golden reference)",
        };
        Some(clap::builder::PossibleValue::new(self.name()).help(help))
    }
}

/// `--arithmetic exact|ggml`: the values are [`Arithmetic::name`], each with its line of `--help`.
impl clap::ValueEnum for Arithmetic {
    fn value_variants<'a>() -> &'a [Self] {
        &Arithmetic::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let help = match self {
            Arithmetic::Exact => "The dequantized weights times the activations, unrounded",
            Arithmetic::Ggml => {
                "llama.cpp's CPU arithmetic (f32 only): activations quantized to 8 bits before each \
                 quantized product, integer block dot products, ggml's float16 GELU table"
            }
        };
        Some(clap::builder::PossibleValue::new(self.name()).help(help))
    }
}

/// A text given on the command line (`--text`) or read from a file (`--file`); at most one of the two.
#[derive(clap::Args, Debug)]
#[group(multiple = false)]
pub struct TextSource {
    /// The text itself, exactly as given.
    #[arg(long)]
    pub text: Option<String>,
    /// A UTF-8 text file, taken exactly as it is (a final newline is tokenized too); `-` reads stdin.
    #[arg(long)]
    pub file: Option<PathBuf>,
}

impl TextSource {
    /// The text, or `None` when neither flag was given.
    pub fn read(&self) -> anyhow::Result<Option<String>> {
        match (&self.text, &self.file) {
            (Some(text), _) => Ok(Some(text.clone())),
            (None, Some(path)) => read_text_file(path).map(Some),
            (None, None) => Ok(None),
        }
    }
}

/// The UTF-8 text of `path` (`-`: stdin), a regular file of at most [`MAX_TEXT_BYTES`].
pub fn read_text_file(path: &Path) -> anyhow::Result<String> {
    if path != Path::new("-") {
        return Ok(read_text(path)?);
    }
    let bytes = read_stream_capped(
        std::io::stdin().lock(),
        "stdin",
        MAX_TEXT_BYTES,
        "a text file",
    )?;
    String::from_utf8(bytes).or_argument(|| format!("{} is not UTF-8 text", path.display()))
}

/// `all` or a comma-separated list of layer indices, each below `n_layers`.
pub fn parse_layers(spec: &str, n_layers: usize) -> anyhow::Result<Vec<usize>> {
    if spec == "all" {
        return Ok((0..n_layers).collect());
    }
    let mut layers = Vec::new();
    for part in spec.split(',') {
        let l: usize = part
            .trim()
            .parse()
            .or_argument(|| format!("'{part}' is not a layer index"))?;
        if l >= n_layers {
            refuse!("layer {l} does not exist (the model has {n_layers} layers)");
        }
        if !layers.contains(&l) {
            layers.push(l);
        }
    }
    layers.sort_unstable();
    Ok(layers)
}

/// A half-open range `A..B` with `A < B`.
pub fn parse_rows(spec: &str) -> anyhow::Result<Range<usize>> {
    let (a, b) = spec
        .split_once("..")
        .or_argument(|| format!("rows '{spec}' must look like A..B"))?;
    let a: usize = a
        .trim()
        .parse()
        .or_argument(|| format!("'{a}' is not a row index"))?;
    let b: usize = b
        .trim()
        .parse()
        .or_argument(|| format!("'{b}' is not a row index"))?;
    if a >= b {
        refuse!("rows '{spec}' are empty");
    }
    Ok(a..b)
}
