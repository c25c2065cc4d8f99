//! MInference head patterns: one object per layer, `{head: ["vertical_and_slash", v, s, score]}`.

use ropescope::export::minference::{self, GENERAL_BUDGET, SINK_BUDGET, SLASH_BUDGET};
use ropescope_test_support::report::{example, H, L};

#[test]
fn patterns_have_minference_shape_and_budgets() {
    let dir = example();
    let out = dir.path().join("patterns.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("export-minference")
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success());
    // The budgets are stated where the export is made, and stdout is the file alone.
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("sink heads 3500 vertical, 100 slash"),
        "{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        out.display().to_string()
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let layers = v.as_array().unwrap();
    assert_eq!(layers.len(), L);
    for layer in layers {
        let heads = layer.as_object().unwrap();
        assert_eq!(heads.len(), H);
        for h in 0..H {
            let p = heads[&h.to_string()].as_array().unwrap();
            assert_eq!(p.len(), 4);
            assert_eq!(p[0], "vertical_and_slash");
            assert!(p[1].is_u64() && p[2].is_u64());
            let score = p[3].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&score));
        }
    }
    let budget = |l: usize, h: usize| {
        let p = &v[l][h.to_string()];
        (
            p[1].as_u64().unwrap() as usize,
            p[2].as_u64().unwrap() as usize,
        )
    };
    assert_eq!(budget(0, 0), SLASH_BUDGET, "previous-token");
    assert_eq!(budget(0, 1), SINK_BUDGET, "sink");
    assert_eq!(budget(1, 0), SLASH_BUDGET, "slash(3)");
    assert_eq!(budget(1, 2), GENERAL_BUDGET, "induction");
}

#[test]
fn patterns_need_the_slash_analysis() {
    let dir = example();
    let path = dir.path().join("summary.json");
    let mut s: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    s["heads"][0]["slash"] = serde_json::Value::Null;
    std::fs::write(&path, serde_json::to_vec(&s).unwrap()).unwrap();
    let err = minference::write(dir.path(), None).unwrap_err().to_string();
    assert!(err.contains("slash"), "{err}");
}
