//! The command line: each subcommand's output, messages and exit codes (`compare`, `diverge`, `help`,
//! `head`, `inspect`, `reference`, `rope`, `tensor`, `tokenize`), `synth` files, and the Python package's pytest suite
//! against the built binary (`python_package`).
//!
//! One test binary, one module per former test file; helpers come from `ropescope_test_support`.

mod compare;
mod conformance;
mod diverge;
mod head;
mod help;
mod inspect;
mod python_package;
mod reference;
mod rope;
mod synth;
mod tensor;
mod tokenize;
