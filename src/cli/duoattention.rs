//! `ropescope export-duoattention`: the scan's retrieval and streaming heads as DuoAttention's pattern directory.

use std::path::PathBuf;

/// Arguments of `ropescope export-duoattention`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scan output directory (needs the `slash` analysis).
    dir: PathBuf,
    /// The directory to write `full_attention_heads.tsv` and `config.json` into (default: `DIR/duoattention`).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `export-duoattention`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let path = crate::report::duoattention::write(&args.dir, args.out.as_deref())?;
    println!("{}", path.display());
    Ok(())
}
