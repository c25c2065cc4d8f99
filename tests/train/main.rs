//! Training: analytic gradients against finite differences (`gradients`); the training claims as statistics
//! over seeds (`gating`, `sdh`; `SEEDS`, `ROPESCOPE_TRAIN_SEEDS`, in `ropescope_test_support::train`); the
//! `train` command (`cli`).
//!
//! One test binary, one module per former test file.

mod cli;
mod gating;
mod gradients;
mod sdh;
