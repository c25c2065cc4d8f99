//! ropescope: a pure-CPU engine and proof-checker for RoPE attention.
//!
//! The crate reads GGUF model files ([`gguf`]), dequantizes their weights exactly as ggml defines them
//! ([`quant`]), and implements rotary position embeddings once ([`rope`]) for the engine, the analyses and the
//! executable checks of the theory in `theory/`.

pub mod cli;
pub mod error;
pub mod gguf;
pub mod numeric;
pub mod quant;
pub mod rope;
pub mod tokenizer;

pub use error::{Error, Result};
