//! `ropescope export-notebook`: a Jupyter notebook that reproduces a scan's figures with numpy and matplotlib.

use std::path::PathBuf;

/// Arguments of `ropescope export-notebook`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scan output directory.
    dir: PathBuf,
    /// The notebook to write (default: `DIR/ropescope.ipynb`); it finds the scan by relative path.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs `export-notebook`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let path = crate::export::notebook::write(&args.dir, args.out.as_deref())?;
    println!("{}", path.display());
    Ok(())
}
