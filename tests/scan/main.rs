//! The scan: the analyses on heads built by hand into synthetic models (`analysis_*`), streamed scores against
//! full matrices (`synthetic`), the `scan` command and its outputs (`cli`, `outputs`), sharded scans and their
//! merge (`shard`), and sharded scans as researchers run them with GNU parallel and Slurm (`cluster`); today's
//! attention designs on converter-made files (`designs`, `nope_layers`).
//!
//! One test binary, one module per former test file; helpers come from `ropescope_test_support`.

mod analysis_ablation;
mod analysis_cauchy_schwarz;
mod analysis_detectors;
mod analysis_posym;
mod claims;
mod cli;
mod cluster;
mod designs;
mod embedding_cone;
mod nope_layers;
mod outputs;
mod shard;
mod synthetic;
