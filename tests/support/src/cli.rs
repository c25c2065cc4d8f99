//! Running the `ropescope` binary Cargo builds for the integration tests: plainly ([`ropescope`], [`ok`]), or
//! under a deadline with its outputs drained on threads of their own ([`run_with`], [`run`]) and a refusal checked
//! to be one clear line ([`assert_refused`]).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The `ropescope` binary built for the running test: `$CARGO_BIN_EXE_ropescope`, which Cargo (1.94 and later)
/// and cargo-nextest set when they run an integration test, else `ropescope` in the folder above the test
/// binary's `deps/` (where Cargo puts the package's binaries). `env!("CARGO_BIN_EXE_ropescope")` is not
/// available here: Cargo sets it at compile time for integration tests only, not for their dependencies.
pub fn exe() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_ropescope") {
        return PathBuf::from(path);
    }
    let test = std::env::current_exe().expect("the test binary's path");
    let path = test
        .parent()
        .and_then(Path::parent)
        .expect("the test binary sits in target/<profile>/deps/")
        .join(format!("ropescope{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is missing: run the tests through cargo",
        path.display()
    );
    path
}

/// Runs `ropescope ARGS`.
pub fn ropescope(args: &[&str]) -> Output {
    Command::new(exe()).args(args).output().unwrap()
}

/// Runs `ropescope ARGS` and panics with its stderr unless it succeeds.
pub fn ok(args: &[&str]) -> Output {
    let out = ropescope(args);
    assert!(
        out.status.success(),
        "ropescope {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Longer than any command of the reliability tests takes (a reader that trusted a billion layers, or a command
/// waiting on a FIFO, would not return at all): a command still running then is killed and the test fails.
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
    let mut child = Command::new(exe())
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
