//! `ropescope compare`: NMSE and max-abs per common array of two reference directories.

use crate::reference::compare::{apply_override, compare_report, default_tolerances};
use crate::Error;
use std::path::PathBuf;

/// Arguments of `ropescope compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory under test.
    a: PathBuf,
    /// Reference directory (the denominator of NMSE).
    b: PathBuf,
    /// Tolerance override `KIND=nmse:X` or `KIND=max_abs:X` (KIND: logits, attn, scores, q, k, q_pre, k_pre,
    /// v, out, ids); repeatable. Defaults: NMSE ≤ 1e-10 for logits and vectors, max-abs ≤ 1e-5 for attn.
    #[arg(long)]
    tol: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `compare`: a table (or JSON) of every common array, then a verdict line; fails with
/// [`Error::Mismatch`] when any array is over its tolerance, and refuses directories with no array in common.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut tols = default_tolerances();
    for spec in &args.tol {
        apply_override(&mut tols, spec)?;
    }
    let report = compare_report(&args.a, &args.b, &tols)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{:<22} {:<18} {:>11} {:>11} {:>11}  result",
            "file", "shape", "nmse", "max_abs", "max_ref"
        );
        for c in &report.comparisons {
            println!(
                "{:<22} {:<18} {:>11.3e} {:>11.3e} {:>11.3e}  {}",
                c.file,
                c.shape,
                c.nmse,
                c.max_abs,
                c.max_ref,
                match (c.pass, c.tolerance) {
                    (true, _) => "ok",
                    (false, None) => "NO TOLERANCE (give one with --tol)",
                    (false, Some(_)) => "OVER",
                }
            );
        }
        for f in &report.unpaired {
            println!("{f}");
        }
        println!("{}", report.verdict);
    }
    if report.pass {
        Ok(())
    } else {
        Err(Error::Mismatch(report.verdict).into())
    }
}
