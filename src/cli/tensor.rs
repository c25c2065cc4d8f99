//! `ropescope tensor`: one tensor of any GGUF file, or a range of its rows, dequantized to float32 `.npy` with
//! ggml's values ([`crate::gguf::write_tensor`]).

use super::OrArgument;
use crate::gguf::{write_tensor, TensorRequest};
use std::ops::Range;
use std::path::PathBuf;

/// Arguments of `ropescope tensor`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF file, of any architecture (one cut inside its tensor data will do for the tensors wholly in it).
    file: PathBuf,
    /// The tensor's name, as the file spells it (blk.0.attn_q.weight).
    name: String,
    /// The .npy file to write: float32, shape in numpy order (ggml's dimensions reversed), written whole or not
    /// at all; never the input file.
    #[arg(long)]
    out: PathBuf,
    /// Only rows A..B (half-open) of the slowest dimension: numpy's first axis, ggml's last dimension (a
    /// matrix's rows, a 1-D tensor's elements); the other rows are not dequantized.
    #[arg(long, value_name = "A..B")]
    rows: Option<String>,
    /// Replace --out if it is an existing file.
    #[arg(long)]
    force: bool,
}

/// A `--rows` range `A..B` with `A < B`.
fn parse_rows(spec: &str) -> anyhow::Result<Range<u64>> {
    let (a, b) = spec
        .split_once("..")
        .or_argument(|| format!("--rows '{spec}' must look like A..B (rows A to B - 1)"))?;
    let index = |s: &str| {
        s.trim()
            .parse::<u64>()
            .or_argument(|| format!("--rows '{spec}': '{}' is not a row index", s.trim()))
    };
    let (a, b) = (index(a)?, index(b)?);
    if a == b {
        refuse!("--rows {spec} is empty: B must be above A");
    }
    if a > b {
        refuse!("--rows {spec} is reversed: B must be above A");
    }
    Ok(a..b)
}

/// Runs `tensor`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let rows = args.rows.as_deref().map(parse_rows).transpose()?;
    let written = write_tensor(&TensorRequest {
        file: &args.file,
        tensor: &args.name,
        rows,
        out: &args.out,
        force: args.force,
    })?;
    eprintln!(
        "wrote {} ({}, shape {:?}, rows {}..{} of {})",
        args.out.display(),
        written.ty,
        written.shape,
        written.rows.start,
        written.rows.end,
        written.n_rows
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_a_non_empty_half_open_range() {
        assert_eq!(parse_rows("2..5").unwrap(), 2..5);
        assert_eq!(parse_rows(" 0 .. 1 ").unwrap(), 0..1);
        for (bad, why) in [
            ("3", "must look like A..B"),
            ("a..4", "'a' is not a row index"),
            ("-1..4", "'-1' is not a row index"),
            ("..4", "'' is not a row index"),
            ("3..3", "is empty"),
            ("5..2", "is reversed"),
        ] {
            let err = parse_rows(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }
}
