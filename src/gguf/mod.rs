//! Reading (and, for tests, writing) GGUF model files.
//!
//! Written for this crate because no maintained crate reads GGUF the way an exact engine needs: the available
//! readers truncate tokenizer arrays, copy tensors instead of mapping them, or panic on K-quants. This reader maps
//! the file, parses GGUF v2 and v3 with every metadata type, and bounds every read and allocation by the file's
//! own length, so hostile files produce errors rather than panics.

mod cursor;
mod extract;
mod file;
mod hparams;
mod value;
mod writer;

pub use extract::{dequantize_rows, numpy_shape, write_tensor, TensorRequest, WrittenTensor};
pub use file::{
    DataExtent, GgufFile, TensorData, TensorInfo, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH,
    MAX_DIMS,
};
pub use hparams::{Hparams, RopeScalingKeys, DEFAULT_ROPE_BASE, MAX_COUNT};
pub use value::{type_id, Array, Value};
pub use writer::{GgufWriter, TensorSpec};
// `synth` writes headers of its own; the header encoder is no API.
pub(crate) use writer::{encode_header, DirectoryEntry};

/// The ggml type of a tensor ([`TensorInfo::ty`]).
pub use crate::quant::GgmlType;
