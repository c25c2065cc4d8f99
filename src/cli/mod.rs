//! The command-line interface: argument parsing and one module per subcommand.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod args;
mod bench_forward;
mod compare;
mod inspect;
mod reference;
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
    /// Compare two reference directories (NMSE and max-abs per array); non-zero exit over tolerance.
    Compare(compare::Args),
    /// Print the token ids a model's own tokenizer gives a text.
    Tokenize(tokenize::Args),
    /// Time model load and the forward pass (full capture by default) and print the times as JSON.
    BenchForward(bench_forward::Args),
    /// Train small RoPE attention models on the CPU (slash-dominant heads, canonical tasks under gating).
    Train(train::Args),
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
        Command::Compare(args) => compare::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Train(args) => train::run(args),
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
