//! `ropescope compare-scans`: several complete scan directories side by side, as `OUT/compare.html` and
//! `OUT/compare.json` (`fixtures/scan/FORMAT.md`, "compare-scans output").

use std::path::PathBuf;

/// Arguments of `ropescope compare-scans`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Two or more complete scan directories, one column each, in this order.
    #[arg(required = true, num_args = 1..)]
    dirs: Vec<PathBuf>,
    /// Output directory, written whole when both files are complete; an existing non-empty directory is
    /// refused unless `--force`.
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing non-empty output directory (whole, when the new output is complete).
    #[arg(long)]
    force: bool,
}

/// Runs `compare-scans`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let page = crate::report::compare_scans::write_comparison(&args.dirs, &args.out, args.force)?;
    println!("{}", page.display());
    Ok(())
}
