//! `ropescope figures`: every figure of a scan directory as a standalone `.svg`, attention maps at the files'
//! full resolution.

use std::path::PathBuf;

/// Arguments of `ropescope figures`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scan output directory.
    dir: PathBuf,
    /// Where to write the `.svg` files (default: `DIR/figures`).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `figures`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let out = args.out.unwrap_or_else(|| args.dir.join("figures"));
    let written = crate::report::write_figures(&args.dir, &out)?;
    println!("{} figures in {}", written.len(), out.display());
    Ok(())
}
