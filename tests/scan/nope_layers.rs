//! The scan and its report on a model with NoPE layers: SmolLM3 converted by llama.cpp's converter
//! (`fixtures/converted/smollm3`), whose layers 3 and 7 rotate nothing. `meta.json` records them, their heads
//! have no frequency or Fourier result, and the report's findings set them against the RoPE layers. (Every
//! converted family scans: `tests/engine/model_refusals.rs`.)

use ropescope_test_support::inputs::scan_converted;
use serde_json::Value;
use std::path::Path;

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn nope_layers_are_recorded_and_compared_with_the_rope_layers() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("smollm3");
    assert!(scan_converted("smollm3", &out).is_file());
    let meta = read_json(&out.join("meta.json"));
    let chunks: Vec<u64> = meta["model"]["rotated_chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(chunks, [8, 8, 8, 0, 8, 8, 8, 0]);
    let summary = read_json(&out.join("summary.json"));
    for h in summary["heads"].as_array().unwrap() {
        let nope = [3, 7].contains(&h["layer"].as_u64().unwrap());
        // No frequency exists on a NoPE layer: null, never shares of 0.
        assert_eq!(h["frequency"].is_null(), nope, "{h}");
        assert_eq!(h["fourier"].is_null(), nope, "{h}");
        assert!(h["slash"].is_object() && h["posym"].is_object(), "{h}");
    }
    let freq = ropescope::io::npy::Array::read(&out.join("chunk_frequency.npy"))
        .unwrap()
        .to_f64();
    for l in 0..8 {
        let row = &freq[l * 8..(l + 1) * 8];
        let nope = l == 3 || l == 7;
        assert!(row.iter().all(|g| g.is_nan() == nope), "layer {l}: {row:?}");
    }
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(report
        .contains("<tr data-group=\"rope\"><td>RoPE</td><td>0, 1, 2, 4, 5, 6</td><td>24</td>"));
    assert!(report.contains("<tr data-group=\"nope\"><td>NoPE</td><td>3, 7</td><td>8</td>"));
    assert!(report.contains("layer 3 is a NoPE layer: nothing rotates"));
    assert!(report.contains("<th>L3 NoPE</th>") && report.contains("<th>L2</th>"));
    assert!(report.contains("The heads of NoPE layers have no frequencies and are left out."));
    // A NoPE head's card: the frequency analyses ran, and have no score for it; they are not "not run".
    let card = &report[report.find("id=\"L3H0\"").unwrap()..];
    let card = &card[..card.find("</section>").unwrap()];
    assert!(card
        .contains("<td>fourier</td><td><span class=\"missing\">not measured for this head</span>"));
    assert!(!card.contains(">not run<"), "{card}");
    let text = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(text
        .contains("NoPE layers (no rotation; the report sets them against the RoPE layers): 3, 7"));
    assert!(text.contains("low band over the 24 heads that rotate:"));
}
