//! The `ropescope` command line; all logic lives in the library's [`ropescope::cli`] module.

fn main() -> std::process::ExitCode {
    ropescope::cli::main()
}
