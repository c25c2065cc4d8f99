//! The report: the HTML page (`html`), its figures, notebook, MInference and DuoAttention exports, the
//! comparison of two scans, the committed example scan directory, and the page rendered in headless Chromium
//! (`browser`).
//!
//! One test binary, one module per former test file; helpers come from `ropescope_test_support::report`.

mod browser;
mod compare;
mod duoattention;
mod example;
mod figures;
mod html;
mod minference;
mod notebook;
