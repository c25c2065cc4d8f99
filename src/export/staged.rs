//! Whole-directory outputs: a command writes into a hidden staging directory beside its target and renames it
//! into place only when everything is written, so the target is always either absent, the previous complete
//! output, or the new complete output — never a mixture, and never a half-written directory a report would
//! read. A lock file beside the target refuses a second writer.
//!
//! For a target `DIR`: the lock is `DIR.lock` (holding the writer's process id), the staging directory
//! `.DIR.partial-PID`. An existing non-empty `DIR` is refused unless `force`, which replaces it whole when the
//! new output is complete. A lock whose process no longer runs (a killed writer) is stale: it is removed with
//! what the writer left (its staging directory; the previous output it had moved aside, put back if the
//! target is missing), and the new writer proceeds.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// A staging directory for one output directory, holding its lock until [`StagedDir::commit`] or drop.
#[derive(Debug)]
pub struct StagedDir {
    target: PathBuf,
    staging: PathBuf,
    lock: PathBuf,
    committed: bool,
}

/// `DIR.lock`, `.DIR.partial-PID` and `.DIR.old-PID` for a target `DIR` and a process id.
fn sibling(target: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    target.with_file_name(format!("{prefix}{name}{suffix}"))
}

/// Whether process `pid` runs; `None` where this cannot be told (no `/proc`).
fn process_runs(pid: u32) -> Option<bool> {
    let proc_root = Path::new("/proc/self");
    proc_root
        .exists()
        .then(|| Path::new("/proc").join(pid.to_string()).exists())
}

impl StagedDir {
    /// Takes the lock of `target` and creates its staging directory. Refuses a target that is a file, an
    /// existing non-empty directory unless `force`, a location that cannot be written, and a target another
    /// running writer holds.
    pub fn begin(target: &Path, force: bool) -> Result<Self> {
        let target = if target.is_absolute() {
            target.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| Error::io(".", e))?
                .join(target)
        };
        if target.exists() && !target.is_dir() {
            return Err(Error::Argument(format!(
                "{} is an existing file, not a directory",
                target.display()
            )));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let lock = sibling(&target, "", ".lock");
        Self::take_lock(&lock, &target)?;
        let non_empty = std::fs::read_dir(&target).is_ok_and(|mut d| d.next().is_some());
        if non_empty && !force {
            let _ = std::fs::remove_file(&lock);
            return Err(Error::Argument(format!(
                "{} exists and is not empty; choose another directory or give --force to replace it",
                target.display()
            )));
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
            committed: false,
        })
    }

    /// Creates `lock` holding this process's id; a stale lock (its process gone) is cleared first.
    fn take_lock(lock: &Path, target: &Path) -> Result<()> {
        for _ in 0..2 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(lock)
            {
                Ok(mut f) => {
                    use std::io::Write;
                    return write!(f, "{}", std::process::id()).map_err(|e| Error::io(lock, e));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(lock)
                        .ok()
                        .and_then(|s| s.trim().parse::<u32>().ok());
                    match holder.map(|pid| (pid, process_runs(pid))) {
                        Some((pid, Some(false))) => {
                            Self::clear_after(pid, target);
                            let _ = std::fs::remove_file(lock);
                        }
                        Some((pid, _)) => {
                            return Err(Error::Resource(format!(
                                "another ropescope (process {pid}) is writing {}; if none is, remove {}",
                                target.display(),
                                lock.display()
                            )))
                        }
                        None => {
                            return Err(Error::Resource(format!(
                                "{} is locked by {}; if no ropescope is writing it, remove the lock",
                                target.display(),
                                lock.display()
                            )))
                        }
                    }
                }
                Err(e) => return Err(Error::io(lock, e)),
            }
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

    #[test]
    fn commit_replaces_the_target_whole_and_drop_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let s = StagedDir::begin(&target, false).unwrap();
        std::fs::write(s.path().join("a"), b"1").unwrap();
        assert!(!target.exists());
        s.commit().unwrap();
        assert_eq!(std::fs::read(target.join("a")).unwrap(), b"1");
        assert!(StagedDir::begin(&target, false)
            .unwrap_err()
            .to_string()
            .contains("give --force"));
        let s = StagedDir::begin(&target, true).unwrap();
        std::fs::write(s.path().join("b"), b"2").unwrap();
        drop(s);
        assert!(target.join("a").exists() && !target.join("b").exists());
        let s = StagedDir::begin(&target, true).unwrap();
        std::fs::write(s.path().join("b"), b"2").unwrap();
        s.commit().unwrap();
        assert!(!target.join("a").exists() && target.join("b").exists());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn a_running_writer_holds_the_lock_and_a_dead_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let held = StagedDir::begin(&target, false).unwrap();
        let err = StagedDir::begin(&target, false).unwrap_err().to_string();
        assert!(err.contains("another ropescope"), "{err}");
        drop(held);
        // A lock left by a process that no longer runs (pid beyond the kernel's maximum).
        std::fs::write(sibling(&target, "", ".lock"), "4194305").unwrap();
        std::fs::create_dir(sibling(&target, ".", ".partial-4194305")).unwrap();
        let s = StagedDir::begin(&target, false).unwrap();
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
        std::fs::write(sibling(&target, "", ".lock"), "4194305").unwrap();
        let s = StagedDir::begin(&target, true).unwrap();
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
        let err = StagedDir::begin(&file, true).unwrap_err().to_string();
        assert!(err.contains("is an existing file"), "{err}");
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
    }
}
