//! Scan directories, shard directories and token-id files read back: each test copies the example scan
//! (`fixtures/scan/example`), corrupts one file the way a hostile or damaged input would, and runs the commands
//! that read it. Each must exit 3 with one error line naming the file, the value and its allowed range, and
//! return promptly (the child is killed past [`ropescope_test_support::cli::DEADLINE`]).

use ropescope::io::npy;
use ropescope_test_support::cli::{arg, assert_ok, assert_refused, run};
use ropescope_test_support::inputs::{copy_example_scan, fifo, write_model};
use ropescope_test_support::paths;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Runs ropescope with `args` and checks that it is refused with exit 3 and one error line containing `needle`.
fn refused(args: &[&str], needle: &str) {
    assert_refused(&run(args), 3, &[needle]);
}

/// A copy of the example scan directory in a fresh temporary directory: `(tempdir, scan)`.
fn example_copy() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let scan = tmp.path().join("scan");
    copy_example_scan(&scan);
    (tmp, scan)
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn write(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// Changes the JSON file `dir/name` in place.
fn edit(dir: &Path, name: &str, f: impl FnOnce(&mut Value)) {
    let path = dir.join(name);
    let mut v = read(&path);
    f(&mut v);
    write(&path, &v);
}

/// Every command that reads a scan directory, on `scan`, writing (if at all) under `tmp`.
fn readers(scan: &Path, tmp: &Path) -> Vec<Vec<String>> {
    let s = scan.display().to_string();
    let out = |name: &str| tmp.join(name).display().to_string();
    let good = paths::fixture("scan/example").display().to_string();
    [
        vec!["report", &s],
        vec!["figures", &s, "--out", &out("figures")],
        vec!["export-notebook", &s, "--out", &out("scan.ipynb")],
        vec!["export-minference", &s, "--out", &out("minference.json")],
        vec!["export-duoattention", &s, "--out", &out("duo")],
        vec!["compare-scans", &good, &s, "--out", &out("compare")],
    ]
    .into_iter()
    .map(|a| a.into_iter().map(String::from).collect())
    .collect()
}

/// Checks that every reader refuses `scan` with `needle`, and wrote nothing.
fn every_reader_refuses(tmp: &Path, scan: &Path, needle: &str) {
    for args in readers(scan, tmp) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, needle);
    }
    assert!(!scan.join("report.html").exists());
    for name in ["figures", "scan.ipynb", "minference.json", "duo", "compare"] {
        assert!(!tmp.join(name).exists(), "{name} was written");
    }
}

#[test]
fn the_example_scan_is_read_by_every_reader() {
    let (tmp, scan) = example_copy();
    for args in readers(&scan, tmp.path()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_ok(&run(&args));
    }
}

#[test]
fn a_head_listed_200_times_is_refused_by_every_reader() {
    let (tmp, scan) = example_copy();
    edit(&scan, "summary.json", |s| {
        let first = s["heads"][0].clone();
        let heads = s["heads"].as_array_mut().unwrap();
        heads.extend(std::iter::repeat_n(first, 200));
    });
    every_reader_refuses(tmp.path(), &scan, "summary.json: head L0H0 is listed twice");
}

#[test]
fn a_head_of_layer_a_billion_is_refused() {
    let (tmp, scan) = example_copy();
    edit(&scan, "summary.json", |s| {
        s["heads"][5]["layer"] = json!(1_000_000_000)
    });
    every_reader_refuses(
        tmp.path(),
        &scan,
        "summary.json: the layer of head L1000000000H2 is 1000000000, outside the allowed 0..=1",
    );
}

#[test]
fn a_missing_head_is_refused() {
    let (tmp, scan) = example_copy();
    edit(&scan, "summary.json", |s| {
        s["heads"].as_array_mut().unwrap().pop();
    });
    let needle = "lists 5 heads, the model has 2 × 3 = 6; head L1H2 is missing";
    every_reader_refuses(tmp.path(), &scan, needle);
}

#[test]
fn a_meta_of_a_billion_layers_is_refused_promptly() {
    let (tmp, scan) = example_copy();
    edit(&scan, "meta.json", |m| {
        m["model"]["n_layers"] = json!(1_000_000_000)
    });
    let needle = "meta.json: model.n_layers is 1000000000, outside the allowed 1..=1024";
    every_reader_refuses(tmp.path(), &scan, needle);
}

#[test]
fn minference_on_an_inflated_meta_is_refused() {
    let (tmp, scan) = example_copy();
    edit(&scan, "meta.json", |m| {
        let model = &mut m["model"];
        model["n_layers"] = json!(1000);
        model["n_heads"] = json!(1000);
        model["n_kv_heads"] = json!(1000);
        model["rope_bases"] = json!(vec![10000.0; 1000]);
        model["windows"] = json!(vec![Value::Null; 1000]);
    });
    let out = tmp.path().join("minference.json");
    refused(
        &["export-minference", arg(&scan), "--out", arg(&out)],
        "summary.json: lists 6 heads, the model has 1000 × 1000 = 1000000; head L0H3 is missing",
    );
    assert!(!out.exists());
}

/// `meta.json` values that disagree with each other, each refused with its range.
#[test]
fn inconsistent_meta_values_are_refused() {
    let cases: [(&str, Value, &str); 8] = [
        (
            "/model/n_chunks",
            json!(5),
            "model.n_chunks is 5, outside the allowed 1..=4",
        ),
        (
            "/model/rope_bases",
            json!([10000.0]),
            "the length of model.rope_bases is 1, outside the allowed n_layers = 2",
        ),
        (
            "/model/windows",
            json!([null, null, null]),
            "the length of model.windows is 3, outside the allowed n_layers = 2",
        ),
        (
            "/model/n_kv_heads",
            json!(2),
            "model.n_kv_heads is 2, outside the allowed divisors of n_heads 3",
        ),
        (
            "/prompt_sets/0/count",
            json!(3),
            "the length of prompt_sets[natural].lengths is 2, outside the allowed count = 3",
        ),
        (
            "/parameters/delta_max",
            json!(32),
            "parameters.delta_max is 32, outside the allowed 0..=31",
        ),
        (
            "/prompt_sets/1/count",
            json!(100_000),
            "prompt_sets[random].count is 100000, outside the allowed 1..=65536",
        ),
        (
            "/analyses/0",
            json!("everything"),
            "an analysis is everything, outside the allowed slash",
        ),
    ];
    for (pointer, value, needle) in cases {
        let (_tmp, scan) = example_copy();
        edit(&scan, "meta.json", |m| {
            *m.pointer_mut(pointer).unwrap() = value
        });
        refused(&["report", arg(&scan)], needle);
    }
}

/// `summary.json` and `ablation.json` values that disagree with the model.
#[test]
fn per_head_values_of_another_model_are_refused() {
    let (_tmp, scan) = example_copy();
    edit(&scan, "summary.json", |s| {
        s["heads"][4]["kv_head"] = json!(0)
    });
    refused(
        &["report", arg(&scan)],
        "summary.json: the kv_head of head L1H1 is 0, outside the allowed 1..=1",
    );

    let (_tmp, scan) = example_copy();
    edit(&scan, "summary.json", |s| {
        s["heads"][0]["slash"]["best_delta"] = json!(9)
    });
    refused(
        &["report", arg(&scan)],
        "an offset Δ of head L0H0 is 9, outside the allowed 0..=8",
    );

    let (_tmp, scan) = example_copy();
    edit(&scan, "summary.json", |s| {
        let sets = &mut s["slash_dominant"]["natural"];
        let first = sets[0].clone();
        sets.as_array_mut().unwrap().push(first);
    });
    refused(
        &["report", arg(&scan)],
        "summary.json: slash_dominant.natural lists L0H0 Δ 1 twice",
    );

    let (_tmp, scan) = example_copy();
    edit(&scan, "ablation.json", |a| {
        a["variants"][1]["peak_delta"].as_array_mut().unwrap().pop();
    });
    refused(
        &["report", arg(&scan)],
        "ablation.json: variants[1].peak_delta is not a list of 2 layers of 3 heads",
    );

    let (_tmp, scan) = example_copy();
    edit(&scan, "summary.json", |s| {
        s["heads"][2]["ablation"]["variants"]
            .as_array_mut()
            .unwrap()
            .pop();
    });
    refused(&["report", arg(&scan)], "head L0H2 has 2 ablation variants");
}

#[test]
fn an_array_of_another_shape_is_refused() {
    let (tmp, scan) = example_copy();
    let slash = scan.join("slash_natural.npy");
    npy::write(&slash, &[2, 3, 5], &[0.1; 30]).unwrap();
    every_reader_refuses(
        tmp.path(),
        &scan,
        "slash_natural.npy: a file of 368 bytes does not fit the model: not the 432 bytes of data",
    );
    // The same number of values in another shape.
    npy::write(&slash, &[3, 2, 9], &[0.1; 54]).unwrap();
    refused(
        &["report", arg(&scan)],
        "slash_natural.npy: F64 [3, 2, 9] does not fit the model: expected F64 [2, 3, 9] as meta.json implies",
    );
    // Float64 attention maps where the format has float32.
    std::fs::copy(paths::fixture("scan/example/slash_natural.npy"), &slash).unwrap();
    let map = scan.join("attention_map_natural.npy");
    npy::write(&map, &[2, 3, 16, 8], &vec![0.0f64; 2 * 3 * 16 * 8]).unwrap();
    refused(
        &["report", arg(&scan)],
        "attention_map_natural.npy: F64 [2, 3, 16, 8] does not fit the model: expected F32 [2, 3, 16, 16]",
    );
}

#[test]
fn an_array_that_is_not_a_regular_file_is_refused() {
    let (_tmp, scan) = example_copy();
    let cone = scan.join("chunk_frequency.npy");
    std::fs::remove_file(&cone).unwrap();
    std::fs::create_dir(&cone).unwrap();
    refused(
        &["report", arg(&scan)],
        "chunk_frequency.npy: not a regular file",
    );
}

/// A token-id file must hold one prompt: `[n]` or `[1, n]`; a 2-D array is refused, not flattened.
#[test]
fn two_dimensional_ids_are_refused_not_flattened() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model.gguf");
    write_model(&model, "llama");
    let ids = tmp.path().join("ids.npy");
    let out = tmp.path().join("ref");
    let args = |ids| ["reference", arg(&model), "--ids", ids, "--out", arg(&out)];
    npy::write(&ids, &[2, 3], &[1i64, 2, 3, 4, 5, 6]).unwrap();
    refused(
        &args(arg(&ids)),
        "ids.npy: token ids of shape [2, 3]; one prompt's ids are a 1-D array [n] or a batch of one [1, n]",
    );
    assert!(!out.exists());
    let batch_of_one = tmp.path().join("batch.npy");
    npy::write(&batch_of_one, &[1, 3], &[1i64, 2, 3]).unwrap();
    assert_ok(&run(&args(arg(&batch_of_one))));
    std::fs::remove_dir_all(&out).unwrap();
    let missing = tmp.path().join("missing.ids");
    assert_refused(
        &run(&args(arg(&missing))),
        2,
        &["missing.ids: no such file (and not a comma-separated list of token ids)"],
    );
}

/// A shard directory made from the example scan: its meta (not complete), `of` shards, this one `shard`,
/// every task of the scan when it is the only one.
fn shard_dir(tmp: &Path, name: &str, shard: u64, of: u64, model: &str) -> PathBuf {
    let example = paths::fixture("scan/example");
    let dir = tmp.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(example.join("prompts.json"), dir.join("prompts.json")).unwrap();
    let mut meta = read(&example.join("meta.json"));
    meta["complete"] = json!(false);
    meta["model_file"] = json!(model);
    let tasks: Vec<Value> = ["natural/0", "natural/1", "random/0", "random/1", "cone"]
        .into_iter()
        .chain(["posym", "detectors", "ablation"])
        .map(|t| json!({"task": t, "seconds": 0.1}))
        .collect();
    write(
        &dir.join("shard.json"),
        &json!({
            "shard_format_version": 1, "shard": shard, "of": of, "meta": meta, "tasks": tasks, "complete": true
        }),
    );
    dir
}

fn merge(tmp: &Path, shards: &[&Path], needle: &str) {
    let out = tmp.join("merged");
    let mut args = vec!["merge", "--quiet", "--out", arg(&out)];
    args.extend(shards.iter().map(|s| arg(s)));
    refused(&args, needle);
    assert!(!out.exists());
}

#[test]
fn a_shard_claiming_four_billion_shards_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = shard_dir(tmp.path(), "s0", 0, 4_000_000_000, "model.gguf");
    merge(
        tmp.path(),
        &[&dir],
        "shard.json: of is 4000000000, outside the allowed 1..=8 (the scan's tasks",
    );
    let dir = shard_dir(tmp.path(), "s1", 5, 2, "model.gguf");
    merge(
        tmp.path(),
        &[&dir],
        "shard.json: shard is 5, outside the allowed 0..=1",
    );
}

#[test]
fn a_shard_whose_prompts_disagree_with_its_meta_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = shard_dir(tmp.path(), "s0", 0, 1, "model.gguf");
    edit(&dir, "prompts.json", |p| {
        p["natural"][1].as_array_mut().unwrap().pop();
    });
    merge(
        tmp.path(),
        &[&dir],
        "prompts.json: holds 2 natural prompts of lengths [32, 31], the scan's meta records 2 of lengths [32, 32]",
    );
    edit(&dir, "prompts.json", |p| {
        p["natural"][1].as_array_mut().unwrap().push(json!(5000));
    });
    merge(
        tmp.path(),
        &[&dir],
        "prompts.json: a natural token id is 5000, outside the allowed 0..=999",
    );
}

#[cfg(unix)]
#[test]
fn a_shard_naming_a_device_or_a_fifo_as_its_model_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = shard_dir(tmp.path(), "s0", 0, 1, "/dev/zero");
    merge(
        tmp.path(),
        &[&dir],
        "/dev/zero: a character device is not an input",
    );
    let fifo = fifo(tmp.path(), "model.fifo");
    let dir = shard_dir(tmp.path(), "s1", 0, 1, arg(&fifo));
    merge(tmp.path(), &[&dir], "model.fifo: a FIFO is not an input");
}
