//! `ropescope head`: one head on one prompt. On a file written by llama.cpp's converter, its attention map,
//! slash profile and chunk norms equal what HF transformers' own float64 forward gives on the same tokens
//! (`fixtures/converted/llama/main`), recomputed here from HF's arrays; its map figure is square; bad heads and
//! windows are refused by name.

use ropescope::analysis::slash::slash_score;
use ropescope::io::npy::Array;
use ropescope_test_support::paths;
use std::path::Path;
use std::process::{Command, Output};

/// Agreement with HF's float64 arrays: the engine's f64 pass matches them to about 1e-14.
const HF_TOL: f64 = 1e-10;

fn head(args: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("head")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn read(path: &Path) -> Vec<f64> {
    Array::read(path).unwrap().to_f64()
}

fn assert_close(ours: &[f64], theirs: &[f64], what: &str) {
    assert_eq!(ours.len(), theirs.len(), "{what}");
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!((a - b).abs() <= HF_TOL, "{what}[{i}]: {a} vs HF {b}");
    }
}

#[test]
fn one_head_equals_hf_transformers_on_its_prompt() {
    let fixture = paths::fixture("converted/llama");
    let ids = fixture.join("main/ids.npy");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("head");
    let (layer, h) = (1usize, 2usize);
    let r = head(
        &[
            fixture.join("model.gguf").to_str().unwrap(),
            "--layer",
            "1",
            "--head",
            "2",
            "--ids",
            ids.to_str().unwrap(),
            "--delta-max",
            "8",
        ],
        &out,
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(stdout.contains("L1H2 (kv 1) on 48 tokens"), "{stdout}");
    assert!(
        stdout.lines().filter(|l| l.starts_with("  ")).count() >= 40,
        "the terminal map"
    );

    // HF's attention of this head, [T, T].
    let attn = Array::read(&fixture.join(format!("main/attn_L{layer}.npy"))).unwrap();
    let t = attn.shape[1];
    let hf: Vec<f64> = attn.to_f64()[h * t * t..(h + 1) * t * t].to_vec();
    assert_close(&read(&out.join("attention.npy")), &hf, "attention");
    let slash: Vec<f64> = (0..=8).map(|d| slash_score(&hf, t, d).unwrap()).collect();
    assert_close(&read(&out.join("slash.npy")), &slash, "slash");
    // HF's pre-RoPE queries are in half-split order: chunk l is dimensions (l, l + d/2).
    let q = Array::read(&fixture.join(format!("main/q_pre_L{layer}.npy"))).unwrap();
    let d = q.shape[2];
    let q: Vec<f64> = q.to_f64()[h * t * d..(h + 1) * t * d].to_vec();
    let norms: Vec<f64> = (0..d / 2)
        .map(|l| q.chunks(d).map(|r| r[l].hypot(r[l + d / 2])).sum::<f64>() / t as f64)
        .collect();
    assert_close(
        &read(&out.join("chunk_norms_q.npy")),
        &norms,
        "q chunk norms",
    );

    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("head.json")).unwrap()).unwrap();
    assert_eq!(record["complete"], true);
    assert_eq!(
        (record["layer"].as_u64(), record["head"].as_u64()),
        (Some(1), Some(2))
    );
    for f in [
        "attention.csv",
        "slash.csv",
        "chunks.csv",
        "attention.png",
        "slash.svg",
        "spectrum.svg",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("attention.csv"))
            .unwrap()
            .lines()
            .count(),
        t + 1
    );
    // The map figure is square: its image is as tall as it is wide.
    let svg = std::fs::read_to_string(out.join("attention.svg")).unwrap();
    let image = &svg[svg.find("<image").unwrap()..];
    let attr = |name: &str| -> f64 {
        let at = image.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        image[at..at + image[at..].find('"').unwrap()]
            .parse()
            .unwrap()
    };
    assert_eq!(attr("width"), attr("height"));

    // A window keeps that block of the same map.
    let windowed = dir.path().join("window");
    let r = head(
        &[
            fixture.join("model.gguf").to_str().unwrap(),
            "--layer",
            "1",
            "--head",
            "2",
            "--ids",
            ids.to_str().unwrap(),
            "--window",
            "10..20",
        ],
        &windowed,
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let block: Vec<f64> = (10..20)
        .flat_map(|i| hf[i * t + 10..i * t + 20].to_vec())
        .collect();
    assert_close(&read(&windowed.join("attention.npy")), &block, "window");
}

#[test]
fn a_head_or_window_outside_the_model_is_refused_by_name() {
    let model = paths::fixture("converted/llama/model.gguf");
    let dir = tempfile::tempdir().unwrap();
    let m = model.to_str().unwrap();
    for (args, words) in [
        (
            vec![m, "--layer", "2", "--head", "0", "--ids", "1,2,3"],
            "head L2H0 does not exist",
        ),
        (
            vec![m, "--layer", "0", "--head", "4", "--ids", "1,2,3"],
            "head L0H4 does not exist",
        ),
        (
            vec![
                m, "--layer", "0", "--head", "0", "--ids", "1,2,3", "--window", "1..9",
            ],
            "window 1..9 is not inside the prompt's 3 positions",
        ),
    ] {
        let out = dir.path().join("out");
        let r = head(&args, &out);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(
            !r.status.success() && err.contains(words),
            "{args:?}: {err}"
        );
        assert!(!out.exists(), "a refused run wrote {}", out.display());
    }
}
