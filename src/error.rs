//! The library's one error type.

use std::path::PathBuf;

/// Everything that can go wrong in ropescope, grouped by where it arises.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    // ---- files ----
    /// An operating-system error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    // ---- GGUF format ----
    /// The file does not start with the GGUF magic bytes.
    #[error("not a GGUF file (magic bytes {found:02x?}, expected \"GGUF\")")]
    BadMagic {
        /// The first four bytes found.
        found: [u8; 4],
    },
    /// A GGUF version this reader does not support.
    #[error("unsupported GGUF version {0} (supported: 2, 3)")]
    UnsupportedVersion(u32),
    /// The file ends before a structure it announces.
    #[error("truncated GGUF file: {what} needs {needed} bytes at offset {offset}, file has {len}")]
    Truncated {
        /// What was being read.
        what: String,
        /// Byte offset where the read started.
        offset: u64,
        /// Bytes the read needed.
        needed: u64,
        /// Length of the file.
        len: u64,
    },
    /// A structurally invalid GGUF file (the message says what and where).
    #[error("malformed GGUF file: {0}")]
    Malformed(String),

    // ---- tensors and quantization ----
    /// A tensor type this crate cannot dequantize.
    #[error("tensor '{tensor}': unsupported tensor type {type_name}")]
    UnsupportedType {
        /// The tensor concerned.
        tensor: String,
        /// The ggml type's name, or its numeric id when unknown.
        type_name: String,
    },
    /// A tensor the caller asked for is not in the file.
    #[error("tensor '{0}' not found")]
    MissingTensor(String),
    /// A tensor whose shape is not what the caller requires.
    #[error("tensor '{tensor}': shape {found:?}, expected {expected}")]
    Shape {
        /// The tensor concerned.
        tensor: String,
        /// The shape found (ggml order, fastest dimension first).
        found: Vec<u64>,
        /// What was expected.
        expected: String,
    },

    // ---- model input ----
    /// Input the model cannot run on (empty prompt, unknown token id, longer than the context or memory).
    #[error("{0}")]
    Input(String),

    // ---- model metadata ----
    /// A required metadata key is absent.
    #[error("metadata key '{0}' is missing")]
    MissingKey(String),
    /// A metadata key holds a value of the wrong type or an invalid value.
    #[error("metadata key '{key}': {problem}")]
    BadValue {
        /// The key concerned.
        key: String,
        /// What is wrong with it.
        problem: String,
    },

    /// A metadata key, key value or tensor that would change the forward pass in a way ropescope does not
    /// implement.
    #[error("{what} would change the forward pass and is not implemented by ropescope{hint}")]
    NotImplemented {
        /// The key (with its value) or tensor concerned.
        what: String,
        /// Further explanation, starting with "; " (may be empty).
        hint: String,
    },

    // ---- tokenizer ----
    /// A tokenizer the metadata describes but ropescope cannot build, or ids it cannot decode.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
}

/// Result type of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
