//! The sharded scan as researchers run it, on SmolLM2 with every analysis: `examples/parallel.sh` with GNU
//! parallel on this machine, and `examples/slurm/submit.sh` (a Slurm job array of shards and a dependent
//! merge job) on a single-node Slurm cluster that `examples/slurm/cluster.sh` configures, starts and stops.
//! Both merged directories must equal one unsharded run's, byte for byte.
//!
//! `fixtures/cluster-tools.sh` installs GNU parallel, slurm-wlm and munge. The Slurm test needs root to start
//! the daemons: without it, it says so and skips. `ROPESCOPE_SKIP_CLUSTER=1` skips both.

use ropescope_test_support::cli::ok;
use ropescope_test_support::paths;
use ropescope_test_support::shard::assert_same_scan;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The scan options of both tests: every analysis, four natural prompts of 32 tokens (the example scripts add
/// `--quiet`).
const OPTIONS: [&str; 4] = ["--length", "32", "--count", "4"];

fn skipped(what: &str) -> bool {
    let skip = std::env::var("ROPESCOPE_SKIP_CLUSTER").is_ok_and(|v| v == "1");
    if skip {
        eprintln!("{what}: skipped (ROPESCOPE_SKIP_CLUSTER=1)");
    }
    skip
}

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The model and one unsharded scan of it with [`OPTIONS`], made once for both tests (they run in parallel
/// threads of this process), in cargo's temporary directory for integration tests.
fn one_run() -> &'static (PathBuf, PathBuf) {
    static ONE: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    ONE.get_or_init(|| {
        let model = paths::model(paths::SMOLLM2);
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scan_cluster_one");
        if out.exists() {
            std::fs::remove_dir_all(&out).unwrap();
        }
        let mut args = vec![
            "scan",
            model.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(OPTIONS);
        args.push("--quiet");
        ok(&args);
        // The Cauchy–Schwarz tables, made at the merge for the merged labels, have heads to show.
        let cs = std::fs::read_to_string(out.join("cauchy_schwarz.json")).unwrap();
        let cs: serde_json::Value = serde_json::from_str(&cs).unwrap();
        assert!(
            cs["heads"].as_array().is_some_and(|h| !h.is_empty()),
            "no head in the Cauchy–Schwarz tables"
        );
        (model, out)
    })
}

fn run_script(script: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let out = Command::new(script)
        .args(args)
        .envs(env.iter().copied())
        .env("ROPESCOPE", env!("CARGO_BIN_EXE_ropescope"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {}: {}{}",
        script.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
#[ignore = "slow: scans SmolLM2 in shards with GNU parallel"]
fn gnu_parallel_shards_merge_to_one_run() {
    if skipped("gnu_parallel_shards_merge_to_one_run") {
        return;
    }
    assert!(
        Command::new("parallel").arg("--version").output().is_ok(),
        "GNU parallel is not installed: run fixtures/cluster-tools.sh"
    );
    let dir = tempfile::tempdir().unwrap();
    let (model, one) = one_run();
    let out = dir.path().join("parallel");
    let mut args = vec![model.to_str().unwrap(), out.to_str().unwrap(), "3"];
    args.extend(OPTIONS);
    run_script(&repo("examples/parallel.sh"), &args, &[("JOBS", "2")]);
    assert_same_scan(one, &out.join("scan"));
}

/// Stops the single-node cluster when the test ends, whatever happened.
struct Cluster(PathBuf);

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo("examples/slurm/cluster.sh"))
            .arg("stop")
            .arg(&self.0)
            .status();
    }
}

#[test]
#[ignore = "slow: starts Slurm, scans SmolLM2 in shards"]
fn slurm_job_array_shards_merge_to_one_run() {
    if skipped("slurm_job_array_shards_merge_to_one_run") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("cluster");
    let start = Command::new(repo("examples/slurm/cluster.sh"))
        .arg("start")
        .arg(&state)
        .output()
        .unwrap();
    let _cluster = Cluster(state.clone());
    if !start.status.success() {
        // Exit code 3: no root, or Slurm is not installed. Anything else is a failure to investigate.
        let why = String::from_utf8_lossy(&start.stderr);
        assert_eq!(
            start.status.code(),
            Some(3),
            "the cluster did not start: {why}"
        );
        eprintln!(
            "slurm_job_array_shards_merge_to_one_run: skipped, a single-node Slurm cluster cannot start here: {why}\
             (as root, fixtures/cluster-tools.sh installs slurm-wlm and munge; README, \"Sharded scans\")"
        );
        return;
    }
    let conf = state.join("slurm.conf");
    let conf = conf.to_str().unwrap();
    let (model, one) = one_run();
    let out = dir.path().join("slurm");
    let mut args = vec![model.to_str().unwrap(), out.to_str().unwrap(), "4"];
    args.extend(OPTIONS);
    let submitted = run_script(
        &repo("examples/slurm/submit.sh"),
        &args,
        &[("SLURM_CONF", conf)],
    );
    let ids = String::from_utf8_lossy(&submitted.stdout)
        .trim()
        .to_string();
    assert_eq!(ids.split(' ').count(), 2, "submit.sh printed '{ids}'");
    let merged = out.join("scan");
    let deadline = Instant::now() + Duration::from_secs(1200);
    while !merged.join("meta.json").exists() && Instant::now() < deadline {
        let queue = Command::new("squeue")
            .args(["-h", "-o", "%i %T"])
            .env("SLURM_CONF", conf)
            .output()
            .unwrap();
        if queue.stdout.is_empty() && !merged.join("meta.json").exists() {
            break; // every job ended, and no merged scan: the logs say why
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    let logs: String = std::fs::read_dir(out.join("logs"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    format!(
                        "--- {}\n{}",
                        e.path().display(),
                        std::fs::read_to_string(e.path()).unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(
        merged.join("meta.json").exists(),
        "the Slurm jobs ({ids}) did not write {}:\n{logs}",
        merged.display()
    );
    for k in 0..4 {
        assert!(out.join(format!("shard-{k}/shard.json")).is_file());
    }
    assert_same_scan(one, &merged);
}
