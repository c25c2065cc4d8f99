//! Helpers shared by ropescope's integration tests, one module per topic. The test binaries (`tests/*/main.rs`
//! and the single-file ones) depend on this crate as `ropescope_test_support`; it depends on `ropescope` with
//! `internals`, the same library the tests link.
//!
//! - [`paths`]: the repository's folders, `fixtures/` and the cache of real models;
//! - [`gguf`]: rewriting a GGUF file to break one rule;
//! - [`cli`]: running the `ropescope` binary (plainly, or under a deadline with one-line refusals checked);
//! - [`inputs`]: small inputs written for the command line (a synthetic model, token ids, a FIFO, a scan);
//! - [`analysis`]: a synthetic model whose heads are built by hand, for the analyses;
//! - [`fidelity`]: the engine against a float64 reference directory, with the README's tolerances;
//! - [`report`]: a generated scan directory, an XML check, headless Chromium, the page's headline numbers;
//! - [`shard`]: a merged sharded scan checked against an unsharded one;
//! - [`theory`]: the fixed seed, proptest configuration and vectors of the theory checks;
//! - [`train`]: training claims as statistics over seeds.

#![warn(missing_docs)]

pub mod analysis;
pub mod cli;
pub mod fidelity;
pub mod gguf;
pub mod inputs;
pub mod paths;
pub mod report;
pub mod shard;
pub mod theory;
pub mod train;
