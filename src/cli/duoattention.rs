//! `ropescope export-duoattention`: the scan's retrieval and streaming heads as DuoAttention's pattern directory.

use std::path::PathBuf;

/// Arguments of `ropescope export-duoattention`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scan output directory (needs the `slash` analysis).
    dir: PathBuf,
    /// The directory to write `full_attention_heads.tsv` and `config.json` into, whole (default:
    /// `DIR/duoattention`); an existing non-empty directory is refused unless `--force`.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Replace earlier patterns (a directory with their `config.json`), whole, when the new ones are complete;
    /// any other non-empty directory is still refused.
    #[arg(long)]
    force: bool,
}

/// Runs `export-duoattention`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let path = crate::export::duoattention::write(&args.dir, args.out.as_deref(), args.force)?;
    eprintln!(
        "each key/value head's value: 1 − its local recall, the share of its query heads' attention beyond key 0 \
         and the last Δmax + 1 keys (the window in config.json); 0 streams, 1 keeps the full cache"
    );
    println!("{}", path.display());
    Ok(())
}
