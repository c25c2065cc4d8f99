//! ropescope: a pure-CPU engine and proof-checker for RoPE attention.
//!
//! The crate reads GGUF model files ([`gguf`]), dequantizes their weights exactly as ggml defines them
//! ([`quant`]), and implements rotary position embeddings once ([`rope`]) for the engine, the analyses and the
//! executable checks of the theory in `theory/`.

// Every public item carries a doc comment; a new one without fails `cargo clippy -- -D warnings`.
#![warn(missing_docs)]

pub mod analysis;
pub mod capture;
pub mod cli;
pub mod error;
pub mod export;
#[doc(hidden)]
pub mod fuzz_harness;
pub mod gguf;
pub mod linalg;
pub mod model;
pub mod numeric;
pub mod profile;
pub mod quant;
pub mod report;
pub mod rope;
pub mod scan;
pub mod synth;
pub mod synthetic;
pub mod theory;
pub mod tokenizer;
pub mod train;

pub use error::{Error, ErrorKind, Result};
