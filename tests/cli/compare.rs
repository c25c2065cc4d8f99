//! `ropescope compare`: a verdict line, an exit code per outcome (0 within tolerance, 1 over it, 2 for a
//! comparison that cannot be made), and a quiet end when its reader closes the pipe.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn compare(args: &[&Path], extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("compare")
        .args(args)
        .args(extra)
        .output()
        .unwrap()
}

/// Writes `n` attention arrays `attn_L{i}.npy` of four values into `dir`, the last value of the first array
/// moved by `shift`.
fn write_refs(dir: &Path, n: usize, shift: f64) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        let mut v = vec![0.25f64, 0.5, 0.125, 1.0];
        if i == 0 {
            v[3] += shift;
        }
        ropescope::io::npy::write(&dir.join(format!("attn_L{i}.npy")), &[2, 2], &v).unwrap();
    }
}

#[test]
fn equal_references_pass_with_a_verdict_line() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    write_refs(&a, 3, 0.0);
    write_refs(&b, 3, 0.0);
    let out = compare(&[&a, &b], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(text.lines().last(), Some("PASS: 3 arrays within tolerance"));
    let json = compare(&[&a, &b], &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["pass"], true);
    assert_eq!(v["verdict"], "PASS: 3 arrays within tolerance");
}

#[test]
fn a_difference_over_tolerance_fails_with_exit_1() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    write_refs(&a, 3, 1e-3); // over the default max-abs of 1e-5 for attention
    write_refs(&b, 3, 0.0);
    let out = compare(&[&a, &b], &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(
        text.lines().last(),
        Some("FAIL: 1 of 3 arrays over tolerance (attn)")
    );
    // Loosened for attention, the same pair passes.
    let loose = compare(&[&a, &b], &["--tol", "attn=max_abs:1e-2"]);
    assert_eq!(loose.status.code(), Some(0));
    let json = compare(&[&a, &b], &["--json"]);
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["pass"], false);
}

#[test]
fn a_comparison_that_cannot_be_made_is_exit_2() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    write_refs(&a, 1, 0.0);
    std::fs::create_dir_all(&b).unwrap();
    let out = compare(&[&a, &b], &[]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no array is present in both directories"),
        "{err}"
    );
    let bad_tol = compare(&[&a, &a], &["--tol", "attn=mse:1"]);
    let err = String::from_utf8(bad_tol.stderr).unwrap();
    assert_eq!(bad_tol.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown metric 'mse'"), "{err}");
}

/// `compare --json | head`: the reader goes away before the output is written; the command ends without a
/// panic (killed by SIGPIPE on Unix, as other tools are).
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    // Well over a pipe's buffer of JSON, so a write must meet the closed pipe.
    write_refs(&a, 600, 0.0);
    write_refs(&b, 600, 0.0);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("compare")
        .args([&a, &b])
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{err}");
    }
}
