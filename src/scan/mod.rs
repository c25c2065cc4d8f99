//! `ropescope scan`: every streaming analysis of a model in one forward pass per prompt, the multi-pass
//! analyses, per-head labels, and the output directory described in `fixtures/scan/FORMAT.md`.
//!
//! [`run`] is the whole scan, from a [`ScanRequest`] to a complete output directory with its report, and
//! [`merge`] folds the shards of a scan into one (`pipeline.rs`). Inside, `analyse` is the measuring step
//! alone, returning a `ScanOutcome`, which `output::write` writes and `report_text::render` ranks as text.

mod analyse;
mod optional;
mod pipeline;
internal_mod! {
    external;
    format;
    labels;
    measure;
    memory;
    output;
    params;
    partial;
    prompts;
    read_back;
    report_text;
    shard;
    summary;
}

#[cfg(feature = "internals")]
pub use analyse::{analyse, GivenReport, ScanOutcome, Streamed};
#[cfg(not(feature = "internals"))]
use analyse::{analyse, ScanOutcome, Streamed};
use analyse::{cone_analysis, finish, Stages};
pub use params::{Analysis, ScanParams};
pub use pipeline::{merge, run, MergeRequest, ScanRequest, ScanSummary};
pub use shard::Shard;

/// Progress of a scan, stage by stage (the CLI draws one bar per stage).
pub trait Progress {
    /// A stage of `total` steps begins.
    fn begin(&self, stage: &str, total: u64);
    /// `done` steps of the current stage are done.
    fn set(&self, done: u64);
    /// The current stage is over.
    fn end(&self);
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn begin(&self, _stage: &str, _total: u64) {}
    fn set(&self, _done: u64) {}
    fn end(&self) {}
}
