//! Bounds: every count, length and size from the command line is checked before any work, input files are
//! regular files read with a size limit, and an operating-system error is stated once (README, "Bounds on every
//! count, length and input file").
//!
//! Each test runs the binary under [`ropescope_test_support::cli::DEADLINE`] and kills it past that, so a hang fails the test
//! instead of stalling the suite; each refusal is one line with its exit code and the value's allowed range.

use ropescope::io::input_file::{MAX_IDS_BYTES, MAX_JSON_BYTES, MAX_NPY_BYTES, MAX_TEXT_BYTES};
use ropescope::synth::SyntheticModel;
use ropescope_test_support::cli::{arg, assert_ok, assert_refused, run, run_with, Run};
use ropescope_test_support::inputs::{fifo, write_ids, write_model};
use std::path::{Path, PathBuf};

/// The synthetic llama model (context 512, vocabulary 64) at `dir/model.gguf`.
fn model(dir: &Path) -> PathBuf {
    let path = dir.join("model.gguf");
    write_model(&path, "llama");
    path
}

/// A `.npy` of `n` token ids at `dir/ids.npy`.
fn ids(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("ids.npy");
    write_ids(&path, n);
    path
}

/// A file of `len` zero bytes that takes no disk space.
fn sparse(path: &Path, len: u64) -> PathBuf {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
    path.to_path_buf()
}

/// `scan` of the synthetic model on `ids` with `extra` options, into `dir/out`.
fn scan(dir: &Path, extra: &[&str]) -> Run {
    let (m, p, out) = (model(dir), ids(dir, 24), dir.join("out"));
    let mut args = vec![
        "scan",
        arg(&m),
        "--prompts",
        arg(&p),
        "--quiet",
        "--out",
        arg(&out),
    ];
    args.extend(extra);
    run(&args)
}

#[test]
fn huge_prompt_count_is_refused_before_any_prompt_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let r = scan(dir.path(), &["--count", "100000000000"]);
    assert_refused(&r, 2, &["--count 100000000000 is out of range: 1 to 65536"]);
    assert!(!dir.path().join("out").exists());
}

#[test]
fn length_beyond_the_context_is_refused_with_its_range() {
    let dir = tempfile::tempdir().unwrap();
    let (m, out) = (model(dir.path()), dir.path().join("out"));
    let r = run(&[
        "scan",
        arg(&m),
        "--length",
        "5000000000",
        "--out",
        arg(&out),
    ]);
    assert_refused(
        &r,
        2,
        &["--length 5000000000 is out of range: 1 to 512 (the model's context length)"],
    );
}

#[test]
fn prompts_beyond_memory_are_refused_by_the_preflight() {
    let dir = tempfile::tempdir().unwrap();
    let mut long = SyntheticModel::new("llama");
    long.context_length = 1 << 20;
    let m = dir.path().join("long.gguf");
    std::fs::write(&m, long.to_bytes()).unwrap();
    let out = dir.path().join("out");
    let (limit, var) = ("64M", ropescope::model::MEMORY_LIMIT_VAR);
    // Prompts longer than the memory allows, then prompts that fit one by one but whose ids together do not.
    for extra in [["--length", "1000000"], ["--length", "1000"]] {
        let mut args = vec!["scan", arg(&m), "--out", arg(&out), "--count", "60000"];
        args.extend(extra);
        let r = run_with(&args, None, &[(var, limit)]);
        let need = format!("a {}-token run needs about", extra[1]);
        assert_refused(
            &r,
            5,
            &[&need, "64 MiB are available", "fewer prompts (count)"],
        );
    }
}

#[test]
fn delta_max_beyond_the_prompts_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let r = scan(dir.path(), &["--delta-max", "18446744073709551615"]);
    assert_refused(
        &r,
        2,
        &["--delta-max 18446744073709551615 is out of range: 0 to 23 (below the prompts' length of 24 tokens)"],
    );
}

#[test]
fn thread_counts_outside_their_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    for n in ["1000000", "0"] {
        let r = run(&["--threads", n, "inspect", arg(&m)]);
        assert_refused(
            &r,
            2,
            &[&format!("--threads {n} is out of range: 1 to 1024")],
        );
    }
}

#[test]
fn shard_counts_are_bounded_at_parse_time_and_by_the_tasks() {
    let dir = tempfile::tempdir().unwrap();
    // A usage error of the parser: its line, then the parser's hint.
    let r = scan(dir.path(), &["--shard", "0/4000000000"]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let first = r.stderr.lines().next().unwrap();
    assert_eq!(
        first,
        "error: invalid value '0/4000000000' for '--shard <K/N>': N = 4000000000 is out of range: 1 to \
         65536"
    );
    // One prompt, all analyses: fewer tasks than shards.
    let r = scan(dir.path(), &["--shard", "0/1000"]);
    assert_refused(
        &r,
        2,
        &[
            "--shard 0/1000: N = 1000 is out of range: 1 to ",
            "tasks of this scan",
        ],
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn other_counts_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (m, out) = (model(dir.path()), dir.path().join("out"));
    let r = run(&[
        "bench-forward",
        arg(&m),
        "--ids",
        "1,2,3",
        "--repeat",
        "1000000000000",
    ]);
    assert_refused(
        &r,
        2,
        &["--repeat 1000000000000 is out of range: 0 to 1000"],
    );
    // A limit, never allocated itself: any count of MiB whose bytes an address holds.
    for command in ["bench-forward", "scan"] {
        let mut args = vec![command, arg(&m), "--packed-weights", "18446744073709551615"];
        args.extend(match command {
            "scan" => ["--out", arg(&out)],
            _ => ["--ids", "1,2,3"],
        });
        assert_refused(
            &run(&args),
            2,
            &[
                "packed-weights",
                "more memory than this machine can address",
            ],
        );
    }
    assert!(!out.exists());
    let r = run(&[
        "train",
        "index",
        "--steps",
        "1000000000000",
        "--out",
        arg(&out),
    ]);
    assert_refused(
        &r,
        2,
        &["--steps 1000000000000 is out of range: 1 to 100000"],
    );
    // A range of chunks is checked before it is expanded (a refusal of the argument, not a crash).
    let r = run(&[
        "train",
        "index",
        "--gate",
        "0-4000000000",
        "--out",
        arg(&out),
    ]);
    assert_refused(
        &r,
        2,
        &["--gate 0-4000000000: chunk 4000000000 does not exist"],
    );
}

#[test]
fn a_fifo_is_refused_by_name_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let (m, out) = (model(dir.path()), dir.path().join("out"));
    let f = fifo(dir.path(), "fifo");
    let g = fifo(dir.path(), "fifo.npy");
    let name = |p: &Path| format!("{}: a FIFO is not an input ropescope reads", p.display());
    for args in [
        vec!["inspect", arg(&f)],
        vec!["scan", arg(&f), "--out", arg(&out)],
        vec!["reference", arg(&f), "--ids", "1,2", "--out", arg(&out)],
        vec!["tokenize", arg(&m), "--file", arg(&f)],
        vec!["scan", arg(&m), "--prompts", arg(&f), "--out", arg(&out)],
        vec!["reference", arg(&m), "--ids", arg(&f), "--out", arg(&out)],
    ] {
        let bad = args.iter().find(|a| a.contains("fifo")).unwrap();
        assert_refused(&run(&args), 3, &[&name(Path::new(bad))]);
    }
    let r = run(&["scan", arg(&m), "--prompts", arg(&g), "--out", arg(&out)]);
    assert_refused(&r, 3, &[&name(&g)]);
}

#[test]
fn devices_and_directories_are_refused_as_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let (m, out) = (model(dir.path()), dir.path().join("out"));
    let zero = "/dev/zero: a character device is not an input ropescope reads";
    for args in [
        ["tokenize", arg(&m), "--file", "/dev/zero"].as_slice(),
        &[
            "scan",
            arg(&m),
            "--prompts",
            "/dev/zero",
            "--out",
            arg(&out),
        ],
        &[
            "reference",
            arg(&m),
            "--ids",
            "/dev/zero",
            "--out",
            arg(&out),
        ],
        &["inspect", "/dev/zero"],
    ] {
        assert_refused(&run(args), 3, &[zero]);
    }
    let r = run(&["inspect", arg(dir.path())]);
    assert_refused(&r, 3, &["a directory is not an input ropescope reads"]);
}

#[test]
fn input_files_over_their_limit_are_refused_with_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (m, out) = (model(dir.path()), dir.path().join("out"));
    let text = sparse(&dir.path().join("big.txt"), MAX_TEXT_BYTES + 1);
    let r = run(&["tokenize", arg(&m), "--file", arg(&text)]);
    assert_refused(
        &r,
        5,
        &[&format!(
            "{} bytes, more than the limit of 16 MiB for a text file",
            MAX_TEXT_BYTES + 1
        )],
    );
    let r = run(&["scan", arg(&m), "--prompts", arg(&text), "--out", arg(&out)]);
    assert_refused(&r, 5, &["more than the limit of 16 MiB for a text file"]);
    let ids = sparse(&dir.path().join("big.npy"), MAX_IDS_BYTES + 1);
    let r = run(&["reference", arg(&m), "--ids", arg(&ids), "--out", arg(&out)]);
    assert_refused(
        &r,
        5,
        &["more than the limit of 64 MiB for a token-id file"],
    );
    // Standard input is read up to the same limit.
    let r = run_with(
        &["tokenize", arg(&m), "--file", "-"],
        Some(vec![b'a'; MAX_TEXT_BYTES as usize + 1]),
        &[],
    );
    assert_refused(
        &r,
        5,
        &["stdin: more than the limit of 16 MiB for a text file"],
    );
    // A scan directory's JSON and a reference directory's arrays.
    let scan = dir.path().join("scan");
    std::fs::create_dir(&scan).unwrap();
    sparse(&scan.join("meta.json"), MAX_JSON_BYTES + 1);
    let r = run(&["report", arg(&scan)]);
    assert_refused(&r, 5, &["more than the limit of 256 MiB for a JSON file"]);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for d in [&a, &b] {
        std::fs::create_dir(d).unwrap();
        sparse(&d.join("logits.npy"), MAX_NPY_BYTES + 1);
    }
    let r = run(&["compare", arg(&a), arg(&b)]);
    assert_refused(&r, 5, &["more than the limit of 16 GiB for a .npy file"]);
}

#[test]
fn a_missing_file_is_named_with_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let (m, out) = (model(dir.path()), dir.path().join("out"));
    let none = dir.path().join("none");
    let none_npy = dir.path().join("none.npy");
    for args in [
        ["inspect", arg(&none)].as_slice(),
        &["tokenize", arg(&m), "--file", arg(&none)],
        &["scan", arg(&m), "--prompts", arg(&none), "--out", arg(&out)],
        &[
            "reference",
            arg(&m),
            "--ids",
            arg(&none_npy),
            "--out",
            arg(&out),
        ],
    ] {
        let r = run(args);
        assert_refused(&r, 6, &["No such file or directory"]);
        assert_eq!(r.stderr.matches("No such file").count(), 1, "{}", r.stderr);
    }
}

#[test]
fn reference_rows_layers_and_prompt_length_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (m, out) = (model(dir.path()), dir.path().join("out"));
    let reference = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["reference", arg(&m), "--out", arg(&out)];
        args.extend(extra);
        run_with(&args, None, env)
    };
    let r = reference(&["--ids", "1,2,3", "--rows", "0..100000000000"], &[]);
    assert_refused(
        &r,
        2,
        &["rows 0..100000000000 are not inside the 3 positions"],
    );
    let r = reference(&["--ids", "1,2,3", "--layers", "0,4000000000"], &[]);
    assert_refused(
        &r,
        2,
        &["layer 4000000000 does not exist (the model has 2 layers)"],
    );
    let long = ids(dir.path(), 513);
    let r = reference(&["--ids", arg(&long)], &[]);
    assert_refused(
        &r,
        2,
        &["the prompt has 513 tokens, more than the model's context of 512"],
    );
    let var = ropescope::model::MEMORY_LIMIT_VAR;
    let r = reference(&["--ids", arg(&ids(dir.path(), 500))], &[(var, "1M")]);
    assert_refused(
        &r,
        5,
        &["a 500-token run needs about", "1.00 MiB are available"],
    );
    assert!(!out.exists());
}

#[test]
fn tolerances_of_unknown_kinds_or_out_of_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = model(dir.path());
    let reference = dir.path().join("ref");
    assert_ok(&run(&[
        "reference",
        arg(&m),
        "--ids",
        "1,2,3",
        "--out",
        arg(&reference),
    ]));
    for (tol, needle) in [
        (
            "logit=nmse:1",
            "unknown kind 'logit' (known: attn, hidden, ids, k, k_pre, kv_latent, logits,",
        ),
        (
            "logits=nmse:-1",
            "-1 is out of range: a finite number, 0 or more",
        ),
        ("logits=nmse:NaN", "NaN is out of range"),
        ("attn=max_abs:inf", "inf is out of range"),
    ] {
        let compare = ["compare", arg(&reference), arg(&reference), "--tol", tol];
        assert_refused(&run(&compare), 2, &[tol, needle]);
        let diverge = [
            "diverge",
            arg(&m),
            "--ids",
            "1,2,3",
            "--against",
            arg(&reference),
            "--tol",
            tol,
        ];
        assert_refused(&run(&diverge), 2, &[tol, needle]);
    }
}

#[test]
fn prompts_too_short_for_a_multi_pass_analysis_are_refused_before_any_pass() {
    let dir = tempfile::tempdir().unwrap();
    let m = ropescope_test_support::paths::fixture("converted/llama/model.gguf");
    let out = dir.path().join("out");
    let scan = |analyses: &str, length: &str, out: &Path| {
        run(&[
            "scan",
            arg(&m),
            "--length",
            length,
            "--delta-max",
            "0",
            "--count",
            "1",
            "--analyses",
            analyses,
            "--quiet",
            "--out",
            arg(out),
        ])
    };
    for (analyses, length, needle) in [
        (
            "slash,posym",
            "9",
            "has 9 tokens; the posym analysis needs at least 10",
        ),
        (
            "slash,ablation",
            "16",
            "has 16 tokens; the ablation analysis needs at least 17",
        ),
        (
            "detectors",
            "1",
            "has 1 tokens; the detectors analysis needs at least 2",
        ),
        (
            "all",
            "12",
            "has 12 tokens; the ablation analysis needs at least 17",
        ),
    ] {
        assert_refused(&scan(analyses, length, &out), 2, &[needle, "--analyses"]);
        assert!(!out.exists());
    }
    for (analyses, length) in [("posym", "10"), ("ablation", "17"), ("detectors", "2")] {
        assert_ok(&scan(analyses, length, &dir.path().join(analyses)));
    }
}

#[test]
fn an_empty_text_is_refused_as_a_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let m = ropescope_test_support::paths::fixture("converted/llama/model.gguf");
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    let out = dir.path().join("out");
    let r = run(&["reference", arg(&m), "--text", "", "--out", arg(&out)]);
    assert_refused(&r, 2, &["--text is empty"]);
    let r = run(&[
        "reference",
        arg(&m),
        "--file",
        arg(&empty),
        "--out",
        arg(&out),
    ]);
    assert_refused(&r, 2, &["empty.txt holds no text"]);
    assert!(!out.exists());
}
