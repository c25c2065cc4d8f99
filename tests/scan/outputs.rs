//! Whole-directory outputs of `scan`: a scan killed with SIGKILL at any point leaves the previous complete
//! output (or, for an instant of the final renames, no directory, which the next run restores), never a partial
//! one; a second writer is refused while the first runs; an existing output is replaced only with `--force`.

use ropescope::synth::SyntheticModel;
use ropescope_test_support::shard::assert_same_scan;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A synthetic model and a prompt of 48 ids, in `dir`.
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let model = dir.join("model.gguf");
    std::fs::write(&model, SyntheticModel::new("qwen2").to_bytes()).unwrap();
    let prompt = dir.join("p.npy");
    let ids: Vec<i64> = (0..48).map(|i| (i * 7 + 3) % 64).collect();
    ropescope::io::npy::write(&prompt, &[ids.len()], &ids).unwrap();
    (model, prompt)
}

fn scan_command(model: &Path, prompt: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ropescope"));
    c.arg("scan")
        .arg(model)
        .arg("--prompts")
        .arg(prompt)
        .args(["--delta-max", "4", "--quiet", "--out"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn scan(model: &Path, prompt: &Path, out: &Path, extra: &[&str]) -> Output {
    scan_command(model, prompt, out, extra).output().unwrap()
}

/// The directory's files that a report reads, all present.
fn complete(out: &Path) -> bool {
    ["meta.json", "summary.json", "prompts.json", "report.html"]
        .iter()
        .all(|f| out.join(f).is_file())
}

#[test]
fn a_killed_scan_leaves_the_previous_output_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (model, prompt) = inputs(dir.path());
    let out = dir.path().join("out");
    let first = scan(&model, &prompt, &out, &["--seed", "1"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let meta = std::fs::read(out.join("meta.json")).unwrap();
    let mut replaced = 0;
    for delay_ms in [0, 5, 20, 50, 100, 200, 400, 800] {
        let mut child = scan_command(&model, &prompt, &out, &["--seed", "2", "--force"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().ok(); // SIGKILL on Unix
        child.wait().unwrap();
        // The commit moves the old output aside for an instant: absent is allowed, incomplete never.
        if !out.exists() {
            continue;
        }
        assert!(
            complete(&out),
            "after {delay_ms} ms: the output is not complete"
        );
        let now = std::fs::read(out.join("meta.json")).unwrap();
        if now != meta {
            // Only a scan that ran to its end may have replaced the output.
            assert!(finished || now.windows(10).any(|w| w == b"\"seed\": 2,"));
            replaced += 1;
            break;
        }
    }
    // Whatever the kills interrupted, the next scan (over a stale lock) completes and replaces the output.
    let last = scan(&model, &prompt, &out, &["--seed", "3", "--force"]);
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    assert!(complete(&out));
    assert_ne!(std::fs::read(out.join("meta.json")).unwrap(), meta);
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("out") && n != "out")
        .collect();
    assert!(
        left.is_empty(),
        "left beside the output: {left:?} (replaced {replaced})"
    );
}

#[test]
fn a_second_writer_is_refused_and_an_existing_output_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let (model, prompt) = inputs(dir.path());
    let out = dir.path().join("out");
    // A lock held by a running process (this test's own).
    let lock = dir.path().join("out.lock");
    std::fs::write(&lock, std::process::id().to_string()).unwrap();
    let held = std::fs::File::open(&lock).unwrap();
    held.lock().unwrap();
    let r = scan(&model, &prompt, &out, &[]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(5), "a locked output is exit 5: {err}");
    assert!(
        err.contains(&format!(
            "another ropescope (process {}) is writing",
            std::process::id()
        )),
        "{err}"
    );
    assert!(!out.exists());
    drop(held);
    std::fs::remove_file(&lock).unwrap();

    let r = scan(&model, &prompt, &out, &[]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let r = scan(&model, &prompt, &out, &[]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(
        r.status.code(),
        Some(2),
        "an occupied output is exit 2: {err}"
    );
    assert!(
        err.contains("exists and is not empty") && err.contains("--force"),
        "{err}"
    );
    assert!(complete(&out));
}

/// A scan of the slash analysis alone: what did not run says "not run" in the terminal summary, `summary.txt`
/// and the report, never a count of 0; and slash-dominant heads are counted both as (head, Δ) pairs and as
/// distinct heads.
#[test]
fn analyses_that_did_not_run_say_so_and_heads_are_counted_as_heads() {
    let dir = tempfile::tempdir().unwrap();
    let (model, prompt) = inputs(dir.path());
    let out = dir.path().join("scan");
    let r = scan(
        &model,
        &prompt,
        &out,
        &["--analyses", "slash", "--kappa", "0.05"],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(
        text.contains("random prompts not run (analysis intrinsic)") && !text.contains("on random"),
        "{text}"
    );
    assert!(text.contains("pairs in") && text.contains("distinct heads on natural prompts"));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<td class=\"random\">not run</td>"), "per Δ");
    assert!(html.contains("<th>distinct heads</th>"));
    assert!(
        !html.contains("class=\"random\">0<"),
        "a 0 for prompts that never ran"
    );
}

/// A single text prompt shorter than `--length` is continued with itself; the scan says so on stderr, in
/// `summary.json`'s warnings (which the report shows first) and in `meta.json` (`repeats_from`), instead of
/// measuring a repeated text in silence.
#[test]
fn a_prompt_continued_to_the_length_is_said_to_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("short.txt");
    std::fs::write(&text, "The cat sat on the mat. It was a sunny day.").unwrap();
    let model = ropescope_test_support::paths::fixture("converted/llama/model.gguf");
    let out = dir.path().join("scan");
    let r = scan(
        &model,
        &text,
        &out,
        &["--analyses", "slash", "--length", "64"],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let stderr = String::from_utf8_lossy(&r.stderr);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
    let from = meta["prompt_sets"][0]["repeats_from"][0].as_u64().unwrap();
    assert!(from > 0 && from < 64, "{from}");
    let words = format!("starts over at token {from} of 64");
    assert!(stderr.contains(&words), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert!(summary["warnings"][0].as_str().unwrap().contains(&words));
    // Long enough: no warning and no repeats_from.
    let long = dir.path().join("long");
    let r = scan(
        &model,
        &text,
        &long,
        &["--analyses", "slash", "--length", "16"],
    );
    assert!(r.status.success());
    let meta = std::fs::read_to_string(long.join("meta.json")).unwrap();
    assert!(!meta.contains("repeats_from"));
}

/// `tables/`: the per-head numbers, the claims and the slash-dominant heads per offset as CSV, each value equal
/// to `summary.json`'s (written in Rust's shortest round-trip form), an empty cell where nothing was measured.
#[test]
fn csv_tables_hold_the_summary_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (model, prompt) = inputs(dir.path());
    let out = dir.path().join("scan");
    let r = scan(
        &model,
        &prompt,
        &out,
        &["--analyses", "slash,rank", "--kappa", "0.05"],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let heads = std::fs::read_to_string(out.join("tables/heads.csv")).unwrap();
    let mut lines = heads.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let json_heads = summary["heads"].as_array().unwrap();
    assert_eq!(rows.len(), json_heads.len());
    for (row, h) in rows.iter().zip(json_heads) {
        assert_eq!(row[col("label")], h["label"].as_str().unwrap());
        let best: f64 = row[col("best_score")].parse().unwrap();
        assert_eq!(best, h["slash"]["best_score"].as_f64().unwrap());
        let q: f64 = row[col("q_rank_one_share")].parse().unwrap();
        assert_eq!(q, h["rank"]["q_rank_one_share"].as_f64().unwrap());
        // Not run: empty, never 0.
        assert_eq!(row[col("amplitude_high")], "");
        assert_eq!(row[col("s_pos")], "");
    }
    let claims = std::fs::read_to_string(out.join("tables/claims.csv")).unwrap();
    for c in summary["claims"].as_array().unwrap() {
        let line = claims
            .lines()
            .find(|l| l.starts_with(&format!("{},", c["id"].as_str().unwrap())))
            .unwrap();
        assert!(
            line.contains(&format!(",{},", c["verdict"].as_str().unwrap())),
            "{line}"
        );
    }
    let per_delta = std::fs::read_to_string(out.join("tables/sdh_per_delta.csv")).unwrap();
    assert!(per_delta.starts_with("delta,natural_heads,random_heads\n"));
    // The random prompts did not run: their column is empty.
    assert!(
        per_delta.lines().skip(1).all(|l| l.ends_with(',')),
        "{per_delta}"
    );
}

/// Weight matrices kept packed between the passes (`--packed-weights`, within the memory the pre-flight finds
/// left) change no output: with none kept, the default, and the default under a memory limit, the scan
/// directories are the same ([`assert_same_scan`]: every file byte for byte but the run's record, `meta.json`
/// equal but for its command and times, and `report.html` the same once rewritten from one `meta.json`).
#[test]
fn packed_weights_change_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let (model, prompt) = inputs(dir.path());
    let runs: [(&str, &[&str], Option<&str>); 3] = [
        ("none", &["--packed-weights", "0"], None),
        ("default", &[], None),
        ("limited", &[], Some("256M")),
    ];
    for (name, extra, limit) in runs {
        let mut c = scan_command(&model, &prompt, &dir.path().join(name), extra);
        if let Some(limit) = limit {
            c.env("ROPESCOPE_MAX_MEMORY", limit);
        }
        let r = c.output().unwrap();
        assert!(
            r.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    let none = dir.path().join("none");
    let written = std::fs::read_dir(&none).unwrap().count();
    assert!(
        written > 20 && none.join("posym.json").is_file(),
        "{written} files"
    );
    for other in ["default", "limited"] {
        assert_same_scan(&none, &dir.path().join(other));
    }
}
