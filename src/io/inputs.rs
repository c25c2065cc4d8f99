//! The files and directories a command reads, so that none of its outputs replaces or removes one: an output
//! directory may not be an input or hold one (`--force` would delete it), and a single-file output may not be
//! an input file nor an existing file inside an input directory (other than the file the command itself writes
//! there, [`Inputs::replacing`]).
//!
//! Paths are compared canonically (symbolic links resolved), and also as given with only their parent
//! resolved, so that neither a link to an input nor a link that is an input escapes the comparison.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// One input: the path as given and the forms it is compared under.
#[derive(Debug, Clone)]
struct Input {
    given: PathBuf,
    forms: Vec<PathBuf>,
}

/// The inputs of one command; paths that do not exist are left out (nothing of them can be lost).
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    inputs: Vec<Input>,
    /// Names of files a single-file output may replace inside an input directory.
    replaceable: Vec<String>,
}

/// `path` with its parent directory resolved and its last component kept (a link stays the link); `None` when
/// the parent does not exist.
fn with_parent_resolved(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(parent.canonicalize().ok()?.join(name))
}

/// The forms `path` is compared under: canonical, and with only its parent resolved.
fn forms(path: &Path) -> Vec<PathBuf> {
    let mut forms: Vec<PathBuf> = path.canonicalize().ok().into_iter().collect();
    if let Some(p) = with_parent_resolved(path) {
        if !forms.contains(&p) {
            forms.push(p);
        }
    }
    forms
}

impl Inputs {
    /// The inputs `paths` (files or directories, in any form the command line gave them).
    pub fn new<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Self {
        let inputs = paths
            .into_iter()
            .filter(|p| p.as_ref().symlink_metadata().is_ok())
            .map(|p| Input {
                given: p.as_ref().to_path_buf(),
                forms: forms(p.as_ref()),
            })
            .collect();
        Self {
            inputs,
            replaceable: Vec::new(),
        }
    }

    /// These inputs, where a single-file output may replace an existing file called `name` inside an input
    /// directory: the file the command itself writes there (`report.html` into the scan directory it reads).
    pub fn replacing(mut self, name: &str) -> Self {
        self.replaceable.push(name.to_string());
        self
    }

    /// The first input that is `dir` or lies under it (as given on the command line).
    pub fn first_inside(&self, dir: &Path) -> Option<&Path> {
        let dirs = forms(dir);
        self.inputs
            .iter()
            .find(|i| {
                i.forms
                    .iter()
                    .any(|f| dirs.iter().any(|d| f.starts_with(d)))
            })
            .map(|i| i.given.as_path())
    }

    /// Refuses `file` as a single-file output when it is an input, or an existing file inside an input
    /// directory other than one named by [`Inputs::replacing`].
    pub fn check_file_output(&self, file: &Path) -> Result<()> {
        let outs = forms(file);
        let own = file
            .file_name()
            .is_some_and(|n| self.replaceable.iter().any(|o| n == o.as_str()));
        let exists = file.symlink_metadata().is_ok();
        for input in &self.inputs {
            for f in &input.forms {
                if outs.iter().any(|o| o == f) {
                    return Err(Error::Argument(format!(
                        "{} is an input of this command ({}); choose another output file",
                        file.display(),
                        input.given.display()
                    )));
                }
                if exists && !own && outs.iter().any(|o| o.starts_with(f)) {
                    return Err(Error::Argument(format!(
                        "{} is a file of the input directory {}; this command replaces {} there; \
                         choose another output file",
                        file.display(),
                        input.given.display(),
                        if self.replaceable.is_empty() {
                            "no file".to_string()
                        } else {
                            self.replaceable.join(", ")
                        }
                    )));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn inputs_are_found_through_links_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let model = data.join("m.gguf");
        std::fs::write(&model, b"x").unwrap();
        let link_to_data = dir.path().join("via");
        std::os::unix::fs::symlink(&data, &link_to_data).unwrap();
        // The input named through a link, the target named directly, and the other way round.
        let inputs = Inputs::new([link_to_data.join("m.gguf")]);
        assert!(inputs.first_inside(&data).is_some());
        assert!(Inputs::new([&model]).first_inside(&link_to_data).is_some());
        assert!(Inputs::new([&model]).first_inside(dir.path()).is_some());
        assert!(Inputs::new([&model])
            .first_inside(&dir.path().join("elsewhere"))
            .is_none());
        // A link inside the target that points out of it is still inside it.
        let outside = tempfile::tempdir().unwrap();
        let link = outside.path().join("m.gguf");
        std::os::unix::fs::symlink(&model, &link).unwrap();
        assert!(Inputs::new([&link]).first_inside(outside.path()).is_some());
        // Missing inputs are left out.
        assert!(Inputs::new([dir.path().join("none")])
            .first_inside(dir.path())
            .is_none());
    }

    #[test]
    fn a_file_output_may_not_be_an_input_nor_replace_a_file_of_an_input_directory() {
        let dir = tempfile::tempdir().unwrap();
        let scan = dir.path().join("scan");
        std::fs::create_dir(&scan).unwrap();
        std::fs::write(scan.join("summary.json"), b"{}").unwrap();
        std::fs::write(scan.join("own.json"), b"{}").unwrap();
        let inputs = Inputs::new([&scan]).replacing("own.json");
        let err = inputs
            .check_file_output(&scan.join("summary.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a file of the input directory"), "{err}");
        assert!(inputs.check_file_output(&scan.join("own.json")).is_ok());
        assert!(Inputs::new([&scan])
            .check_file_output(&scan.join("own.json"))
            .is_err());
        assert!(inputs.check_file_output(&scan.join("new.json")).is_ok());
        assert!(inputs.check_file_output(&dir.path().join("x")).is_ok());
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"x").unwrap();
        let err = Inputs::new([&model])
            .check_file_output(&model)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is an input of this command"), "{err}");
    }
}
