//! The engine against the float64 reference of HF transformers on the two real models
//! (`fixtures/reference/`, made by `fixtures/reference/make_reference.py`, every float32 island of HF patched
//! to float64; see that folder's README). Tolerances: `tests/fidelity_support` (the README's table).

mod common;
mod fidelity_support;

use fidelity_support::check_case;
use ropescope::gguf::GgufFile;
use ropescope::model::Model;

fn check_model(file_name: &str, dir: &str) {
    let path = common::model(file_name);
    let file = GgufFile::open(&path).unwrap();
    let cases = ["short", "long"].map(|c| common::fixture(&format!("reference/{dir}/{c}")));
    let m64 = Model::<f64>::load(&file).unwrap();
    for case in &cases {
        check_case(&m64, &path, case);
    }
    drop(m64);
    let m32 = Model::<f32>::load(&file).unwrap();
    for case in &cases {
        check_case(&m32, &path, case);
    }
}

#[test]
fn smollm2_matches_hf_float64() {
    check_model(common::SMOLLM2, "smollm2-135m");
}

#[test]
fn gemma3_matches_hf_float64_including_the_sliding_window() {
    check_model(common::GEMMA3, "gemma3-270m");
}
