//! The engine against the float64 reference of HF transformers on the two real models
//! (`fixtures/reference/`, made by `fixtures/reference/make_reference.py`, every float32 island of HF patched
//! to float64; see that folder's README).
//!
//! Tolerances (the bars, also in the README):
//! - f64 engine: logits max-abs ≤ 1e-9 · max|logit|, attention probabilities max-abs ≤ 1e-10, and every other
//!   array (scores, q, k before and after RoPE) NMSE ≤ 1e-20;
//! - f32 engine: logits NMSE ≤ 1e-10, attention max-abs ≤ 1e-5, other arrays NMSE ≤ 1e-10.

mod common;

use ropescope::export::compare::{compare_dirs, Tolerance};
use ropescope::export::npy::Array;
use ropescope::export::reference::{write_reference, ReferenceRequest};
use ropescope::gguf::GgufFile;
use ropescope::model::Model;
use std::collections::BTreeMap;
use std::path::Path;

const F64_LOGITS_REL_MAX_ABS: f64 = 1e-9;
const F64_ATTN_MAX_ABS: f64 = 1e-10;
const F64_OTHER_NMSE: f64 = 1e-20;
const F32_LOGITS_NMSE: f64 = 1e-10;
const F32_ATTN_MAX_ABS: f64 = 1e-5;
const F32_OTHER_NMSE: f64 = 1e-10;

fn tolerances(logits: Tolerance, attn: Tolerance, other: Tolerance) -> BTreeMap<String, Tolerance> {
    let mut t = BTreeMap::new();
    t.insert("logits".to_string(), logits);
    t.insert("attn".to_string(), attn);
    t.insert(
        "ids".to_string(),
        Tolerance {
            nmse: None,
            max_abs: Some(0.0),
        },
    );
    for k in ["scores", "q_pre", "k_pre", "q", "k"] {
        t.insert(k.to_string(), other);
    }
    t
}

/// Runs the engine in precision `T` on a reference case and compares every array the case holds.
fn check_case<T: ropescope::numeric::Real + ropescope::export::npy::NpyElement>(
    model: &Model<T>,
    model_path: &Path,
    case: &Path,
    tols: &BTreeMap<String, Tolerance>,
) {
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(case.join("meta.json")).unwrap()).unwrap();
    let rows =
        meta["rows"][0].as_u64().unwrap() as usize..meta["rows"][1].as_u64().unwrap() as usize;
    let layers: Vec<usize> = meta["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_u64().unwrap() as usize)
        .collect();
    let ids: Vec<u32> = Array::read(&case.join("ids.npy"))
        .unwrap()
        .to_i64()
        .unwrap()
        .iter()
        .map(|&i| i as u32)
        .collect();
    let out = tempfile::tempdir().unwrap();
    write_reference(
        model,
        model_path,
        &ids,
        &ReferenceRequest { layers, rows },
        out.path(),
    )
    .unwrap();
    let (rows, only_theirs) = compare_dirs(out.path(), case, tols).unwrap();
    assert!(
        only_theirs
            .iter()
            .all(|f| !f.contains(&case.display().to_string())),
        "{only_theirs:?}"
    );
    assert!(
        rows.iter().any(|c| c.file == "logits.npy")
            && rows.iter().any(|c| c.file.starts_with("attn_"))
    );
    for c in &rows {
        assert!(
            c.pass,
            "{} {}: nmse {:e}, max_abs {:e} (max |ref| {:e}) over {:?}",
            case.display(),
            c.file,
            c.nmse,
            c.max_abs,
            c.max_ref,
            c.tolerance
        );
    }
}

fn check_model(file_name: &str, dir: &str) {
    let path = common::model(file_name);
    let file = GgufFile::open(&path).unwrap();
    let cases = ["short", "long"].map(|c| common::fixture(&format!("reference/{dir}/{c}")));
    let max_logit = |case: &Path| {
        Array::read(&case.join("logits.npy"))
            .unwrap()
            .to_f64()
            .iter()
            .fold(0.0f64, |m, x| m.max(x.abs()))
    };

    let m64 = Model::<f64>::load(&file).unwrap();
    for case in &cases {
        let logits = Tolerance {
            nmse: None,
            max_abs: Some(F64_LOGITS_REL_MAX_ABS * max_logit(case)),
        };
        let attn = Tolerance {
            nmse: None,
            max_abs: Some(F64_ATTN_MAX_ABS),
        };
        let other = Tolerance {
            nmse: Some(F64_OTHER_NMSE),
            max_abs: None,
        };
        check_case(&m64, &path, case, &tolerances(logits, attn, other));
    }
    drop(m64);
    let m32 = Model::<f32>::load(&file).unwrap();
    for case in &cases {
        let logits = Tolerance {
            nmse: Some(F32_LOGITS_NMSE),
            max_abs: None,
        };
        let attn = Tolerance {
            nmse: None,
            max_abs: Some(F32_ATTN_MAX_ABS),
        };
        let other = Tolerance {
            nmse: Some(F32_OTHER_NMSE),
            max_abs: None,
        };
        check_case(&m32, &path, case, &tolerances(logits, attn, other));
    }
}

#[test]
fn smollm2_matches_hf_float64() {
    check_model(common::SMOLLM2, "smollm2-135m");
}

#[test]
fn gemma3_matches_hf_float64_including_the_sliding_window() {
    check_model(common::GEMMA3, "gemma3-270m");
}
