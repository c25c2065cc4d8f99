//! `ropescope diverge` on HF transformers dumps of SmolLM2-135M made by `examples/hf_dump.py`
//! (`fixtures/diverge/make_fixtures.sh`): HF's float32 pass stays within the default tolerances on every
//! tensor; with the RoPE base set to 1e4 instead of the model's 1e5 the first divergence is layer 0's post-RoPE
//! queries, while the projections before RoPE agree. Then the error paths of a dump.

mod common;

use ropescope::export::npy::{self, Array};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dump(name: &str) -> PathBuf {
    common::fixture(&format!("diverge/{name}"))
}

fn diverge(against: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("diverge")
        .arg(common::model(common::SMOLLM2))
        .arg("--ids")
        .arg(dump("hf-f32").join("ids.npy"))
        .arg("--against")
        .arg(against)
        .args(extra)
        .output()
        .unwrap()
}

/// The JSON report of a run on `against` and its exit code.
fn report(against: &Path) -> (serde_json::Value, Option<i32>) {
    let out = diverge(against, &["--json", "-"]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code())
}

fn tensor<'a>(r: &'a serde_json::Value, file: &str) -> &'a serde_json::Value {
    r["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["file"] == file)
        .unwrap_or_else(|| panic!("{file} not compared"))
}

/// A copy of the float32 dump in a temporary directory.
fn copy_of_hf_f32() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dump("hf-f32")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    dir
}

#[test]
fn hf_float32_stays_within_tolerance_on_every_tensor() {
    let (r, code) = report(&dump("hf-f32"));
    assert_eq!(code, Some(0), "{}", r["verdict"]);
    assert_eq!(r["layers"], serde_json::json!([0, 1, 2, 29]));
    let tensors = r["tensors"].as_array().unwrap();
    // Nine tensors in each of the four layers, and the logits.
    assert_eq!(tensors.len(), 4 * 9 + 1);
    assert!(tensors.iter().all(|t| t["crosses"] == false));
    assert_eq!(tensors.last().unwrap()["file"], "logits.npy");
    assert_eq!(r["first"], serde_json::Value::Null);
    assert_eq!(r["verdict"], "PASS: 37 tensors within tolerance");
    // The text report ends with the same verdict.
    let out = diverge(&dump("hf-f32"), &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().last(),
        Some("PASS: 37 tensors within tolerance")
    );
}

#[test]
fn a_wrong_rope_base_diverges_first_at_layer_0_post_rope_queries() {
    let (r, code) = report(&dump("hf-f32-theta-1e4"));
    assert_eq!(code, Some(1), "{}", r["verdict"]);
    let first = &r["tensors"][r["first"].as_u64().unwrap() as usize];
    assert_eq!(first["file"], "q_L0.npy");
    // Before RoPE layer 0 agrees: the projections do not depend on the base.
    for file in ["q_pre_L0.npy", "k_pre_L0.npy", "v_L0.npy"] {
        assert_eq!(tensor(&r, file)["crosses"], false, "{file}");
    }
    // After it both rotated vectors are off, in every head.
    for file in ["q_L0.npy", "k_L0.npy"] {
        let t = tensor(&r, file);
        assert_eq!(t["crosses"], true, "{file}");
        assert!(t["heads"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["nmse"].as_f64().unwrap() > 1e-4));
    }
    // Position 0 is not rotated by any base, so the worst element is at a later position.
    assert!(first["worst"]["row"].as_u64().unwrap() > 0);
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("FAIL: first divergence at q_L0.npy (layer 0, q)"),
        "{verdict}"
    );
}

#[test]
fn missing_tensors_are_skipped_and_listed() {
    let dir = copy_of_hf_f32();
    for f in ["out_L1.npy", "logits.npy", "hidden_L29.npy"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    std::fs::write(dir.path().join("extra.npy"), b"").unwrap();
    let out = diverge(dir.path(), &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("not in the dump (skipped): out_L1.npy, hidden_L29.npy, logits.npy"),
        "{text}"
    );
    assert!(
        text.contains("not of the layout (ignored): extra.npy"),
        "{text}"
    );
}

#[test]
fn errors_of_a_dump_are_named_with_their_exit_codes() {
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    let none = tempfile::tempdir().unwrap();
    let out = diverge(&none.path().join("absent"), &[]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("absent"));

    // A shape that differs: exit 3, naming the file.
    let dir = copy_of_hf_f32();
    let k = dir.path().join("k_L1.npy");
    npy::write(&k, &[3, 10, 32], &vec![0.0f32; 3 * 10 * 32]).unwrap();
    let out = diverge(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("k_L1.npy: shape [3, 10, 32], expected [3, 10, 64]"),
        "{}",
        stderr(&out)
    );

    // A non-finite value: reported as the first divergence (exit 1), not a crash.
    let dir = copy_of_hf_f32();
    let attn = dir.path().join("attn_L1.npy");
    let a = Array::read(&attn).unwrap();
    let mut v: Vec<f32> = a.to_f64().iter().map(|&x| x as f32).collect();
    v[7] = f32::NAN;
    v[8] = f32::INFINITY;
    npy::write(&attn, &a.shape, &v).unwrap();
    let (r, code) = report(dir.path());
    assert_eq!(code, Some(1));
    let first = &r["tensors"][r["first"].as_u64().unwrap() as usize];
    assert_eq!(first["file"], "attn_L1.npy");
    assert_eq!(first["non_finite"], 2);
    assert_eq!(
        (
            &first["worst"]["head"],
            &first["worst"]["row"],
            &first["worst"]["col"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!(0),
            &serde_json::json!(7)
        )
    );

    // A file that is not an .npy: exit 3.
    std::fs::write(&attn, b"not an array").unwrap();
    let out = diverge(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("attn_L1.npy"));
}

#[test]
fn tolerances_can_be_overridden_and_the_report_written_as_json() {
    // Held to a bar float32 cannot meet, HF's pass diverges at its first tensor.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = diverge(
        &dump("hf-f32"),
        &[
            "--tol",
            "q_pre=nmse:1e-20",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["tensors"][0]["file"], "q_pre_L0.npy");
    assert_eq!(r["first"], 0);
    assert_eq!(r["tensors"][0]["tolerance"]["nmse"], 1e-20);
}
