//! `scan --shard K/N` and `merge` on small synthetic models: four merged shards give the directory of one
//! unsharded scan byte for byte (every analysis, the multi-pass ones included), and a merge refuses a
//! missing, duplicated, foreign or altered shard with one clear error.

use ropescope::io::npy;
use ropescope::synth::SyntheticModel;
use ropescope_test_support::cli::{ok, ropescope};
use ropescope_test_support::shard::assert_same_scan;
use std::path::{Path, PathBuf};

/// A synthetic model, and four `.npy` prompts of different lengths.
fn setup(dir: &Path, model: SyntheticModel) -> (PathBuf, Vec<String>) {
    setup_file(dir, &model.to_bytes())
}

/// The model file of `bytes`, and four `.npy` prompts of different lengths.
fn setup_file(dir: &Path, bytes: &[u8]) -> (PathBuf, Vec<String>) {
    let path = dir.join("model.gguf");
    std::fs::write(&path, bytes).unwrap();
    let prompts = [40_i64, 33, 47, 36]
        .iter()
        .enumerate()
        .map(|(p, &len)| {
            let file = dir.join(format!("p{p}.npy"));
            let ids: Vec<i64> = (0..len).map(|i| (i * 7 + 3 * p as i64 + 1) % 64).collect();
            npy::write(&file, &[ids.len()], &ids).unwrap();
            file.display().to_string()
        })
        .collect();
    (path, prompts)
}

/// `scan MODEL --prompts ... EXTRA... --out OUT` with the tests' parameters.
fn scan_args<'a>(
    model: &'a Path,
    prompts: &'a [String],
    out: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut a = vec!["scan", model.to_str().unwrap(), "--prompts"];
    a.extend(prompts.iter().map(String::as_str));
    a.extend([
        "--delta-max",
        "5",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    a.extend(extra);
    a
}

/// Writes the four shards `DIR/s0..s3` of the scan with `extra` options; returns their paths.
fn shards(dir: &Path, model: &Path, prompts: &[String], extra: &[&str]) -> Vec<PathBuf> {
    (0..4)
        .map(|k| {
            let out = dir.join(format!("s{k}"));
            let shard = format!("{k}/4");
            let mut args = scan_args(model, prompts, &out, extra);
            args.extend(["--shard", shard.as_str()]);
            ok(&args);
            out
        })
        .collect()
}

fn merge(shards: &[PathBuf], out: &Path) -> std::process::Output {
    let mut args = vec!["merge", "--quiet", "--out", out.to_str().unwrap()];
    args.extend(shards.iter().map(|s| s.to_str().unwrap()));
    ropescope(&args)
}

/// The one-run and merged directories of the same scan of the model file of `bytes`, checked equal.
fn four_shards_equal_one_run(bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let (path, prompts) = setup_file(dir.path(), bytes);
    let one = dir.path().join("one");
    ok(&scan_args(&path, &prompts, &one, &[]));
    let parts = shards(dir.path(), &path, &prompts, &[]);
    let merged = dir.path().join("merged");
    // The shards in another order than their indices: the merge orders them.
    let shuffled = [&parts[2], &parts[0], &parts[3], &parts[1]].map(|p| p.clone());
    let out = merge(&shuffled, &merged);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_same_scan(&one, &merged);
    // Every analysis ran, the multi-pass ones included.
    for file in [
        "posym.json",
        "detectors.json",
        "ablation.json",
        "cauchy_schwarz.json",
        "cone_q.npy",
    ] {
        assert!(merged.join(file).is_file(), "{file} missing");
    }
}

#[test]
fn four_merged_shards_equal_one_run_llama() {
    four_shards_equal_one_run(&SyntheticModel::new("llama").to_bytes());
}

#[test]
fn four_merged_shards_equal_one_run_gemma3_local_and_global_layers() {
    let mut m = SyntheticModel::new("gemma3");
    m.n_layers = 3;
    m.sliding_window = Some(16);
    four_shards_equal_one_run(&m.to_bytes());
}

/// Layers of two shapes (Gemma 4's sliding and global layers, 2 and 1 key/value heads, heads of 16 and 32
/// dimensions): the shards pad each head's sums to the widest layer's and the merge cuts them back.
#[test]
fn four_merged_shards_equal_one_run_gemma4_layers_of_two_shapes() {
    let file = ropescope_test_support::paths::fixture("converted/gemma4-31b/model.gguf");
    four_shards_equal_one_run(&std::fs::read(file).unwrap());
}

/// Learned sinks (GPT-OSS): each prompt's sink mass travels through the shards.
#[test]
fn four_merged_shards_equal_one_run_gpt_oss_sinks() {
    let file = ropescope_test_support::paths::fixture("converted/gpt-oss/model.gguf");
    four_shards_equal_one_run(&std::fs::read(file).unwrap());
}

/// The error of a merge that must fail: its exit code is non-zero, and its stderr is returned.
fn refused(shards: &[PathBuf], out: &Path) -> String {
    let run = merge(shards, out);
    assert!(!run.status.success(), "the merge succeeded");
    assert!(!out.exists(), "a refused merge left {}", out.display());
    String::from_utf8(run.stderr).unwrap()
}

#[test]
fn merge_refuses_missing_duplicated_foreign_and_altered_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (path, prompts) = setup(dir.path(), SyntheticModel::new("llama"));
    let extra = ["--analyses", "slash,intrinsic,rank,cone"];
    let parts = shards(dir.path(), &path, &prompts, &extra);
    let out = dir.path().join("merged");

    let err = refused(&parts[..3], &out);
    assert!(
        err.contains("a shard of 4, given without shard 3/4"),
        "{err}"
    );

    let twice = [
        parts[0].clone(),
        parts[1].clone(),
        parts[1].clone(),
        parts[3].clone(),
    ];
    let err = refused(&twice, &out);
    assert!(err.contains("shard 1/4 given twice"), "{err}");

    // The same shard of a scan with another seed: its random prompts differ.
    let foreign = dir.path().join("foreign");
    let mut args = scan_args(&path, &prompts, &foreign, &extra);
    args.extend(["--seed", "1", "--shard", "2/4"]);
    ok(&args);
    let mixed = [
        parts[0].clone(),
        parts[1].clone(),
        foreign,
        parts[3].clone(),
    ];
    let err = refused(&mixed, &out);
    assert!(
        err.contains("a shard of another scan (its parameters differ"),
        "{err}"
    );

    // The same shard of another model.
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let mut other_model = SyntheticModel::new("llama");
    other_model.seed = 8;
    let (other_path, _) = setup(&other_dir, other_model);
    let other = dir.path().join("other-shard");
    let mut args = scan_args(&other_path, &prompts, &other, &extra);
    args.extend(["--shard", "0/4"]);
    ok(&args);
    let mixed = [other, parts[1].clone(), parts[2].clone(), parts[3].clone()];
    let err = refused(&mixed, &out);
    assert!(err.contains("its model_sha256 differs"), "{err}");

    // A shard of a two-shard scan among four.
    let half = dir.path().join("half");
    let mut args = scan_args(&path, &prompts, &half, &extra);
    args.extend(["--shard", "1/2"]);
    ok(&args);
    let mixed = [parts[0].clone(), half, parts[2].clone(), parts[3].clone()];
    let err = refused(&mixed, &out);
    assert!(err.contains("does not belong with"), "{err}");

    // A prompt's array of the wrong shape.
    let altered = dir.path().join("altered");
    copy_dir(&parts[1], &altered);
    let sums = altered.join("natural/p00001/slash_sums.npy");
    npy::write(&sums, &[2, 4, 5], &[0.0_f64; 40]).unwrap();
    let mixed = [
        parts[0].clone(),
        altered,
        parts[2].clone(),
        parts[3].clone(),
    ];
    let err = refused(&mixed, &out);
    assert!(
        err.contains("slash_sums.npy: expected F64 [2, 4, 6], found F64 [2, 4, 5]"),
        "{err}"
    );

    // A cone result that does not cover every head.
    let cut = dir.path().join("cut-cone");
    copy_dir(&parts[0], &cut);
    let cone_path = cut.join("cone.json");
    let mut cone: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cone_path).unwrap()).unwrap();
    cone["queries"].as_array_mut().unwrap().pop();
    std::fs::write(&cone_path, serde_json::to_vec(&cone).unwrap()).unwrap();
    let mixed = [cut, parts[1].clone(), parts[2].clone(), parts[3].clone()];
    let err = refused(&mixed, &out);
    assert!(
        err.contains("cone.json: not the cone of this model's 8 heads"),
        "{err}"
    );

    // Not a shard at all.
    let err = refused(&[dir.path().to_path_buf()], &out);
    assert!(err.contains("not a shard directory"), "{err}");
}

#[test]
fn scan_refuses_a_malformed_shard_option() {
    let dir = tempfile::tempdir().unwrap();
    let (path, prompts) = setup(dir.path(), SyntheticModel::new("llama"));
    for bad in ["4/4", "1", "a/2", "0/0"] {
        let out = dir.path().join("out");
        let mut args = scan_args(&path, &prompts, &out, &[]);
        args.extend(["--shard", bad]);
        let run = ropescope(&args);
        assert!(!run.status.success(), "--shard {bad} accepted");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("expected K/N with 0 ≤ K < N"), "{err}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
