//! The `ropescope` command line; all logic lives in the library's [`ropescope::cli`] module.

/// The allocator of the command line (see `Cargo.toml`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    ropescope::cli::main()
}
