//! `ropescope merge`: folds the shards of a scan (`scan --shard K/N`) into the directory one unsharded scan
//! writes.

use super::scan::{print_summary, Bars};
use crate::scan::{self, MergeRequest};
use std::path::PathBuf;

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
    let req = MergeRequest {
        shards: args.shards,
        model: args.model,
        force: args.force,
        command: std::env::args().collect(),
    };
    let done = scan::merge(&req, &args.out, &Bars::new(args.quiet))?;
    print_summary(&done);
    Ok(())
}
