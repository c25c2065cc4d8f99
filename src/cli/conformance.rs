//! `ropescope conformance`: another engine's dump judged stage by stage against the error budget of its
//! precision, with the kind of mistake behind any stage beyond it.

use super::prompt::read_ids;
use crate::conformance::budget::Precision;
use crate::conformance::stages::{check_dump, StageReport};
use crate::gguf::GgufFile;
use crate::io::inputs::Inputs;
use crate::io::{check_output_file, write_json};
use crate::model::Model;
use crate::Error;
use std::path::{Path, PathBuf};

/// Arguments of `ropescope conformance`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Judge each RoPE and attention stage of a dump (reference layout) against the budget of its precision:
    /// post-RoPE q/k from the dump's own pre-RoPE q/k, attention from its own q and k.
    Check(CheckArgs),
}

/// Arguments of `ropescope conformance check`.
#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// The GGUF model file the other engine ran.
    model: PathBuf,
    /// The other engine's dump: a directory in the reference layout (`q_pre_L{l}.npy`, `q_L{l}.npy`,
    /// `k_pre_L{l}.npy`, `k_L{l}.npy`, `attn_L{l}.npy`; `meta.json` with `rows` when the attention holds some
    /// rows only), float32 or float64.
    #[arg(long)]
    dump: PathBuf,
    /// Token ids: a comma-separated list or a `.npy` file (default: the dump's `ids.npy`).
    #[arg(long)]
    ids: Option<String>,
    /// The engine's working precision, which sets the budget: f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// Also write the report as JSON to this file (`-`: standard output, instead of the table).
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Runs a `conformance` subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Check(args) => check(args),
    }
}

/// One line per stage, then the verdict.
pub(super) fn print_table(report: &StageReport, dump: &Path) {
    println!(
        "{} judged stage by stage ({} tokens, attention rows {}..{}, budget of {}):",
        dump.display(),
        report.n_tokens,
        report.rows[0],
        report.rows[1],
        report.precision
    );
    println!("{:<6} {:<6} result", "layer", "stage");
    for layer in &report.layers {
        for (stage, text, _) in layer.lines() {
            println!("{:<6} {:<6} {text}", layer.layer, stage);
        }
    }
    println!("{}", report.verdict);
}

/// Runs `conformance check`: checks the `--json` file, loads the model in float64, judges the dump, prints the
/// table (and writes the JSON), and fails with [`Error::Mismatch`] when a stage is beyond its budget.
fn check(args: CheckArgs) -> anyhow::Result<()> {
    let ids_spec = match &args.ids {
        Some(spec) => spec.clone(),
        None => {
            let path = args.dump.join("ids.npy");
            if !path.exists() {
                return Err(Error::Argument(format!(
                    "{} has no ids.npy: give the prompt's token ids with --ids",
                    args.dump.display()
                ))
                .into());
            }
            path.display().to_string()
        }
    };
    if let Some(json) = args.json.as_deref().filter(|p| p.as_os_str() != "-") {
        let inputs = Inputs::new([args.model.as_path(), &args.dump, Path::new(&ids_spec)]);
        check_output_file(json, &inputs)?;
    }
    let ids = read_ids(&ids_spec)?;
    let file = GgufFile::open(&args.model)?;
    let model = Model::<f64>::load(&file)?;
    let report = check_dump(&model, &ids, &args.dump, args.precision)?;
    if report.stages == 0 {
        return Err(Error::Argument(format!(
            "{} holds no stage to judge: a stage needs q_pre_L{{l}}.npy with q_L{{l}}.npy, k_pre with k, or q and \
             k with attn_L{{l}}.npy",
            args.dump.display()
        ))
        .into());
    }
    match &args.json {
        Some(p) if p.as_os_str() == "-" => {
            println!("{}", serde_json::to_string_pretty(&report)?)
        }
        Some(p) => {
            write_json(p, &report)?;
            print_table(&report, &args.dump);
        }
        None => print_table(&report, &args.dump),
    }
    if report.within {
        Ok(())
    } else {
        Err(Error::Mismatch(report.verdict).into())
    }
}
