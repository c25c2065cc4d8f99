//! `ropescope export-minference`: the scan's head patterns as MInference's per-layer JSON.

use std::path::PathBuf;

/// Arguments of `ropescope export-minference`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scan output directory (needs the `slash` analysis).
    dir: PathBuf,
    /// The JSON file to write (default: `DIR/minference_pattern.json`).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `export-minference`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let path = crate::export::minference::write(&args.dir, args.out.as_deref())?;
    println!("{}", path.display());
    Ok(())
}
