//! Atomic file output: a file is either absent, the old version, or complete; never half-written. A path that
//! is a symbolic link to a regular file is written through the link (the file it points to is replaced, the
//! link kept); a character device or a FIFO (`/dev/null`, `/dev/stdout`) is written in place, as a stream; a
//! directory, a link to nothing or any other kind of file is refused, never renamed over.

use crate::error::{Error, Result};
use crate::io::inputs::Inputs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How a single-file output is written, from what its path is now.
enum Destination {
    /// Absent, or a regular file: a new file renamed over this path (the link's file, for a link).
    Replace(PathBuf),
    /// A character device or a FIFO: written in place.
    Stream,
}

/// What `path` is, as a single-file output; a kind of file that is neither replaced nor streamed into is an
/// argument error naming it.
fn destination(path: &Path) -> Result<Destination> {
    let refuse = |what: &str| {
        Err(Error::Argument(format!(
            "{} is {what}; ropescope writes a single-file output only to a regular file, a character device \
             or a FIFO",
            path.display()
        )))
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {
            if path.symlink_metadata().is_ok_and(|l| l.is_symlink()) {
                let real = path.canonicalize().map_err(|e| Error::io(path, e))?;
                Ok(Destination::Replace(real))
            } else {
                Ok(Destination::Replace(path.to_path_buf()))
            }
        }
        Ok(m) if is_stream(m.file_type()) => Ok(Destination::Stream),
        Ok(m) if m.is_dir() => refuse("a directory"),
        Ok(_) => refuse("neither a regular file, a character device nor a FIFO"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if path.symlink_metadata().is_ok() {
                refuse("a symbolic link to nothing")
            } else {
                Ok(Destination::Replace(path.to_path_buf()))
            }
        }
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Whether a file of type `t` is a character device or a FIFO.
#[cfg(unix)]
fn is_stream(t: std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    t.is_char_device() || t.is_fifo()
}

/// Whether a file of type `t` is a character device or a FIFO (never, off Unix).
#[cfg(not(unix))]
fn is_stream(_: std::fs::FileType) -> bool {
    false
}

/// The directory a file `path` is created in.
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Random characters in the name of a temporary file (`.NAME.XXXXXX.tmp`).
const TEMPORARY_RANDOM_CHARS: usize = 6;

/// The prefix of the temporary files beside `path`: `.NAME.`.
fn temporary_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.")
}

/// `e` without the path the `tempfile` crate appends to its message (` at path "..."`, the temporary file's):
/// the error names the directory already.
fn without_temporary_path(e: std::io::Error) -> std::io::Error {
    let text = e.to_string();
    match text.split_once(" at path ") {
        Some((cause, _)) => std::io::Error::new(e.kind(), cause.to_string()),
        None => e,
    }
}

/// A temporary file beside `path`, `.NAME.XXXXXX.tmp`, with the mode a new file gets under the umask, locked
/// while it is open so that a later writer can tell it from one a killed writer left.
fn temporary_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    let dir = parent_of(path);
    let prefix = temporary_prefix(path);
    let mut builder = tempfile::Builder::new();
    builder
        .prefix(&prefix)
        .suffix(".tmp")
        .rand_bytes(TEMPORARY_RANDOM_CHARS);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666 & !umask()));
    }
    let tmp = builder
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, without_temporary_path(e)))?;
    // Where the file system has no locks, a killed writer's temporary file is merely not cleared.
    let _ = tmp.as_file().try_lock();
    Ok(tmp)
}

/// Removes the temporary files a killed writer of `path` left beside it (as large as the output, for `synth`):
/// `.NAME.XXXXXX.tmp` files that no process holds locked. Nothing else is touched.
fn clear_stale_temporaries(path: &Path) {
    let (dir, prefix) = (parent_of(path), temporary_prefix(path));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_temporary = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .is_some_and(|r| {
                r.len() == TEMPORARY_RANDOM_CHARS && r.chars().all(|c| c.is_ascii_alphanumeric())
            });
        if !is_temporary || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let stale = std::fs::File::open(entry.path()).is_ok_and(|f| f.try_lock().is_ok());
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Checks, before any work, that `path` can take a single-file output of a command reading `inputs`: not an
/// input ([`Inputs::check_file_output`]), of a kind [`write_atomic`] writes, and for a regular file in a
/// directory where a file can be created (a temporary one is created and removed).
pub fn check_output_file(path: &Path, inputs: &Inputs) -> Result<()> {
    inputs.check_file_output(path)?;
    match destination(path)? {
        Destination::Replace(real) => temporary_beside(&real).map(drop),
        Destination::Stream => Ok(()),
    }
}

/// Writes `path` by streaming into a temporary file in the same directory, syncing it, and renaming it over
/// `path`. On any error (a full disk, say) the temporary file is removed and `path` is left as it was; the
/// temporary files a killed writer of `path` left are removed first. A link to a regular file is written
/// through; a character device or a FIFO is written in place; anything else that exists and is not a regular
/// file is refused (see the module documentation).
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let real = match destination(path)? {
        Destination::Replace(real) => real,
        Destination::Stream => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            let mut buf = std::io::BufWriter::with_capacity(1 << 20, file);
            write(&mut buf).map_err(|e| Error::io(path, e))?;
            return buf.flush().map_err(|e| Error::io(path, e));
        }
    };
    clear_stale_temporaries(&real);
    let mut tmp = temporary_beside(&real)?;
    {
        let mut buf = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
        write(&mut buf).map_err(|e| Error::io(path, e))?;
        buf.flush().map_err(|e| Error::io(path, e))?;
    }
    tmp.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    tmp.persist(&real).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}

/// The process's file-mode creation mask: Linux reports it in `/proc/self/status`; elsewhere the common 022 is
/// assumed. (Reading it with `umask(2)` would change it for every thread for a moment.)
#[cfg(unix)]
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_atomic(&path, |w| w.write_all(b"old")).unwrap();
        let err = write_atomic(&path, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(err.unwrap_err().to_string().contains("disk full"));
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn files_honour_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        write_atomic(&path, |w| w.write_all(b"x")).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask());
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_fifos_are_written_in_place_and_directories_refused() {
        use std::os::unix::fs::FileTypeExt;
        write_atomic(Path::new("/dev/null"), |w| w.write_all(b"x")).unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, |w| w.write_all(b"through")).unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        let err = write_atomic(dir.path(), |w| w.write_all(b"x"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a directory"), "{err}");
        assert!(check_output_file(dir.path(), &Inputs::default()).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_is_written_through_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        let link = dir.path().join("link");
        std::fs::write(&file, b"old").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_atomic(&link, |w| w.write_all(b"new")).unwrap();
        assert!(link.symlink_metadata().unwrap().is_symlink());
        assert_eq!(std::fs::read(&file).unwrap(), b"new");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("none"), &dangling).unwrap();
        let err = write_atomic(&dangling, |w| w.write_all(b"x"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("a symbolic link to nothing"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    #[test]
    fn an_unwritable_place_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/out.json");
        assert!(check_output_file(&missing, &Inputs::default()).is_err());
        assert!(check_output_file(&dir.path().join("out.json"), &Inputs::default()).is_ok());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
