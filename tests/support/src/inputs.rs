//! Small inputs the command-line tests hand the binary: a synthetic model, token ids, a FIFO nobody writes, a
//! copy of the example scan directory; and a scan of a converted model.

use crate::paths::fixture;
use ropescope::io::npy;
use ropescope::synth::SyntheticModel;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes the synthetic model of architecture `arch` (`SyntheticModel::new`: two layers, context 512,
/// vocabulary 64) to `path`; returns its bytes.
pub fn write_model(path: &Path, arch: &str) -> Vec<u8> {
    let bytes = SyntheticModel::new(arch).to_bytes();
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// Writes `n` token ids inside the synthetic vocabulary of 64 to the `.npy` file `path`; returns its bytes.
pub fn write_ids(path: &Path, n: usize) -> Vec<u8> {
    let ids: Vec<i64> = (0..n as i64).map(|i| (i * 7 + 3) % 64).collect();
    npy::write(path, &[ids.len()], &ids).unwrap();
    std::fs::read(path).unwrap()
}

/// A FIFO at `dir/name`, which no process ever writes.
pub fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success());
    path
}

/// A copy of the example scan directory (`fixtures/scan/example`) at `dir`.
pub fn copy_example_scan(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for e in std::fs::read_dir(fixture("scan/example")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
}

/// `scan --count 1 --length 64 --delta-max 8` of the converted model `fixtures/converted/{variant}` into `out`
/// (built-in prompts, every analysis), through the library; returns the report's path.
pub fn scan_converted(variant: &str, out: &Path) -> PathBuf {
    let mut req = ropescope::scan::ScanRequest::new(crate::paths::fixture(&format!(
        "converted/{variant}/model.gguf"
    )));
    req.count = Some(1);
    req.params.prompt_length = 64;
    req.params.delta_max = 8;
    req.params.cone_tokens = 32;
    req.command = [
        "ropescope",
        "scan",
        variant,
        "--count",
        "1",
        "--length",
        "64",
    ]
    .map(String::from)
    .to_vec();
    let summary = ropescope::scan::run(&req, out, &ropescope::scan::NoProgress)
        .unwrap_or_else(|e| panic!("{variant}: {e}"));
    summary.report.expect("a whole scan has a report")
}
