//! The command-line interface: argument parsing and one module per subcommand.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod args;
mod bench_forward;
mod compare;
mod figures;
mod inspect;
mod minference;
mod notebook;
mod reference;
mod report;
mod rope;
mod scan;
mod tokenize;
mod train;

/// ropescope: exact, inspectable RoPE attention on GGUF models, and executable checks of its theory.
#[derive(Parser, Debug)]
#[command(name = "ropescope", version, about)]
struct Cli {
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a GGUF model's architecture, hyper-parameters and tensor types.
    Inspect(inspect::Args),
    /// Run the model and write the golden reference (logits, attention, q/k) as .npy files.
    Reference(reference::Args),
    /// Write a model's per-layer RoPE frequencies and float64 cos/sin tables at chosen positions as .npy files.
    Rope(rope::Args),
    /// Compare two reference directories (NMSE and max-abs per array); non-zero exit over tolerance.
    Compare(compare::Args),
    /// Scan every head: slash scores on natural and random prompts, rank, Fourier, frequency usage, cone, labels.
    Scan(scan::Args),
    /// Print the token ids a model's own tokenizer gives a text.
    Tokenize(tokenize::Args),
    /// Time model load and the forward pass (full capture by default) and print the times as JSON.
    BenchForward(bench_forward::Args),
    /// Train small RoPE attention models on the CPU (slash-dominant heads, canonical tasks under gating).
    Train(train::Args),
    /// Write DIR/report.html, the self-contained report page of a scan directory.
    Report(report::Args),
    /// Write every figure of a scan directory as a standalone .svg.
    Figures(figures::Args),
    /// Write a Jupyter notebook that reproduces a scan's figures with numpy and matplotlib.
    ExportNotebook(notebook::Args),
    /// Write a scan's head patterns as MInference's per-layer vertical_and_slash JSON.
    ExportMinference(minference::Args),
}

/// Runs the CLI on the process arguments; errors are printed as one line on stderr with a non-zero exit.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(n) = cli.threads {
        if let Err(e) = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
        {
            eprintln!("error: cannot start {n} threads: {e}");
            return ExitCode::FAILURE;
        }
    }
    let result = match cli.command {
        Command::Inspect(args) => inspect::run(args),
        Command::Reference(args) => reference::run(args),
        Command::Rope(args) => rope::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Scan(args) => scan::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Train(args) => train::run(args),
        Command::Report(args) => report::run(args),
        Command::Figures(args) => figures::run(args),
        Command::ExportNotebook(args) => notebook::run(args),
        Command::ExportMinference(args) => minference::run(args),
        Command::BenchForward(args) => bench_forward::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
