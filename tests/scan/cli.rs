//! `ropescope scan` end to end on a small synthetic model written to a temporary file: the output files of
//! `fixtures/scan/FORMAT.md` exist with their shapes, `summary.json` has every key, and unavailable analyses
//! are refused clearly.

use ropescope::analysis::ablation::{self, AblationParams};
use ropescope::io::npy;
use ropescope::scan::format::{Meta, Summary};
use ropescope::synth::SyntheticModel;
use std::path::Path;
use std::process::Command;

fn write_model(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("model.gguf");
    std::fs::write(&path, SyntheticModel::new("qwen2").to_bytes()).unwrap();
    path
}

fn write_prompt(dir: &Path, name: &str, len: i64) -> std::path::PathBuf {
    let path = dir.join(name);
    let ids: Vec<i64> = (0..len).map(|i| (i * 7 + 3) % 64).collect();
    npy::write(&path, &[ids.len()], &ids).unwrap();
    path
}

fn scan(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("scan")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn scan_writes_every_file_and_summary_key() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_model(dir.path());
    let (a, b) = (
        write_prompt(dir.path(), "a.npy", 40),
        write_prompt(dir.path(), "b.npy", 33),
    );
    let out = dir.path().join("out");
    let run = scan(&[
        model.to_str().unwrap(),
        "--prompts",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--delta-max",
        "5",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = String::from_utf8(run.stdout).unwrap();
    assert!(text.contains("top heads by slash score"), "{text}");
    assert!(
        text.contains("columns: Δ = offset of the largest mean slash score"),
        "legend: {text}"
    );

    let meta: Meta =
        serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta.prompt_sets[1].lengths, vec![40, 33]);
    assert_eq!(meta.model.architecture, "qwen2");
    // The completion record: the exact command, the mark, the model's hash.
    assert!(meta.complete && meta.incomplete().is_none());
    assert_eq!(&meta.command[1..3], ["scan", model.to_str().unwrap()]);
    assert_eq!(meta.command.last().unwrap(), out.to_str().unwrap());
    let steps: Vec<&str> = meta.step_seconds.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(
        steps,
        [
            "natural prompts",
            "random prompts",
            "cone",
            "posym",
            "detectors",
            "cauchy-schwarz",
            "ablation"
        ]
    );
    let total: f64 = meta.step_seconds.iter().map(|s| s.seconds).sum();
    assert!(
        total > 0.0 && total <= meta.elapsed_seconds,
        "{total} of {}",
        meta.elapsed_seconds
    );
    let raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let head = &raw["heads"][0];
    for key in [
        "layer",
        "head",
        "kv_head",
        "label",
        "slash",
        "rank",
        "fourier",
        "frequency",
        "cone",
        "posym",
        "detectors",
        "cauchy_schwarz",
        "ablation",
    ] {
        assert!(head.get(key).is_some(), "summary head lacks {key}");
    }
    let summary: Summary = serde_json::from_value(raw).unwrap();
    assert_eq!(summary.heads.len(), 2 * 4);
    for h in &summary.heads {
        // Every analysis ran, so no head's record is null ("did not run").
        assert!(
            h.posym.is_some() && h.detectors.is_some(),
            "L{}H{}",
            h.layer,
            h.head
        );
        assert!(
            h.cauchy_schwarz.is_some() && h.ablation.is_some(),
            "L{}H{}",
            h.layer,
            h.head
        );
        let variants = h.ablation.as_ref().unwrap()["variants"]
            .as_array()
            .unwrap()
            .len();
        let expected = ablation::passes(1, &AblationParams::default()) - 1; // minus the baseline
        assert_eq!(
            variants as u64, expected,
            "every ablation variant at the head"
        );
    }

    let shape = |name: &str| npy::Array::read(&out.join(name)).unwrap().shape;
    for set in ["natural", "random"] {
        assert_eq!(shape(&format!("slash_{set}.npy")), vec![2, 4, 6]);
        assert_eq!(shape(&format!("sink_{set}.npy")), vec![2, 4]);
        assert_eq!(
            shape(&format!("attention_map_{set}.npy")),
            vec![2, 4, 40, 40]
        );
        assert_eq!(shape(&format!("chunk_norms_q_{set}.npy")), vec![2, 4, 4]);
        assert_eq!(shape(&format!("chunk_norms_v_{set}.npy")), vec![2, 4, 4]);
        assert_eq!(
            shape(&format!("singular_values_k_{set}.npy")),
            vec![2, 4, 8]
        );
        assert_eq!(shape(&format!("fourier_phase_{set}.npy")), vec![2, 4, 4]);
    }
    assert_eq!(shape("chunk_frequency.npy"), vec![2, 4]);
    assert_eq!(shape("cone_k.npy"), vec![2, 4, 2]);
    assert!(out.join("prompts.json").is_file() && out.join("summary.txt").is_file());
}

#[test]
fn unavailable_and_unknown_analyses_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_model(dir.path());
    let m = model.to_str().unwrap();
    let run = scan(&[m, "--analyses", "slash,nonsense", "--quiet"]);
    assert_eq!(run.status.code(), Some(2), "an unknown analysis is exit 2");
    assert!(String::from_utf8_lossy(&run.stderr).contains("unknown analysis 'nonsense'"));
    // Every analysis is part of this build, so none is refused as unavailable.
    assert!(ropescope::scan::Analysis::ALL.iter().all(|a| a.available()));
}

/// Refused before any work: an output path that is a file, `--count 0`, a prompt file without text.
#[test]
fn scan_refuses_a_bad_request_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_model(dir.path());
    let m = model.to_str().unwrap();
    let file = dir.path().join("taken");
    std::fs::write(&file, b"x").unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"\n").unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    for (args, needle) in [
        (
            vec![m, "--out", file.to_str().unwrap()],
            "is an existing file, not a directory",
        ),
        (
            vec![m, "--count", "0", "--out", o],
            "--count must be at least 1",
        ),
        (
            vec![m, "--prompts", empty.to_str().unwrap(), "--out", o],
            "holds no text",
        ),
    ] {
        let run = scan(&[args.as_slice(), &["--quiet"]].concat());
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(
            run.status.code(),
            Some(2),
            "{args:?}: a bad request is exit 2"
        );
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!out.join("summary.json").exists());
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn cauchy_schwarz_alone_records_every_head_and_warns_when_it_tables_none() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_model(dir.path());
    let a = write_prompt(dir.path(), "a.npy", 40);
    let out = dir.path().join("out");
    let run = scan(&[
        model.to_str().unwrap(),
        "--prompts",
        a.to_str().unwrap(),
        "--delta-max",
        "5",
        "--analyses",
        "cauchy-schwarz",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let meta: Meta =
        serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(
        meta.analyses,
        ["slash", "cauchy-schwarz"],
        "slash chooses the heads"
    );
    let summary: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let mut tabled = 0;
    for h in &summary.heads {
        let record = h.cauchy_schwarz.as_ref().expect("ran, so not null");
        let inside = record["in_head_set"].as_bool().expect("in_head_set");
        let chosen = h.label == "diagonal" || h.label == "previous-token";
        assert_eq!(inside, chosen, "L{}H{} {}", h.layer, h.head, h.label);
        if inside {
            tabled += 1;
            assert!(record["previous"]["n_pairs"].as_u64().unwrap() > 0);
        } else {
            assert!(record["head_set_rule"]
                .as_str()
                .unwrap()
                .contains("diagonal"));
        }
        assert!(
            h.ablation.is_none() && h.posym.is_none(),
            "did not run: null"
        );
    }
    let warned = summary
        .warnings
        .iter()
        .any(|w| w.contains("cauchy-schwarz ran but tabled no head"));
    assert_eq!(warned, tabled == 0, "{:?}", summary.warnings);
    assert_eq!(
        warned,
        stderr.contains("warning: cauchy-schwarz"),
        "{stderr}"
    );
}

#[test]
fn a_scan_without_label_analyses_warns_that_every_head_is_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_model(dir.path());
    let a = write_prompt(dir.path(), "a.npy", 40);
    let out = dir.path().join("out");
    let run = scan(&[
        model.to_str().unwrap(),
        "--prompts",
        a.to_str().unwrap(),
        "--analyses",
        "rank",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: no analysis the labels are decided from ran"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("scan: "),
        "--quiet silences the log: {stderr}"
    );
    let logged = scan(&[
        model.to_str().unwrap(),
        "--prompts",
        a.to_str().unwrap(),
        "--analyses",
        "rank",
        "--out",
        dir.path().join("logged").to_str().unwrap(),
    ]);
    let log = String::from_utf8_lossy(&logged.stderr);
    let line = log
        .lines()
        .find(|l| l.starts_with("scan: natural prompts done (1 steps) in "))
        .unwrap_or_else(|| panic!("one log line per step when stderr is not a terminal: {log}"));
    assert!(line.ends_with(" s"), "{line}");
    let summary: Summary =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary.warnings.len(), 1);
    assert!(summary.heads.iter().all(|h| h.label == "mixed"));
}

/// The pre-flight counts what the scan keeps, against the memory available (capped here by
/// `ROPESCOPE_MAX_MEMORY`): a scan that cannot fit is refused before any work, exit 5, saying what it needs,
/// what is available and which options reduce it; a malformed cap is a bad argument.
#[test]
fn scan_larger_than_memory_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let model = write_model(dir.path());
    let prompt = write_prompt(dir.path(), "a.npy", 40);
    let out = dir.path().join("out");
    let run = |limit: &str| {
        Command::new(env!("CARGO_BIN_EXE_ropescope"))
            .env("ROPESCOPE_MAX_MEMORY", limit)
            .arg("scan")
            .arg(&model)
            .arg("--prompts")
            .arg(&prompt)
            .args(["--delta-max", "4", "--quiet", "--out"])
            .arg(&out)
            .output()
            .unwrap()
    };
    let small = run("1K");
    let err = String::from_utf8_lossy(&small.stderr);
    assert_eq!(small.status.code(), Some(5), "{err}");
    assert!(
        err.contains("a 40-token run needs about")
            && err.contains("MiB for the results it keeps")
            && err
                .contains("0 MiB are available; shorten the prompts (length), leave out analyses"),
        "{err}"
    );
    assert!(!out.exists());
    let bad = run("lots");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr)
        .contains("ROPESCOPE_MAX_MEMORY=\"lots\" is not a size"));
    let ample = run("64G");
    assert!(
        ample.status.success(),
        "{}",
        String::from_utf8_lossy(&ample.stderr)
    );
}
