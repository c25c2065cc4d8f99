//! DuoAttention patterns: `full_attention_heads.tsv` (layers × KV heads, tab-separated, in [0, 1]) and
//! `config.json`, from the example scan: each value is `1 − min(1, sink + Σ_Δ SlashScore(Δ))` of the head,
//! the largest over a KV head's query heads.

use ropescope::io::npy::Array;
use ropescope_test_support::report::{example, DMAX, H, L};
use std::path::Path;

/// The values `export-duoattention` writes into `out`, parsed as numpy's `loadtxt(..., delimiter="\t")` would.
fn export(dir: &Path, out: &Path) -> Vec<Vec<f64>> {
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("export-duoattention")
        .arg(dir)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = std::fs::read_to_string(out.join("full_attention_heads.tsv")).unwrap();
    assert!(text.ends_with('\n'));
    text.lines()
        .map(|l| l.split('\t').map(|v| v.parse::<f64>().unwrap()).collect())
        .collect()
}

/// `1 − min(1, sink + Σ slash)` of every query head, from the scan's own files.
fn streaming_loss(dir: &Path) -> Vec<Vec<f64>> {
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let slash = Array::read(&dir.join("slash_natural.npy")).unwrap();
    assert_eq!(slash.shape, [L, H, DMAX + 1]);
    let slash = slash.to_f64();
    let mut out = vec![vec![0.0; H]; L];
    for h in summary["heads"].as_array().unwrap() {
        let (l, q) = (
            h["layer"].as_u64().unwrap() as usize,
            h["head"].as_u64().unwrap() as usize,
        );
        let sink = h["slash"]["sink"].as_f64().unwrap();
        let cell = (l * H + q) * (DMAX + 1);
        let diagonals: f64 = slash[cell..cell + DMAX + 1].iter().sum();
        out[l][q] = 1.0 - (sink + diagonals).min(1.0);
    }
    out
}

#[test]
fn values_are_the_attention_a_streaming_head_would_lose() {
    let dir = example();
    let values = export(dir.path(), &dir.path().join("duo"));
    assert_eq!(values, streaming_loss(dir.path()));
    // On the example's 32-token prompts the window holds a quarter of the keys: the sink heads lose nothing,
    // the previous-token head little, the content head most.
    assert_eq!((values[0][1], values[1][1]), (0.0, 0.0), "{values:?}");
    assert!(values[0][0] < 0.05, "{values:?}");
    let most = values.iter().flatten().copied().fold(0.0, f64::max);
    assert_eq!(most, values[1][2], "{values:?}");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("duo/config.json")).unwrap())
            .unwrap();
    assert_eq!(config["sink_size"], 1);
    assert_eq!(config["recent_size"], DMAX + 1);
}

#[test]
fn a_kv_head_takes_the_largest_value_of_its_query_heads() {
    let dir = example();
    let loss = streaming_loss(dir.path());
    // Make the three query heads of each layer share one KV head.
    for (file, edit) in [
        (
            "meta.json",
            &(|v: &mut serde_json::Value| v["model"]["n_kv_heads"] = 1.into())
                as &dyn Fn(&mut serde_json::Value),
        ),
        ("summary.json", &|v: &mut serde_json::Value| {
            for h in v["heads"].as_array_mut().unwrap() {
                h["kv_head"] = 0.into();
            }
        }),
    ] {
        let path = dir.path().join(file);
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    }
    let values = export(dir.path(), &dir.path().join("duo"));
    let expected: Vec<Vec<f64>> = loss
        .iter()
        .map(|l| vec![l.iter().copied().fold(0.0, f64::max)])
        .collect();
    assert_eq!(values, expected);
}

#[test]
fn values_need_the_slash_analysis() {
    let dir = example();
    let path = dir.path().join("summary.json");
    let mut s: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    s["heads"][0]["slash"] = serde_json::Value::Null;
    std::fs::write(&path, serde_json::to_vec(&s).unwrap()).unwrap();
    let err = ropescope::export::duoattention::write(dir.path(), None, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("slash"), "{err}");
}
