//! `ropescope rope`: a model's per-layer RoPE frequencies and float64 cos/sin tables at chosen positions, as
//! `.npy` files (format: [`crate::reference::rope_tables`]).

use super::OrArgument;
use crate::gguf::GgufFile;
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use crate::model::arch;
use crate::reference::rope_tables::{write_rope_tables, TableShape};
use std::ops::Range;
use std::path::PathBuf;

/// Arguments of `ropescope rope`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file.
    model: PathBuf,
    /// Positions: a comma-separated list of positions and half-open ranges `A..B`, kept in the order given
    /// (no position twice).
    #[arg(long, default_value = "0..64")]
    positions: String,
    /// Sequence length the tables are for (decides LongRoPE's short or long factors); above every position.
    /// Default: the largest position + 1.
    #[arg(long)]
    length: Option<usize>,
    /// Output directory, written whole when complete; an existing non-empty directory is refused unless
    /// `--force`, and one that is or holds the model always.
    #[arg(long)]
    out: PathBuf,
    /// Replace existing RoPE tables (a directory with their `meta.json`), whole, when the new output is
    /// complete; any other non-empty directory is still refused.
    #[arg(long)]
    force: bool,
}

/// The comma-separated parts of a positions list, each a single position `p` (as `p..p + 1`) or a non-empty
/// half-open range `A..B`, unexpanded.
fn parse_segments(spec: &str) -> anyhow::Result<Vec<Range<usize>>> {
    if spec.trim().is_empty() {
        refuse!("no positions were given");
    }
    let number = |s: &str| -> anyhow::Result<usize> {
        s.trim()
            .parse()
            .or_argument(|| format!("'{}' is not a position", s.trim()))
    };
    spec.split(',')
        .map(|part| match part.split_once("..") {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a >= b {
                    refuse!("positions '{}' are an empty range", part.trim());
                }
                Ok(a..b)
            }
            None => {
                let p = number(part)?;
                let end = p
                    .checked_add(1)
                    .or_argument(|| "position too large".into())?;
                Ok(p..end)
            }
        })
        .collect()
}

/// Runs `rope`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let segments = parse_segments(&args.positions)?;
    let n_positions = segments
        .iter()
        .try_fold(0usize, |n, r| n.checked_add(r.len()))
        .or_argument(|| "too many positions".into())?;
    let staged = StagedDir::begin(
        &args.out,
        &Staging {
            force: args.force,
            inputs: &Inputs::new([&args.model]),
            records: &[Record::ROPE_TABLES],
        },
    )?;
    let file = GgufFile::open(&args.model)?;
    let config = arch::resolve(&file)?;
    // Refuse oversized tables before the positions are expanded.
    TableShape::of(&config, n_positions)?.check_size()?;
    let positions: Vec<usize> = segments.into_iter().flatten().collect();
    let length = match args.length {
        Some(n) => n,
        None => positions
            .iter()
            .max()
            .and_then(|m| m.checked_add(1))
            .or_argument(|| "the largest position has no length above it".into())?,
    };
    let shape = write_rope_tables(&config, &args.model, &positions, length, staged.path())?;
    let out = staged.commit()?;
    eprintln!(
        "wrote {} ({} layers, {} positions, {} chunks)",
        out.display(),
        shape.n_layers,
        shape.n_positions,
        shape.n_chunks
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_lists_mix_ranges_and_single_positions() {
        assert_eq!(
            parse_segments("0..3, 100,4095").unwrap(),
            vec![0..3, 100..101, 4095..4096]
        );
        for bad in ["", " ", "3..3", "5..2", "1,,2", "-1", "a..4", "..4"] {
            assert!(parse_segments(bad).is_err(), "{bad:?}");
        }
    }
}
