//! `ropescope diverge`: where another engine's per-layer tensors first leave ropescope's float64 pass (or, with
//! `--arithmetic ggml`, its float32 pass in llama.cpp's arithmetic).

use super::prompt::read_ids;
use crate::conformance::budget::Precision;
use crate::conformance::stages::{check_dump, StageReport};
use crate::gguf::GgufFile;
use crate::io::inputs::Inputs;
use crate::io::{check_output_file, write_json};
use crate::model::{Arithmetic, Model};
use crate::reference::compare::{apply_override, default_tolerances};
use crate::reference::diverge::{describe, diverge, DivergeReport};
use crate::Error;
use std::path::{Path, PathBuf};

/// Arguments of `ropescope diverge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file.
    model: PathBuf,
    /// Token ids: a comma-separated list (`1,2,3`) or a `.npy` file of integers (such as the dump's `ids.npy`).
    #[arg(long)]
    ids: String,
    /// The other engine's dump: a directory in the reference layout (`{kind}_L{layer}.npy`, `logits.npy`),
    /// float32 or float64.
    #[arg(long)]
    against: PathBuf,
    /// Tolerance override `KIND=nmse:X` or `KIND=max_abs:X` (KIND: q_pre, k_pre, v, q, k, scores, attn, out,
    /// hidden, logits); repeatable. Defaults: NMSE ≤ 1e-10, attn max-abs ≤ 1e-5.
    #[arg(long = "tol", visible_alias = "tolerance")]
    tol: Vec<String>,
    /// The engine's working precision, for the budgets of the stage-by-stage check (f32, bf16, f16).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// The pass the dump is compared with: `exact` (float64), or `ggml` (float32 in llama.cpp's CPU arithmetic,
    /// for llama.cpp's dumps: what remains is what its quantized activations do not explain).
    #[arg(long, value_enum, default_value_t = Arithmetic::Exact)]
    arithmetic: Arithmetic,
    /// Also write the report as JSON to this file (`-`: standard output, instead of the table).
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The JSON report: the divergence, and each RoPE and attention stage judged from the dump's own inputs
/// (`stages`, `null` when the dump holds none).
#[derive(serde::Serialize)]
struct Report<'a> {
    #[serde(flatten)]
    diverge: &'a DivergeReport,
    stages: Option<&'a StageReport>,
}

/// `h0 1.2e-15  h1 3.4e-15  ...`: one value per head.
fn per_head(values: impl Iterator<Item = f64>) -> String {
    values
        .enumerate()
        .map(|(h, v)| format!("h{h} {v:.1e}"))
        .collect::<Vec<_>>()
        .join("  ")
}

/// The report as a table in computation order, per-head lines under each tensor with heads, and the files
/// skipped (the verdict is printed last, after the stage-by-stage table).
fn print_table(report: &DivergeReport, against: &std::path::Path, arithmetic: Arithmetic) {
    let pass = match arithmetic {
        Arithmetic::Exact => "float64",
        Arithmetic::Ggml => "float32 in ggml's arithmetic",
    };
    println!(
        "ropescope {pass} against {}: {} tokens, layers {}",
        against.display(),
        report.n_tokens,
        report
            .layers
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "{:<16} {:<14} {:>10} {:>10} {:>10}  {:<16} {:<24} result",
        "tensor", "shape", "nmse", "max_abs", "max_ref", "worst (h,row,col)", "tolerance"
    );
    for (i, t) in report.tensors.iter().enumerate() {
        let w = &t.worst;
        let at = match w.head {
            Some(h) => format!("{h},{},{}", w.row, w.col),
            None => format!("-,{},{}", w.row, w.col),
        };
        let result = match (t.crosses, report.first == Some(i)) {
            (false, _) => "ok",
            (true, true) => "OVER  <- first divergence",
            (true, false) => "OVER",
        };
        println!(
            "{:<16} {:<14} {:>10.3e} {:>10.3e} {:>10.3e}  {:<16} {:<24} {result}",
            t.file.trim_end_matches(".npy"),
            format!("{:?}", t.shape),
            t.nmse,
            t.max_abs,
            t.max_ref,
            at,
            describe(&t.tolerance),
        );
        if !t.heads.is_empty() {
            println!("    nmse    {}", per_head(t.heads.iter().map(|h| h.nmse)));
            println!(
                "    max_abs {}",
                per_head(t.heads.iter().map(|h| h.max_abs))
            );
        }
    }
    if !report.missing.is_empty() {
        println!("not in the dump (skipped): {}", report.missing.join(", "));
    }
    if !report.ignored.is_empty() {
        println!("not of the layout (ignored): {}", report.ignored.join(", "));
    }
}

/// Runs `diverge`: checks the `--json` file (not an input, writable), loads the model in float64, compares the
/// dump with its pass, prints the table (and writes the JSON), and fails with [`Error::Mismatch`] when a tensor
/// is over its tolerance.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(json) = args.json.as_deref().filter(|p| p.as_os_str() != "-") {
        let inputs = Inputs::new([args.model.as_path(), &args.against, Path::new(&args.ids)]);
        check_output_file(json, &inputs)?;
    }
    let mut tols = default_tolerances();
    for spec in &args.tol {
        apply_override(&mut tols, spec)?;
    }
    let ids = read_ids(&args.ids)?;
    let file = GgufFile::open(&args.model)?;
    let model = Model::<f64>::load(&file)?;
    let report = match args.arithmetic {
        Arithmetic::Exact => diverge(&model, &ids, &args.against, &tols)?,
        Arithmetic::Ggml => {
            let ggml = Model::<f32>::load_with(&file, Arithmetic::Ggml)?;
            diverge(&ggml, &ids, &args.against, &tols)?
        }
    };
    let stages = check_dump(&model, &ids, &args.against, args.precision)?;
    let stages = (stages.stages > 0).then_some(&stages);
    let print = || {
        print_table(&report, &args.against, args.arithmetic);
        if let Some(stages) = stages {
            println!();
            super::conformance::print_table(stages, &args.against);
        }
        println!("{}", report.verdict);
    };
    let full = Report {
        diverge: &report,
        stages,
    };
    match &args.json {
        Some(p) if p.as_os_str() == "-" => {
            println!("{}", serde_json::to_string_pretty(&full)?)
        }
        Some(p) => {
            write_json(p, &full)?;
            print();
        }
        None => print(),
    }
    if report.pass {
        Ok(())
    } else {
        Err(Error::Mismatch(report.verdict).into())
    }
}
