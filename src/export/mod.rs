//! Writing results: atomic files, NumPy `.npy` arrays, the golden-reference directory format, and comparisons
//! against it.

pub mod atomic;
pub mod compare;
pub mod diverge;
pub mod npy;
pub mod reference;
pub mod rope_tables;
pub mod staged;

pub use atomic::write_atomic;

/// Writes `value` as pretty-printed JSON (with a final newline) to `path`, atomically.
pub fn write_json<T: serde::Serialize>(path: &std::path::Path, value: &T) -> crate::Result<()> {
    let mut text =
        serde_json::to_vec_pretty(value).map_err(|e| crate::Error::Internal(e.to_string()))?;
    text.push(b'\n');
    write_atomic(path, |w| w.write_all(&text))
}
