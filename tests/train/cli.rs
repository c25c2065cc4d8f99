//! `ropescope train`: outputs on disk, clear errors on bad arguments.

use std::process::Command;

fn ropescope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
}

#[test]
fn train_writes_curves_metrics_and_npy_maps() {
    let dir = tempfile::tempdir().unwrap();
    for (experiment, map) in [
        ("sdh", "attention_in_distribution.npy"),
        ("index", "attention_by_answer_position.npy"),
    ] {
        let out = dir.path().join(experiment);
        let status = ropescope()
            .args(["train", experiment, "--steps", "3", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            status.status.success(),
            "{}",
            String::from_utf8_lossy(&status.stderr)
        );
        let metrics: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("metrics.json")).unwrap())
                .unwrap();
        assert_eq!(metrics["config"]["steps"], 3);
        let curve: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("curve.json")).unwrap())
                .unwrap();
        assert_eq!(curve.as_array().unwrap().last().unwrap()["step"], 3);
        let npy = std::fs::read(out.join(map)).unwrap();
        assert_eq!(&npy[..6], b"\x93NUMPY");
        if experiment == "index" {
            // Row p is the mean attention of the test examples whose answer sits at p: a distribution over the
            // context where the row has examples, zero where it has none.
            let a = ropescope::io::npy::Array::read(&out.join(map)).unwrap();
            let len = a.shape[1];
            let sums: Vec<f64> = a.to_f64().chunks(len).map(|r| r.iter().sum()).collect();
            assert!(
                sums.iter().all(|&s| s == 0.0 || (s - 1.0).abs() < 1e-9),
                "{sums:?}"
            );
            assert!(sums.iter().any(|&s| s > 0.0));
        }
    }
}

#[test]
fn train_rejects_bad_arguments_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for (args, message) in [
        (
            vec!["train", "sdh", "--gate", "9"],
            "chunk 9 does not exist",
        ),
        (vec!["train", "index", "--gate", "a-b"], "cannot read"),
        (
            vec!["train", "retrieval", "--steps", "0"],
            "--steps must be at least 1",
        ),
        (
            vec!["train", "index", "--embeddings", "isotropic"],
            "applies to `sdh` only",
        ),
    ] {
        let out = ropescope()
            .args(&args)
            .arg("--out")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
