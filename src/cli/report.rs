//! `ropescope report`: the self-contained `report.html` of a scan directory.

use std::path::PathBuf;

/// Arguments of `ropescope report`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The scan output directory; the page is written into it as `report.html`.
    dir: PathBuf,
}

/// Runs `report`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let path = crate::report::write_report(&args.dir)?;
    println!("{}", path.display());
    Ok(())
}
