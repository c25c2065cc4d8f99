//! The command-line interface: argument parsing and one module per subcommand.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod inspect;
mod tokenize;

/// ropescope: exact, inspectable RoPE attention on GGUF models, and executable checks of its theory.
#[derive(Parser, Debug)]
#[command(name = "ropescope", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a GGUF model's architecture, hyper-parameters and tensor types.
    Inspect(inspect::Args),
    /// Print the token ids a model's own tokenizer gives a text.
    Tokenize(tokenize::Args),
}

/// Runs the CLI on the process arguments; errors are printed as one line on stderr with a non-zero exit.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(args) => inspect::run(args),
        Command::Tokenize(args) => tokenize::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
