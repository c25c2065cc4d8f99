//! Argument parsing shared by several subcommands.

use anyhow::{bail, Context};
use std::ops::Range;

/// Arithmetic precision of a run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Single precision: fast.
    F32,
    /// Double precision: every operation in f64 (the golden reference).
    F64,
}

/// `all` or a comma-separated list of layer indices, each below `n_layers`.
pub fn parse_layers(spec: &str, n_layers: usize) -> anyhow::Result<Vec<usize>> {
    if spec == "all" {
        return Ok((0..n_layers).collect());
    }
    let mut layers = Vec::new();
    for part in spec.split(',') {
        let l: usize = part
            .trim()
            .parse()
            .with_context(|| format!("'{part}' is not a layer index"))?;
        if l >= n_layers {
            bail!("layer {l} does not exist (the model has {n_layers} layers)");
        }
        if !layers.contains(&l) {
            layers.push(l);
        }
    }
    layers.sort_unstable();
    Ok(layers)
}

/// A half-open range `A..B` with `A < B`.
pub fn parse_rows(spec: &str) -> anyhow::Result<Range<usize>> {
    let (a, b) = spec
        .split_once("..")
        .with_context(|| format!("rows '{spec}' must look like A..B"))?;
    let a: usize = a
        .trim()
        .parse()
        .with_context(|| format!("'{a}' is not a row index"))?;
    let b: usize = b
        .trim()
        .parse()
        .with_context(|| format!("'{b}' is not a row index"))?;
    if a >= b {
        bail!("rows '{spec}' are empty");
    }
    Ok(a..b)
}
