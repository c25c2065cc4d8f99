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
    /// The file's header is whole but its tensor data ends before the end the tensor directory announces.
    #[error(
        "truncated GGUF file: its tensor data is {missing} bytes short (the tensor directory needs a file of \
         {expected_size} bytes, this one has {file_size}; {incomplete} of {n_tensors} tensors incomplete, the first \
         '{first}'); `ropescope inspect` reads the header of such a file"
    )]
    TruncatedData {
        /// Bytes missing: `expected_size - file_size`.
        missing: u64,
        /// The file size the tensor directory implies.
        expected_size: u64,
        /// The actual file size.
        file_size: u64,
        /// Tensors whose data ends past the end of the file.
        incomplete: usize,
        /// Tensors in the directory.
        n_tensors: usize,
        /// The first incomplete tensor, in directory order.
        first: String,
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

    /// The forward pass produced a NaN or an infinity. From finite weights and values the golden pass does
    /// not, so the file's weights or hyper-parameters are wrong; the pass stops there and nothing is written.
    #[error(
        "{stage} of {at} holds {value} at position {position}, element {element}: the model file's weights or \
         hyper-parameters give a non-finite value there, so nothing is written"
    )]
    NonFinite {
        /// The tensor the pass computed (`post-RoPE queries`, `the attention block's output`, ...).
        stage: String,
        /// Where in the model: `layer 3`, `the token embeddings`, `the output head`.
        at: String,
        /// The value found (`NaN`, `inf`, `-inf`).
        value: String,
        /// The token position (row) of the first non-finite element.
        position: usize,
        /// Its index within the row.
        element: usize,
    },

    // ---- requests and data files ----
    /// An argument or request the command cannot honour: an empty prompt, a token id outside the vocabulary, a
    /// layer the model does not have, an output path that is a file.
    #[error("{0}")]
    Argument(String),
    /// A request parameter out of range or inconsistent with the others. `name` is the parameter's name as
    /// the command line and the Python package share it (`delta_max`, `length`, `force`); the command line
    /// shows it as its flag (`--delta-max`), the message itself names no front end's syntax.
    #[error("{name} {problem}")]
    Parameter {
        /// The parameter, in snake case.
        name: &'static str,
        /// What is wrong with its value, continuing a sentence that starts with the name.
        problem: String,
    },
    /// A data file other than the model (a scan directory's JSON or `.npy` files, a reference directory) whose
    /// content is invalid or does not fit the rest of the directory.
    #[error("{}: {what}", path.display())]
    BadData {
        /// The file or directory concerned.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A valid input that asks for something ropescope does not do (the message names it).
    #[error("{0}")]
    Unsupported(String),
    /// Not enough of a resource to go on: memory, a size limit, an output another writer holds locked.
    #[error("{0}")]
    Resource(String),
    /// Two references compared differ beyond their tolerances (the comparison itself ran).
    #[error("{0}")]
    Mismatch(String),
    /// A failure that is a defect of ropescope, not of its input (a value that cannot be serialised).
    #[error("internal error: {0}")]
    Internal(String),
    /// The computation was stopped from outside ([`crate::interrupt`]: Ctrl-C in Python).
    #[error("interrupted")]
    Interrupted,

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

    /// An error of a step, with what the step was doing (`loading the model`, `prompt 'a.txt'`).
    #[error("{context}: {source}")]
    Context {
        /// What was being done.
        context: String,
        /// The step's error; its kind is this error's kind.
        #[source]
        source: Box<Error>,
    },

    // ---- tokenizer ----
    /// A tokenizer the metadata describes but ropescope does not implement.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
}

/// What kind of failure an [`Error`] is, for callers that act on the kind rather than the message; each kind
/// has its own process exit code (`docs/commands.md`, "Exit codes", lists them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Two references differ beyond tolerance ([`Error::Mismatch`]). Exit code 1.
    Mismatch,
    /// A bad argument or request ([`Error::Argument`]); clap's own usage errors share the code. Exit code 2.
    Argument,
    /// A model or data file that is malformed, truncated or inconsistent. Exit code 3.
    BadFile,
    /// A valid input ropescope does not implement, refused by name. Exit code 4.
    Unsupported,
    /// Not enough memory, a size limit, or an output locked by another writer. Exit code 5.
    Resource,
    /// An operating-system error on a named file. Exit code 6.
    Io,
    /// A defect of ropescope. Exit code 7.
    Internal,
    /// Stopped from outside ([`Error::Interrupted`]). Exit code 130, as a shell reports Ctrl-C.
    Interrupted,
}

impl ErrorKind {
    /// The process exit code of the command line for this kind of failure (0 is success).
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Mismatch => 1,
            ErrorKind::Argument => 2,
            ErrorKind::BadFile => 3,
            ErrorKind::Unsupported => 4,
            ErrorKind::Resource => 5,
            ErrorKind::Io => 6,
            ErrorKind::Internal => 7,
            ErrorKind::Interrupted => 130,
        }
    }
}

/// Adds what a step was doing to its error ([`Error::Context`]).
pub trait Context<T> {
    /// The error, if any, with `context` before it.
    fn context(self, context: impl Into<String>) -> Result<T>;
    /// The error, if any, with the context `f` gives (computed only on error).
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T>;
}

impl<T> Context<T> for Result<T> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.with_context(|| context)
    }

    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| Error::Context {
            context: f().into(),
            source: Box::new(e),
        })
    }
}

/// Result type of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The kind of this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } => ErrorKind::Io,
            Error::BadMagic { .. }
            | Error::Truncated { .. }
            | Error::TruncatedData { .. }
            | Error::Malformed(_)
            | Error::MissingTensor(_)
            | Error::Shape { .. }
            | Error::MissingKey(_)
            | Error::BadValue { .. }
            | Error::NonFinite { .. }
            | Error::BadData { .. } => ErrorKind::BadFile,
            Error::UnsupportedVersion(_)
            | Error::UnsupportedType { .. }
            | Error::NotImplemented { .. }
            | Error::Tokenizer(_)
            | Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::Argument(_) | Error::Parameter { .. } => ErrorKind::Argument,
            Error::Resource(_) => ErrorKind::Resource,
            Error::Mismatch(_) => ErrorKind::Mismatch,
            Error::Internal(_) => ErrorKind::Internal,
            Error::Interrupted => ErrorKind::Interrupted,
            Error::Context { source, .. } => source.kind(),
        }
    }

    /// A [`Error::Parameter`] error: `name` (snake case) followed by `problem`.
    pub fn parameter(name: &'static str, problem: impl Into<String>) -> Self {
        Error::Parameter {
            name,
            problem: problem.into(),
        }
    }

    /// A [`Error::BadData`] error: what is wrong with the data file `path`.
    pub fn bad_data(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Error::BadData {
            path: path.into(),
            what: what.into(),
        }
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
