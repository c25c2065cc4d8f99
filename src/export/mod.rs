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

/// Reads and parses the JSON file `path`; a file that does not parse is [`crate::Error::BadData`] naming it as
/// "not a valid {what} file".
pub fn read_json<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    what: &str,
) -> crate::Result<T> {
    let text = std::fs::read(path).map_err(|e| crate::Error::io(path, e))?;
    serde_json::from_slice(&text).map_err(|e| {
        crate::Error::BadData(format!("{}: not a valid {what} file ({e})", path.display()))
    })
}

/// Writes `value` as pretty-printed JSON (with a final newline) to `path`, atomically.
pub fn write_json<T: serde::Serialize>(path: &std::path::Path, value: &T) -> crate::Result<()> {
    let mut text =
        serde_json::to_vec_pretty(value).map_err(|e| crate::Error::Internal(e.to_string()))?;
    text.push(b'\n');
    write_atomic(path, |w| w.write_all(&text))
}
