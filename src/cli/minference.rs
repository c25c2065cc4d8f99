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
    use crate::export::minference::{GENERAL_BUDGET, SINK_BUDGET, SLASH_BUDGET};
    let path = crate::export::minference::write(&args.dir, args.out.as_deref())?;
    let b = |(v, s): (usize, usize)| format!("{v} vertical, {s} slash");
    eprintln!(
        "budgets by label (MInference's own three): sink heads {}; diagonal, previous-token and slash heads {}; \
         other heads {}",
        b(SINK_BUDGET),
        b(SLASH_BUDGET),
        b(GENERAL_BUDGET)
    );
    println!("{}", path.display());
    Ok(())
}
