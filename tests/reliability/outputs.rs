//! Outputs: whole or absent, never over an input, `--force` removing only what ropescope wrote, every output
//! path checked before the work (README, "Outputs: whole or absent, and what `--force` removes").
//!
//! Each input kind is put where an output would replace or remove it; the command must refuse with exit code 2
//! and leave the input byte for byte.

use ropescope::io::npy;
use ropescope_test_support::cli::{arg, assert_ok, assert_refused, run};
use ropescope_test_support::inputs::{copy_example_scan, write_ids, write_model};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Every file under `dir` with its bytes, sorted: a directory's whole content, to compare before and after.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                files.push((p, bytes));
            }
        }
    }
    files.sort();
    files
}

/// A shard directory (`scan --shard 0/1`) of the model at `model`, written to `out`.
fn write_shard(model: &Path, ids: &Path, out: &Path) {
    assert_ok(&run(&[
        "scan",
        arg(model),
        "--prompts",
        arg(ids),
        "--analyses",
        "slash",
        "--delta-max",
        "4",
        "--shard",
        "0/1",
        "--quiet",
        "--out",
        arg(out),
    ]));
}

/// The synthetic qwen2 model at `dir/model.gguf`: its path and its bytes.
fn model_in(dir: &Path) -> (PathBuf, Vec<u8>) {
    let path = dir.join("model.gguf");
    let bytes = write_model(&path, "qwen2");
    (path, bytes)
}

/// Requires ropescope `args` to be refused with exit 2 and every one of `needles`, and `input` to still hold
/// `bytes`.
fn assert_refused_keeping(args: &[&str], needles: &[&str], input: &Path, bytes: &[u8]) {
    assert_refused(&run(args), 2, needles);
    assert_eq!(
        std::fs::read(input).unwrap(),
        bytes,
        "{args:?}: {input:?} changed"
    );
}

/// Runs `command MODEL option input --out DIR --force`, with the synthetic model in a folder of its own and DIR
/// the folder holding `input`, and requires a refusal (exit 2, every one of `needles`) that leaves `input` as it
/// was.
fn assert_force_keeps(command: &str, option: &str, input: &Path, needles: &[&str]) {
    let models = tempfile::tempdir().unwrap();
    let (model, _) = model_in(models.path());
    let bytes = std::fs::read(input).unwrap();
    let dir = input.parent().unwrap();
    let args = [
        command,
        arg(&model),
        option,
        arg(input),
        "--out",
        arg(dir),
        "--force",
    ];
    assert_refused_keeping(&args, needles, input, &bytes);
}

/// The arguments of `reference model --ids 1,2,3 --out out`, with `--force` when `force`.
fn reference<'a>(model: &'a Path, out: &'a Path, force: bool) -> Vec<&'a str> {
    let mut args = vec!["reference", arg(model), "--ids", "1,2,3", "--out", arg(out)];
    if force {
        args.push("--force");
    }
    args
}

/// What the refusal of an output that is or holds an input of the command says.
const INPUT_INSIDE: &str = "is or holds the input";

#[test]
fn force_never_removes_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (model, bytes) = model_in(dir.path());
    for force in [false, true] {
        // The directory holding the model, and the model itself, as the output directory.
        for out in [dir.path(), model.as_path()] {
            let args = reference(&model, out, force);
            let r = run(&args);
            assert_eq!(r.code, Some(2), "{args:?}");
            assert_eq!(std::fs::read(&model).unwrap(), bytes);
        }
    }
    let r = run(&reference(&model, dir.path(), true));
    assert_refused(&r, 2, &[INPUT_INSIDE, "model.gguf"]);
    // Inside an earlier reference directory, which --force would otherwise replace whole.
    let earlier = dir.path().join("earlier");
    let into_earlier = |model: &Path| run(&reference(model, &earlier, true));
    assert_ok(&into_earlier(&model));
    let inside = earlier.join("model.gguf");
    std::fs::copy(&model, &inside).unwrap();
    assert_refused(&into_earlier(&inside), 2, &[INPUT_INSIDE]);
    assert_eq!(std::fs::read(&inside).unwrap(), bytes);
    // Through a symbolic link to the directory.
    #[cfg(unix)]
    {
        let link = tempfile::tempdir().unwrap();
        let via = link.path().join("via");
        std::os::unix::fs::symlink(dir.path(), &via).unwrap();
        assert_refused_keeping(
            &["rope", arg(&model), "--out", arg(&via), "--force"],
            &[INPUT_INSIDE],
            &model,
            &bytes,
        );
    }
}

#[test]
fn force_never_removes_an_ids_file() {
    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("ids.npy");
    write_ids(&ids, 24);
    assert_force_keeps("reference", "--ids", &ids, &[INPUT_INSIDE, "ids.npy"]);
}

#[test]
fn force_never_removes_a_prompt_file() {
    let prompts = tempfile::tempdir().unwrap();
    let text = prompts.path().join("p.txt");
    std::fs::write(&text, "a prompt").unwrap();
    let ids = prompts.path().join("p.npy");
    write_ids(&ids, 24);
    for prompt in [&text, &ids] {
        assert_force_keeps("scan", "--prompts", prompt, &[INPUT_INSIDE]);
    }
}

#[test]
fn force_never_removes_a_text_file() {
    let texts = tempfile::tempdir().unwrap();
    let text = texts.path().join("t.txt");
    std::fs::write(&text, "some text").unwrap();
    assert_force_keeps("reference", "--file", &text, &[INPUT_INSIDE, "t.txt"]);
}

#[test]
fn diverge_json_never_replaces_the_dump_nor_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (model, model_bytes) = model_in(dir.path());
    let dump = dir.path().join("dump");
    std::fs::create_dir(&dump).unwrap();
    let logits = dump.join("logits.npy");
    let bytes = write_ids(&logits, 24);
    let folder = dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    for (json, needle) in [
        (&logits, "is a file of the input directory"),
        (&model, "is an input of this command"),
        (&dump, "is an input of this command"),
        (&folder, "is a directory"),
    ] {
        let r = run(&[
            "diverge",
            arg(&model),
            "--ids",
            "1,2,3",
            "--against",
            arg(&dump),
            "--json",
            arg(json),
        ]);
        assert_refused(&r, 2, &[needle]);
    }
    assert_eq!(std::fs::read(&logits).unwrap(), bytes);
    assert_eq!(std::fs::read(&model).unwrap(), model_bytes);
}

#[test]
fn merge_never_removes_a_shard_or_its_model() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = model_in(dir.path());
    let ids = dir.path().join("ids.npy");
    write_ids(&ids, 24);
    let shard = dir.path().join("shards").join("s0");
    write_shard(&model, &ids, &shard);
    let before = snapshot(dir.path());
    // The shard itself, the folder holding it, and the folder holding the model.
    for out in [shard.as_path(), shard.parent().unwrap(), dir.path()] {
        let r = run(&["merge", arg(&shard), "--out", arg(out), "--force"]);
        assert_refused(&r, 2, &[INPUT_INSIDE]);
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn exports_never_remove_or_replace_their_scan() {
    let dir = tempfile::tempdir().unwrap();
    let scan = dir.path().join("scan");
    copy_example_scan(&scan);
    let other = dir.path().join("other");
    copy_example_scan(&other);
    let before = snapshot(dir.path());
    let (summary, meta) = (scan.join("summary.json"), scan.join("meta.json"));
    let scan_s = arg(&scan);
    let runs: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["figures", scan_s, "--out", scan_s, "--force"],
            INPUT_INSIDE,
        ),
        (
            vec![
                "export-duoattention",
                scan_s,
                "--out",
                arg(dir.path()),
                "--force",
            ],
            INPUT_INSIDE,
        ),
        (
            vec![
                "compare-scans",
                scan_s,
                arg(&other),
                "--out",
                arg(&other),
                "--force",
            ],
            INPUT_INSIDE,
        ),
        (
            vec!["export-minference", scan_s, "--out", arg(&summary)],
            "is a file of the input directory",
        ),
        (
            vec!["export-notebook", scan_s, "--out", arg(&meta)],
            "is a file of the input directory",
        ),
    ];
    for (args, needle) in &runs {
        assert_refused(&run(args), 2, &[needle]);
    }
    assert_eq!(snapshot(dir.path()), before);
    // Their default outputs inside the scan are theirs to replace (a directory with --force).
    for command in ["export-minference", "export-notebook"] {
        assert_ok(&run(&[command, scan_s]));
        assert_ok(&run(&[command, scan_s]));
    }
    for command in ["figures", "export-duoattention"] {
        assert_ok(&run(&[command, scan_s]));
        assert_refused(
            &run(&[command, scan_s]),
            2,
            &["--force is needed to replace"],
        );
        assert_ok(&run(&[command, scan_s, "--force"]));
    }
    let entries = std::fs::read_dir(&scan).unwrap().count();
    assert_eq!(
        entries,
        31 + 4,
        "the example's files and the four exports, nothing else"
    );
}

#[test]
fn synth_never_overwrites_its_like_file() {
    let dir = tempfile::tempdir().unwrap();
    let like = dir.path().join("like.gguf");
    let bytes = write_model(&like, "qwen2");
    assert_refused_keeping(
        &[
            "synth",
            "--like",
            arg(&like),
            "--quant",
            "F32",
            "--out",
            arg(&like),
            "--force",
            "--quiet",
        ],
        &["is an input of this command"],
        &like,
        &bytes,
    );
}

#[test]
fn force_refuses_a_directory_ropescope_did_not_write_and_names_what_it_would_remove() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = model_in(dir.path());
    let mine = dir.path().join("thesis");
    std::fs::create_dir(&mine).unwrap();
    for name in [
        "chapter1.tex",
        "chapter2.tex",
        "data.csv",
        "figs",
        "notes.md",
        "refs.bib",
    ] {
        std::fs::write(mine.join(name), name).unwrap();
    }
    let before = snapshot(&mine);
    for command in ["reference", "rope"] {
        let mut args = vec![command, arg(&model), "--out", arg(&mine), "--force"];
        if command == "reference" {
            args.extend(["--ids", "1,2,3"]);
        }
        assert_refused(
            &run(&args),
            2,
            &[
                "is not an output of this command",
                "--force would remove the 6 entries (chapter1.tex, chapter2.tex, data.csv, figs, notes.md, …)",
            ],
        );
    }
    // A scan's output is not a reference's either.
    let scan = dir.path().join("scan");
    copy_example_scan(&scan);
    let r = run(&reference(&model, &scan, true));
    assert_refused(
        &r,
        2,
        &["is not an output of this command (no meta.json of one"],
    );
    assert_eq!(snapshot(&mine), before);
}

#[test]
fn force_replaces_a_previous_output_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = model_in(dir.path());
    let out = dir.path().join("tables");
    let rope = |positions: &str, force: bool| {
        let mut args = vec![
            "rope",
            arg(&model),
            "--positions",
            positions,
            "--out",
            arg(&out),
        ];
        if force {
            args.push("--force");
        }
        run(&args)
    };
    assert_ok(&rope("0..4", false));
    assert_refused(&rope("0..8", false), 2, &["--force is needed to replace"]);
    assert_ok(&rope("0..8", true));
    let positions = npy::Array::read(&out.join("positions.npy")).unwrap();
    assert_eq!(positions.shape, [8]);
    let ref_dir = dir.path().join("ref");
    for force in [false, true] {
        assert_ok(&run(&reference(&model, &ref_dir, force)));
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        left.len(),
        3,
        "no lock, staging or old directory left: {left:?}"
    );
}

#[test]
fn every_directory_output_is_staged_and_absent_after_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_model = dir.path().join("junk.gguf");
    std::fs::write(&not_a_model, b"not a gguf file at all").unwrap();
    let scan = dir.path().join("scan");
    copy_example_scan(&scan);
    std::fs::write(scan.join("summary.json"), b"{").unwrap();
    let scan_files = snapshot(&scan);
    let out = dir.path().join("out");
    let o = arg(&out);
    let runs: [Vec<&str>; 5] = [
        vec!["rope", arg(&not_a_model), "--out", o],
        vec!["reference", arg(&not_a_model), "--ids", "1", "--out", o],
        vec!["figures", arg(&scan), "--out", o],
        vec!["export-duoattention", arg(&scan), "--out", o],
        vec!["train", "sdh", "--gate", "99", "--out", o],
    ];
    for args in &runs {
        let r = run(args);
        assert_ne!(r.code, Some(0), "{args:?}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left.len(), 2, "{args:?} left {left:?}");
        assert_eq!(snapshot(&scan), scan_files, "{args:?}");
    }
}

#[test]
fn single_file_outputs_write_into_devices_and_through_links_and_refuse_directories() {
    let dir = tempfile::tempdir().unwrap();
    let scan = dir.path().join("scan");
    copy_example_scan(&scan);
    let r = run(&["export-minference", arg(&scan), "--out", "/dev/null"]);
    assert_ok(&r);
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = std::fs::metadata("/dev/null").unwrap().file_type();
        assert!(t.is_char_device());
        let real = dir.path().join("real.json");
        std::fs::write(&real, b"old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_ok(&run(&[
            "export-minference",
            arg(&scan),
            "--out",
            arg(&link),
        ]));
        assert!(link.symlink_metadata().unwrap().is_symlink());
        assert!(std::fs::read(&real).unwrap().starts_with(b"["));
    }
    let folder = dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    let r = run(&["export-notebook", arg(&scan), "--out", arg(&folder)]);
    assert_refused(&r, 2, &["is a directory"]);
    assert!(folder.is_dir());
}

/// Requires ropescope `args` to have failed on its output (exit 2, `needle`) within 5 s, long before the work it
/// would have done.
fn assert_fails_fast(args: &[&str], needle: &str) {
    let start = Instant::now();
    let r = run(args);
    let took = start.elapsed();
    assert_refused(&r, 2, &[needle]);
    assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
}

#[test]
fn outputs_are_checked_before_the_work() {
    let dir = tempfile::tempdir().unwrap();
    // A model that would fail only when read (exit 3): the output error must come first.
    let junk = dir.path().join("junk.gguf");
    std::fs::write(&junk, b"not a gguf file at all").unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (j, f, d) = (arg(&junk), arg(&file), arg(&full));
    assert_fails_fast(
        &["reference", j, "--ids", "1", "--out", "."],
        "needs a name of its own",
    );
    assert_fails_fast(
        &["reference", j, "--ids", "1", "--out", d],
        "exists and is not empty",
    );
    assert_fails_fast(&["scan", j, "--out", f], "is an existing file");
    assert_fails_fast(&["rope", j, "--out", d], "exists and is not empty");
    assert_fails_fast(
        &["synth", "--like", j, "--out", d, "--force"],
        "is a directory",
    );
    assert_fails_fast(
        &[
            "diverge",
            j,
            "--ids",
            "1",
            "--against",
            arg(&empty),
            "--json",
            d,
        ],
        "is a directory",
    );
    // Training has no input to fail on: the output is checked before the arguments that configure it, and the
    // default run takes longer than the bound.
    assert_fails_fast(
        &["train", "sdh", "--gate", "99", "--out", f],
        "is an existing file",
    );
    assert_fails_fast(&["train", "sdh", "--out", f], "is an existing file");
    assert_fails_fast(&["train", "index", "--out", d], "exists and is not empty");
}

#[test]
fn compare_scans_refuses_a_scan_given_twice() {
    let dir = tempfile::tempdir().unwrap();
    let scan = dir.path().join("scan");
    copy_example_scan(&scan);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&scan, &link).unwrap();
    let out = dir.path().join("out");
    for twice in [arg(&scan), arg(&link)] {
        let r = run(&["compare-scans", arg(&scan), twice, "--out", arg(&out)]);
        assert_refused(&r, 2, &["are the same scan directory; give each scan once"]);
    }
    assert!(!out.exists());
}

/// Starts `ropescope args` in the background, with no output.
fn spawn(args: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `dir` holds an entry whose name starts with `prefix` (the child's staging or temporary file).
fn wait_for_entry(dir: &Path, prefix: &str) {
    let start = Instant::now();
    while !entries(dir).iter().any(|n| n.starts_with(prefix)) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no {prefix}* in {dir:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The names in `dir`.
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The converted tiny llama (`fixtures/converted/llama`, with its tokenizer; context 256) copied to
/// `dir/model.gguf`.
fn tokenizing_model_in(dir: &Path) -> PathBuf {
    let path = dir.join("model.gguf");
    std::fs::copy(
        ropescope_test_support::paths::fixture("converted/llama/model.gguf"),
        &path,
    )
    .unwrap();
    path
}

/// A scan of `model` (with a tokenizer) long enough to be stopped midway: 2000 prompts of 256 tokens.
fn long_scan<'a>(model: &'a Path, out: &'a Path) -> Vec<&'a str> {
    let common = ["--length", "256", "--count", "2000", "--analyses", "slash"];
    let mut args = vec!["scan", arg(model), "--quiet", "--out", arg(out)];
    args.extend(common);
    args
}

#[test]
fn a_killed_writer_leaves_no_lock_that_blocks_the_next_even_unreaped() {
    let dir = tempfile::tempdir().unwrap();
    let model = tokenizing_model_in(dir.path());
    let out = dir.path().join("out");
    let mut child = spawn(&long_scan(&model, &out));
    wait_for_entry(dir.path(), ".out.partial-");
    // Killed and not yet waited for: a zombie whose process id still exists.
    child.kill().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let ids = dir.path().join("ids.npy");
    write_ids(&ids, 12);
    write_shard(&model, &ids, &out);
    child.wait().unwrap();
    assert_eq!(entries(dir.path()).len(), 3, "{:?}", entries(dir.path()));
    assert!(out.join("shard.json").exists());
}

#[test]
fn an_interrupted_scan_removes_its_staging_and_lock_and_exits_130() {
    for signal in ["-INT", "-TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let model = tokenizing_model_in(dir.path());
        let out = dir.path().join("out");
        let mut child = spawn(&long_scan(&model, &out));
        wait_for_entry(dir.path(), ".out.partial-");
        let sent = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{signal}: still running"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(130), "{signal}: {err}");
        assert_eq!(err.trim(), "error: interrupted", "{signal}");
        assert_eq!(entries(dir.path()), ["model.gguf"], "{signal}");
    }
}

#[test]
fn a_killed_single_file_writer_leaves_no_temporary_behind_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = model_in(dir.path());
    let out = dir.path().join("out.gguf");
    let mut child = spawn(&[
        "synth",
        "--like",
        "smollm2-135m",
        "--quant",
        "Q8_0",
        "--quiet",
        "--out",
        arg(&out),
    ]);
    wait_for_entry(dir.path(), ".out.gguf.");
    child.kill().unwrap();
    child.wait().unwrap();
    // Another writer's temporary file, still open and locked, is left alone.
    let busy = dir.path().join(".out.gguf.Busy01.tmp");
    let held = std::fs::File::create(&busy).unwrap();
    held.lock().unwrap();
    assert_ok(&run(&[
        "synth",
        "--like",
        arg(&model),
        "--quiet",
        "--out",
        arg(&out),
    ]));
    let mut names = entries(dir.path());
    names.sort();
    assert_eq!(names, [".out.gguf.Busy01.tmp", "model.gguf", "out.gguf"]);
}

/// `head` writes its directory whole: `--force` replaces an earlier `head` output, never a folder holding its
/// model or ids, nor another command's output.
#[test]
fn head_never_removes_its_inputs_nor_another_output() {
    let dir = tempfile::tempdir().unwrap();
    let (model, bytes) = model_in(dir.path());
    let ids = dir.path().join("ids.npy");
    let ids_bytes = write_ids(&ids, 24);
    let head = |out: &Path, ids: &Path| {
        let args = vec![
            "head",
            arg(&model),
            "--layer",
            "1",
            "--head",
            "0",
            "--ids",
            arg(ids),
            "--out",
            arg(out),
            "--force",
        ];
        run(&args)
    };
    // The folder holding the model and the ids.
    assert_refused(&head(dir.path(), &ids), 2, &[INPUT_INSIDE]);
    assert_eq!(std::fs::read(&model).unwrap(), bytes);
    assert_eq!(std::fs::read(&ids).unwrap(), ids_bytes);
    // Its own earlier output is replaced; a reference directory is not.
    let elsewhere = tempfile::tempdir().unwrap();
    let out = elsewhere.path().join("head");
    assert_ok(&head(&out, &ids));
    assert_ok(&head(&out, &ids));
    assert!(out.join("head.json").is_file());
    let reference_dir = elsewhere.path().join("ref");
    assert_ok(&run(&reference(&model, &reference_dir, false)));
    assert_refused(
        &head(&reference_dir, &ids),
        2,
        &["is not an output of this command"],
    );
    assert!(reference_dir.join("meta.json").is_file());
}
