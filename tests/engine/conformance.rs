//! The conformance budget and diagnosis on data made by other programs: HF transformers' own passes over the
//! converter-made fixtures (`fixtures/converted/`).

use ropescope::conformance::attention::AttentionMistake;
use ropescope::conformance::budget::Precision;
use ropescope::conformance::stages::check_dump;
use ropescope::gguf::GgufFile;
use ropescope::io::token_ids;
use ropescope::model::Model;
use ropescope_test_support::paths;

/// HF's sliding window of the mistral fixture.
const MISTRAL_WINDOW: usize = 16;

/// Every variant's converted fixtures.
fn variants() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(paths::fixture("converted"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("model.gguf").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// HF's float64 pass judged stage by stage as if it came from an engine in float32: every stage of every
/// variant is far inside the budget (below 10⁻⁸ of it: float64 rounding), which checks that the stages are recomputed with each
/// family's own conventions (pairing, partial and latent layouts, masks, windows, chunks, soft-caps, sinks,
/// scales): a convention wrong anywhere would put a stage orders of magnitude beyond it.
#[test]
fn hf_float64_passes_are_far_inside_the_f32_budget_on_every_family() {
    let mut worst = Vec::new();
    for v in variants() {
        let dir = paths::fixture(&format!("converted/{v}"));
        let file = GgufFile::open(dir.join("model.gguf")).unwrap();
        let mut model = Model::<f64>::load(&file).unwrap();
        match v.as_str() {
            "llama4" => crate::converted::with_llama4_hf_settings(&mut model),
            // HF's window, which the converter drops (`mistral_matches_before_the_window_the_converter_drops`).
            "mistral" => model
                .config
                .layers
                .iter_mut()
                .for_each(|l| l.window = Some(MISTRAL_WINDOW)),
            _ => {}
        }
        let tmp = tempfile::tempdir().unwrap();
        for case in crate::converted::cases_in_reference_layout(&v, tmp.path()) {
            let ids = token_ids::read_file(&case.join("ids.npy")).unwrap();
            let report = check_dump(&model, &ids, &case, Precision::F32).unwrap();
            let max = report
                .layers
                .iter()
                .flat_map(|l| {
                    [
                        l.q.as_ref().map(|c| c.ratio),
                        l.k.as_ref().map(|c| c.ratio),
                        l.attention.as_ref().map(|c| c.ratio),
                    ]
                })
                .flatten()
                .fold(0.0, f64::max);
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            worst.push(format!("{v}/{name} {max:.1e} ({} stages)", report.stages));
            assert!(
                report.within && max < 1e-8,
                "{v}/{name}: {}",
                report.verdict
            );
        }
    }
    eprintln!("{}", worst.join("\n"));
}

/// The mistral fixture read as the file states it (the converter drops HF's window of 16): the attention stage
/// is diagnosed as a mask whose visible keys get nothing, from the first layer, and the RoPE stages are exact.
#[test]
fn a_window_the_file_does_not_state_is_diagnosed_as_a_mask() {
    let dir = paths::fixture("converted/mistral");
    let model = Model::<f64>::load(&GgufFile::open(dir.join("model.gguf")).unwrap()).unwrap();
    let case = dir.join("main");
    let ids = token_ids::read_file(&case.join("ids.npy")).unwrap();
    assert!(ids.len() > MISTRAL_WINDOW);
    let report = check_dump(&model, &ids, &case, Precision::F32).unwrap();
    let first = &report.layers[0];
    assert!(first.q.as_ref().unwrap().within() && first.k.as_ref().unwrap().within());
    let attention = first.attention.as_ref().unwrap();
    assert!(
        matches!(attention.mistake, Some(AttentionMistake::Mask { extra: 0, missing }) if missing > 0),
        "{attention:?}"
    );
    assert!(
        report
            .verdict
            .starts_with("beyond budget (f32), first at layer 0 attn"),
        "{}",
        report.verdict
    );
}
