//! Whole-directory outputs: a command writes into a hidden staging directory beside its target and renames it
//! into place only when everything is written, so the target is always either absent, the previous complete
//! output, or the new complete output — never a mixture, and never a half-written directory a report would
//! read. A lock file beside the target refuses a second writer.
//!
//! For a target `DIR`: the lock is `DIR.lock` (holding the writer's process id, and locked by it with the
//! operating system's file lock for as long as it runs), the staging directory `.DIR.partial-PID`. A target
//! that is one of the command's inputs or holds one is refused. An existing non-empty `DIR` is refused unless
//! `force`, and even then unless it is an output this command wrote (its completion [`Record`] is there):
//! `force` replaces only ropescope's own outputs, whole, when the new output is complete. A lock file that no
//! process holds locked is a killed writer's (the system releases a file lock when its process ends, however it
//! ends, so neither a zombie nor a process id used again keeps it): it is cleared with what the writer left
//! (its staging directory; the previous output it had moved aside, put back if the target is missing), and the
//! new writer proceeds.

use crate::error::{Error, Result};
use crate::io::input_file::read_capped;
use crate::io::inputs::Inputs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A staging directory for one output directory, holding its lock until [`StagedDir::commit`] or drop.
#[derive(Debug)]
pub struct StagedDir {
    target: PathBuf,
    staging: PathBuf,
    lock: PathBuf,
    /// The open lock file, locked while this writer runs.
    _held: std::fs::File,
    committed: bool,
}

/// The file a command writes last into its output directory, which marks the directory as that command's
/// complete output: a JSON object holding every one of `keys`, none of them `null` or `false`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// The file's name inside the directory.
    pub file: &'static str,
    /// Keys only this command's file has.
    pub keys: &'static [&'static str],
}

/// Largest completion record read: the records are a few kilobytes; anything larger is not one.
pub const MAX_RECORD_BYTES: u64 = 64 << 20;

/// How many entries of a directory `--force` would wrongly remove are named in the refusal.
pub const NAMED_ENTRIES: usize = 5;

impl Record {
    /// A complete scan directory (`scan`, `merge`): `meta.json` with `complete`.
    pub const SCAN: Record = Record {
        file: "meta.json",
        keys: &["ropescope_version", "format_version", "complete"],
    };
    /// A shard of a scan (`scan --shard`): `shard.json` with `complete`.
    pub const SHARD: Record = Record {
        file: "shard.json",
        keys: &["shard_format_version", "complete"],
    };
    /// A reference directory (`reference`): `meta.json` with `complete`.
    pub const REFERENCE: Record = Record {
        file: "meta.json",
        keys: &["producer", "coordinate_order", "complete"],
    };
    /// One head on one prompt (`head`): `head.json` with `complete`.
    pub const HEAD: Record = Record {
        file: "head.json",
        keys: &["producer", "kv_head", "complete"],
    };
    /// Golden vectors (`conformance vectors`): `manifest.json`.
    pub const CONFORMANCE_VECTORS: Record = Record {
        file: "manifest.json",
        keys: &["format", "format_version", "families"],
    };
    /// A conformance matrix (`conformance run`): `conformance.json` with `complete`.
    pub const CONFORMANCE: Record = Record {
        file: "conformance.json",
        keys: &["format", "engine", "cells", "complete"],
    };
    /// RoPE tables (`rope`): `meta.json`.
    pub const ROPE_TABLES: Record = Record {
        file: "meta.json",
        keys: &["producer", "pairing_dims", "shapes"],
    };
    /// Scans side by side (`compare-scans`): `compare.json`.
    pub const COMPARE: Record = Record {
        file: "compare.json",
        keys: &["format_version", "models", "labels"],
    };
    /// A training experiment (`train`): `metrics.json`.
    pub const TRAIN: Record = Record {
        file: "metrics.json",
        keys: &["config", "curve"],
    };
    /// Standalone figures (`figures`): `figures.json`.
    pub const FIGURES: Record = Record {
        file: "figures.json",
        keys: &["producer", "figures"],
    };
    /// DuoAttention patterns (`export-duoattention`): `config.json`.
    pub const DUOATTENTION: Record = Record {
        file: "config.json",
        keys: &["sink_size", "recent_size"],
    };

    /// Whether `dir` holds this record: a regular file (not a link) of at most [`MAX_RECORD_BYTES`], a JSON
    /// object with every key set.
    pub fn is_in(&self, dir: &Path) -> bool {
        let path = dir.join(self.file);
        if !path.symlink_metadata().is_ok_and(|m| m.is_file()) {
            return false;
        }
        let Ok(text) = read_capped(&path, MAX_RECORD_BYTES, "a completion record") else {
            return false;
        };
        serde_json::from_slice::<serde_json::Value>(&text).is_ok_and(|v| {
            self.keys.iter().all(|k| {
                v.get(k)
                    .is_some_and(|x| !x.is_null() && x != &serde_json::Value::Bool(false))
            })
        })
    }
}

/// What a command's output directory may replace and must keep.
#[derive(Clone, Copy, Debug)]
pub struct Staging<'a> {
    /// Replace an existing non-empty target, if it is this command's output (one of `records` is in it).
    pub force: bool,
    /// The command's inputs: the target may not be one nor hold one, `force` or not.
    pub inputs: &'a Inputs,
    /// The completion records of the outputs this command may replace.
    pub records: &'a [Record],
}

/// `DIR.lock`, `.DIR.partial-PID` and `.DIR.old-PID` for a target `DIR` and a process id.
fn sibling(target: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    target.with_file_name(format!("{prefix}{name}{suffix}"))
}

/// Attempts at taking a lock whose file another writer removes meanwhile (each such removal ends a writer).
const LOCK_ATTEMPTS: usize = 3;

/// Whether the open `file` is still the file at `path` (not removed or replaced since it was opened).
fn is_at(file: &std::fs::File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), path.symlink_metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        path.exists()
    }
}

/// `target` made absolute, with a symbolic link to a directory resolved (the link is kept, its directory
/// replaced); a path that ends in `..`, `.` or a root is refused, having no name to stage beside.
fn resolve_target(target: &Path) -> Result<PathBuf> {
    let named = target
        .components()
        .next_back()
        .is_some_and(|c| matches!(c, std::path::Component::Normal(_)));
    if !named {
        return Err(Error::Argument(format!(
            "{}: an output directory needs a name of its own (not `.`, `..` or a root); give a new \
             directory such as {}",
            target.display(),
            target.join("ropescope-out").display()
        )));
    }
    let absolute: PathBuf = if target.is_absolute() {
        target.components().collect()
    } else {
        std::env::current_dir()
            .map_err(|e| Error::io(".", e))?
            .join(target)
            .components()
            .collect()
    };
    if absolute.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
        return absolute.canonicalize().map_err(|e| Error::io(&absolute, e));
    }
    Ok(absolute)
}

/// The refusal of `--force` on a non-empty `target` that holds none of `records`: what it would remove.
fn not_ours(target: &Path, records: &[Record]) -> Error {
    let mut names: Vec<String> = std::fs::read_dir(target)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let count = names.len();
    let more = if count > NAMED_ENTRIES { ", …" } else { "" };
    names.truncate(NAMED_ENTRIES);
    let files: Vec<&str> = records.iter().map(|r| r.file).collect();
    Error::parameter(
        "force",
        format!(
            "would remove the {count} entries ({}{more}) of {}, which is not an output of this command (no {} \
             of one in it), so it is refused: choose another directory, or empty it yourself",
            names.join(", "),
            target.display(),
            if files.is_empty() {
                "completion record".to_string()
            } else {
                files.join(" or ")
            },
        ),
    )
}

impl StagedDir {
    /// Takes the lock of `target` and creates its staging directory: call it before the work, so that a bad
    /// target fails at once. Refuses a target that is a file, one that is an input of the command or holds
    /// one, an existing non-empty directory unless `how.force` and it holds one of `how.records`, a location
    /// that cannot be written, and a target another running writer holds.
    pub fn begin(target: &Path, how: &Staging) -> Result<Self> {
        let target = resolve_target(target)?;
        if target.exists() && !target.is_dir() {
            return Err(Error::Argument(format!(
                "{} is an existing file, not a directory",
                target.display()
            )));
        }
        if let Some(input) = how.inputs.first_inside(&target) {
            return Err(Error::Argument(format!(
                "the output directory {} is or holds the input {}; choose another output directory",
                target.display(),
                input.display()
            )));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let lock = sibling(&target, "", ".lock");
        let held = Self::take_lock(&lock, &target)?;
        let non_empty = std::fs::read_dir(&target).is_ok_and(|mut d| d.next().is_some());
        let refusal = match (non_empty, how.force) {
            (false, _) => None,
            (true, false) => Some(Error::parameter(
                "force",
                format!(
                    "is needed to replace {}, which exists and is not empty; or choose another directory",
                    target.display()
                ),
            )),
            (true, true) if how.records.iter().any(|r| r.is_in(&target)) => None,
            (true, true) => Some(not_ours(&target, how.records)),
        };
        if let Some(e) = refusal {
            let _ = std::fs::remove_file(&lock);
            return Err(e);
        }
        let pid = std::process::id();
        let staging = sibling(&target, ".", &format!(".partial-{pid}"));
        let _ = std::fs::remove_dir_all(&staging);
        if let Err(e) = std::fs::create_dir(&staging) {
            let _ = std::fs::remove_file(&lock);
            return Err(Error::io(&staging, e));
        }
        Ok(Self {
            target,
            staging,
            lock,
            _held: held,
            committed: false,
        })
    }

    /// Opens `lock`, locks it and writes this process's id into it. A lock file no process holds is a killed
    /// writer's: what it left is cleared first. One that another process holds is refused, naming it.
    fn take_lock(lock: &Path, target: &Path) -> Result<std::fs::File> {
        use std::io::{Seek, Write};
        for _ in 0..LOCK_ATTEMPTS {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(lock)
                .map_err(|e| Error::io(lock, e))?;
            let mut holder = String::new();
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let _ = file.read_to_string(&mut holder);
                    let process = holder
                        .trim()
                        .parse::<u32>()
                        .map_or_else(|_| String::new(), |pid| format!(" (process {pid})"));
                    return Err(Error::Resource(format!(
                        "another ropescope{process} is writing {} (it holds {}); wait for it to end or stop it",
                        target.display(),
                        lock.display()
                    )));
                }
                // A file system without file locks (some cluster file systems mounted without them): the
                // lock file still names the writer, but a second writer is not detected there.
                Err(std::fs::TryLockError::Error(e))
                    if e.kind() == std::io::ErrorKind::Unsupported => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(lock, e)),
            }
            // The writer that held it may have finished and removed the file since it was opened.
            if !is_at(&file, lock) {
                continue;
            }
            let _ = file.read_to_string(&mut holder);
            if let Ok(pid) = holder.trim().parse::<u32>() {
                Self::clear_after(pid, target);
            }
            file.set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| write!(file, "{}", std::process::id()))
                .map_err(|e| Error::io(lock, e))?;
            return Ok(file);
        }
        Err(Error::Resource(format!(
            "cannot take the lock {}",
            lock.display()
        )))
    }

    /// Clears what a killed writer `pid` left: its staging directory, and the previous output it had moved
    /// aside (put back when the killed writer had not yet put its own output in place, removed otherwise).
    fn clear_after(pid: u32, target: &Path) {
        let _ = std::fs::remove_dir_all(sibling(target, ".", &format!(".partial-{pid}")));
        let old = sibling(target, ".", &format!(".old-{pid}"));
        if old.exists() {
            if target.exists() {
                let _ = std::fs::remove_dir_all(&old);
            } else {
                let _ = std::fs::rename(&old, target);
            }
        }
    }

    /// The directory to write into.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// The final directory.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Puts the complete output in place of the target (replacing a previous one whole) and releases the lock.
    pub fn commit(mut self) -> Result<PathBuf> {
        let old = sibling(&self.target, ".", &format!(".old-{}", std::process::id()));
        let had_old = self.target.exists();
        if had_old {
            std::fs::rename(&self.target, &old).map_err(|e| Error::io(&self.target, e))?;
        }
        if let Err(e) = std::fs::rename(&self.staging, &self.target) {
            if had_old {
                let _ = std::fs::rename(&old, &self.target);
            }
            return Err(Error::io(&self.target, e));
        }
        self.committed = true;
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        let _ = std::fs::remove_file(&self.lock);
        Ok(self.target.clone())
    }
}

impl Drop for StagedDir {
    /// An output that was not committed is removed with its lock; the target is left as it was.
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
            let _ = std::fs::remove_file(&self.lock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The completion record of the tests' outputs.
    const DONE: Record = Record {
        file: "done.json",
        keys: &["done"],
    };

    /// `StagedDir::begin` with no inputs, accepting [`DONE`].
    fn begin(target: &Path, force: bool) -> Result<StagedDir> {
        StagedDir::begin(
            target,
            &Staging {
                force,
                inputs: &Inputs::default(),
                records: &[DONE],
            },
        )
    }

    /// Writes `name` and the completion record into `s`, and commits it.
    fn complete(s: StagedDir, name: &str) {
        std::fs::write(s.path().join(name), b"2").unwrap();
        std::fs::write(s.path().join(DONE.file), br#"{"done": true}"#).unwrap();
        s.commit().unwrap();
    }

    #[test]
    fn commit_replaces_the_target_whole_and_drop_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let s = begin(&target, false).unwrap();
        std::fs::write(s.path().join("a"), b"1").unwrap();
        std::fs::write(s.path().join(DONE.file), br#"{"done": 1}"#).unwrap();
        assert!(!target.exists());
        s.commit().unwrap();
        assert_eq!(std::fs::read(target.join("a")).unwrap(), b"1");
        assert!(begin(&target, false)
            .unwrap_err()
            .to_string()
            .contains("force is needed to replace"));
        let s = begin(&target, true).unwrap();
        std::fs::write(s.path().join("b"), b"2").unwrap();
        drop(s);
        assert!(target.join("a").exists() && !target.join("b").exists());
        complete(begin(&target, true).unwrap(), "b");
        assert!(!target.join("a").exists() && target.join("b").exists());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn a_running_writer_holds_the_lock_and_a_dead_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let held = begin(&target, false).unwrap();
        let err = begin(&target, false).unwrap_err().to_string();
        assert!(err.contains("another ropescope"), "{err}");
        drop(held);
        // A lock left by a process that no longer runs (pid beyond the kernel's maximum).
        std::fs::write(sibling(&target, "", ".lock"), "4194305").unwrap();
        std::fs::create_dir(sibling(&target, ".", ".partial-4194305")).unwrap();
        let s = begin(&target, false).unwrap();
        assert!(!sibling(&target, ".", ".partial-4194305").exists());
        s.commit().unwrap();
    }

    #[test]
    fn a_writer_killed_between_its_renames_gets_the_previous_output_back() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let old = sibling(&target, ".", ".old-4194305");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join("a"), b"1").unwrap();
        std::fs::write(old.join(DONE.file), br#"{"done": true}"#).unwrap();
        std::fs::write(sibling(&target, "", ".lock"), "4194305").unwrap();
        let s = begin(&target, true).unwrap();
        assert_eq!(std::fs::read(target.join("a")).unwrap(), b"1");
        assert!(!old.exists());
        drop(s);
        assert!(target.join("a").exists());
    }

    #[test]
    fn a_file_is_not_a_target() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let err = begin(&file, true).unwrap_err().to_string();
        assert!(err.contains("is an existing file"), "{err}");
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }

    #[test]
    fn force_replaces_only_an_output_holding_its_record() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        std::fs::create_dir(&target).unwrap();
        for (i, name) in ["thesis.tex", "data", "notes", "a", "b", "c"]
            .iter()
            .enumerate()
        {
            std::fs::write(target.join(name), [i as u8]).unwrap();
        }
        let err = begin(&target, true).unwrap_err().to_string();
        assert!(
            err.contains("is not an output of this command (no done.json of one in it)")
                && err.contains("force would remove the 6 entries (a, b, c, data, notes, …)"),
            "{err}"
        );
        // A record of another kind, or with its key false, is not this command's.
        std::fs::write(target.join(DONE.file), br#"{"done": false}"#).unwrap();
        assert!(begin(&target, true).is_err());
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 7);
        std::fs::write(target.join(DONE.file), br#"{"done": true}"#).unwrap();
        complete(begin(&target, true).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 2);
    }

    #[test]
    fn a_target_holding_an_input_is_refused_even_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"x").unwrap();
        let inputs = Inputs::new([&model]);
        for force in [false, true] {
            let err = StagedDir::begin(
                dir.path(),
                &Staging {
                    force,
                    inputs: &inputs,
                    records: &[DONE],
                },
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("is or holds the input"), "{err}");
        }
        assert_eq!(std::fs::read(&model).unwrap(), b"x");
    }

    #[test]
    fn a_target_without_a_name_of_its_own_is_refused() {
        for t in [".", "..", "/", "a/.."] {
            let err = begin(Path::new(t), true).unwrap_err().to_string();
            assert!(err.contains("needs a name of its own"), "{t}: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_to_a_directory_is_kept_and_its_directory_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        let link = dir.path().join("link");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        complete(begin(&link, false).unwrap(), "a");
        assert!(link.symlink_metadata().unwrap().is_symlink());
        assert!(real.join("a").is_file());
    }
}
