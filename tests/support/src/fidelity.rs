//! The engine's forward pass against a float64 reference directory of HF transformers (the format of
//! `fixtures/reference/README.md`), with the fidelity tolerances of the README:
//! - f64 engine: logits max-abs ≤ 1e-9 · max|logit|, attention probabilities max-abs ≤ 1e-10, and every other
//!   array (scores, q, k before and after RoPE) NMSE ≤ 1e-20;
//! - f32 engine: logits NMSE ≤ 1e-10, attention max-abs ≤ 1e-5, other arrays NMSE ≤ 1e-10.

use ropescope::io::npy::{Array, NpyElement};
use ropescope::model::Model;
use ropescope::numeric::Real;
use ropescope::reference::compare::{compare_dirs, Comparison, Tolerance};
use ropescope::reference::write::{write_reference, ReferenceRequest};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

/// f64 engine: logits max-abs over max|logit|.
pub const F64_LOGITS_REL_MAX_ABS: f64 = 1e-9;
/// f64 engine: attention probabilities max-abs.
pub const F64_ATTN_MAX_ABS: f64 = 1e-10;
/// f64 engine: scores, q and k NMSE.
pub const F64_OTHER_NMSE: f64 = 1e-20;
/// f32 engine: logits NMSE.
pub const F32_LOGITS_NMSE: f64 = 1e-10;
/// f32 engine: attention probabilities max-abs.
pub const F32_ATTN_MAX_ABS: f64 = 1e-5;
/// f32 engine: scores, q and k NMSE.
pub const F32_OTHER_NMSE: f64 = 1e-10;

/// The f32 tolerances of logits (NMSE), attention (max-abs) and scores, q and k (NMSE) that a case is checked
/// with.
#[derive(Clone, Copy, Debug)]
pub struct F32Bars {
    /// Logits, NMSE.
    pub logits_nmse: f64,
    /// Attention probabilities, max-abs.
    pub attn_max_abs: f64,
    /// Scores, q and k, NMSE.
    pub other_nmse: f64,
}

/// The default f32 bars: [`F32_LOGITS_NMSE`], [`F32_ATTN_MAX_ABS`] and [`F32_OTHER_NMSE`].
pub const F32_BARS: F32Bars = F32Bars {
    logits_nmse: F32_LOGITS_NMSE,
    attn_max_abs: F32_ATTN_MAX_ABS,
    other_nmse: F32_OTHER_NMSE,
};

/// The tolerances per array kind for precision `T`, given the case's max|logit| and the f32 bars.
pub fn tolerances<T: Real>(max_logit: f64, f32: F32Bars) -> BTreeMap<String, Tolerance> {
    let (logits, attn, other) = if T::NAME == "f64" {
        (
            Tolerance {
                nmse: None,
                max_abs: Some(F64_LOGITS_REL_MAX_ABS * max_logit),
            },
            Tolerance {
                nmse: None,
                max_abs: Some(F64_ATTN_MAX_ABS),
            },
            Tolerance {
                nmse: Some(F64_OTHER_NMSE),
                max_abs: None,
            },
        )
    } else {
        (
            Tolerance {
                nmse: Some(f32.logits_nmse),
                max_abs: None,
            },
            Tolerance {
                nmse: None,
                max_abs: Some(f32.attn_max_abs),
            },
            Tolerance {
                nmse: Some(f32.other_nmse),
                max_abs: None,
            },
        )
    };
    let mut t = BTreeMap::new();
    t.insert("logits".to_string(), logits);
    t.insert("attn".to_string(), attn);
    t.insert("sink".to_string(), attn);
    t.insert(
        "ids".to_string(),
        Tolerance {
            nmse: None,
            max_abs: Some(0.0),
        },
    );
    for k in ["scores", "q_pre", "k_pre", "q", "k", "kv_latent"] {
        t.insert(k.to_string(), other);
    }
    t
}

/// A reference case directory: its meta.json, ids, rows and layers.
pub struct Case {
    /// The token ids.
    pub ids: Vec<u32>,
    /// The rows [A, B) of logits and attention.
    pub rows: Range<usize>,
    /// The captured layers.
    pub layers: Vec<usize>,
    /// meta.json.
    pub meta: serde_json::Value,
}

impl Case {
    /// Reads the case directory `dir`.
    pub fn read(dir: &Path) -> Self {
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        let at = |i: usize| meta["rows"][i].as_u64().unwrap() as usize;
        let rows = at(0)..at(1);
        let layers = meta["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_u64().unwrap() as usize)
            .collect();
        let ids = Array::read(&dir.join("ids.npy"))
            .unwrap()
            .to_i64()
            .unwrap()
            .iter()
            .map(|&i| i as u32)
            .collect();
        Self {
            ids,
            rows,
            layers,
            meta,
        }
    }
}

/// max|x| of an array file.
pub fn max_abs_of(path: &Path) -> f64 {
    Array::read(path)
        .unwrap()
        .to_f64()
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()))
}

/// Runs the engine in precision `T` on the case `dir` and compares every array it holds within
/// [`tolerances`] (f32 with [`F32_BARS`]). Returns the comparisons (all passed).
pub fn check_case<T: Real + NpyElement>(
    model: &Model<T>,
    model_path: &Path,
    dir: &Path,
) -> Vec<Comparison> {
    check_case_with(model, model_path, dir, F32_BARS)
}

/// [`check_case`] with other f32 bars.
pub fn check_case_with<T: Real + NpyElement>(
    model: &Model<T>,
    model_path: &Path,
    dir: &Path,
    f32: F32Bars,
) -> Vec<Comparison> {
    let case = Case::read(dir);
    let tols = tolerances::<T>(max_abs_of(&dir.join("logits.npy")), f32);
    let out = tempfile::tempdir().unwrap();
    write_reference(
        model,
        model_path,
        &case.ids,
        &ReferenceRequest {
            layers: case.layers.clone(),
            rows: case.rows.clone(),
            command: Vec::new(),
        },
        out.path(),
    )
    .unwrap();
    let (rows, only_theirs) = compare_dirs(out.path(), dir, &tols).unwrap();
    assert!(
        only_theirs
            .iter()
            .all(|f| !f.contains(&dir.display().to_string())),
        "{only_theirs:?}"
    );
    assert!(
        rows.iter().any(|c| c.file == "logits.npy")
            && rows.iter().any(|c| c.file.starts_with("attn_")),
        "{}: no logits or attention compared",
        dir.display()
    );
    for c in &rows {
        assert!(
            c.pass,
            "{} ({}) {}: nmse {:e}, max_abs {:e} (max |ref| {:e}) over {:?}",
            dir.display(),
            T::NAME,
            c.file,
            c.nmse,
            c.max_abs,
            c.max_ref,
            c.tolerance
        );
    }
    rows
}
