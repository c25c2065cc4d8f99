//! How a scan reports its progress, stage by stage, to whoever runs it.

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
