//! Where another engine first leaves ropescope's float64 forward pass (`ropescope diverge`).
//!
//! The other engine's tensors come as a directory in the reference layout (`fixtures/reference/README.md`:
//! `{kind}_L{layer}.npy` for the kinds of [`LAYER_KINDS`], `logits.npy`, optionally `ids.npy` and `meta.json`),
//! float32 or float64. Each tensor present is compared with ropescope's value, in the order the forward pass
//! computes them (layer by layer, each layer in [`LAYER_KINDS`] order, the logits last), with the NMSE and
//! max-abs of [`errors`] overall and per head; the first tensor over its [`Tolerance`] is the divergence.

use crate::error::{Error, Result};
use crate::io::npy::Array;
use crate::model::Model;
use crate::numeric::Real;
use crate::reference::compare::{errors, kind_of, Tolerance};
use crate::reference::write::{compute_reference, ReferenceArray, ReferenceRequest, LAYER_KINDS};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

/// One element of a compared tensor, by its coordinates in the reference layout.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Element {
    /// Head (query head, or key/value head for `k_pre`, `k`, `v`); `None` for arrays without a head axis
    /// (`hidden`, `logits`).
    pub head: Option<usize>,
    /// Row: the position (for `attn`, `scores` and `logits`, the query position, counted from 0 whatever the
    /// rows kept).
    pub row: usize,
    /// Column: the key position for `attn` and `scores`, the coordinate otherwise.
    pub col: usize,
    /// The other engine's value.
    pub dump: f64,
    /// ropescope's float64 value.
    pub ours: f64,
}

/// The error measures of one head of a tensor.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeadErrors {
    /// The head.
    pub head: usize,
    /// `Σ(dump − ours)² / Σ ours²` over the head (infinite, JSON `null`, when a value is not finite).
    pub nmse: f64,
    /// `max |dump − ours|` over the head.
    pub max_abs: f64,
}

/// One tensor of the dump against ropescope's float64 value.
#[derive(Clone, Debug, Serialize)]
pub struct TensorDivergence {
    /// The dump's file name (`q_L0.npy`).
    pub file: String,
    /// The quantity (`q`, `hidden`, `logits`, ...).
    pub kind: String,
    /// The layer; `None` for the logits.
    pub layer: Option<usize>,
    /// The shape, equal in both.
    pub shape: Vec<usize>,
    /// `Σ(dump − ours)² / Σ ours²` over the tensor (infinite, JSON `null`, when a value is not finite).
    pub nmse: f64,
    /// `max |dump − ours|`.
    pub max_abs: f64,
    /// `max |ours|`, for scale.
    pub max_ref: f64,
    /// Number of NaN and infinite values in the dump.
    pub non_finite: usize,
    /// The element of largest `|dump − ours|`, or the dump's first non-finite value when it has one.
    pub worst: Element,
    /// Per head, for tensors with a head axis (`[heads, rows, cols]`); empty otherwise.
    pub heads: Vec<HeadErrors>,
    /// The tolerance applied.
    pub tolerance: Tolerance,
    /// Whether the tensor is over its tolerance.
    pub crosses: bool,
}

/// What `ropescope diverge` reports (and writes with `--json`).
#[derive(Clone, Debug, Serialize)]
pub struct DivergeReport {
    /// Whether no tensor crosses its tolerance.
    pub pass: bool,
    /// `PASS: ...` or `FAIL: first divergence at FILE ...`.
    pub verdict: String,
    /// Number of tokens.
    pub n_tokens: usize,
    /// Layers with at least one tensor in the dump.
    pub layers: Vec<usize>,
    /// Index in `tensors` of the first tensor over its tolerance.
    pub first: Option<usize>,
    /// Every compared tensor, in the order the forward pass computes them.
    pub tensors: Vec<TensorDivergence>,
    /// Files of the layout absent from the dump, for the layers it has (skipped).
    pub missing: Vec<String>,
    /// `.npy` files of the dump that are not part of the layout (not read).
    pub ignored: Vec<String>,
}

/// The files of a dump directory, sorted into the layout.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// `(layer, kind)` → file name.
    pub(crate) tensors: BTreeMap<(usize, &'static str), String>,
    /// Whether `logits.npy` is present.
    logits: bool,
    /// Whether `ids.npy` is present.
    ids: bool,
    /// Other `.npy` files.
    pub(crate) ignored: Vec<String>,
}

/// Sorts the `.npy` file names of a directory into the layout: `{kind}_L{layer}.npy` for the kinds of
/// [`LAYER_KINDS`] (the layer written without leading zeros), `logits.npy`, `ids.npy`; anything else is ignored.
pub(crate) fn sort_names(names: impl IntoIterator<Item = String>) -> Listing {
    let mut listing = Listing::default();
    for name in names.into_iter().filter(|n| n.ends_with(".npy")) {
        let kind = kind_of(&name);
        let layer_kind = LAYER_KINDS.iter().copied().find(|k| *k == kind);
        let layer = name
            .strip_suffix(".npy")
            .and_then(|stem| stem.get(kind.len() + 2..))
            .and_then(|l| l.parse::<usize>().ok());
        match (name.as_str(), layer_kind, layer) {
            ("logits.npy", _, _) => listing.logits = true,
            ("ids.npy", _, _) => listing.ids = true,
            (_, Some(k), Some(l)) if name == format!("{k}_L{l}.npy") => {
                listing.tensors.insert((l, k), name);
            }
            _ => listing.ignored.push(name),
        }
    }
    listing.ignored.sort();
    listing
}

/// The files of the dump directory `dir`, sorted into the layout; a layer a model of `n_layers` does not have is
/// an error naming its file.
pub(crate) fn read_listing(dir: &Path, n_layers: usize) -> Result<Listing> {
    let names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    let listing = sort_names(names);
    if let Some(((l, _), file)) = listing.tensors.iter().find(|((l, _), _)| *l >= n_layers) {
        return Err(Error::bad_data(
            dir.join(file),
            format!("layer {l} does not exist (the model has {n_layers})"),
        ));
    }
    Ok(listing)
}

/// Checks that the dump `dir`'s `ids.npy`, when `listing` has one, holds the token ids `ids`.
pub(crate) fn check_dump_ids(dir: &Path, listing: &Listing, ids: &[u32]) -> Result<()> {
    if !listing.ids {
        return Ok(());
    }
    let path = dir.join("ids.npy");
    check_ids(&Array::read(&path)?, ids, &path.display().to_string())
}

/// Checks that a dump's `ids.npy` (array `a`, read from `origin`) holds the token ids `ids` given, as one
/// prompt (`io::token_ids::from_array`).
pub(crate) fn check_ids(a: &Array, ids: &[u32], origin: &str) -> Result<()> {
    let theirs = crate::io::token_ids::from_array(a, origin)?;
    if theirs != ids {
        return Err(Error::bad_data(
            origin,
            format!(
                "holds other token ids than the ones given ({} ids against {})",
                theirs.len(),
                ids.len()
            ),
        ));
    }
    Ok(())
}

/// The query rows of a dump: `meta.json`'s `rows` `[A, B]` when it states them, else every position.
pub(crate) fn dump_rows(dir: &Path, t: usize) -> Result<Range<usize>> {
    let path = dir.join("meta.json");
    if !path.exists() {
        return Ok(0..t);
    }
    let max = crate::io::input_file::MAX_JSON_BYTES;
    let text = crate::io::input_file::read_capped(&path, max, "a dump's meta.json")?;
    rows_of(&text, t, &path.display().to_string())
}

/// The query rows a dump's `meta.json` (`text`, read from `origin`) states for a pass of `t` tokens.
pub(crate) fn rows_of(text: &[u8], t: usize, origin: &str) -> Result<Range<usize>> {
    let bad = |why: &str| Error::bad_data(origin, why);
    let meta: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| bad(&format!("not JSON ({e})")))?;
    let Some(rows) = meta.get("rows") else {
        return Ok(0..t);
    };
    let pair: Option<Vec<u64>> = rows
        .as_array()
        .and_then(|r| r.iter().map(|v| v.as_u64()).collect());
    match pair.as_deref() {
        Some(&[a, b]) if a < b && b <= t as u64 => Ok(a as usize..b as usize),
        _ => Err(bad(&format!(
            "'rows' is {rows}, not [A, B] with A < B ≤ {t} (the number of tokens)"
        ))),
    }
}

/// Compares the dumped tensor `dir/file` with ropescope's. `row0` is the position of the arrays' first row (the
/// first kept query row for `attn`, `scores` and `logits`, else 0). A shape that differs is an error naming the
/// file.
pub(crate) fn compare_tensor(
    dir: &Path,
    file: &str,
    dump: &Array,
    ours: &ReferenceArray<f64>,
    row0: usize,
    tolerance: Tolerance,
) -> Result<TensorDivergence> {
    let shape = &ours.shape;
    if &dump.shape != shape {
        return Err(Error::bad_data(
            dir.join(file),
            format!("shape {:?}, expected {shape:?}", dump.shape),
        ));
    }
    let (a, b) = (dump.to_f64(), &ours.data);
    let (nmse, max_abs, max_ref) = errors(&a, b);
    let non_finite = a.iter().filter(|v| !v.is_finite()).count();
    let at = match a.iter().position(|v| !v.is_finite()) {
        Some(i) => i,
        None => (0..a.len())
            .max_by(|&i, &j| (a[i] - b[i]).abs().total_cmp(&(a[j] - b[j]).abs()))
            .unwrap_or(0),
    };
    // [heads, rows, cols] or [rows, cols]; an empty array has no worst element, and reports (0, 0, 0).
    let cols = shape.last().copied().unwrap_or(1).max(1);
    let with_heads = shape.len() == 3;
    let per_head = (if with_heads { shape[1] * cols } else { a.len() }).max(1);
    let worst = Element {
        head: with_heads.then_some(at / per_head),
        row: row0 + (at % per_head) / cols,
        col: at % cols,
        dump: a.get(at).copied().unwrap_or(0.0),
        ours: b.get(at).copied().unwrap_or(0.0),
    };
    let heads = if with_heads {
        a.chunks(per_head)
            .zip(b.chunks(per_head))
            .enumerate()
            .map(|(head, (x, y))| {
                let (nmse, max_abs, _) = errors(x, y);
                HeadErrors {
                    head,
                    nmse,
                    max_abs,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(TensorDivergence {
        file: file.to_string(),
        kind: kind_of(file).to_string(),
        layer: None,
        shape: shape.clone(),
        nmse,
        max_abs,
        max_ref,
        non_finite,
        worst,
        heads,
        tolerance,
        crosses: !tolerance.holds(nmse, max_abs),
    })
}

/// `nmse ≤ X, max_abs ≤ Y` for the bounds that are set.
pub fn describe(t: &Tolerance) -> String {
    let parts: Vec<String> = [("nmse", t.nmse), ("max_abs", t.max_abs)]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name} ≤ {v:e}")))
        .collect();
    if parts.is_empty() {
        "no bound".into()
    } else {
        parts.join(", ")
    }
}

/// The verdict line: `PASS: ...`, or the first tensor over its tolerance with its worst element.
fn verdict(tensors: &[TensorDivergence], first: Option<usize>) -> String {
    let over = tensors.iter().filter(|t| t.crosses).count();
    let Some(f) = first.and_then(|i| tensors.get(i)) else {
        return format!("PASS: {} tensors within tolerance", tensors.len());
    };
    let w = &f.worst;
    let head = w.head.map(|h| format!("head {h}, ")).unwrap_or_default();
    let layer = f.layer.map(|l| format!("layer {l}, ")).unwrap_or_default();
    let non_finite = if f.non_finite > 0 {
        format!("{} non-finite values in the dump; ", f.non_finite)
    } else {
        String::new()
    };
    format!(
        "FAIL: first divergence at {} ({layer}{}): {non_finite}nmse {:.3e}, max_abs {:.3e} (tolerance {}); worst at \
         {head}row {}, column {}: dump {:.6e}, ropescope {:.6e}; {over} of {} tensors over tolerance",
        f.file,
        f.kind,
        f.nmse,
        f.max_abs,
        describe(&f.tolerance),
        w.row,
        w.col,
        w.dump,
        w.ours,
        tensors.len()
    )
}

/// Runs `model` on `ids`, compares every tensor of the dump directory `dir` with ropescope's values (float64, or
/// the precision and arithmetic `model` computes in), and
/// reports them in computation order with the first one over its tolerance (`tolerances` by kind; a kind
/// without one is held to exact equality). Errors: `dir` unreadable, no tensor of the layout in it, a file that
/// is not a readable `.npy`, a layer the model does not have, `ids.npy` holding other ids, a shape mismatch.
pub fn diverge<T: Real>(
    model: &Model<T>,
    ids: &[u32],
    dir: &Path,
    tolerances: &BTreeMap<String, Tolerance>,
) -> Result<DivergeReport> {
    let listing = read_listing(dir, model.config.n_layers)?;
    if listing.tensors.is_empty() && !listing.logits {
        return Err(Error::Argument(format!(
            "{} holds no tensor of the reference layout ({{kind}}_L{{layer}}.npy, kind one of {}; logits.npy)",
            dir.display(),
            LAYER_KINDS.join(", ")
        )));
    }
    check_dump_ids(dir, &listing, ids)?;
    let mut dumps = BTreeMap::new();
    for file in listing.tensors.values() {
        dumps.insert(file.clone(), Array::read(&dir.join(file))?);
    }
    if listing.logits {
        dumps.insert("logits.npy".into(), Array::read(&dir.join("logits.npy"))?);
    }

    let rows = dump_rows(dir, ids.len())?;
    let layers: Vec<usize> = {
        let mut l: Vec<usize> = listing.tensors.keys().map(|(l, _)| *l).collect();
        l.dedup();
        l
    };
    let mut kinds: Vec<&str> = LAYER_KINDS
        .into_iter()
        .filter(|k| listing.tensors.keys().any(|(_, kind)| kind == k))
        .collect();
    if listing.logits {
        kinds.push("logits");
    }
    let req = ReferenceRequest {
        layers: layers.clone(),
        rows: rows.clone(),
        command: Vec::new(),
    };
    let ours: Vec<ReferenceArray<f64>> = compute_reference(model, ids, &req, &kinds)?
        .into_iter()
        .map(|a| ReferenceArray {
            name: a.name,
            shape: a.shape,
            data: a.data.into_iter().map(Real::to_f64_exact).collect(),
        })
        .collect();

    let mut tensors = Vec::new();
    let mut missing = Vec::new();
    let exact = Tolerance {
        nmse: None,
        max_abs: Some(0.0),
    };
    // compute_reference lists the logits first; the forward pass computes them last.
    let in_order = ours
        .iter()
        .filter(|a| a.name != "logits")
        .chain(ours.iter().filter(|a| a.name == "logits"));
    for array in in_order {
        let file = format!("{}.npy", array.name);
        let Some(dump) = dumps.get(&file) else {
            continue;
        };
        let kind = kind_of(&file);
        let row0 = if matches!(kind, "attn" | "sink" | "scores" | "logits") {
            rows.start
        } else {
            0
        };
        let tolerance = tolerances.get(kind).copied().unwrap_or(exact);
        let mut t = compare_tensor(dir, &file, dump, array, row0, tolerance)?;
        t.layer = (kind != "logits")
            .then(|| file[kind.len() + 2..file.len() - 4].parse().ok())
            .flatten();
        tensors.push(t);
    }
    for &l in &layers {
        for kind in LAYER_KINDS {
            let written = match kind {
                "sink" => model.config.sinks,
                "kv_latent" => model.config.mla.is_some(),
                _ => true,
            };
            if written && !listing.tensors.contains_key(&(l, kind)) {
                missing.push(format!("{kind}_L{l}.npy"));
            }
        }
    }
    if !listing.logits {
        missing.push("logits.npy".into());
    }
    let first = tensors.iter().position(|t| t.crosses);
    Ok(DivergeReport {
        pass: first.is_none(),
        verdict: verdict(&tensors, first),
        n_tokens: ids.len(),
        layers,
        first,
        tensors,
        missing,
        ignored: listing.ignored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::npy;
    use crate::reference::compare::default_tolerances;

    fn ours(name: &str, shape: &[usize], data: Vec<f64>) -> ReferenceArray<f64> {
        ReferenceArray {
            name: name.into(),
            shape: shape.to_vec(),
            data,
        }
    }

    fn array(dir: &Path, name: &str, shape: &[usize], data: &[f32]) -> Array {
        let p = dir.join(name);
        std::fs::write(&p, npy::encode(shape, data).unwrap()).unwrap();
        Array::read(&p).unwrap()
    }

    #[test]
    fn names_sort_into_the_layout() {
        let names = [
            "q_L0.npy",
            "q_pre_L12.npy",
            "hidden_L3.npy",
            "logits.npy",
            "ids.npy",
            "meta.json",
            "q_L01.npy",
            "foo_L0.npy",
            "q_Lx.npy",
        ];
        let l = sort_names(names.iter().map(|s| s.to_string()));
        let keys: Vec<(usize, &str)> = l.tensors.keys().copied().collect();
        assert_eq!(keys, [(0, "q"), (3, "hidden"), (12, "q_pre")]);
        assert!(l.logits && l.ids);
        assert_eq!(l.ignored, ["foo_L0.npy", "q_L01.npy", "q_Lx.npy"]);
    }

    #[test]
    fn layer_kinds_are_in_computation_order() {
        // Projections, then RoPE, then attention, then the head outputs and the residual stream.
        assert_eq!(
            LAYER_KINDS,
            [
                "q_pre",
                "k_pre",
                "v",
                "kv_latent",
                "q",
                "k",
                "scores",
                "attn",
                "sink",
                "out",
                "hidden"
            ]
        );
    }

    #[test]
    fn per_head_errors_and_the_worst_element() {
        let dir = tempfile::tempdir().unwrap();
        // [2 heads, 2 rows, 3 cols]; head 1, row 1, column 2 is off by 0.5, head 0 by 0.25 at row 0, column 1.
        let reference: Vec<f64> = (0..12).map(|i| i as f64 + 1.0).collect();
        let mut dump: Vec<f32> = reference.iter().map(|&v| v as f32).collect();
        dump[1] += 0.25;
        dump[11] += 0.5;
        let d = array(dir.path(), "scores_L2.npy", &[2, 2, 3], &dump);
        let t = compare_tensor(
            dir.path(),
            "scores_L2.npy",
            &d,
            &ours("scores_L2", &[2, 2, 3], reference.clone()),
            5,
            default_tolerances()["scores"],
        )
        .unwrap();
        assert_eq!(t.max_abs, 0.5);
        assert_eq!(
            t.worst,
            Element {
                head: Some(1),
                row: 6,
                col: 2,
                dump: 12.5,
                ours: 12.0
            }
        );
        let head0: f64 = reference[..6].iter().map(|v| v * v).sum();
        let head1: f64 = reference[6..].iter().map(|v| v * v).sum();
        assert_eq!(t.heads.len(), 2);
        assert!((t.heads[0].nmse - 0.0625 / head0).abs() < 1e-15);
        assert!((t.heads[1].nmse - 0.25 / head1).abs() < 1e-15);
        assert_eq!((t.heads[0].max_abs, t.heads[1].max_abs), (0.25, 0.5));
        assert!(t.crosses);
    }

    #[test]
    fn arrays_without_heads_report_row_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let reference = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let d = array(
            dir.path(),
            "hidden_L0.npy",
            &[3, 2],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 7.0],
        );
        let t = compare_tensor(
            dir.path(),
            "hidden_L0.npy",
            &d,
            &ours("hidden_L0", &[3, 2], reference),
            0,
            default_tolerances()["hidden"],
        )
        .unwrap();
        assert_eq!((t.worst.head, t.worst.row, t.worst.col), (None, 2, 1));
        assert!(t.heads.is_empty());
    }

    #[test]
    fn non_finite_values_are_reported_not_panicked_on() {
        let dir = tempfile::tempdir().unwrap();
        let d = array(
            dir.path(),
            "q_L0.npy",
            &[1, 2, 2],
            &[1.0, f32::NAN, 3.0, f32::INFINITY],
        );
        let t = compare_tensor(
            dir.path(),
            "q_L0.npy",
            &d,
            &ours("q_L0", &[1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]),
            0,
            default_tolerances()["q"],
        )
        .unwrap();
        assert_eq!(t.non_finite, 2);
        assert!(t.crosses && t.nmse.is_infinite());
        assert_eq!((t.worst.head, t.worst.row, t.worst.col), (Some(0), 0, 1));
        assert!(t.worst.dump.is_nan());
        let v = verdict(&[t], Some(0));
        assert!(v.contains("2 non-finite values in the dump"), "{v}");
    }

    #[test]
    fn a_shape_mismatch_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = array(dir.path(), "k_L1.npy", &[1, 2, 2], &[0.0; 4]);
        let e = compare_tensor(
            dir.path(),
            "k_L1.npy",
            &d,
            &ours("k_L1", &[1, 4, 1], vec![0.0; 4]),
            0,
            default_tolerances()["k"],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: shape [1, 2, 2], expected [1, 4, 1]",
                dir.path().join("k_L1.npy").display()
            )
        );
    }

    #[test]
    fn the_first_crossing_is_the_earliest_in_computation_order() {
        let dir = tempfile::tempdir().unwrap();
        let tols = default_tolerances();
        let good = array(dir.path(), "good.npy", &[1, 1, 2], &[1.0, 2.0]);
        let bad = array(dir.path(), "bad.npy", &[1, 1, 2], &[1.0, 3.0]);
        let r = ours("x", &[1, 1, 2], vec![1.0, 2.0]);
        let order = [
            ("q_pre_L0.npy", &good),
            ("k_L0.npy", &bad),
            ("attn_L0.npy", &good),
            ("q_L1.npy", &bad),
        ];
        let tensors: Vec<TensorDivergence> = order
            .iter()
            .map(|(f, a)| compare_tensor(dir.path(), f, a, &r, 0, tols[kind_of(f)]).unwrap())
            .collect();
        let first = tensors.iter().position(|t| t.crosses);
        assert_eq!(first, Some(1));
        let v = verdict(&tensors, first);
        assert!(
            v.starts_with("FAIL: first divergence at k_L0.npy (k)"),
            "{v}"
        );
        assert!(v.ends_with("2 of 4 tensors over tolerance"), "{v}");
        assert_eq!(
            verdict(&tensors[..1], None),
            "PASS: 1 tensors within tolerance"
        );
    }

    #[test]
    fn rows_come_from_meta_json_and_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(dump_rows(dir.path(), 7).unwrap(), 0..7);
        let meta = dir.path().join("meta.json");
        std::fs::write(&meta, r#"{"rows": [5, 7]}"#).unwrap();
        assert_eq!(dump_rows(dir.path(), 7).unwrap(), 5..7);
        for bad in [
            r#"{"rows": [5, 9]}"#,
            r#"{"rows": [5, "x", 7]}"#,
            r#"{"rows": 5}"#,
        ] {
            std::fs::write(&meta, bad).unwrap();
            assert!(dump_rows(dir.path(), 7)
                .unwrap_err()
                .to_string()
                .contains("not [A, B] with A < B ≤ 7"));
        }
        std::fs::write(&meta, "{").unwrap();
        assert!(matches!(
            dump_rows(dir.path(), 7),
            Err(Error::BadData { .. })
        ));
    }

    /// A synthetic llama model and the ids it runs on.
    fn synthetic() -> (Model<f64>, Vec<u32>) {
        let file = crate::gguf::GgufFile::from_bytes(
            crate::synth::SyntheticModel::new("llama").to_bytes(),
        )
        .unwrap();
        (
            Model::load(&file).unwrap(),
            (0..9).map(|i| i * 7 % 64).collect(),
        )
    }

    /// Writes ropescope's own float64 values of `layers` into `dir` in float32, as another engine would, with
    /// `ids.npy`; `skip` names the files left out.
    fn float32_dump(model: &Model<f64>, ids: &[u32], layers: &[usize], dir: &Path, skip: &[&str]) {
        let req = ReferenceRequest {
            layers: layers.to_vec(),
            rows: 0..ids.len(),
            command: Vec::new(),
        };
        for a in compute_reference(model, ids, &req, &LAYER_KINDS).unwrap() {
            let name = format!("{}.npy", a.name);
            if !skip.contains(&name.as_str()) {
                let data: Vec<f32> = a.data.iter().map(|&v| v as f32).collect();
                npy::write(&dir.join(name), &a.shape, &data).unwrap();
            }
        }
        let ids64: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
        npy::write(&dir.join("ids.npy"), &[ids.len()], &ids64).unwrap();
    }

    #[test]
    fn a_float32_dump_of_the_same_pass_agrees_and_a_changed_tensor_is_named_first() {
        let (model, ids) = synthetic();
        let dir = tempfile::tempdir().unwrap();
        float32_dump(&model, &ids, &[0, 1], dir.path(), &["v_L1.npy"]);
        let tols = default_tolerances();
        let r = diverge(&model, &ids, dir.path(), &tols).unwrap();
        assert!(r.pass, "{}", r.verdict);
        assert_eq!(r.layers, [0, 1]);
        assert_eq!(r.missing, ["v_L1.npy", "logits.npy"]);
        let files: Vec<&str> = r.tensors.iter().map(|t| t.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "q_pre_L0.npy",
                "k_pre_L0.npy",
                "v_L0.npy",
                "q_L0.npy",
                "k_L0.npy",
                "scores_L0.npy",
                "attn_L0.npy",
                "out_L0.npy",
                "hidden_L0.npy",
                "q_pre_L1.npy",
                "k_pre_L1.npy",
                "q_L1.npy",
                "k_L1.npy",
                "scores_L1.npy",
                "attn_L1.npy",
                "out_L1.npy",
                "hidden_L1.npy"
            ]
        );
        assert_eq!(r.tensors[11].layer, Some(1));

        // One value of layer 1's queries changed: the first divergence, at that element.
        let path = dir.path().join("q_L1.npy");
        let q = Array::read(&path).unwrap();
        let mut data: Vec<f32> = q.to_f64().iter().map(|&v| v as f32).collect();
        let (h, i, c) = (1, 4, 3);
        let at = (h * ids.len() + i) * q.shape[2] + c;
        data[at] += 1.0;
        npy::write(&path, &q.shape, &data).unwrap();
        let r = diverge(&model, &ids, dir.path(), &tols).unwrap();
        let first = &r.tensors[r.first.unwrap()];
        assert_eq!(first.file, "q_L1.npy");
        assert_eq!(
            (first.worst.head, first.worst.row, first.worst.col),
            (Some(h), i, c)
        );
        assert!(
            r.verdict
                .starts_with("FAIL: first divergence at q_L1.npy (layer 1, q)"),
            "{}",
            r.verdict
        );

        // A NaN earlier in the pass becomes the first divergence, reported rather than panicked on.
        let path = dir.path().join("k_pre_L0.npy");
        let k = Array::read(&path).unwrap();
        let mut data: Vec<f32> = k.to_f64().iter().map(|&v| v as f32).collect();
        data[5] = f32::NAN;
        std::fs::write(&path, npy::encode(&k.shape, &data).unwrap()).unwrap();
        let r = diverge(&model, &ids, dir.path(), &tols).unwrap();
        let first = &r.tensors[r.first.unwrap()];
        assert_eq!((first.file.as_str(), first.non_finite), ("k_pre_L0.npy", 1));
        assert!(
            r.verdict.contains("1 non-finite values in the dump"),
            "{}",
            r.verdict
        );
    }

    #[test]
    fn bad_dumps_are_one_clear_error() {
        let (model, ids) = synthetic();
        let tols = default_tolerances();
        let dir = tempfile::tempdir().unwrap();
        let err = |d: &Path| diverge(&model, &ids, d, &tols).unwrap_err();

        let absent = dir.path().join("absent");
        assert!(matches!(err(&absent), Error::Io { .. }));
        assert!(err(dir.path())
            .to_string()
            .contains("holds no tensor of the reference layout"));

        float32_dump(&model, &ids, &[0], dir.path(), &[]);
        npy::write(&dir.path().join("k_L0.npy"), &[1, 2], &[0.0f32, 0.0]).unwrap();
        let e = err(dir.path());
        assert!(matches!(e, Error::BadData { .. }));
        assert!(
            e.to_string()
                .ends_with("k_L0.npy: shape [1, 2], expected [2, 9, 8]"),
            "{e}"
        );

        let dir = tempfile::tempdir().unwrap();
        float32_dump(&model, &ids, &[0], dir.path(), &[]);
        let n = model.config.n_layers;
        npy::write(&dir.path().join(format!("q_L{n}.npy")), &[1], &[0.0f32]).unwrap();
        assert!(err(dir.path())
            .to_string()
            .contains(&format!("layer {n} does not exist")));

        let dir = tempfile::tempdir().unwrap();
        float32_dump(&model, &ids, &[0], dir.path(), &[]);
        npy::write(&dir.path().join("ids.npy"), &[2], &[1i64, 2]).unwrap();
        assert!(err(dir.path())
            .to_string()
            .contains("holds other token ids"));
        std::fs::write(dir.path().join("ids.npy"), b"not npy").unwrap();
        assert!(matches!(err(dir.path()), Error::BadData { .. }));
    }
}
