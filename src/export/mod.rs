//! Writing results: atomic files, NumPy `.npy` arrays, the golden-reference directory format, and comparisons
//! against it.

pub mod compare;
pub mod inputs;
pub mod npy;
pub mod reference;
pub mod staged;
internal_mod! {
    atomic;
    diverge;
    input_file;
    rope_tables;
    token_ids;
}

// Atomic files and JSON are the crate's own helpers, public only with `internals`.
#[cfg(feature = "internals")]
pub use atomic::{check_output_file, read_json, write_atomic, write_json};
#[cfg(not(feature = "internals"))]
pub(crate) use atomic::{check_output_file, read_json, write_atomic, write_json};
