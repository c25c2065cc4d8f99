//! Measurements on attention heads, one module per measurement.
//!
//! Every function here is pure and works on plain slices (matrices are row-major), so the same code serves the
//! executable theory checks (`tests/theory_*.rs`) and the analyses of real models. Chunk indices are 0-based
//! (`l = 0` is the fastest chunk); the papers' 1-based chunk `l` is chunk `l - 1` here.

pub mod attention_map;
pub mod cone;
pub mod embedding_cone;
pub mod fourier;
pub mod posym;
pub mod rank;
pub mod slash;
pub mod slash_stream;
pub mod softmax;
pub mod vector_stats;
