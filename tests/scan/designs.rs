//! The scan on the attention designs of today's models, each on a file written by llama.cpp's converter
//! (`fixtures/converted/`): heads that rotate only part of themselves (GPT-NeoX's 25%, Gemma 4's proportional
//! RoPE) give their unrotated coordinates their own "NoPE" share beside the frequency bands; GPT-OSS's learned
//! sinks are measured as HF transformers computes them; Llama 4's chunked layers are recorded.

use ropescope::analysis::slash_stream::SlashCapture;
use ropescope::gguf::GgufFile;
use ropescope::io::npy::Array;
use ropescope::model::{ForwardOptions, Model};
use ropescope_test_support::fidelity::Case;
use ropescope_test_support::inputs::scan_converted;
use ropescope_test_support::paths;
use serde_json::Value;
use std::path::Path;

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Shares sum to 1 to rounding.
const SHARE_SUM_TOL: f64 = 1e-12;

/// Every head's shares over the bands and the unrotated part sum to 1; the unrotated share is there, and
/// positive for the queries and keys, exactly on the heads that have coordinates that never turn (all of
/// GPT-NeoX's, Gemma 4's global layers only); and the
/// bands' part of the Fourier amplitude splits as the chunk amplitudes in `fourier_amplitude_natural.npy` do,
/// chunks of frequency 0 left out.
#[test]
fn partial_and_proportional_rotation_report_their_unrotated_share_apart() {
    let tmp = tempfile::tempdir().unwrap();
    for (variant, still_layers) in [("gptneox", None), ("gemma4", Some([2usize, 5]))] {
        let out = tmp.path().join(variant);
        scan_converted(variant, &out);
        let summary = read_json(&out.join("summary.json"));
        let meta = read_json(&out.join("meta.json"));
        let read = |f: &str| Array::read(&out.join(f)).unwrap().to_f64();
        let (amp, freq) = (
            read("fourier_amplitude_natural.npy"),
            read("chunk_frequency.npy"),
        );
        let c = meta["model"]["n_chunks"].as_u64().unwrap() as usize;
        let edges = &meta["parameters"];
        let high_min = edges["high_band_min_frequency"].as_f64().unwrap();
        let n_heads = meta["model"]["n_heads"].as_u64().unwrap() as usize;
        for h in summary["heads"].as_array().unwrap() {
            let (l, head) = (
                h["layer"].as_u64().unwrap() as usize,
                h["head"].as_u64().unwrap() as usize,
            );
            let still = still_layers.is_none_or(|s| s.contains(&l));
            // The queries' and keys' unrotated coordinates have a norm on these random weights: their share is
            // counted, not only present.
            for side in ["q", "k"] {
                let nope = h["frequency"][side]["nope"].as_f64().unwrap_or(0.0);
                assert_eq!(nope > 0.0, still, "{variant} L{l}H{head} {side}: {nope}");
            }
            let a = &h["fourier"]["amplitude_shares"];
            for shares in [a, &h["frequency"]["q"], &h["frequency"]["k"]] {
                assert_eq!(
                    shares["nope"].is_number(),
                    still,
                    "{variant} L{l}H{head}: {shares}"
                );
                let sum: f64 = ["low", "medium", "high", "nope"]
                    .iter()
                    .map(|k| shares[*k].as_f64().unwrap_or(0.0))
                    .sum();
                assert!(
                    (sum - 1.0).abs() < SHARE_SUM_TOL,
                    "{variant} L{l}H{head}: {shares}"
                );
            }
            // Recomputed from the written amplitudes: the high band's share of the turning chunks' amplitude.
            let row = &amp[(l * n_heads + head) * c..][..c];
            let g = &freq[l * c..][..c];
            let turning = |keep: &dyn Fn(f64) -> bool| -> f64 {
                row.iter()
                    .zip(g)
                    .filter(|(a, &g)| a.is_finite() && g > 0.0 && keep(g))
                    .map(|(a, _)| a)
                    .sum()
            };
            let bands = 1.0 - a["nope"].as_f64().unwrap_or(0.0);
            let high = a["high"].as_f64().unwrap();
            let expected = turning(&|g| g >= high_min) / turning(&|_| true) * bands;
            assert!(
                (high - expected).abs() < SHARE_SUM_TOL,
                "{variant} L{l}H{head}: {high} vs {expected}"
            );
        }
    }
}

/// Largest difference between the learned-sink mass the scan measures (f64) and the mass HF transformers'
/// float64 forward gives the sink on the same file and tokens; both are means of probabilities computed to
/// about 1e-14.
const SINK_MASS_TOL: f64 = 1e-12;

/// GPT-OSS's learned sinks: the mean over a prompt's rows of the mass each head's sink takes equals HF's, read
/// from the fixture's `sink_L{l}.npy` (HF's attention with the sink column it drops), and `scan` writes it.
#[test]
fn learned_sink_mass_equals_hf_transformers() {
    let dir = paths::fixture("converted/gpt-oss");
    let case = Case::read(&dir.join("main"));
    let file = GgufFile::open(dir.join("model.gguf")).unwrap();
    let model = Model::<f64>::load(&file).unwrap();
    let c = &model.config;
    let mut cap = SlashCapture::new(c.n_layers, c.n_heads, 4);
    model
        .forward(&case.ids, &ForwardOptions::default(), &mut cap)
        .unwrap();
    let ours = cap.learned_sinks().expect("GPT-OSS has sinks");
    assert_eq!(case.rows, 0..case.ids.len(), "HF's rows are every row");
    for &l in &case.layers {
        let hf = Array::read(&dir.join(format!("main/sink_L{l}.npy"))).unwrap();
        let (heads, rows) = (hf.shape[0], hf.shape[1]);
        let hf = hf.to_f64();
        for h in 0..heads {
            let mean = hf[h * rows..(h + 1) * rows].iter().sum::<f64>() / rows as f64;
            let got = ours[l * c.n_heads + h];
            assert!(
                (got - mean).abs() < SINK_MASS_TOL,
                "L{l}H{h}: {got} vs HF {mean}"
            );
            assert!(got > 0.01, "L{l}H{h}: the sink takes mass");
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("scan");
    scan_converted("gpt-oss", &out);
    let summary = read_json(&out.join("summary.json"));
    let learned = Array::read(&out.join("learned_sink_natural.npy"))
        .unwrap()
        .to_f64();
    for (h, m) in summary["heads"].as_array().unwrap().iter().zip(&learned) {
        assert_eq!(h["slash"]["learned_sink"].as_f64(), Some(*m));
        assert!(*m > 0.0 && *m < 1.0);
    }
    // A model without sinks writes no such file and no such field.
    let plain = tmp.path().join("llama");
    scan_converted("llama", &plain);
    assert!(!plain.join("learned_sink_natural.npy").exists());
    assert!(!std::fs::read_to_string(plain.join("summary.json"))
        .unwrap()
        .contains("learned_sink"));
}

/// Llama 4's chunked RoPE layers (llama.cpp's block of 8192 positions) and its NoPE layer without chunks are
/// recorded per layer, and the maps of a chunked layer say so.
#[test]
fn chunked_layers_are_recorded_and_named_on_their_maps() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("scan");
    let page = scan_converted("llama4", &out);
    let meta = read_json(&out.join("meta.json"));
    assert_eq!(
        meta["model"]["chunks"],
        serde_json::json!([8192, 8192, 8192, null])
    );
    assert_eq!(
        meta["model"]["rotated_chunks"][3], 0,
        "the chunkless layer is NoPE"
    );
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.contains("chunked attention: a query sees only its own block of 8192 positions"));
    let plain = tmp.path().join("llama");
    scan_converted("llama", &plain);
    assert!(read_json(&plain.join("meta.json"))["model"]
        .get("chunks")
        .is_none());
}
