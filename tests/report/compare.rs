//! `ropescope compare-scans` end to end: two scans of small synthetic models (a Llama and a Gemma 3, the second
//! without `fourier` and `posym`) set side by side. `compare.json`'s label counts, SDH counts and band shares
//! equal those computed here from each scan's `summary.json`; analyses that did not run are `null` and "not run"
//! on the page; the page names both models and has every section; an incomplete scan directory and a single
//! directory are refused with a clear message and leave no output behind.

use ropescope::io::npy;
use ropescope::report::compare_scans::{Comparison, SECTIONS};
use ropescope::scan::format::{Bands, Summary};
use ropescope::synth::SyntheticModel;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ropescope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(run: &Output) {
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// Scans a synthetic model of `arch` written as `dir/{file}` with `analyses` on two `.npy` prompts; returns the
/// scan directory.
fn scan(dir: &Path, arch: &str, file: &str, analyses: &str) -> PathBuf {
    let model = dir.join(file);
    let mut synthetic = SyntheticModel::new(arch);
    if arch == "gemma3" {
        // Gemma 3 needs its sliding window; six layers make layer 5 global, as in the real models.
        synthetic.sliding_window = Some(16);
        synthetic.n_layers = 6;
    }
    std::fs::write(&model, synthetic.to_bytes()).unwrap();
    let prompts: Vec<PathBuf> = [("a", 40i64), ("b", 36)]
        .iter()
        .map(|&(name, len)| {
            let path = dir.join(format!("{arch}-{name}.npy"));
            let ids: Vec<i64> = (0..len).map(|i| (i * 7 + 3) % 64).collect();
            npy::write(&path, &[ids.len()], &ids).unwrap();
            path
        })
        .collect();
    let out = dir.join(format!("scan-{arch}"));
    ok(&ropescope(&[
        "scan",
        model.to_str().unwrap(),
        "--prompts",
        prompts[0].to_str().unwrap(),
        prompts[1].to_str().unwrap(),
        "--analyses",
        analyses,
        "--delta-max",
        "5",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]));
    out
}

fn summary(dir: &Path) -> Summary {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

fn mean(bands: &[&Bands]) -> [f64; 3] {
    let n = bands.len() as f64;
    [
        bands.iter().map(|b| b.low).sum::<f64>() / n,
        bands.iter().map(|b| b.medium).sum::<f64>() / n,
        bands.iter().map(|b| b.high).sum::<f64>() / n,
    ]
}

/// Nothing of an output `out` exists: neither the directory nor its lock or staging siblings.
fn nothing_left(out: &Path) {
    assert!(!out.exists(), "{} was written", out.display());
    let name = out.file_name().unwrap().to_string_lossy().into_owned();
    for entry in std::fs::read_dir(out.parent().unwrap()).unwrap() {
        let other = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!other.contains(&name), "{other} was left behind");
    }
}

#[test]
fn two_scans_side_by_side() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let llama = scan(
        dir,
        "llama",
        "llama-synthetic.gguf",
        "slash,intrinsic,frequency,fourier,posym",
    );
    let gemma = scan(
        dir,
        "gemma3",
        "gemma3-synthetic.gguf",
        "slash,intrinsic,frequency",
    );
    let out = dir.join("compared");
    let run = ropescope(&[
        "compare-scans",
        llama.to_str().unwrap(),
        gemma.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    ok(&run);
    assert!(String::from_utf8_lossy(&run.stdout).contains("compare.html"));
    let c: Comparison =
        serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(c.models.len(), 2);
    assert_eq!(c.models[0].name, "llama-synthetic.gguf (llama)");
    assert_eq!(c.models[1].name, "gemma3-synthetic.gguf (gemma3)");

    let summaries = [summary(&llama), summary(&gemma)];
    let all_labels: BTreeSet<String> = summaries
        .iter()
        .flat_map(|s| s.heads.iter().map(|h| h.label.clone()))
        .collect();
    assert_eq!(c.labels, all_labels.into_iter().collect::<Vec<_>>());
    for (m, s) in c.models.iter().zip(&summaries) {
        // Labels: every label of either model, with this model's count (0 where it has none).
        let mut counts: BTreeMap<String, usize> = c.labels.iter().map(|l| (l.clone(), 0)).collect();
        for h in &s.heads {
            *counts.get_mut(&h.label).unwrap() += 1;
        }
        assert_eq!(m.labels.counts, counts, "{}", m.name);
        assert_eq!(m.labels.heads, s.heads.len());
        for (l, &n) in &counts {
            assert_eq!(m.labels.shares[l], n as f64 / s.heads.len() as f64);
        }

        // SDHs: heads and triples on both sets, per Δ, and the intrinsic record as it is in the file.
        let sets = s.slash_dominant.as_ref().unwrap();
        let sdh = m.sdh.as_ref().unwrap();
        let heads_of = |v: &[ropescope::scan::format::SlashHead]| {
            v.iter()
                .map(|t| (t.layer, t.head))
                .collect::<BTreeSet<_>>()
                .len()
        };
        assert_eq!(sdh.natural_heads, heads_of(&sets.natural));
        assert_eq!(
            sdh.natural_heads,
            s.heads
                .iter()
                .filter(|h| h.slash.as_ref().unwrap().slash_dominant)
                .count()
        );
        assert_eq!(sdh.random_heads, Some(heads_of(&sets.random)));
        assert_eq!(sdh.natural_triples, sets.natural.len());
        assert_eq!(sdh.random_triples, Some(sets.random.len()));
        assert_eq!(sdh.kappa, sets.kappa);
        assert_eq!(sdh.per_delta.len(), 6);
        for (d, at) in sdh.per_delta.iter().enumerate() {
            assert_eq!(at.delta, d);
            assert_eq!(
                at.natural,
                sets.natural.iter().filter(|t| t.delta == d).count()
            );
            assert_eq!(
                at.random,
                Some(sets.random.iter().filter(|t| t.delta == d).count())
            );
        }
        assert_eq!(sdh.intrinsic, s.intrinsic);
        assert_eq!(
            sdh.still_dominant_on_random,
            Some(
                s.heads
                    .iter()
                    .filter_map(|h| h.slash.as_ref())
                    .filter(|x| x.slash_dominant && x.random_slash_dominant == Some(true))
                    .count()
            )
        );

        // Band shares of query norm: the mean of the heads' own shares.
        let q: Vec<&Bands> = s
            .heads
            .iter()
            .map(|h| &h.frequency.as_ref().unwrap().q)
            .collect();
        let got = m.bands.query_norm.unwrap();
        let want = mean(&q);
        for (g, w) in [got.low, got.medium, got.high].iter().zip(want) {
            assert!((g - w).abs() <= 1e-12, "{g} vs {w}");
        }

        // Top heads: ten at most, best first, each as in the summary.
        let top = m.top_heads.as_ref().unwrap();
        assert_eq!(top.len(), s.heads.len().min(10));
        assert!(top.windows(2).all(|w| w[0].best_score >= w[1].best_score));
        let best = s
            .heads
            .iter()
            .map(|h| h.slash.as_ref().unwrap().best_score)
            .fold(f64::MIN, f64::max);
        assert_eq!(top[0].best_score, best);
    }
    // What did not run is null, never 0.
    assert!(c.models[0].bands.fourier_amplitude.is_some() && c.models[0].posym.is_some());
    assert!(c.models[1].bands.fourier_amplitude.is_none() && c.models[1].posym.is_none());
    let posym = c.models[0].posym.as_ref().unwrap();
    assert_eq!(posym.heads.len(), summaries[0].heads.len());

    let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
    for name in [
        "llama-synthetic.gguf (llama)",
        "gemma3-synthetic.gguf (gemma3)",
    ] {
        assert!(html.contains(name), "page lacks {name}");
    }
    for heading in [
        "Models",
        "Labels",
        "Slash-dominant heads",
        "Band shares",
        "Positional–symbolic plane",
        "Top heads by slash score",
    ] {
        assert!(
            html.contains(&format!("\">{heading}</h2>")),
            "page lacks {heading}"
        );
    }
    assert_eq!(SECTIONS.len(), 6);
    assert!(html.contains("not run"));
    assert!(html.contains("<svg") && !html.contains("<script"));
    assert!(!html.contains("https://"), "the page loads nothing");

    // An existing output is refused without --force, and replaced whole with it.
    let again = ropescope(&[
        "compare-scans",
        llama.to_str().unwrap(),
        gemma.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!again.status.success());
    let forced = ropescope(&[
        "compare-scans",
        gemma.to_str().unwrap(),
        llama.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--force",
    ]);
    ok(&forced);
    let c2: Comparison =
        serde_json::from_slice(&std::fs::read(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(c2.models[0].name, c.models[1].name);

    // Refusals: an incomplete scan and a single directory; nothing written.
    let incomplete = dir.join("scan-incomplete");
    std::fs::create_dir(&incomplete).unwrap();
    for entry in std::fs::read_dir(&gemma).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), incomplete.join(entry.file_name())).unwrap();
        }
    }
    let meta_path = incomplete.join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta.as_object_mut().unwrap().remove("complete");
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let refused_out = dir.join("refused");
    let refused = ropescope(&[
        "compare-scans",
        llama.to_str().unwrap(),
        incomplete.to_str().unwrap(),
        "--out",
        refused_out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        err.contains("scan-incomplete") && err.contains("not a complete scan directory"),
        "{err}"
    );
    nothing_left(&refused_out);

    let single = ropescope(&[
        "compare-scans",
        llama.to_str().unwrap(),
        "--out",
        refused_out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&single.stderr);
    assert_eq!(single.status.code(), Some(2), "{err}");
    assert!(err.contains("at least 2 scan directories"), "{err}");
    nothing_left(&refused_out);
}
