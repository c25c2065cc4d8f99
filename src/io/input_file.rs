//! Opening and reading input files: only regular files are read (a FIFO, a device, a socket or a directory is
//! refused by name, without blocking on it), and a file read whole is read only up to a size limit of its kind,
//! stated in the error.
//!
//! A regular file's size is known before it is read, so each limit is checked before any allocation; the read
//! itself stops one byte past the limit, so a file that grows meanwhile cannot exceed it either.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Largest text file read (`--file`, text `--prompts`): 16 MiB, four times the text of a million tokens (about
/// 4 bytes a token), more than any model's context holds.
pub const MAX_TEXT_BYTES: u64 = 16 << 20;

/// Largest `.npy` file of token ids read (`--ids`, `.npy` `--prompts`): 64 MiB, eight million 8-byte ids, more
/// than any model's context holds.
pub const MAX_IDS_BYTES: u64 = 64 << 20;

/// Largest JSON file read (a scan's `meta.json`, `summary.json`, `prompts.json`, a shard's records): 256 MiB,
/// far above what a scan of the largest supported model writes (its `summary.json` is a few MiB); parsing holds
/// the text and its values in memory together.
pub const MAX_JSON_BYTES: u64 = 256 << 20;

/// Largest other `.npy` array read whole (reference directories, other engines' dumps, a scan's arrays):
/// 16 GiB, above a 4096-token float64 attention map of 64 heads (8 GiB), the largest array a reference of a
/// model ropescope runs on a workstation writes.
pub const MAX_NPY_BYTES: u64 = 16 << 30;

/// What a file that is not a regular file is, for the error.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Refuses `meta` unless it is a regular file's.
fn check_regular(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    Err(Error::bad_data(path, format!("{} is not an input ropescope reads (inputs are regular files)", kind_of(meta)
    )))
}

/// Opens the regular file `path` for reading; anything else is refused by name ([`Error::BadData`]) before it is
/// opened, so a FIFO with no writer or a device is never waited on. Links are followed.
pub fn open_regular(path: &Path) -> Result<File> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    check_regular(path, &meta)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        // Should the path be replaced by a FIFO after the check, opening it still does not wait for a writer.
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| Error::io(path, e))?;
    check_regular(path, &file.metadata().map_err(|e| Error::io(path, e))?)?;
    Ok(file)
}

/// `bytes` as a short size for messages: `16 MiB`, `64 KiB`, `100 bytes`.
fn size_text(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b.is_multiple_of(1 << 30) => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// The error for an input of `what` (`"a text file"`) larger than `limit`; `len` when known.
fn too_large(origin: &str, what: &str, len: Option<u64>, limit: u64) -> Error {
    let size = len.map_or_else(String::new, |n| format!("{n} bytes, "));
    Error::Resource(format!(
        "{origin}: {size}more than the limit of {} for {what}",
        size_text(limit)
    ))
}

/// Reads all of `reader` (named `origin` in errors) up to `limit` bytes; more is refused ([`Error::Resource`]).
pub fn read_stream_capped(
    reader: impl Read,
    origin: &str,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(origin, e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(origin, what, None, limit));
    }
    Ok(bytes)
}

/// The bytes of the regular file `path` ([`open_regular`]), refused before any is read when it is larger than
/// `limit` bytes, the limit for `what` (`"a text file"`), which the error states ([`Error::Resource`]).
pub fn read_capped(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    let file = open_regular(path)?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let origin = path.display().to_string();
    if len > limit {
        return Err(too_large(&origin, what, Some(len), limit));
    }
    read_stream_capped(file, &origin, limit, what)
}

/// The UTF-8 text of the regular file `path`, of at most [`MAX_TEXT_BYTES`]; other bytes are
/// [`Error::Argument`].
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = read_capped(path, MAX_TEXT_BYTES, "a text file")?;
    String::from_utf8(bytes).map_err(|_| Error::Argument(format!("{} is not UTF-8 text", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_binary_multiples() {
        assert_eq!(size_text(MAX_TEXT_BYTES), "16 MiB");
        assert_eq!(size_text(MAX_NPY_BYTES), "16 GiB");
        assert_eq!(size_text(3 << 10), "3 KiB");
        assert_eq!(size_text(1000), "1000 bytes");
    }

    #[test]
    fn a_file_over_its_limit_is_refused_and_one_at_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        std::fs::write(&path, b"0123456789").unwrap();
        assert_eq!(read_capped(&path, 10, "a text file").unwrap().len(), 10);
        let err = read_capped(&path, 9, "a text file").unwrap_err();
        assert!(matches!(err, Error::Resource(_)), "{err}");
        assert!(
            err.to_string()
                .ends_with("t.txt: 10 bytes, more than the limit of 9 bytes for a text file"),
            "{err}"
        );
        let err = read_stream_capped(&b"abc"[..], "stdin", 2, "a text file").unwrap_err();
        assert_eq!(
            err.to_string(),
            "stdin: more than the limit of 2 bytes for a text file"
        );
    }

    #[test]
    fn a_directory_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let err = open_regular(dir.path()).unwrap_err().to_string();
        assert!(err.contains("a directory is not an input"), "{err}");
    }
}
