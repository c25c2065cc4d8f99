//! `ropescope compare`: NMSE and max-abs per common array of two reference directories.

use super::OrArgument;
use crate::export::compare::{compare_dirs, default_tolerances, kind_of, Tolerance};
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

fn apply_override(
    tols: &mut std::collections::BTreeMap<String, Tolerance>,
    spec: &str,
) -> anyhow::Result<()> {
    let (kind, rest) = spec
        .split_once('=')
        .or_argument(|| format!("--tol '{spec}': expected KIND=METRIC:VALUE"))?;
    let (metric, value) = rest
        .split_once(':')
        .or_argument(|| format!("--tol '{spec}': expected KIND=METRIC:VALUE"))?;
    let value: f64 = value
        .parse()
        .or_argument(|| format!("--tol '{spec}': '{value}' is not a number"))?;
    let t = tols.entry(kind.to_string()).or_insert(Tolerance {
        nmse: None,
        max_abs: None,
    });
    match metric {
        "nmse" => t.nmse = Some(value),
        "max_abs" => t.max_abs = Some(value),
        other => refuse!("--tol '{spec}': unknown metric '{other}' (nmse or max_abs)"),
    }
    Ok(())
}

/// Runs `compare`: a table (or JSON) of every common array, then a verdict line; fails with
/// [`Error::Mismatch`] when any array is over its tolerance, and refuses directories with no array in common.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut tols = default_tolerances();
    for spec in &args.tol {
        apply_override(&mut tols, spec)?;
    }
    let (rows, only) = compare_dirs(&args.a, &args.b, &tols)?;
    if rows.is_empty() {
        refuse!("no array is present in both directories");
    }
    let failed: Vec<&str> = rows
        .iter()
        .filter(|c| !c.pass)
        .map(|c| c.file.as_str())
        .collect();
    let kinds: std::collections::BTreeSet<&str> = failed.iter().map(|f| kind_of(f)).collect();
    let verdict = if failed.is_empty() {
        format!("PASS: {} arrays within tolerance", rows.len())
    } else {
        format!(
            "FAIL: {} of {} arrays over tolerance ({})",
            failed.len(),
            rows.len(),
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        )
    };
    if args.json {
        let report = serde_json::json!({
            "pass": failed.is_empty(),
            "verdict": verdict,
            "comparisons": rows,
            "unpaired": only,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{:<22} {:<18} {:>11} {:>11} {:>11}  result",
            "file", "shape", "nmse", "max_abs", "max_ref"
        );
        for c in &rows {
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
        for f in &only {
            println!("{f}");
        }
        println!("{verdict}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::Mismatch(verdict).into())
    }
}
