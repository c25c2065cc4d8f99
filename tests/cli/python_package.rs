//! The Python package (`python/`) and its pytest suite, run from `cargo test`.
//!
//! The test keeps a virtual environment in the cache, `$ROPESCOPE_CACHE/python-package` (default
//! `~/.cache/ropescope`; never inside the clone), installs `python/requirements-test.txt` into it, builds and
//! installs the package (`pip install ./python`, its Rust build in `$ROPESCOPE_CACHE/python-target`), and runs
//! `pytest python/tests`, which also runs `examples/numpy_first_layer.py`. Each step is redone only when its
//! input changed: the requirements file, or the package's and the engine's sources (a sha256 over them). Needs
//! `python3` with its `venv` module (Debian: `python3-venv`) and the models of `fixtures/models.sh`;
//! `ROPESCOPE_SKIP_PYTHON=1` skips the test.

use ropescope_test_support::paths;
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Set to skip this test (a machine without Python's `venv` module).
const SKIP_VAR: &str = "ROPESCOPE_SKIP_PYTHON";

/// Runs `cmd`, panicking with its output (and `hint`) when it fails.
fn run(cmd: &mut Command, hint: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}{hint}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}){hint}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every file under `dir`, recursively, sorted.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "__pycache__") {
                files_under(&path, out);
            }
        } else {
            out.push(path);
        }
    }
    out.sort();
}

/// sha256 over the names and contents of everything the installed package is built from.
fn package_digest(root: &Path) -> String {
    let mut files = Vec::new();
    for dir in ["src", "python/src", "python/ropescope"] {
        files_under(&root.join(dir), &mut files);
    }
    for file in [
        "Cargo.toml",
        "python/Cargo.toml",
        "python/Cargo.lock",
        "python/pyproject.toml",
    ] {
        files.push(root.join(file));
    }
    let mut h = Sha256::new();
    for f in &files {
        h.update(f.strip_prefix(root).unwrap().to_string_lossy().as_bytes());
        h.update(fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
    }
    format!("{:x}", h.finalize())
}

/// `PATH` with the environment's `bin` first: the build backend runs `maturin` from there.
fn with_venv_bin(venv: &Path) -> std::ffi::OsString {
    let mut dirs = vec![venv.join("bin")];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).expect("PATH holds a directory with a ':'")
}

/// Whether `stamp` holds `content`; if not, runs `step` and then writes it.
fn unless_stamped(stamp: &Path, content: &[u8], step: impl FnOnce()) {
    if fs::read(stamp).is_ok_and(|s| s == content) {
        return;
    }
    let _ = fs::remove_file(stamp);
    step();
    fs::write(stamp, content).unwrap_or_else(|e| panic!("{}: {e}", stamp.display()));
}

#[test]
#[ignore = "slow: builds the Python wheel and runs pytest"]
fn python_package_tests_pass() {
    if std::env::var_os(SKIP_VAR).is_some() {
        eprintln!("{SKIP_VAR} is set: the Python package's tests are skipped");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cache = paths::cache_dir();
    let venv = cache.join("python-package");
    let (python, pip) = (venv.join("bin/python"), venv.join("bin/pip"));

    if !pip.exists() {
        let _ = fs::remove_dir_all(&venv);
        fs::create_dir_all(&cache).unwrap_or_else(|e| panic!("{}: {e}", cache.display()));
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output();
        if !made.as_ref().is_ok_and(|o| o.status.success()) {
            let _ = fs::remove_dir_all(&venv);
            panic!(
                "cannot create a Python virtual environment in {}: {}; install python3 with its venv module \
                 (Debian: apt-get install python3-venv), or set {SKIP_VAR}=1 to skip this test",
                venv.display(),
                match made {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                }
            );
        }
    }
    let quiet = ["--quiet", "--disable-pip-version-check"];
    let requirements = root.join("python/requirements-test.txt");
    let wanted = fs::read(&requirements).unwrap();
    unless_stamped(&venv.join("requirements-test.txt"), &wanted, || {
        run(
            Command::new(&pip)
                .arg("install")
                .args(quiet)
                .arg("-r")
                .arg(&requirements),
            "",
        );
    });
    let digest = package_digest(root);
    unless_stamped(
        &venv.join("ropescope-package.sha256"),
        digest.as_bytes(),
        || {
            run(
                Command::new(&pip)
                    .arg("install")
                    .args(quiet)
                    .args(["--no-build-isolation", "--no-deps", "--force-reinstall"])
                    .arg(root.join("python"))
                    .env("PATH", with_venv_bin(&venv))
                    .env("CARGO_TARGET_DIR", cache.join("python-target")),
                "",
            );
        },
    );
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("python/tests"))
        .env("ROPESCOPE_BIN", env!("CARGO_BIN_EXE_ropescope"))
        .env("ROPESCOPE_CACHE", &cache)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run pytest: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pytest failed ({})\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", text.trim_end().lines().last().unwrap_or(""));
}
