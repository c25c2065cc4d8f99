//! `ropescope conformance check` on HF transformers' own runs (`fixtures/conformance/`): an honest bfloat16 run
//! is within the bfloat16 budget and beyond the float32 one; an injected position offset is named as such; the
//! JSON report holds every stage; a dump with nothing to judge, a wrong shape and a missing `ids.npy` are one-line
//! refusals.

use ropescope_test_support::cli::{arg, assert_ok, assert_refused, run};
use ropescope_test_support::paths;
use std::path::PathBuf;

fn llama() -> PathBuf {
    paths::fixture("converted/llama/model.gguf")
}

fn dump(rel: &str) -> PathBuf {
    paths::fixture(&format!("conformance/{rel}"))
}

#[test]
fn a_bfloat16_run_is_judged_by_the_budget_of_its_precision() {
    let (model, bf16) = (llama(), dump("hf/llama/eager-bf16"));
    let args = |p| {
        [
            "conformance",
            "check",
            arg(&model),
            "--dump",
            arg(&bf16),
            "--precision",
            p,
        ]
    };
    let within = run(&args("bf16"));
    assert_ok(&within);
    assert!(
        within
            .stdout
            .contains("within budget: 6 stages of 2 layers (bf16)"),
        "{}",
        within.stdout
    );
    let strict = run(&args("f32"));
    assert_eq!(strict.code, Some(1), "{}", strict.stdout);
    assert!(strict
        .stdout
        .contains("beyond budget (f32), first at layer 0 q"));
}

#[test]
fn an_offset_of_every_position_is_named_and_cancels_in_the_attention() {
    let (model, bug) = (llama(), dump("hf-bugs/positions-start-at-1"));
    let r = run(&["conformance", "check", arg(&model), "--dump", arg(&bug)]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("position offset: position p rotated as p + 1 (cancels in q·k)"),
        "{}",
        r.stdout
    );
    let attn_lines: Vec<&str> = r.stdout.lines().filter(|l| l.contains(" attn ")).collect();
    assert!(
        attn_lines.len() == 2 && attn_lines.iter().all(|l| l.contains("within budget")),
        "{}",
        r.stdout
    );
}

#[test]
fn the_json_report_holds_every_stage_with_its_mistake() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, bug, json) = (
        llama(),
        dump("hf-bugs/rope-base-plus-one"),
        tmp.path().join("r.json"),
    );
    let r = run(&[
        "conformance",
        "check",
        arg(&model),
        "--dump",
        arg(&bug),
        "--json",
        arg(&json),
    ]);
    assert_eq!(r.code, Some(1));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["precision"], "f32");
    assert_eq!(v["within"], false);
    let layers = v["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2);
    let q = &layers[0]["q"];
    assert_eq!(q["mistake"]["kind"], "frequency");
    assert!(q["ratio"].as_f64().unwrap() > 1.0);
    assert!(q["row0_within"].as_bool().unwrap());
    assert!(!q["mistake"]["chunks"].as_array().unwrap().is_empty());
}

#[test]
fn dumps_that_cannot_be_judged_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let model = llama();
    let check = |dir: &PathBuf| run(&["conformance", "check", arg(&model), "--dump", arg(dir)]);
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_refused(
        &check(&empty),
        2,
        &["has no ids.npy: give the prompt's token ids with --ids"],
    );
    std::fs::copy(dump("hf/llama/eager-f32/ids.npy"), empty.join("ids.npy")).unwrap();
    assert_refused(&check(&empty), 2, &["holds no stage to judge"]);
    let wrong = [2usize, 48, 16];
    ropescope::io::npy::write(
        &empty.join("q_pre_L0.npy"),
        &wrong,
        &vec![0f32; 2 * 48 * 16],
    )
    .unwrap();
    assert_refused(
        &check(&empty),
        3,
        &[
            "q_pre_L0.npy",
            "shape [2, 48, 16], expected [4, 48, 16] for this model and prompt",
        ],
    );
}
