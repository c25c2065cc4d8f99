//! `ropescope rope` against HF transformers: every converted variant's per-layer inverse frequencies and cos/sin
//! tables equal the float64 values HF computes (`fixtures/converted/<variant>/<case>/meta.json` → `rope`,
//! recorded independently of ropescope), and bad requests are refused before anything is written.

use ropescope::io::npy::Array;
use ropescope_test_support::paths;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Largest relative difference allowed between an inverse frequency and HF's float64 one: a few ulps. Both sides
/// evaluate the same formulas in f64, in the same order of operations; every variant agrees bit for bit.
const INV_FREQ_REL_TOL: f64 = 1e-15;

/// Largest absolute difference allowed between a table entry and `attention_scaling · cos(p · g_HF)` (or sin)
/// computed here. Every variant agrees bit for bit (difference 0).
const COS_SIN_ABS_TOL: f64 = 1e-15;

/// Runs `ropescope rope` with `args`.
fn rope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("rope")
        .args(args)
        .output()
        .unwrap()
}

/// Runs `ropescope rope MODEL --positions SPEC --length N --out DIR` and requires success.
fn rope_tables(model: &Path, positions: &str, length: usize, out: &Path) {
    let out_status = rope(&[
        model.to_str().unwrap(),
        "--positions",
        positions,
        "--length",
        &length.to_string(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        out_status.status.success(),
        "{}",
        String::from_utf8_lossy(&out_status.stderr)
    );
    let err = String::from_utf8(out_status.stderr).unwrap();
    assert!(err.starts_with("wrote "), "{err}");
}

/// The variant directories of `fixtures/converted` whose model the engine loads, sorted (the others are refused
/// by name: `engine::model_refusals::converted_models_not_yet_scanned_are_refused_by_name`; the count is asserted
/// by [`every_variant_matches_hf_float64`]).
fn variants() -> Vec<PathBuf> {
    let runs = |p: &Path| {
        let file = ropescope::gguf::GgufFile::open(p.join("model.gguf")).unwrap();
        ropescope::model::Model::<f64>::load(&file).is_ok()
    };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(paths::fixture("converted"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.gguf").is_file() && runs(p))
        .collect();
    dirs.sort();
    dirs
}

/// The case directories (those with a `meta.json`) of a variant, sorted.
fn cases(variant: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(variant)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("meta.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Reads a JSON file; serde_json's `float_roundtrip` feature (enabled in Cargo.toml) reads every float correctly
/// rounded, so HF's values arrive here exactly as HF wrote them.
fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// HF's RoPE entry for `layer` of a case: `all` when the case has one type, else the layer's kind.
fn hf_rope(meta: &Value, layer: usize) -> &Value {
    let rope = &meta["rope"];
    if rope.get("all").is_some() {
        return &rope["all"];
    }
    let kind = meta["layer_kinds"][layer.to_string()]
        .as_str()
        .unwrap_or_else(|| panic!("layer {layer} has no kind in meta.json"));
    &rope[kind]
}

/// The larger of a running maximum and a new difference, a NaN difference counting as infinite.
fn worst(max: f64, diff: f64) -> f64 {
    if diff.is_nan() {
        f64::INFINITY
    } else {
        max.max(diff)
    }
}

/// Largest differences found in one table directory.
#[derive(Default, Debug)]
struct MaxDiff {
    inv_freq_rel: f64,
    cos_sin_abs: f64,
}

/// Compares the tables in `out` with HF's frequencies `hf_inv_freq(l)` and magnitude `hf_scaling(l)` for
/// every layer, and returns the largest differences.
fn compare(
    out: &Path,
    positions: &[usize],
    hf_inv_freq: impl Fn(usize) -> Vec<f64>,
    hf_scaling: impl Fn(usize) -> f64,
) -> MaxDiff {
    let inv_freq = Array::read(&out.join("inv_freq.npy")).unwrap();
    let cos = Array::read(&out.join("cos.npy")).unwrap();
    let sin = Array::read(&out.join("sin.npy")).unwrap();
    let written = Array::read(&out.join("positions.npy")).unwrap();
    let (n_layers, n_chunks) = (inv_freq.shape[0], inv_freq.shape[1]);
    let p_n = positions.len();
    assert_eq!(
        written.to_i64().unwrap(),
        positions.iter().map(|&p| p as i64).collect::<Vec<_>>()
    );
    assert_eq!(cos.shape, vec![n_layers, p_n, n_chunks]);
    assert_eq!(sin.shape, cos.shape);
    let (g, c, s) = (inv_freq.to_f64(), cos.to_f64(), sin.to_f64());
    let mut d = MaxDiff::default();
    for l in 0..n_layers {
        let hf = hf_inv_freq(l);
        let m = hf_scaling(l);
        assert!(hf.len() <= n_chunks, "layer {l}: number of chunks");
        // Chunks the layer does not rotate (all of a NoPE layer's) are NaN in every table.
        for k in hf.len()..n_chunks {
            assert!(
                g[l * n_chunks + k].is_nan(),
                "layer {l} chunk {k}: inv_freq"
            );
            for i in 0..p_n {
                let at = (l * p_n + i) * n_chunks + k;
                assert!(
                    c[at].is_nan() && s[at].is_nan(),
                    "layer {l} chunk {k}: cos/sin"
                );
            }
        }
        for (k, &want) in hf.iter().enumerate() {
            let got = g[l * n_chunks + k];
            // A chunk proportional RoPE leaves unrotated has frequency exactly 0 in HF and here.
            let rel = match want {
                0.0 if got == 0.0 => 0.0,
                _ => (got - want).abs() / want.abs(),
            };
            d.inv_freq_rel = worst(d.inv_freq_rel, rel);
        }
        for (i, &p) in positions.iter().enumerate() {
            for (k, &freq) in hf.iter().enumerate() {
                let at = (l * p_n + i) * n_chunks + k;
                let theta = p as f64 * freq;
                d.cos_sin_abs = worst(d.cos_sin_abs, (c[at] - m * theta.cos()).abs());
                d.cos_sin_abs = worst(d.cos_sin_abs, (s[at] - m * theta.sin()).abs());
            }
        }
    }
    d
}

fn assert_within(what: &str, d: &MaxDiff, cos_sin_tol: f64) {
    assert!(
        d.inv_freq_rel <= INV_FREQ_REL_TOL && d.cos_sin_abs <= cos_sin_tol,
        "{what}: inv_freq relative {:e} (tolerance {INV_FREQ_REL_TOL:e}), cos/sin absolute {:e} \
         (tolerance {cos_sin_tol:e})",
        d.inv_freq_rel,
        d.cos_sin_abs
    );
}

/// Every case of every variant, at the case's own length `T`: positions 0–7, 31 and `T − 1` (every case has
/// `T ≥ 32`; for `T = 48` this is `0..8,31,47`).
#[test]
fn every_variant_matches_hf_float64() {
    let tmp = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    for variant in variants() {
        let name = variant.file_name().unwrap().to_string_lossy().into_owned();
        for case in cases(&variant) {
            let meta = read_json(&case.join("meta.json"));
            let t = meta["n_tokens"].as_u64().unwrap() as usize;
            assert!(t >= 32, "{}: T = {t}", case.display());
            let mut positions: Vec<usize> = (0..8).chain([31]).collect();
            let mut spec = "0..8,31".to_string();
            if t - 1 > 31 {
                positions.push(t - 1);
                spec += &format!(",{}", t - 1);
            }
            let case_name = case.file_name().unwrap().to_string_lossy().into_owned();
            let out = tmp.path().join(format!("{name}-{case_name}"));
            rope_tables(&variant.join("model.gguf"), &spec, t, &out);
            let ours = read_json(&out.join("meta.json"));
            assert_eq!(ours["length"], t);
            let hf_config = read_json(&variant.join("hf_config.json"));
            assert_eq!(
                ours["n_layers"], hf_config["num_hidden_layers"],
                "{name}/{case_name}"
            );
            // HF rotates nothing on a NoPE layer (`rope_layers` false).
            let rotates = |l: usize| meta["rope_layers"].get(l).is_none_or(|r| r == true);
            // Per layer: Gemma 4's sliding and global layers differ in head and rotated dimensions.
            for l in 0..ours["n_layers"].as_u64().unwrap() as usize {
                let (theirs, mine) = (hf_rope(&meta, l), &ours["layers"][l]);
                if rotates(l) {
                    assert_eq!(
                        mine["rot_dim"], theirs["rotary_dim"],
                        "{name}/{case_name} layer {l}"
                    );
                }
                // DeepSeek's HF config calls its rotated part the head dimension.
                if let Some(d) = theirs.get("head_dim").filter(|_| meta.get("mla").is_none()) {
                    assert_eq!(&mine["head_dim"], d, "{name}/{case_name} layer {l}");
                }
            }
            let d = compare(
                &out,
                &positions,
                |l| match rotates(l) {
                    true => floats(&hf_rope(&meta, l)["inv_freq"]),
                    false => Vec::new(),
                },
                |l| hf_rope(&meta, l)["attention_scaling"].as_f64().unwrap(),
            );
            report.push((name.clone(), format!("{name}/{case_name}"), d));
        }
    }
    for (_, what, d) in &report {
        eprintln!(
            "{what}: inv_freq rel {:e}, cos/sin abs {:e}",
            d.inv_freq_rel, d.cos_sin_abs
        );
    }
    for (_, what, d) in &report {
        assert_within(what, d, COS_SIN_ABS_TOL);
    }
    assert_eq!(
        report.len(),
        34,
        "33 variants, phi3-longrope with two cases"
    );
}

/// LongRoPE's factors follow `--length`: the short ones up to the original context (32), the long ones above.
#[test]
fn phi3_longrope_factors_follow_the_length() {
    let variant = paths::fixture("converted/phi3-longrope");
    let meta = read_json(&variant.join("short/meta.json"));
    let hf = &meta["rope"]["all"];
    let (short, long) = (floats(&hf["short_inv_freq"]), floats(&hf["long_inv_freq"]));
    assert_ne!(short, long);
    let m = hf["attention_scaling"].as_f64().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let positions: Vec<usize> = (0..8).chain([31]).collect();
    for (length, factors, want) in [(32, "short", &short), (48, "long", &long)] {
        let out = tmp.path().join(factors);
        rope_tables(&variant.join("model.gguf"), "0..8,31", length, &out);
        let d = compare(&out, &positions, |_| want.clone(), |_| m);
        assert_within(
            &format!("phi3-longrope --length {length}"),
            &d,
            COS_SIN_ABS_TOL,
        );
        let ours = read_json(&out.join("meta.json"));
        for layer in ours["layers"].as_array().unwrap() {
            assert_eq!(layer["longrope_factors"], factors);
        }
    }
}

/// A refused request exits with `code` and one line on stderr naming the problem, and writes nothing.
fn assert_refused(args: &[&str], out: &Path, needle: &str, code: i32) {
    let o = rope(args);
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err}");
    assert!(!out.exists(), "{} was created", out.display());
}

#[test]
fn bad_requests_are_refused_before_writing() {
    let model = paths::fixture("converted/gemma3/model.gguf");
    let model = model.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("tables");
    let out_s = out.to_str().unwrap();
    // Exit 2 for a bad argument, 5 for tables over the size limit.
    for (positions, length, needle, code) in [
        ("0..4,2", None, "position 2 is given twice", 2),
        ("5,0..8", None, "position 5 is given twice", 2),
        ("0..8", Some("7"), "length 7 does not cover position 7", 2),
        (
            "3,20",
            Some("20"),
            "length 20 does not cover position 20",
            2,
        ),
        ("", None, "no positions", 2),
        ("4..4", None, "empty range", 2),
        ("x", None, "'x' is not a position", 2),
        ("0..100000000000", None, "1 GiB", 5),
    ] {
        let mut args = vec![model, "--positions", positions, "--out", out_s];
        if let Some(n) = length {
            args.extend(["--length", n]);
        }
        assert_refused(&args, &out, needle, code);
    }
}

/// The JSON reader the comparisons rely on reads HF's floats correctly rounded (llama-llama3's chunk 3).
#[test]
fn json_floats_are_read_correctly_rounded() {
    let text = "0.20500094811345038";
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(v.as_f64(), text.parse::<f64>().ok());
}

#[test]
fn out_is_required() {
    let model = paths::fixture("converted/llama/model.gguf");
    let o = rope(&[model.to_str().unwrap(), "--positions", "0..4"]);
    assert!(!o.status.success());
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("--out"), "{err}");
}
