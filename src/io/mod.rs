//! Files in and out: outputs written whole or not at all (`atomic`, `staged`), the inputs no output may replace
//! (`inputs`), input files opened only when regular and read up to a limit (`input_file`), NumPy `.npy` arrays
//! and token ids (`npy`, `token_ids`), JSON (`json`) and content hashes (`hashing`).

pub mod inputs;
pub mod npy;
pub mod staged;
internal_mod! {
    atomic;
    hashing;
    input_file;
    json;
    token_ids;
}

// Atomic files and JSON are the crate's own helpers, public only with `internals`.
#[cfg(feature = "internals")]
pub use atomic::{check_output_file, write_atomic};
#[cfg(not(feature = "internals"))]
pub(crate) use atomic::{check_output_file, write_atomic};
#[cfg(feature = "internals")]
pub use json::{read_json, write_json};
#[cfg(not(feature = "internals"))]
pub(crate) use json::{read_json, write_json};
