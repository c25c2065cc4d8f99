//! `ropescope figures`: every figure of a scan directory as a standalone `.svg`, attention maps at the files'
//! full resolution.

use std::path::PathBuf;

/// Arguments of `ropescope figures`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scan output directory.
    dir: PathBuf,
    /// The directory to write the `.svg` files and `figures.json` into, whole (default: `DIR/figures`); an
    /// existing non-empty directory is refused unless `--force`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace earlier figures (a directory with their `figures.json`), whole, when the new ones are complete;
    /// any other non-empty directory is still refused.
    #[arg(long)]
    force: bool,
}

/// Runs `figures`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let out = args.out.unwrap_or_else(|| args.dir.join("figures"));
    let written = crate::report::write_figures(&args.dir, &out, args.force)?;
    println!("{} figures in {}", written.len(), out.display());
    Ok(())
}
