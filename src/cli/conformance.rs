//! `ropescope conformance`: another engine's dump judged stage by stage against the error budget of its
//! precision, with the kind of mistake behind any stage beyond it.

use super::prompt::read_ids;
use crate::conformance::budget::Precision;
use crate::conformance::matrix::{self, run_dumps, ConformanceReport, Verdict};
use crate::conformance::stages::{check_dump, StageReport};
use crate::conformance::vectors::{read_manifest, sources_in, write_vectors};
use crate::gguf::GgufFile;
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
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
    /// Write golden vectors: for each model of a converted-fixtures directory, the model, the prompt, every stage
    /// of the float64 pass and the RoPE tables, with a manifest naming each stage in HF's and llama.cpp's terms.
    Vectors(VectorsArgs),
    /// Judge an engine's dumps of every family of a vectors directory: one verdict per family and configuration
    /// (exact, within budget, degraded, wrong, refused), as conformance.json and conformance.html.
    Run(RunArgs),
}

/// Arguments of `ropescope conformance vectors`.
#[derive(clap::Args, Debug)]
struct VectorsArgs {
    /// The models: a directory in the layout of the repository's `fixtures/converted` (one subdirectory per model
    /// with `model.gguf` and case directories holding `ids.npy`).
    #[arg(long, default_value = "fixtures/converted")]
    from: PathBuf,
    /// Output directory (written whole, or not at all).
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing output of `conformance vectors`.
    #[arg(long)]
    force: bool,
}

/// Arguments of `ropescope conformance run`.
#[derive(clap::Args, Debug)]
struct RunArgs {
    /// A directory written by `conformance vectors`.
    #[arg(long)]
    vectors: PathBuf,
    /// The engine: `dumps:DIR`, its dumps in the reference layout as `DIR/FAMILY/` or `DIR/FAMILY/CONFIG/`
    /// (each with `ids.npy`; `meta.json` may state `dtype` and `rows`, or `refused` with the reason).
    #[arg(long)]
    engine: String,
    /// The precision of a dump whose `meta.json` states no `dtype`: f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// Output directory: conformance.json and conformance.html.
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing output of `conformance run`.
    #[arg(long)]
    force: bool,
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
        Command::Vectors(args) => vectors(args),
        Command::Run(args) => run_matrix(args),
    }
}

/// Runs `conformance vectors`: stages the output, writes every model's vectors, commits.
fn vectors(args: VectorsArgs) -> anyhow::Result<()> {
    let sources = sources_in(&args.from)?;
    let staged = StagedDir::begin(
        &args.out,
        &Staging {
            force: args.force,
            inputs: &Inputs::new([args.from.as_path()]),
            records: &[Record::CONFORMANCE_VECTORS],
        },
    )?;
    let manifest = write_vectors(&sources, staged.path())?;
    let out = staged.commit()?;
    eprintln!(
        "wrote {}: {} families, manifest.json",
        out.display(),
        manifest.families.len()
    );
    Ok(())
}

/// Runs `conformance run`: judges every family's dumps, writes conformance.json and conformance.html, prints
/// the matrix; fails with [`Error::Mismatch`] when a cell is degraded or wrong.
fn run_matrix(args: RunArgs) -> anyhow::Result<()> {
    let root = match args.engine.split_once(':') {
        Some(("dumps", dir)) if !dir.is_empty() => PathBuf::from(dir),
        _ => {
            return Err(Error::Argument(format!(
                "--engine {}: the engines this version runs are `dumps:DIR` (another engine's dumps in the \
                 reference layout); HF transformers' and llama.cpp's are written by \
                 fixtures/conformance/hf_dumps.py and llamacpp_dumps.py",
                args.engine
            ))
            .into())
        }
    };
    let manifest = read_manifest(&args.vectors)?;
    let staged = StagedDir::begin(
        &args.out,
        &Staging {
            force: args.force,
            inputs: &Inputs::new([args.vectors.as_path(), root.as_path()]),
            records: &[Record::CONFORMANCE],
        },
    )?;
    let cells = run_dumps(&args.vectors, &manifest, &root, args.precision)?;
    let report = ConformanceReport {
        format: matrix::FORMAT,
        format_version: matrix::FORMAT_VERSION,
        producer: format!("ropescope {}", env!("CARGO_PKG_VERSION")),
        engine: args.engine.clone(),
        cells,
        complete: true,
    };
    crate::io::atomic::write_atomic(&staged.path().join("conformance.html"), |w| {
        w.write_all(matrix::html(&report).as_bytes())
    })?;
    write_json(&staged.path().join("conformance.json"), &report)?;
    let out = staged.commit()?;
    println!(
        "{:<24} {:<12} {:<14} {:>8}  detail",
        "family", "config", "verdict", "ratio"
    );
    for c in &report.cells {
        let ratio = c.worst_ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
        let detail = match c.verdict {
            Verdict::Exact | Verdict::WithinBudget => "",
            _ => c.detail.as_str(),
        };
        println!(
            "{:<24} {:<12} {:<14} {:>8}  {detail}",
            c.family,
            c.config,
            c.verdict.name(),
            ratio
        );
    }
    let failing = report
        .cells
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Degraded | Verdict::Wrong))
        .count();
    eprintln!("wrote {}", out.display());
    match failing {
        0 => Ok(()),
        n => Err(Error::Mismatch(format!(
            "{n} of {} cells degraded or wrong",
            report.cells.len()
        ))
        .into()),
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
