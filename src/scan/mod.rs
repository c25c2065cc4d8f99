//! `ropescope scan`: every streaming analysis of a model in one forward pass per prompt, the multi-pass
//! analyses, per-head labels, and the output directory described in `fixtures/scan/FORMAT.md`.
//!
//! [`run`] is the whole scan, from a [`ScanRequest`] to a complete output directory with its report, and
//! [`merge`] folds the shards of a scan into one (`pipeline.rs`). Inside, `analyse` is the measuring step
//! alone, returning a `ScanOutcome`, which `output::write` writes and `report_text::render` ranks as text.

mod analyse;
mod optional;
mod pipeline;
mod progress;
internal_mod! {
    claims;
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
    tables;
}

#[cfg(feature = "internals")]
pub use analyse::{analyse, GivenReport, ScanOutcome, Streamed};
pub use params::{Analysis, ScanParams};
pub use pipeline::{
    merge, run, MergeRequest, ScanRequest, ScanSummary, DEFAULT_PACKED_WEIGHT_BYTES,
};
pub use progress::{NoProgress, Progress};
pub use shard::Shard;
