//! `ropescope scan`: every streaming analysis of a model in one forward pass per prompt, per-head labels and
//! the output directory described in `fixtures/scan/FORMAT.md`.

pub mod format;
