//! `ropescope diverge` on HF transformers dumps of SmolLM2-135M made by `examples/hf_dump.py`
//! (`fixtures/diverge/make_fixtures.sh`): HF's float32 pass stays within the default tolerances on every
//! tensor; with the RoPE base set to 1e4 instead of the model's 1e5 the first divergence is layer 0's post-RoPE
//! queries, while the projections before RoPE agree. Then the error paths of a dump. Last, llama.cpp dumps of
//! SmolLM2 and Gemma 3 made by `examples/llamacpp_dump.py` (`fixtures/diverge/make_llamacpp_fixtures.sh`): both
//! diverge first at layer 0's queries before RoPE, by the error of llama.cpp's 8-bit quantized activations.

use ropescope::io::npy::{self, Array};
use ropescope_test_support::paths;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dump(name: &str) -> PathBuf {
    paths::fixture(&format!("diverge/{name}"))
}

fn diverge(against: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("diverge")
        .arg(paths::model(paths::SMOLLM2))
        .arg("--ids")
        .arg(dump("hf-f32").join("ids.npy"))
        .arg("--against")
        .arg(against)
        .args(extra)
        .output()
        .unwrap()
}

/// The JSON report of a run on `against` and its exit code.
fn report(against: &Path) -> (serde_json::Value, Option<i32>) {
    let out = diverge(against, &["--json", "-"]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code())
}

fn tensor<'a>(r: &'a serde_json::Value, file: &str) -> &'a serde_json::Value {
    r["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["file"] == file)
        .unwrap_or_else(|| panic!("{file} not compared"))
}

/// A copy of the float32 dump in a temporary directory.
fn copy_of_hf_f32() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dump("hf-f32")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    dir
}

#[test]
fn hf_float32_stays_within_tolerance_on_every_tensor() {
    let (r, code) = report(&dump("hf-f32"));
    assert_eq!(code, Some(0), "{}", r["verdict"]);
    assert_eq!(r["layers"], serde_json::json!([0, 1, 2, 29]));
    let tensors = r["tensors"].as_array().unwrap();
    // Nine tensors in each of the four layers, and the logits.
    assert_eq!(tensors.len(), 4 * 9 + 1);
    assert!(tensors.iter().all(|t| t["crosses"] == false));
    assert_eq!(tensors.last().unwrap()["file"], "logits.npy");
    assert_eq!(r["first"], serde_json::Value::Null);
    assert_eq!(r["verdict"], "PASS: 37 tensors within tolerance");
    // The text report ends with the same verdict.
    let out = diverge(&dump("hf-f32"), &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().last(),
        Some("PASS: 37 tensors within tolerance")
    );
    // Each RoPE and attention stage, judged from HF's own inputs, is within the float32 budget.
    assert!(
        text.contains("within budget: 12 stages of 4 layers (f32)"),
        "{text}"
    );
    assert_eq!(r["stages"]["within"], true);
}

#[test]
fn a_wrong_rope_base_diverges_first_at_layer_0_post_rope_queries() {
    let (r, code) = report(&dump("hf-f32-theta-1e4"));
    assert_eq!(code, Some(1), "{}", r["verdict"]);
    let first = &r["tensors"][r["first"].as_u64().unwrap() as usize];
    assert_eq!(first["file"], "q_L0.npy");
    // Before RoPE layer 0 agrees: the projections do not depend on the base.
    for file in ["q_pre_L0.npy", "k_pre_L0.npy", "v_L0.npy"] {
        assert_eq!(tensor(&r, file)["crosses"], false, "{file}");
    }
    // After it both rotated vectors are off, in every head.
    for file in ["q_L0.npy", "k_L0.npy"] {
        let t = tensor(&r, file);
        assert_eq!(t["crosses"], true, "{file}");
        assert!(t["heads"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["nmse"].as_f64().unwrap() > 1e-4));
    }
    // Position 0 is not rotated by any base, so the worst element is at a later position.
    assert!(first["worst"]["row"].as_u64().unwrap() > 0);
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("FAIL: first divergence at q_L0.npy (layer 0, q)"),
        "{verdict}"
    );
    // Judged stage by stage, the queries' RoPE is a frequency mistake: every chunk but the first turns at the
    // rates of base 1e4, while the attention from HF's own q and k stays within budget.
    let q = &r["stages"]["layers"][0]["q"]["mistake"];
    assert_eq!(q["kind"], "frequency");
    assert!(
        (q["engine_base"].as_f64().unwrap() / 1e4 - 1.0).abs() < 1e-4,
        "{q}"
    );
    assert_eq!(q["expected_base"], 1e5);
    assert!(
        r["stages"]["layers"][0]["attention"]["ratio"]
            .as_f64()
            .unwrap()
            <= 1.0
    );
}

#[test]
fn missing_tensors_are_skipped_and_listed() {
    let dir = copy_of_hf_f32();
    for f in ["out_L1.npy", "logits.npy", "hidden_L29.npy"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    std::fs::write(dir.path().join("extra.npy"), b"").unwrap();
    let out = diverge(dir.path(), &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("not in the dump (skipped): out_L1.npy, hidden_L29.npy, logits.npy"),
        "{text}"
    );
    assert!(
        text.contains("not of the layout (ignored): extra.npy"),
        "{text}"
    );
}

#[test]
fn errors_of_a_dump_are_named_with_their_exit_codes() {
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    let none = tempfile::tempdir().unwrap();
    let out = diverge(&none.path().join("absent"), &[]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert!(stderr(&out).contains("absent"));

    // A shape that differs: exit 3, naming the file.
    let dir = copy_of_hf_f32();
    let k = dir.path().join("k_L1.npy");
    npy::write(&k, &[3, 10, 32], &vec![0.0f32; 3 * 10 * 32]).unwrap();
    let out = diverge(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("k_L1.npy: shape [3, 10, 32], expected [3, 10, 64]"),
        "{}",
        stderr(&out)
    );

    // A non-finite value: reported as the first divergence (exit 1), not a crash.
    let dir = copy_of_hf_f32();
    let attn = dir.path().join("attn_L1.npy");
    let a = Array::read(&attn).unwrap();
    let mut v: Vec<f32> = a.to_f64().iter().map(|&x| x as f32).collect();
    v[7] = f32::NAN;
    v[8] = f32::INFINITY;
    std::fs::write(&attn, npy::encode(&a.shape, &v).unwrap()).unwrap();
    let (r, code) = report(dir.path());
    assert_eq!(code, Some(1));
    let first = &r["tensors"][r["first"].as_u64().unwrap() as usize];
    assert_eq!(first["file"], "attn_L1.npy");
    assert_eq!(first["non_finite"], 2);
    assert_eq!(
        (
            &first["worst"]["head"],
            &first["worst"]["row"],
            &first["worst"]["col"]
        ),
        (
            &serde_json::json!(0),
            &serde_json::json!(0),
            &serde_json::json!(7)
        )
    );

    // A file that is not an .npy: exit 3.
    std::fs::write(&attn, b"not an array").unwrap();
    let out = diverge(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("attn_L1.npy"));
}

#[test]
fn tolerances_can_be_overridden_and_the_report_written_as_json() {
    // Held to a bar float32 cannot meet, HF's pass diverges at its first tensor.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = diverge(
        &dump("hf-f32"),
        &[
            "--tol",
            "q_pre=nmse:1e-20",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["tensors"][0]["file"], "q_pre_L0.npy");
    assert_eq!(r["first"], 0);
    assert_eq!(r["tensors"][0]["tolerance"]["nmse"], 1e-20);
}

/// `ropescope diverge MODEL --ids DIR/ids.npy --against DIR --json -` on a llama.cpp dump: the report and the exit
/// code.
fn llamacpp_report(model: &str, name: &str, extra: &[&str]) -> (serde_json::Value, Option<i32>) {
    let dir = dump(name);
    let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("diverge")
        .arg(paths::model(model))
        .arg("--ids")
        .arg(dir.join("ids.npy"))
        .arg("--against")
        .arg(&dir)
        .args(["--json", "-"])
        .args(extra)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code())
}

fn nmse_of(r: &serde_json::Value, file: &str) -> f64 {
    tensor(r, file)["nmse"].as_f64().unwrap()
}

/// `|x / measured − 1| ≤ 1%`: a figure of the committed dump, read back (the dump is fixed data and ropescope's
/// float64 pass is deterministic, so only the printed rounding is allowed for).
fn near(x: f64, measured: f64) -> bool {
    (x / measured - 1.0).abs() <= 0.01
}

/// The largest NMSE over the vector tensors and the largest attention max-abs of a report.
fn worst_errors(r: &serde_json::Value) -> (f64, f64) {
    worst_errors_of(r, |_| true)
}

/// [`worst_errors`] over the tensors `keep` admits (at least one).
fn worst_errors_of(r: &serde_json::Value, keep: impl Fn(&serde_json::Value) -> bool) -> (f64, f64) {
    let tensors: Vec<&serde_json::Value> = r["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| keep(t))
        .collect();
    assert!(!tensors.is_empty());
    let nmse = tensors
        .iter()
        .filter(|t| t["kind"] != "attn")
        .map(|t| t["nmse"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let attn = tensors
        .iter()
        .filter(|t| t["kind"] == "attn")
        .map(|t| t["max_abs"].as_f64().unwrap())
        .fold(0.0, f64::max);
    (nmse, attn)
}

/// Tolerances at the level of an engine with 8-bit activations: NMSE ≤ 2e-2 for every vector kind, attention
/// max-abs ≤ 0.1.
const QUANTIZED_ACTIVATION_TOLERANCES: [&str; 18] = [
    "--tol",
    "q_pre=nmse:2e-2",
    "--tol",
    "k_pre=nmse:2e-2",
    "--tol",
    "v=nmse:2e-2",
    "--tol",
    "q=nmse:2e-2",
    "--tol",
    "k=nmse:2e-2",
    "--tol",
    "scores=nmse:2e-2",
    "--tol",
    "out=nmse:2e-2",
    "--tol",
    "hidden=nmse:2e-2",
    "--tol",
    "attn=max_abs:0.1",
];

/// Checks the part both llama.cpp dumps share: every tensor crosses the default tolerances, the first is layer 0's
/// q before RoPE, the logits are absent, the replay files are ignored; then the quantized-activation tolerances
/// pass.
fn llamacpp_case(model: &str, name: &str, last_layer: usize) -> serde_json::Value {
    let (r, code) = llamacpp_report(model, name, &[]);
    assert_eq!(code, Some(1), "{}", r["verdict"]);
    assert_eq!(r["layers"], serde_json::json!([0, 1, last_layer]));
    let tensors = r["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 3 * 9);
    assert!(tensors.iter().all(|t| t["crosses"] == true));
    assert_eq!(r["first"], 0);
    assert_eq!(tensors[0]["file"], "q_pre_L0.npy");
    assert_eq!(r["missing"], serde_json::json!(["logits.npy"]));
    let ignored = r["ignored"].as_array().unwrap();
    assert_eq!(ignored.len(), 12);
    assert!(ignored
        .iter()
        .all(|f| f.as_str().unwrap().starts_with("x_")));
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("FAIL: first divergence at q_pre_L0.npy (layer 0, q_pre)"),
        "{verdict}"
    );
    assert!(
        verdict.ends_with("27 of 27 tensors over tolerance"),
        "{verdict}"
    );

    let (pass, code) = llamacpp_report(model, name, &QUANTIZED_ACTIVATION_TOLERANCES);
    assert_eq!(code, Some(0), "{}", pass["verdict"]);
    assert_eq!(pass["verdict"], "PASS: 27 tensors within tolerance");
    r
}

/// `(head, row, col)` of a tensor report's worst element.
fn worst_element(tensor: &serde_json::Value) -> (u64, u64, u64) {
    let w = &tensor["worst"];
    let at = |k: &str| {
        w[k].as_u64()
            .unwrap_or_else(|| panic!("worst.{k} in {tensor}"))
    };
    (at("head"), at("row"), at("col"))
}

#[test]
fn llamacpp_smollm2_diverges_first_at_layer_0_queries_by_its_q8_1_activations() {
    let r = llamacpp_case(paths::SMOLLM2, "llamacpp-smollm2", 29);
    // Layer 0's projections are off by what quantizing their input to Q8_1 (llama.cpp's vec_dot_type for Q4_1
    // weights) costs: examples/llamacpp_replay.py on this dump reproduces llama.cpp's q, k and v projections to
    // NMSE ≤ 9.2e-14 with the activations quantized, while the exact float64 product on llama.cpp's own input is
    // 1.247e-5, 1.349e-5 and 2.281e-4 away from them: the figures below, to the digit. RoPE rotates the error
    // along (q and k after RoPE keep the same NMSE).
    let first = &r["tensors"][0];
    assert!(near(first["nmse"].as_f64().unwrap(), 1.247e-5), "{first}");
    assert_eq!(worst_element(first), (4, 7, 54), "{first}");
    assert!(near(nmse_of(&r, "k_pre_L0.npy"), 1.349e-5));
    assert!(near(nmse_of(&r, "v_L0.npy"), 2.281e-4));
    assert!(near(nmse_of(&r, "q_L0.npy"), 1.247e-5));
    // Every layer adds its own quantization error: by layer 29 the head outputs are at 4.0e-3 and the attention
    // probabilities 7.0e-2 off, the largest figures of the dump, which the 2e-2 and 0.1 bars above clear.
    let (nmse, attn) = worst_errors(&r);
    assert!(near(nmse, 3.984e-3), "{nmse}");
    assert!(near(attn, 7.007e-2), "{attn}");
    assert!(near(nmse_of(&r, "out_L29.npy"), 3.984e-3));
}

#[test]
fn llamacpp_gemma3_diverges_first_at_layer_0_queries_by_its_q8_0_activations() {
    let r = llamacpp_case(paths::GEMMA3, "llamacpp-gemma3", 17);
    // Gemma's q and k weights are Q5_0 (its v Q5_0 or Q8_0), whose vec_dot_type is Q8_0. The replay reproduces
    // llama.cpp's layer-0 projections to NMSE ≤ 1.4e-14 with Q8_0 activations; the exact product is 4.23e-5 (q),
    // 7.93e-5 (k) and 2.386e-4 (v) away, and the QK-norm, whose gains reach 4.6, weighs the error up to 1.312e-4
    // (q) and 1.309e-4 (k) in q_pre and k_pre: the figures below.
    let first = &r["tensors"][0];
    assert!(near(first["nmse"].as_f64().unwrap(), 1.312e-4), "{first}");
    assert_eq!(worst_element(first), (1, 10, 118), "{first}");
    assert!(near(nmse_of(&r, "k_pre_L0.npy"), 1.309e-4));
    assert!(near(nmse_of(&r, "v_L0.npy"), 2.386e-4));
    // Gemma 3 ends further off than SmolLM2 with 12 fewer layers: layer 17's head outputs at 1.07e-2 (the largest
    // NMSE of the dump), its attention probabilities 5.1e-2.
    let (nmse, attn) = worst_errors(&r);
    assert!(near(nmse, 1.068e-2), "{nmse}");
    assert!(near(nmse_of(&r, "out_L17.npy"), 1.068e-2));
    assert!(near(attn, 5.128e-2), "{attn}");
}

/// With `--arithmetic ggml` (8-bit activations before each quantized product, integer block dot products, a
/// float32 residual stream and ggml's RMSNorm and GELU), llama.cpp's dumps agree with ropescope's pass to
/// float32 rounding where the exact pass was 1e-5 to 1e-4 away: every tensor of the layers before the first
/// rounding decision of an activation quantizer that the two engines take differently. Such a flip changes a
/// value by a whole quantization step, and later layers amplify it (docs/diverge.md); the last layer is over.
#[test]
fn llamacpp_dumps_agree_with_the_ggml_arithmetic_until_a_quantizer_rounds_differently() {
    // Measured: SmolLM2 layer 0 at NMSE ≤ 1.3e-13 up to the head outputs and 1.1e-11 for its residual stream
    // (a flip in the feed-forward block's quantizer); Gemma 3 layers 0 and 1 at ≤ 1.6e-13, attention max-abs
    // ≤ 4.5e-7. The exact pass: 1.25e-5 and 1.31e-4 at the first tensor.
    for (model, name, agreeing, bar) in [
        (paths::SMOLLM2, "llamacpp-smollm2", &[0u64][..], 1e-10),
        (paths::GEMMA3, "llamacpp-gemma3", &[0, 1][..], 1e-12),
    ] {
        let (r, _) = llamacpp_report(model, name, &["--arithmetic", "ggml"]);
        let of_layers =
            |t: &serde_json::Value| agreeing.contains(&t["layer"].as_u64().unwrap_or(u64::MAX));
        let (nmse, attn) = worst_errors_of(&r, of_layers);
        assert!(nmse <= bar && attn <= 1e-5, "{name}: {nmse:e}, {attn:e}");
        assert!(nmse_of(&r, "q_pre_L0.npy") <= 1e-12, "{name}");
        let (exact, _) = llamacpp_report(model, name, &[]);
        assert!(nmse_of(&exact, "q_pre_L0.npy") >= 1e-6, "{name}");
        assert_eq!(r["pass"], false, "{name}: the last layer is past a flip");
    }
}
