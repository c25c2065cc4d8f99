//! Measurements on attention heads, one module per measurement.
//!
//! Two kinds of module. The measurement definitions (`slash`, `fourier`, `rank`, `cone`, `posym`, `softmax`) are
//! pure functions on plain slices (matrices row-major), shared by the executable theory checks
//! (`tests/theory/*.rs`), the training experiments and the real-model analyses. The real-model analyses stream
//! over the engine's capture (`slash_stream`, `attention_map`, `vector_stats`) or run their own forward passes
//! (`posym_scan`, `detectors`, `cauchy_schwarz`, `ablation`), and `embedding_cone` reads the weights. Chunk indices
//! are 0-based (`l = 0` is the fastest chunk); the papers' 1-based chunk `l` is chunk `l - 1` here.

/// Forward passes the multi-pass analyses run at the same time where their passes are independent (the block
/// swaps of `posym_scan`, the variants of `ablation`): each pass's work fills the cores while another waits on
/// its own serial parts and on the last of a layer's heads. Two, on any number of cores: every pass gives the
/// same bits however it is scheduled, and each adds its working memory (the scan's pre-flight counts them). The
/// first pass of each analysis runs alone, so that the matrices it packs are packed before passes run side by
/// side.
pub const PASSES_AT_ONCE: usize = 2;

pub mod ablation;
pub mod attention_map;
pub mod cauchy_schwarz;
pub mod cone;
pub mod correlation;
pub mod detectors;
pub mod embedding_cone;
pub mod fourier;
pub mod posym;
pub mod posym_scan;
pub mod rank;
pub mod slash;
pub mod slash_stream;
pub mod softmax;
pub mod vector_stats;
