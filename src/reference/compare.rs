//! Comparing two reference directories (`ropescope compare`): NMSE and max-abs per common array, against
//! per-quantity tolerances.

use crate::error::{Error, Result};
use crate::io::npy::Array;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Bounds one quantity must satisfy; `None` bounds are not checked.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    /// Largest allowed normalised mean squared error `Σ(a−b)² / Σb²` (b: the second directory).
    pub nmse: Option<f64>,
    /// Largest allowed `max |a − b|`.
    pub max_abs: Option<f64>,
}

/// The quantity an array file holds: its name up to `_L{layer}` or `.npy` (`attn`, `q_pre`, `logits`, ...).
pub fn kind_of(file: &str) -> &str {
    let stem = file.strip_suffix(".npy").unwrap_or(file);
    match stem.rfind("_L") {
        Some(i) if stem[i + 2..].chars().all(|c| c.is_ascii_digit()) && i + 2 < stem.len() => {
            &stem[..i]
        }
        _ => stem,
    }
}

/// Default NMSE bound of logits, attention logits, q, k, v, MLA's latent, head outputs and the residual stream: the f32
/// engine's bar against an f64 reference in the fidelity tests.
pub const DEFAULT_VECTOR_NMSE: f64 = 1e-10;

/// Default max-abs bound of attention probabilities: the f32 engine's bar against an f64 reference in the
/// fidelity tests.
pub const DEFAULT_ATTN_MAX_ABS: f64 = 1e-5;

/// The quantities held to [`DEFAULT_VECTOR_NMSE`] by default.
const NMSE_KINDS: [&str; 10] = [
    "logits",
    "scores",
    "q_pre",
    "k_pre",
    "q",
    "k",
    "v",
    "kv_latent",
    "out",
    "hidden",
];

impl Tolerance {
    /// Whether `nmse` and `max_abs` are within every bound that is set.
    pub fn holds(&self, nmse: f64, max_abs: f64) -> bool {
        self.nmse.is_none_or(|n| nmse <= n) && self.max_abs.is_none_or(|m| max_abs <= m)
    }
}

/// Default tolerances: NMSE ≤ [`DEFAULT_VECTOR_NMSE`] for logits and vectors, max-abs ≤
/// [`DEFAULT_ATTN_MAX_ABS`] for attention probabilities and sink masses; token ids must be equal.
pub fn default_tolerances() -> BTreeMap<String, Tolerance> {
    let nmse = Tolerance {
        nmse: Some(DEFAULT_VECTOR_NMSE),
        max_abs: None,
    };
    let mut t = BTreeMap::new();
    for k in NMSE_KINDS {
        t.insert(k.to_string(), nmse);
    }
    for probabilities in ["attn", "sink"] {
        t.insert(
            probabilities.into(),
            Tolerance {
                nmse: None,
                max_abs: Some(DEFAULT_ATTN_MAX_ABS),
            },
        );
    }
    t.insert(
        "ids".into(),
        Tolerance {
            nmse: None,
            max_abs: Some(0.0),
        },
    );
    t
}

/// Result for one array present in both directories.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// File name.
    pub file: String,
    /// Shape (equal in both), or both shapes when they differ.
    pub shape: String,
    /// `Σ(a−b)² / Σb²` (0 when both are zero).
    pub nmse: f64,
    /// `max |a − b|`.
    pub max_abs: f64,
    /// `max |b|`, for scale.
    pub max_ref: f64,
    /// The tolerance applied.
    pub tolerance: Option<Tolerance>,
    /// Whether the shapes agree and every bound holds.
    pub pass: bool,
}

/// NMSE, max-abs difference and max-abs reference value of two equally long arrays. Any NaN or infinite
/// difference makes both error measures infinite, so it can never pass a tolerance.
pub fn errors(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    let (mut num, mut den, mut max_abs, mut max_ref) = (0.0, 0.0, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let d = x - y;
        if !d.is_finite() && x != y {
            return (f64::INFINITY, f64::INFINITY, max_ref.max(y.abs()));
        }
        num += d * d;
        den += y * y;
        max_abs = max_abs.max(d.abs());
        max_ref = max_ref.max(y.abs());
    }
    let nmse = if den > 0.0 {
        num / den
    } else if num > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    (nmse, max_abs, max_ref)
}

/// Compares every `.npy` file present in both `a` and `b`. Returns the comparisons (sorted by file) and the
/// files found in only one directory.
pub fn compare_dirs(
    a: &Path,
    b: &Path,
    tolerances: &BTreeMap<String, Tolerance>,
) -> Result<(Vec<Comparison>, Vec<String>)> {
    let list = |dir: &Path| -> Result<Vec<String>> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| Error::io(dir, e))?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.ends_with(".npy") && !n.starts_with('.'))
            .collect();
        v.sort();
        Ok(v)
    };
    let (la, lb) = (list(a)?, list(b)?);
    let only: Vec<String> = la
        .iter()
        .filter(|f| !lb.contains(f))
        .map(|f| format!("{f} (only in {})", a.display()))
        .chain(
            lb.iter()
                .filter(|f| !la.contains(f))
                .map(|f| format!("{f} (only in {})", b.display())),
        )
        .collect();
    let mut out = Vec::new();
    for file in la.iter().filter(|f| lb.contains(f)) {
        let (x, y) = (Array::read(&a.join(file))?, Array::read(&b.join(file))?);
        let tolerance = tolerances.get(kind_of(file)).copied();
        if x.shape != y.shape {
            out.push(Comparison {
                file: file.clone(),
                shape: format!("{:?} vs {:?}", x.shape, y.shape),
                nmse: f64::INFINITY,
                max_abs: f64::INFINITY,
                max_ref: 0.0,
                tolerance,
                pass: false,
            });
            continue;
        }
        let (nmse, max_abs, max_ref) = errors(&x.to_f64(), &y.to_f64());
        // An array of a kind without a tolerance cannot pass: nothing says what agreement it needs.
        let pass = tolerance.is_some_and(|t| t.holds(nmse, max_abs));
        out.push(Comparison {
            file: file.clone(),
            shape: format!("{:?}", x.shape),
            nmse,
            max_abs,
            max_ref,
            tolerance,
            pass,
        });
    }
    Ok((out, only))
}

/// Applies a tolerance override `KIND=nmse:X` or `KIND=max_abs:X` (`tol`) to `tolerances`:
/// `KIND` one of its kinds, `X` a finite number, 0 or more.
pub fn apply_override(tolerances: &mut BTreeMap<String, Tolerance>, spec: &str) -> Result<()> {
    let bad = || Error::parameter("tol", format!("'{spec}': expected KIND=METRIC:VALUE"));
    let (kind, rest) = spec.split_once('=').ok_or_else(bad)?;
    let (metric, value) = rest.split_once(':').ok_or_else(bad)?;
    let value: f64 = value
        .parse()
        .map_err(|_| Error::parameter("tol", format!("'{spec}': '{value}' is not a number")))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(Error::parameter(
            "tol",
            format!("'{spec}': {value} is out of range: a finite number, 0 or more"),
        ));
    }
    if !tolerances.contains_key(kind) {
        let known: Vec<&str> = tolerances.keys().map(String::as_str).collect();
        return Err(Error::parameter(
            "tol",
            format!(
                "'{spec}': unknown kind '{kind}' (known: {})",
                known.join(", ")
            ),
        ));
    }
    let t = tolerances.entry(kind.to_string()).or_insert(Tolerance {
        nmse: None,
        max_abs: None,
    });
    match metric {
        "nmse" => t.nmse = Some(value),
        "max_abs" => t.max_abs = Some(value),
        other => {
            return Err(Error::parameter(
                "tol",
                format!("'{spec}': unknown metric '{other}' (nmse or max_abs)"),
            ))
        }
    }
    Ok(())
}

/// The comparison of two reference directories with its verdict (what `ropescope compare --json` prints).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Whether every common array is within its tolerance.
    pub pass: bool,
    /// `PASS: N arrays within tolerance` or `FAIL: F of N arrays over tolerance (kinds)`.
    pub verdict: String,
    /// One entry per array present in both directories, sorted by file.
    pub comparisons: Vec<Comparison>,
    /// The files present in only one directory, each saying which.
    pub unpaired: Vec<String>,
}

/// Compares `a` (under test) with `b` (the reference) as [`compare_dirs`] does and states the verdict; refuses
/// directories with no array in common.
pub fn compare_report(
    a: &Path,
    b: &Path,
    tolerances: &BTreeMap<String, Tolerance>,
) -> Result<Report> {
    let (comparisons, unpaired) = compare_dirs(a, b, tolerances)?;
    if comparisons.is_empty() {
        return Err(Error::Argument(
            "no array is present in both directories".into(),
        ));
    }
    let failed: Vec<&str> = comparisons
        .iter()
        .filter(|c| !c.pass)
        .map(|c| c.file.as_str())
        .collect();
    let kinds: std::collections::BTreeSet<&str> = failed.iter().map(|f| kind_of(f)).collect();
    let verdict = if failed.is_empty() {
        format!("PASS: {} arrays within tolerance", comparisons.len())
    } else {
        format!(
            "FAIL: {} of {} arrays over tolerance ({})",
            failed.len(),
            comparisons.len(),
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        )
    };
    Ok(Report {
        pass: failed.is_empty(),
        verdict,
        comparisons,
        unpaired,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_reference_files() {
        assert_eq!(kind_of("attn_L5.npy"), "attn");
        assert_eq!(kind_of("q_pre_L12.npy"), "q_pre");
        assert_eq!(kind_of("logits.npy"), "logits");
        assert_eq!(kind_of("k_L0.npy"), "k");
    }

    #[test]
    fn a_kind_without_tolerance_does_not_pass() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for d in [a.path(), b.path()] {
            crate::io::npy::write(&d.join("extra_L0.npy"), &[2], &[1.0f64, 2.0]).unwrap();
            crate::io::npy::write(&d.join("logits.npy"), &[2], &[1.0f64, 2.0]).unwrap();
        }
        let (rows, _) = compare_dirs(a.path(), b.path(), &default_tolerances()).unwrap();
        let pass = |f: &str| rows.iter().find(|c| c.file == f).unwrap().pass;
        assert!(pass("logits.npy"));
        assert!(!pass("extra_L0.npy"));
    }

    #[test]
    fn error_measures() {
        let (nmse, max_abs, max_ref) = errors(&[1.0, 2.0, 2.0], &[1.0, 2.0, 3.0]);
        assert!((nmse - 1.0 / 14.0).abs() < 1e-15);
        assert_eq!((max_abs, max_ref), (1.0, 3.0));
        assert_eq!(errors(&[f64::NAN], &[1.0]).1, f64::INFINITY);
        assert_eq!(errors(&[1.0, f64::INFINITY], &[1.0, 2.0]).0, f64::INFINITY);
    }
}
