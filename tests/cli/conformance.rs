//! `ropescope conformance check` on HF transformers' own runs (`fixtures/conformance/`): an honest bfloat16 run
//! is within the bfloat16 budget and beyond the float32 one; an injected position offset is named as such; the
//! JSON report holds every stage; a dump with nothing to judge, a wrong shape and a missing `ids.npy` are one-line
//! refusals.

use ropescope_test_support::cli::{arg, assert_ok, assert_refused, run, Run};
use ropescope_test_support::paths;
use std::path::{Path, PathBuf};

fn llama() -> PathBuf {
    paths::fixture("converted/llama/model.gguf")
}

fn dump(rel: &str) -> PathBuf {
    paths::fixture(&format!("conformance/{rel}"))
}

/// `conformance run` of the vectors `vectors` against the dumps under `dumps` into `out`: the run and the
/// parsed `conformance.json`.
fn run_matrix(vectors: &Path, dumps: &Path, out: &Path) -> (Run, serde_json::Value) {
    let engine = format!("dumps:{}", dumps.display());
    let r = run(&[
        "conformance",
        "run",
        "--vectors",
        arg(vectors),
        "--engine",
        &engine,
        "--out",
        arg(out),
    ]);
    let report =
        serde_json::from_slice(&std::fs::read(out.join("conformance.json")).unwrap_or_default())
            .unwrap_or(serde_json::Value::Null);
    (r, report)
}

#[test]
fn a_bfloat16_run_is_judged_by_the_budget_of_its_precision() {
    let (model, bf16) = (llama(), dump("hf/llama/eager-bf16"));
    let args = |p| {
        [
            "conformance",
            "check",
            arg(&model),
            "--dump",
            arg(&bf16),
            "--precision",
            p,
        ]
    };
    let within = run(&args("bf16"));
    assert_ok(&within);
    assert!(
        within
            .stdout
            .contains("within budget: 6 stages of 2 layers (bf16)"),
        "{}",
        within.stdout
    );
    let strict = run(&args("f32"));
    assert_eq!(strict.code, Some(1), "{}", strict.stdout);
    assert!(strict
        .stdout
        .contains("beyond budget (f32), first at layer 0 q"));
}

#[test]
fn an_offset_of_every_position_is_named_and_cancels_in_the_attention() {
    let (model, bug) = (llama(), dump("hf-bugs/positions-start-at-1"));
    let r = run(&["conformance", "check", arg(&model), "--dump", arg(&bug)]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("position offset: position p rotated as p + 1 (cancels in q·k)"),
        "{}",
        r.stdout
    );
    let attn_lines: Vec<&str> = r.stdout.lines().filter(|l| l.contains(" attn ")).collect();
    assert!(
        attn_lines.len() == 2 && attn_lines.iter().all(|l| l.contains("within budget")),
        "{}",
        r.stdout
    );
}

#[test]
fn the_json_report_holds_every_stage_with_its_mistake() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, bug, json) = (
        llama(),
        dump("hf-bugs/rope-base-plus-one"),
        tmp.path().join("r.json"),
    );
    let r = run(&[
        "conformance",
        "check",
        arg(&model),
        "--dump",
        arg(&bug),
        "--json",
        arg(&json),
    ]);
    assert_eq!(r.code, Some(1));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["precision"], "f32");
    assert_eq!(v["within"], false);
    let layers = v["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2);
    let q = &layers[0]["q"];
    assert_eq!(q["mistake"]["kind"], "frequency");
    assert!(q["ratio"].as_f64().unwrap() > 1.0);
    assert!(q["row0_within"].as_bool().unwrap());
    assert!(!q["mistake"]["chunks"].as_array().unwrap().is_empty());
}

#[test]
fn dumps_that_cannot_be_judged_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let model = llama();
    let check = |dir: &PathBuf| run(&["conformance", "check", arg(&model), "--dump", arg(dir)]);
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_refused(
        &check(&empty),
        2,
        &["has no ids.npy: give the prompt's token ids with --ids"],
    );
    std::fs::copy(dump("hf/llama/eager-f32/ids.npy"), empty.join("ids.npy")).unwrap();
    assert_refused(&check(&empty), 2, &["holds no stage to judge"]);
    std::fs::write(empty.join("q_L9.npy"), b"").unwrap();
    assert_refused(
        &check(&empty),
        3,
        &["q_L9.npy", "layer 9 does not exist (the model has 2)"],
    );
    std::fs::remove_file(empty.join("q_L9.npy")).unwrap();
    let wrong = [2usize, 48, 16];
    ropescope::io::npy::write(
        &empty.join("q_pre_L0.npy"),
        &wrong,
        &vec![0f32; 2 * 48 * 16],
    )
    .unwrap();
    assert_refused(
        &check(&empty),
        3,
        &[
            "q_pre_L0.npy",
            "shape [2, 48, 16], expected [4, 48, 16] for this model and prompt",
        ],
    );
}

/// `conformance vectors` over the converted fixtures, then `conformance run` on HF's own dumps and on llama.cpp's:
/// every family has its vectors and manifest entry; every cell of HF's runs is within its precision's budget except
/// the two whose HF settings the files cannot state (mistral's window, llama4's chunk: the eager runs' attention is
/// diagnosed as a mask), which sdpa runs (no probabilities to judge) do not show; phi3-longrope's short case has no
/// HF dump. llama.cpp's cells are within budget but where its conventions differ from HF's, each named.
#[test]
fn vectors_then_run_give_the_matrices_of_hf_transformers_and_llama_cpp() {
    let tmp = tempfile::tempdir().unwrap();
    let (vectors, out) = (tmp.path().join("vectors"), tmp.path().join("hf"));
    let converted = paths::fixture("converted");
    let made = run(&[
        "conformance",
        "vectors",
        "--from",
        arg(&converted),
        "--out",
        arg(&vectors),
    ]);
    assert_ok(&made);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(vectors.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["format"], "ropescope-conformance-vectors");
    let families = manifest["families"].as_array().unwrap();
    assert_eq!(
        families.len(),
        34,
        "33 variants, phi3-longrope with two cases"
    );
    let gpt_oss = families.iter().find(|f| f["name"] == "gpt-oss").unwrap();
    let features: Vec<&str> = gpt_oss["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(
        features.contains(&"sinks") && features.contains(&"sliding-window"),
        "{features:?}"
    );
    let q0 = gpt_oss["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["file"] == "q_L0.npy")
        .unwrap();
    assert_eq!(q0["llama_cpp"], "Qcur-0, the rope node");
    for f in [
        "model.gguf",
        "ids.npy",
        "q_pre_L0.npy",
        "attn_L0.npy",
        "logits.npy",
        "rope/inv_freq.npy",
    ] {
        assert!(vectors.join("gpt-oss").join(f).is_file(), "{f}");
    }

    let (r, report) = run_matrix(&vectors, &paths::fixture("conformance/hf"), &out);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("4 of 127 cells degraded or wrong"),
        "{}",
        r.stderr
    );
    assert_eq!(report["format"], "ropescope-conformance");
    for cell in report["cells"].as_array().unwrap() {
        let (family, config) = (
            cell["family"].as_str().unwrap(),
            cell["config"].as_str().unwrap(),
        );
        let verdict = cell["verdict"].as_str().unwrap();
        match (family, config) {
            ("llama4" | "mistral", "eager-f32" | "eager-bf16") => {
                assert_eq!(verdict, "wrong", "{cell}");
                assert_eq!(cell["first"]["stage"], "attn");
                assert!(cell["detail"]
                    .as_str()
                    .unwrap()
                    .contains("mask: 0 masked keys given weight"));
            }
            ("phi3-longrope-short", _) => assert_eq!(verdict, "refused", "{cell}"),
            _ => assert_eq!(verdict, "within budget", "{family} {config}: {cell}"),
        }
    }
    let page = std::fs::read_to_string(out.join("conformance.html")).unwrap();
    assert!(page.contains("<th>sdpa-bf16</th>") && page.contains("phi3-longrope-short"));

    // llama.cpp (fixtures/conformance/llamacpp_dumps.py), float32 and Q8_0 weights: four of its own conventions
    // are beyond budget and named; it cannot load deepseek2's file.
    let out = tmp.path().join("llamacpp");
    let (r, report) = run_matrix(&vectors, &paths::fixture("conformance/llamacpp"), &out);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("7 of 67 cells degraded or wrong"),
        "{}",
        r.stderr
    );
    for cell in report["cells"].as_array().unwrap() {
        let (family, config) = (
            cell["family"].as_str().unwrap(),
            cell["config"].as_str().unwrap(),
        );
        let (verdict, detail) = (
            cell["verdict"].as_str().unwrap(),
            cell["detail"].as_str().unwrap(),
        );
        let expect = |stage: &str, words: &str| {
            assert_eq!(verdict, "wrong", "{cell}");
            assert_eq!(
                (
                    cell["first"]["layer"].as_u64(),
                    cell["first"]["stage"].as_str()
                ),
                (Some(0), Some(stage))
            );
            assert!(detail.contains(words), "{cell}");
        };
        match (family, config) {
            // EXAONE 4's sliding window, which llama.cpp applies only at 64 layers.
            ("exaone4", _) => expect(
                "attn",
                "mask: 912 masked keys given weight, 0 visible keys given none",
            ),
            // GPT-OSS's YaRN correction range, which llama.cpp rounds and HF does not.
            ("gpt-oss", _) => expect(
                "q",
                "frequency: chunks 2 ×0.9431, 3 ×0.9943, 4 ×1.0907, 5 ×1.3389, 6 ×3.4222",
            ),
            // LongRoPE's factors chosen by the allocated context (256) instead of the sequence length (32).
            ("phi3-longrope-short", _) => expect("q", "frequency: chunks 1 ×0.8000"),
            // Q8_0 keeps attn_k_b in F16, so ggml rounds the queries' no-RoPE part to f16 inside the scores.
            ("deepseek3", "q8_0") => expect("attn", "no single kind of mistake explains it"),
            ("deepseek2", _) => assert_eq!(verdict, "refused", "{cell}"),
            _ => assert_eq!(verdict, "within budget", "{family} {config}: {cell}"),
        }
    }
}

/// Injected mistakes as one engine's configurations of the llama family: a position offset is beyond budget but
/// keeps every top-1 token (degraded); interleaved pairs change them (wrong, first at layer 0's q, pairing).
#[test]
fn a_harmless_offset_is_degraded_and_a_pairing_mistake_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let (vectors, root, out) = (
        tmp.path().join("v"),
        tmp.path().join("dumps"),
        tmp.path().join("out"),
    );
    let only_llama = tmp.path().join("converted");
    std::fs::create_dir_all(only_llama.join("llama/main")).unwrap();
    for f in ["model.gguf", "main/ids.npy"] {
        std::fs::copy(
            paths::fixture("converted/llama").join(f),
            only_llama.join("llama").join(f),
        )
        .unwrap();
    }
    assert_ok(&run(&[
        "conformance",
        "vectors",
        "--from",
        arg(&only_llama),
        "--out",
        arg(&vectors),
    ]));
    for bug in ["positions-start-at-1", "pairing-interleaved-for-half-split"] {
        let to = root.join("llama").join(bug);
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(dump(&format!("hf-bugs/{bug}"))).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    let (r, report) = run_matrix(&vectors, &root, &out);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    let cell = |config: &str| {
        report["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["config"] == config)
            .unwrap()
            .clone()
    };
    let offset = cell("positions-start-at-1");
    assert_eq!(offset["verdict"], "degraded", "{offset}");
    assert_eq!(offset["top1_agree"], true);
    let pairing = cell("pairing-interleaved-for-half-split");
    assert_eq!(pairing["verdict"], "wrong", "{pairing}");
    assert_eq!(pairing["first"]["layer"], 0);
    assert_eq!(pairing["first"]["stage"], "q");
    assert!(pairing["detail"]
        .as_str()
        .unwrap()
        .contains("pairing: pairs rotated adjacent"));
    let bad_engine = run(&[
        "conformance",
        "run",
        "--vectors",
        arg(&vectors),
        "--engine",
        "vllm",
        "--out",
        arg(&out),
    ]);
    assert_refused(
        &bad_engine,
        2,
        &["--engine vllm: the engines this version runs are `dumps:DIR`"],
    );
}

/// HF transformers loading the converted Phi-3 file with `gguf_file=` (`fixtures/conformance/hf_gguf_loader.sh`,
/// dumped by `examples/hf_dump.py`, which takes q and k before RoPE from `apply_rotary_pos_emb` and so handles
/// Phi-3's fused `qkv_proj`): its queries before RoPE agree with the float64 pass, and the RoPE stage is named as
/// a partial rotation applied to the whole head — HF's GGUF loader drops `phi3.rope.dimension_count`.
#[test]
fn hf_gguf_loader_ignores_phi3_partial_rotation() {
    let model = paths::fixture("converted/phi3-partial/model.gguf");
    let d = dump("hf-gguf-loader/phi3-partial");
    let r = run(&["conformance", "check", arg(&model), "--dump", arg(&d)]);
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(
            "partial rotation ignored: all 16 coordinates rotated at the rates of the base over 16, where the model \
             rotates 8"
        ),
        "{}",
        r.stdout
    );
}
