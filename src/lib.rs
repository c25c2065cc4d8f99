//! ropescope: a pure-CPU engine and proof-checker for RoPE attention.
//!
//! The crate reads GGUF model files ([`gguf`]), dequantizes their weights exactly as ggml defines them, and
//! implements rotary position embeddings once ([`rope`]) for the engine, the analyses and the executable checks
//! of the theory in `theory/`.
//!
//! A forward pass ([`model::Model::forward`]) hands everything attention computes to a [`capture::Capture`]
//! as it goes: pre- and post-RoPE queries and keys, values, logits and probabilities one block of query rows at
//! a time, head outputs and the residual stream. The analyses ([`analysis`]) are captures, pure functions of what
//! captures keep, or series of forward passes; [`scan::run`] runs them and draws its report, and [`reference`](mod@reference)
//! writes the float64 golden reference and compares other engines against it. `ARCHITECTURE.md`, at the
//! repository's root, maps the modules and the papers' terms to the code and tests.
//!
//! # Public surface
//!
//! - [`gguf`]: [`gguf::GgufFile`], a model file's metadata, tensors and hyper-parameters (and a small writer);
//! - [`model`]: [`model::Model`] (`load`, `config`, `forward` with [`model::ForwardOptions`], and
//!   `forward_keeping_prefix` / `forward_from_prefix` to resume a pass after the tokens it shares with an
//!   earlier one, [`model::PrefixKv`]) and its configuration types;
//! - [`capture`]: the [`capture::Capture`] trait and the ready sinks ([`capture::CollectSink`], pairs);
//! - [`rope`]: [`rope::RopeSpec`], the per-chunk frequencies and the context-extension scalings;
//! - [`tokenizer`]: [`tokenizer::Tokenizer`], built from a file's own vocabulary;
//! - [`analysis`]: the analyses' pure functions and streaming captures;
//! - [`scan`]: the scan as one call, [`scan::run`] with a [`scan::ScanRequest`] (and [`scan::merge`] for shards);
//! - [`reference`](mod@reference): the golden reference's writer ([`reference::write`]) and [`reference::compare`];
//! - [`io`]: `.npy` arrays ([`io::npy`]), outputs staged whole ([`io::staged`]) and the inputs they protect;
//! - [`synth`]: [`synth::SyntheticModel`], tiny seeded models of every architecture, in memory (the examples
//!   below run on them);
//! - [`numeric`] ([`numeric::Real`], the float of `Model<f64>` and `Model<f32>`), [`error`], [`interrupt`]
//!   (stopping a pass from outside) and [`cli::main`], the command line.
//!
//! Everything else is crate-private: the scan's parts and its report, one head on one prompt (`head`), the exports, training, `synth`'s file
//! generator, quantization, the kernels, profiling, and the engine's own parts of `model`, `reference` and `io`. The `internals` cargo feature makes it public,
//! and adds the theory checks and the fuzz harness, for the crate's own tests, benches and fuzz targets only: it
//! is not API, and may change in any release.
//!
//! `Model<f64>` is the golden reference (every operation in f64, RoPE angles included); `Model<f32>` is the fast
//! path. Both take their weights from the same memory-mapped file, kept quantized.
//!
//! # Run a model and read one head's attention
//!
//! With a model file: open it, build the model and the file's own tokenizer, run the prompt with a
//! [`capture::CollectSink`] on the layers to keep, and read a head's record.
//!
//! ```no_run
//! use ropescope::capture::CollectSink;
//! use ropescope::gguf::GgufFile;
//! use ropescope::model::{ForwardOptions, Model};
//! use ropescope::tokenizer::Tokenizer;
//!
//! let file = GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let model = Model::<f64>::load(&file)?;
//! let ids = Tokenizer::from_gguf(&file)?.encode("The cat sat on the mat.", true)?;
//! let mut sink = CollectSink::new(vec![5], 0..ids.len());
//! model.forward(&ids, &ForwardOptions::default(), &mut sink)?;
//! let head = sink.get(5, 3).expect("layer 5 was captured");
//! println!("row 4 of layer 5, head 3: {:?}", &head.probs[4 * ids.len()..5 * ids.len()]);
//! # Ok::<(), ropescope::Error>(())
//! ```
//!
//! The same steps on a small model built in memory ([`synth::SyntheticModel`]: seeded random weights in a
//! real architecture's GGUF layout, with no tokenizer, so the ids are written out):
//!
//! ```
//! use ropescope::capture::CollectSink;
//! use ropescope::gguf::GgufFile;
//! use ropescope::model::{ForwardOptions, Model};
//! use ropescope::synth::SyntheticModel;
//!
//! // Two layers, 4 query heads sharing 2 key/value heads, head dimension 8, a vocabulary of 64.
//! let file = GgufFile::from_bytes(SyntheticModel::new("llama").to_bytes())?;
//! let model = Model::<f64>::load(&file)?;
//! let ids: Vec<u32> = vec![1, 17, 4, 33, 17, 4, 60, 9];
//! let t = ids.len();
//!
//! // Keep layer 1, every query row; compute the output logits of the last position.
//! let mut sink = CollectSink::new(vec![1], 0..t);
//! let opts = ForwardOptions { logits_rows: t - 1..t, ..ForwardOptions::default() };
//! let out = model.forward(&ids, &opts, &mut sink)?;
//! assert_eq!(out.logits.len(), model.config.vocab_size);
//!
//! let head = sink.get(1, 2).expect("layer 1 was captured");
//! assert_eq!(head.info.as_ref().map(|i| i.kv_head), Some(1), "query head 2 reads key/value head 1");
//! // `probs` is `[rows, T]`: row `i` is query `i`'s attention over all `T` keys.
//! for i in 0..t {
//!     let row = &head.probs[i * t..(i + 1) * t];
//!     assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
//!     assert!(row[i + 1..].iter().all(|&p| p == 0.0), "causal: nothing on later keys");
//! }
//! # Ok::<(), ropescope::Error>(())
//! ```
//!
//! # A streaming capture of your own
//!
//! [`capture::CollectSink`] keeps `T × T` per head; an analysis over long prompts reduces each block of rows as
//! it arrives instead. A [`capture::Capture`] says per layer what it wants ([`capture::LayerPlan`]) and opens one
//! [`capture::HeadCapture`] per head, which runs on the thread computing that head; `end_head` takes it back in
//! head order. This one measures each head's mean attention on the previous token, `SlashScore(1)` of
//! [`analysis::slash`], and runs beside a `CollectSink` in the same pass (a pair of captures is a capture) to
//! check itself.
//!
//! ```
//! use ropescope::analysis::slash::slash_score;
//! use ropescope::capture::{AttentionBlock, Capture, CollectSink, HeadCapture, HeadInfo, LayerPlan};
//! use ropescope::gguf::GgufFile;
//! use ropescope::model::{ForwardOptions, Model};
//! use ropescope::numeric::Real;
//! use ropescope::synth::SyntheticModel;
//!
//! /// `1/(T−1) · Σ_{i≥1} S[i, i−1]` of every head, as one running sum per head.
//! struct PreviousToken {
//!     n_heads: usize,
//!     /// Indexed by `layer · n_heads + head`.
//!     scores: Vec<f64>,
//! }
//!
//! /// One head's running sum, on the thread that computes the head.
//! struct PreviousTokenHead {
//!     sum: f64,
//! }
//!
//! impl<T: Real> HeadCapture<T> for PreviousTokenHead {
//!     fn block(&mut self, _info: &HeadInfo, block: &AttentionBlock<'_, T>) {
//!         for i in block.rows.clone().filter(|&i| i >= 1) {
//!             // Columns are the key positions `block.cols`, which need not start at 0: read them.
//!             if block.cols.contains(&(i - 1)) {
//!                 self.sum += block.probs_row(i)[i - 1 - block.cols.start].to_f64_exact();
//!             }
//!         }
//!     }
//! }
//!
//! impl<T: Real> Capture<T> for PreviousToken {
//!     type Head = PreviousTokenHead;
//!     fn plan(&self, _layer: usize) -> LayerPlan {
//!         LayerPlan { attention: true, ..LayerPlan::default() }
//!     }
//!     fn begin_head(&self, _info: &HeadInfo) -> PreviousTokenHead {
//!         PreviousTokenHead { sum: 0.0 }
//!     }
//!     fn end_head(&mut self, info: &HeadInfo, head: PreviousTokenHead) {
//!         self.scores[info.layer * self.n_heads + info.head] = head.sum / (info.n_tokens - 1) as f64;
//!     }
//! }
//!
//! let file = GgufFile::from_bytes(SyntheticModel::new("qwen2").to_bytes())?;
//! let model = Model::<f64>::load(&file)?;
//! let (layers, heads) = (model.config.n_layers, model.config.n_heads);
//! let ids: Vec<u32> = (0..40).map(|i| (i * 7 % 64) as u32).collect();
//! let t = ids.len();
//!
//! let mut both = (
//!     PreviousToken { n_heads: heads, scores: vec![0.0; layers * heads] },
//!     CollectSink::new((0..layers).collect(), 0..t),
//! );
//! model.forward(&ids, &ForwardOptions::default(), &mut both)?;
//! let (streamed, kept) = both;
//! for layer in 0..layers {
//!     for head in 0..heads {
//!         let probs = &kept.get(layer, head).expect("every layer was kept").probs;
//!         let full = slash_score(probs, t, 1).expect("T > 1");
//!         assert!((streamed.scores[layer * heads + head] - full).abs() < 1e-12);
//!     }
//! }
//! # Ok::<(), ropescope::Error>(())
//! ```
//!
//! # Compare two reference directories
//!
//! [`reference::write::write_reference`] writes what a forward pass computes for chosen layers and rows as
//! `.npy` files (the layout of `fixtures/reference/README.md`, which any engine can write);
//! [`reference::compare::compare_report`] compares a directory under test with a reference, array by array,
//! against per-quantity tolerances. Here the f32 engine passes against the f64 reference, and a model whose RoPE
//! base is wrong fails from layer 0's post-RoPE queries on, while its pre-RoPE ones still agree.
//!
//! ```
//! use ropescope::reference::compare::{compare_report, default_tolerances};
//! use ropescope::reference::write::{write_reference, ReferenceRequest};
//! use ropescope::gguf::GgufFile;
//! use ropescope::model::Model;
//! use ropescope::synth::SyntheticModel;
//! use std::error::Error;
//!
//! let dir = tempfile::tempdir()?;
//! let ids: Vec<u32> = vec![1, 5, 9, 2, 7, 7, 3, 12, 40, 2];
//! let req = ReferenceRequest { layers: vec![0, 1], rows: 0..ids.len(), command: Vec::new() };
//! // Writes `model` as a GGUF file (the reference records its sha256) and the f64 and f32 references of it.
//! let write = |model: &SyntheticModel, name: &str| -> Result<(), Box<dyn Error>> {
//!     let path = dir.path().join(format!("{name}.gguf"));
//!     std::fs::write(&path, model.to_bytes())?;
//!     let file = GgufFile::open(&path)?;
//!     let out = |precision: &str| dir.path().join(format!("{name}-{precision}"));
//!     write_reference(&Model::<f64>::load(&file)?, &path, &ids, &req, &out("f64"))?;
//!     write_reference(&Model::<f32>::load(&file)?, &path, &ids, &req, &out("f32"))?;
//!     Ok(())
//! };
//! write(&SyntheticModel::new("llama"), "model")?;
//! let wrong_base = SyntheticModel { rope_base: 500_000.0, ..SyntheticModel::new("llama") };
//! write(&wrong_base, "wrong")?;
//!
//! let within = |a: &str, b: &str| compare_report(&dir.path().join(a), &dir.path().join(b), &default_tolerances());
//! let report = within("model-f32", "model-f64")?;
//! assert!(report.pass, "{}", report.verdict);
//!
//! let report = within("wrong-f64", "model-f64")?;
//! assert!(!report.pass);
//! let passes = |file: &str| report.comparisons.iter().any(|c| c.file == file && c.pass);
//! assert!(passes("q_pre_L0.npy") && passes("k_pre_L0.npy") && passes("v_L0.npy"));
//! assert!(!passes("q_L0.npy") && !passes("k_L0.npy") && !passes("logits.npy"));
//! # Ok::<(), Box<dyn Error>>(())
//! ```

// Every public item carries a doc comment; a new one without fails `cargo clippy -- -D warnings`.
#![warn(missing_docs)]

/// Declares modules that are public with the `internals` feature (for the crate's tests, benches and fuzz
/// targets; not API) and crate-private without it.
macro_rules! internal_mod {
    ($($(#[$attr:meta])* $name:ident;)*) => {$(
        #[cfg(feature = "internals")]
        $(#[$attr])*
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        $(#[$attr])*
        pub(crate) mod $name;
    )*};
}

pub mod analysis;
pub mod capture;
pub mod cli;
pub mod conformance;
pub mod error;
pub mod gguf;
pub mod interrupt;
pub mod io;
pub mod model;
pub mod numeric;
pub mod reference;
pub mod rope;
pub mod scan;
pub mod synth;
pub mod tokenizer;

internal_mod! {
    export;
    head;
    linalg;
    profile;
    quant;
    report;
    train;
}

// Used only by the integration tests and the fuzz targets, never by the engine or the command line.
#[cfg(feature = "internals")]
pub mod fuzz_harness;
#[cfg(feature = "internals")]
pub mod theory;

pub use error::{Error, ErrorKind, Result};
