//! The command-line interface: argument parsing and one module per subcommand.

use crate::{Error, ErrorKind};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Returns from the enclosing function with an argument error ([`Error::Argument`], exit code 2) whose message
/// is formatted like `format!`.
macro_rules! refuse {
    ($($message:tt)*) => {
        return Err($crate::Error::Argument(format!($($message)*)).into())
    };
}

mod args;
mod bench_forward;
mod compare;
mod compare_scans;
mod conformance;
mod diverge;
mod duoattention;
mod figures;
mod head;
mod inspect;
mod merge;
mod minference;
mod notebook;
mod prompt;
mod reference;
mod report;
mod rope;
mod scan;
mod synth;
mod tensor;
mod tokenize;
mod train;

/// Largest `--threads`: 1024. Every thread is an operating-system thread with its own stack and scratch, started
/// before any work; beyond the cores of the largest machines more bring no speed, and results do not depend on
/// the count.
pub const MAX_THREADS: usize = 1024;

/// ropescope: exact, inspectable RoPE attention on GGUF models, and executable checks of its theory.
#[derive(Parser, Debug)]
#[command(name = "ropescope", version, about)]
struct Cli {
    /// Worker threads, 1 to 1024 (default: all cores). Results do not depend on it.
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
    /// Write one tensor of any GGUF file (or a range of its rows) dequantized to float32 .npy, as ggml does.
    Tensor(tensor::Args),
    /// Compare two reference directories (NMSE and max-abs per array); non-zero exit over tolerance.
    Compare(compare::Args),
    /// Compare another engine's per-layer tensors with the float64 pass and name the first that diverges.
    Diverge(diverge::Args),
    /// Judge another engine's dump stage by stage against the error budget of its precision, naming the kind of
    /// mistake behind any stage beyond it.
    #[command(subcommand_required = true)]
    Conformance(conformance::Args),
    /// Scan every head: slash scores on natural and random prompts, rank, Fourier, frequency usage, cone, labels.
    Scan(scan::Args),
    /// Merge the shards of a scan (`scan --shard K/N`) into the directory one unsharded scan writes.
    Merge(merge::Args),
    /// Print the token ids a model's own tokenizer gives a text.
    Tokenize(tokenize::Args),
    /// Write a random-weight GGUF with the header of a real file or of a named shape (llama-3.1-8b, ...).
    Synth(synth::Args),
    /// Time model load and the forward pass (full capture by default) and print the times as JSON.
    BenchForward(bench_forward::Args),
    /// Train small RoPE attention models on the CPU (slash-dominant heads, canonical tasks under gating).
    Train(train::Args),
    /// Write DIR/report.html, the self-contained report page of a scan directory.
    Report(report::Args),
    /// One head on one prompt: its attention map, slash profile, chunk norms and logit spectrum, as .npy, CSV, SVG
    /// and PNG, and a picture on the terminal.
    Head(head::Args),
    /// Write every figure of a scan directory as a standalone .svg.
    Figures(figures::Args),
    /// Write a Jupyter notebook that reproduces a scan's figures with numpy and matplotlib.
    ExportNotebook(notebook::Args),
    /// Write a scan's head patterns as MInference's per-layer vertical_and_slash JSON.
    ExportMinference(minference::Args),
    /// Write a scan's retrieval and streaming heads as DuoAttention's full_attention_heads.tsv and config.json.
    ExportDuoattention(duoattention::Args),
    /// Set several scans side by side: OUT/compare.html and OUT/compare.json (the cross-model tables).
    CompareScans(compare_scans::Args),
}

/// Turns a failed parse or lookup of a command-line value into an argument error with the message given.
trait OrArgument<T> {
    /// `Ok` as is; otherwise [`Error::Argument`] with `message()`.
    fn or_argument(self, message: impl FnOnce() -> String) -> anyhow::Result<T>;
}

impl<T, E> OrArgument<T> for Result<T, E> {
    fn or_argument(self, message: impl FnOnce() -> String) -> anyhow::Result<T> {
        self.map_err(|_| Error::Argument(message()).into())
    }
}

impl<T> OrArgument<T> for Option<T> {
    fn or_argument(self, message: impl FnOnce() -> String) -> anyhow::Result<T> {
        self.ok_or_else(|| Error::Argument(message()).into())
    }
}

/// The exit code of a failed command ([`error_kind`]).
fn exit_code(e: &anyhow::Error) -> u8 {
    error_kind(e).exit_code()
}

/// Restores the default action of SIGPIPE, so that a command whose reader goes away (`ropescope compare --json
/// | head`) ends quietly as other Unix tools do, instead of panicking on the failed write.
fn quiet_on_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: called once at start-up, before any thread exists; SIG_DFL is a valid disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Asks glibc's allocator to serve every block from its heaps and to keep what is freed, instead of mapping
/// each block above its mmap threshold (at most 32 MiB) afresh and unmapping it when freed. A long prompt's
/// pass allocates every layer's activations anew, tens to hundreds of MB apiece at 32k tokens; mapped
/// afresh, each faulted in and zeroed its pages again: a 32768-token Gemma 3 scan spent 18.6 s of its 139 s
/// of CPU time in the kernel, 1.3 s with the blocks kept (74.6 s → 62.2 s wall, the same peak memory). Blocks a
/// worker thread's arena cannot hold still get a mapping of their own. Elsewhere, the allocator is left as it is.
/// Public for the benchmarks, which time passes as the command line runs them; call it before any thread exists.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called once at start-up, before any thread exists; both are documented mallopt parameters, and
    // mallopt only changes how later requests are served.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

/// Set by SIGINT (Ctrl-C) or SIGTERM while a command that runs forward passes works ([`stop_on_signals`]).
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether SIGINT or SIGTERM arrived: the interrupt check of the command line's forward passes.
fn stop_requested() -> bool {
    STOP.load(std::sync::atomic::Ordering::Relaxed)
}

/// The handler of SIGINT and SIGTERM: asks the passes to stop, and gives the signal its default action back, so
/// that a second one ends the process at once.
#[cfg(unix)]
extern "C" fn request_stop(signal: libc::c_int) {
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: signal(2) is async-signal-safe, and SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
    }
}

/// Makes SIGINT and SIGTERM stop the forward passes at their next check (`crate::interrupt`), so that the
/// command unwinds, removes its staged output and lock, and exits 130 instead of leaving them behind.
fn stop_on_signals() {
    #[cfg(unix)]
    // SAFETY: called on the main thread before the command's work; `request_stop` only stores an atomic flag
    // and calls signal(2), both async-signal-safe.
    unsafe {
        let handler = request_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Whether `command` spends its time in forward passes, which check for a stop between layers.
fn runs_passes(command: &Command) -> bool {
    matches!(
        command,
        Command::Scan(_)
            | Command::Merge(_)
            | Command::Reference(_)
            | Command::Head(_)
            | Command::Diverge(_)
            | Command::BenchForward(_)
    )
}

/// Runs one command.
fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Inspect(args) => inspect::run(args),
        Command::Reference(args) => reference::run(args),
        Command::Rope(args) => rope::run(args),
        Command::Tensor(args) => tensor::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Diverge(args) => diverge::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Scan(args) => scan::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Synth(args) => synth::run(args),
        Command::Train(args) => train::run(args),
        Command::Report(args) => report::run(args),
        Command::Figures(args) => figures::run(args),
        Command::Head(args) => head::run(args),
        Command::ExportNotebook(args) => notebook::run(args),
        Command::ExportMinference(args) => minference::run(args),
        Command::ExportDuoattention(args) => duoattention::run(args),
        Command::CompareScans(args) => compare_scans::run(args),
        Command::BenchForward(args) => bench_forward::run(args),
    }
}

/// Refuses a `--threads` outside `1..=MAX_THREADS`.
fn check_threads(threads: Option<usize>) -> anyhow::Result<()> {
    match threads {
        Some(n) if !(1..=MAX_THREADS).contains(&n) => {
            refuse!("--threads {n} is out of range: 1 to {MAX_THREADS}")
        }
        _ => Ok(()),
    }
}

/// Starts the global thread pool with `--threads` workers, when given.
fn start_threads(threads: Option<usize>) -> anyhow::Result<()> {
    check_threads(threads)?;
    if let Some(n) = threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .map_err(|e| Error::Resource(format!("cannot start {n} threads: {e}")))?;
    }
    Ok(())
}

/// A failed command's message as one line: its chain of causes joined by ": ", leaving out a cause whose text
/// the line already ends with (an [`Error::Io`] states its operating-system error, which is also its cause);
/// a request parameter is named by its flag.
fn error_message(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = match cause.downcast_ref::<Error>() {
            Some(err) => flag_text(err),
            None => cause.to_string(),
        };
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The message of `e` as the command line states it: a parameter is named by its flag (`--delta-max`).
fn flag_text(e: &Error) -> String {
    match e {
        Error::Parameter { name, problem } => format!("--{} {problem}", name.replace('_', "-")),
        Error::Context { context, source } => format!("{context}: {}", flag_text(source)),
        _ => e.to_string(),
    }
}

/// The kind of a failed command: that of the first ropescope [`Error`] in its chain of causes, else
/// [`ErrorKind::Io`] for an operating-system error, else [`ErrorKind::Internal`].
fn error_kind(e: &anyhow::Error) -> ErrorKind {
    e.chain()
        .find_map(|cause| {
            if let Some(err) = cause.downcast_ref::<Error>() {
                Some(err.kind())
            } else {
                cause.is::<std::io::Error>().then_some(ErrorKind::Io)
            }
        })
        .unwrap_or(ErrorKind::Internal)
}

/// Runs the CLI on the process arguments; an error is printed as one line on stderr and exits with the code of
/// its kind ([`ErrorKind::exit_code`]).
pub fn main() -> ExitCode {
    quiet_on_broken_pipe();
    keep_freed_memory();
    let cli = Cli::parse();
    let result = start_threads(cli.threads).and_then(|()| {
        if runs_passes(&cli.command) {
            stop_on_signals();
            crate::interrupt::with_check(stop_requested, || dispatch(cli.command))
        } else {
            dispatch(cli.command)
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_message(&e));
            ExitCode::from(exit_code(&e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operating_system_error_is_stated_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = anyhow::Error::from(Error::io("a.txt", io)).context("prompt 'a'");
        assert_eq!(error_message(&e), "prompt 'a': a.txt: entity not found");
    }
}
