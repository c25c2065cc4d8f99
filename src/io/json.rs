//! JSON files: read from a regular file of bounded size, written pretty-printed and atomically.

use super::atomic::write_atomic;
use crate::error::{Error, Result};
use std::path::Path;

/// Reads and parses the JSON file `path`, a regular file of at most
/// [`MAX_JSON_BYTES`](super::input_file::MAX_JSON_BYTES); a file that does not parse is [`Error::BadData`]
/// naming it as "not a valid {what} file".
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    use super::input_file::{read_capped, MAX_JSON_BYTES};
    let text = read_capped(path, MAX_JSON_BYTES, "a JSON file")?;
    serde_json::from_slice(&text)
        .map_err(|e| Error::bad_data(path, format!("not a valid {what} file ({e})")))
}

/// Writes `value` as pretty-printed JSON (with a final newline) to `path`, atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| Error::Internal(e.to_string()))?;
    text.push(b'\n');
    write_atomic(path, |w| w.write_all(&text))
}
