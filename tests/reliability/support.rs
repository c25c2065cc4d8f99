//! Helpers every module of this binary shares: running `ropescope` under a deadline, asserting a one-line
//! refusal, and writing the small inputs (a synthetic model, token ids, a FIFO, a copy of the example scan) the
//! tests hand it.

use ropescope::io::npy;
use ropescope::synth::SyntheticModel;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longer than any command of these tests takes (a reader that trusted a billion layers, or a command waiting
/// on a FIFO, would not return at all): a command still running then is killed and the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// What a finished run of the binary gave.
pub struct Run {
    /// The arguments it ran with, for messages.
    pub args: Vec<String>,
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Its standard output (invalid UTF-8 replaced).
    pub stdout: String,
    /// Its standard error (invalid UTF-8 replaced).
    pub stderr: String,
}

/// Reads all of `pipe` on a thread of its own, so that a full pipe never blocks the child.
fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).unwrap();
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs the binary with `args`, `stdin` as its standard input (none when `None`) and `env` added to the
/// environment; kills it and panics, naming `args`, when it is still running after [`DEADLINE`].
pub fn run_with(args: &[&str], stdin: Option<Vec<u8>>, env: &[(&str, &str)]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let feeder = stdin.map(|bytes| {
        let mut pipe = child.stdin.take().unwrap();
        // A command stops reading at its limit; the broken pipe that follows is expected.
        std::thread::spawn(move || drop(pipe.write_all(&bytes)))
    });
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("ropescope {args:?} was still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        code: status.code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// [`run_with`] with no standard input and the environment as it is.
pub fn run(args: &[&str]) -> Run {
    run_with(args, None, &[])
}

/// Requires that `r` failed with exit code `code` and a standard error of exactly one line (one line and its end,
/// nothing blank around it) holding every one of `needles`.
pub fn assert_refused(r: &Run, code: i32, needles: &[&str]) {
    let (args, err) = (&r.args, &r.stderr);
    assert_eq!(r.code, Some(code), "ropescope {args:?}: {err}");
    for n in needles {
        assert!(
            err.contains(n),
            "ropescope {args:?}: expected '{n}' in: {err}"
        );
    }
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines.len() == 1 && !lines[0].trim().is_empty(),
        "ropescope {args:?}: not one line: {err}"
    );
}

/// Requires that `r` succeeded (exit code 0); otherwise shows both of its outputs.
pub fn assert_ok(r: &Run) {
    assert_eq!(
        r.code,
        Some(0),
        "ropescope {:?}: {}{}",
        r.args,
        r.stdout,
        r.stderr
    );
}

/// `path` as a command-line argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

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
    for e in std::fs::read_dir(crate::common::fixture("scan/example")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
}
