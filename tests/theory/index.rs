//! Keeps `theory/` and the tests that check it from drifting apart.
//!
//! Convention: every claim document `theory/<claim>.md` has a paragraph beginning `**Tests:**` followed by
//! backticked references `` `tests/<area>/<module>.rs::<test_fn>` `` (the paragraph may wrap over several lines):
//! the source file of a module of the test binary `tests/<area>/`. This file asserts that
//! 1. every document (except `README.md`) has such a line, and every reference names an existing file containing a
//!    `#[test] fn <test_fn>` (plain or inside a `proptest!` block);
//! 2. every `#[test]` function in the modules of `tests/theory/` and `tests/train/` is referenced by some document
//!    (this file, the checker itself, excepted);
//! 3. every document is listed in `theory/README.md`;
//! 4. no referenced test is `#[ignore]`d, unless the reason given starts with `slow:` (a slow test runs in the full
//!    run, `cargo test -- --include-ignored`; any other ignored test checks nothing);
//! 5. the status of every row of `theory/README.md` that links a document states the same kind of check (its first
//!    two words, e.g. `checked numerically`, `checked statistically`) as the document's `**Status.**` paragraph.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The marker that starts a document's list of tests.
const TESTS_MARKER: &str = "**Tests:**";
/// Test binaries (folders of `tests/`) whose modules' tests must all be referenced.
const CHECKED_BINARIES: [&str; 2] = ["theory", "train"];
/// This checker, whose own tests are not claims.
const CHECKER: &str = "tests/theory/index.rs";
/// How the reason of an `#[ignore]` that only marks a slow test starts.
const SLOW: &str = "#[ignore = \"slow:";

/// The `(file, function)` references of one document's `**Tests:**` paragraph (the marker line and the lines
/// after it up to the next blank line), or `None` without such a paragraph.
fn test_references(doc: &str) -> Option<Vec<(String, String)>> {
    let start = doc
        .lines()
        .position(|l| l.trim_start().starts_with(TESTS_MARKER))?;
    let paragraph: Vec<&str> = doc
        .lines()
        .skip(start)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    Some(
        paragraph
            .join(" ")
            .split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|span| span.split_once("::"))
            .map(|(file, function)| (file.trim().to_string(), function.trim().to_string()))
            .collect(),
    )
}

/// Names of the functions in `source` marked `#[test]` (attributes, comments and blank lines may sit between).
fn test_functions(source: &str) -> BTreeSet<String> {
    test_functions_flagged(source).0
}

/// The `#[test]` functions of `source`, and those of them also marked `#[ignore]` for another reason than being
/// slow ([`SLOW`]).
fn test_functions_flagged(source: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut names = BTreeSet::new();
    let mut ignored = BTreeSet::new();
    let mut pending = false;
    let mut ignore = false;
    for line in source.lines().map(str::trim) {
        if line.starts_with("#[test]") {
            pending = true;
        } else if pending && line.starts_with("#[ignore") {
            ignore = !line.starts_with(SLOW);
        } else if pending && !(line.is_empty() || line.starts_with("#[") || line.starts_with("//"))
        {
            let rest = line.trim_start_matches("pub ").trim_start_matches("async ");
            if let Some(signature) = rest.strip_prefix("fn ") {
                let name: String = signature
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if ignore {
                    ignored.insert(name.clone());
                }
                names.insert(name);
            }
            pending = false;
            ignore = false;
        }
    }
    (names, ignored)
}

/// The marker that starts a document's status.
const STATUS_MARKER: &str = "**Status.**";

/// The kind of check a status states: its first two words, lower-case, without punctuation (`checked exactly`).
fn status_kind(status: &str) -> String {
    status
        .split_whitespace()
        .take(2)
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `(document, status)` of every row of the index that links a document: the status is the cell before the last
/// (a claim's own cell may hold `|` inside code, so cells are counted from the end).
fn index_statuses(readme: &str) -> Vec<(String, String)> {
    readme
        .lines()
        .filter(|l| l.starts_with('|'))
        .filter_map(|row| {
            let cells: Vec<&str> = row.trim_end().trim_end_matches('|').split('|').collect();
            let [.., status, document] = cells[..] else {
                return None;
            };
            let name = document.split("](").nth(1)?.split(')').next()?;
            name.ends_with(".md")
                .then(|| (name.to_string(), status.trim().to_string()))
        })
        .collect()
}

/// Every drift between `root/theory/` and `root/tests/`, one message each.
fn drift(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let theory = root.join("theory");
    let readme = fs::read_to_string(theory.join("README.md")).unwrap_or_else(|_| {
        problems.push("theory/README.md is missing".to_string());
        String::new()
    });
    let mut docs: Vec<String> = fs::read_dir(&theory)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| name.ends_with(".md") && name != "README.md")
                .collect()
        })
        .unwrap_or_default();
    docs.sort();

    let mut referenced = BTreeSet::new();
    for name in &docs {
        if !readme.contains(name.as_str()) {
            problems.push(format!("theory/{name} is not listed in theory/README.md"));
        }
        let text = fs::read_to_string(theory.join(name)).unwrap_or_default();
        let Some(refs) = test_references(&text) else {
            problems.push(format!("theory/{name} has no {TESTS_MARKER} line"));
            continue;
        };
        if refs.is_empty() {
            problems.push(format!(
                "theory/{name}: {TESTS_MARKER} names no `tests/<area>/<module>.rs::<test>`"
            ));
        }
        for (file, function) in refs {
            let source = fs::read_to_string(root.join(&file)).ok();
            if !file.starts_with("tests/") || !file.ends_with(".rs") || source.is_none() {
                problems.push(format!("theory/{name}: no test file {file}"));
            } else {
                let (tests, ignored) = test_functions_flagged(&source.unwrap_or_default());
                if !tests.contains(&function) {
                    problems.push(format!(
                        "theory/{name}: {file} has no #[test] fn {function}"
                    ));
                } else if ignored.contains(&function) {
                    problems.push(format!("theory/{name}: {file}::{function} is #[ignore]d"));
                }
            }
            referenced.insert((file, function));
        }
    }

    for (name, status) in index_statuses(&readme) {
        let text = fs::read_to_string(theory.join(&name)).unwrap_or_default();
        let Some(own) = text.lines().find_map(|l| l.strip_prefix(STATUS_MARKER)) else {
            problems.push(format!("theory/{name} has no {STATUS_MARKER} paragraph"));
            continue;
        };
        if status_kind(own) != status_kind(&status) {
            problems.push(format!(
                "theory/{name}: the document says \"{}\", theory/README.md \"{}\"",
                status_kind(own),
                status_kind(&status)
            ));
        }
    }

    let mut test_files: Vec<String> = CHECKED_BINARIES
        .iter()
        .flat_map(|binary| {
            fs::read_dir(root.join("tests").join(binary))
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok()?.file_name().into_string().ok())
                        .filter(|n| n.ends_with(".rs") && n != "main.rs")
                        .map(|n| format!("tests/{binary}/{n}"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .filter(|path| path != CHECKER)
        .collect();
    test_files.sort();
    for file in test_files {
        let source = fs::read_to_string(root.join(&file)).unwrap_or_default();
        for function in test_functions(&source) {
            if !referenced.contains(&(file.clone(), function.clone())) {
                problems.push(format!(
                    "{file}::{function} is not named by any theory document"
                ));
            }
        }
    }
    problems
}

/// The repository's `theory/` and theory tests are in step.
#[test]
fn theory_documents_and_tests_are_in_step() {
    let problems = drift(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert!(
        problems.is_empty(),
        "theory/ and tests/ drifted:\n{}",
        problems.join("\n")
    );
}

/// The checker itself can fail: in a scratch tree with one drift of each kind it reports every one of them (a
/// citation of the former one-file-per-binary layout and a status the index states otherwise among them), it
/// finds tests inside `proptest!` blocks, it accepts a cited test ignored only for being slow, and it reads the
/// status cell of a row whose claim holds `|` in code.
#[test]
fn drift_check_reports_each_kind_of_drift() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("theory")).unwrap();
    fs::create_dir_all(root.join("tests/theory")).unwrap();
    fs::create_dir_all(root.join("tests/train")).unwrap();
    let write = |path: &str, text: &str| fs::write(root.join(path), text).unwrap();
    write(
        "theory/README.md",
        "| claim `|x|` | src | checked exactly | [a](a.md) |\n| claim | src | open: why | — |\n\
         | claim | src | checked numerically | [d](d.md) |\n| [b](b.md) |\n",
    );
    write(
        "theory/a.md",
        "# A\n**Status.** Checked exactly.\n\n**Tests:** `tests/theory/x.rs::checked`, `tests/theory/x.rs::missing`, \
         `tests/theory/y.rs::gone`,\n`tests/theory_x.rs::checked`\n",
    );
    write("theory/b.md", "# B without a tests line\n");
    write(
        "theory/d.md",
        "**Status.** Checked statistically.\n\n**Tests:** `tests/theory/x.rs::checked`\n",
    );
    write(
        "theory/c.md",
        "**Tests:** `tests/train/z.rs::trained`, `tests/train/z.rs::slow`\n",
    );
    write("tests/theory/main.rs", "mod x;\n");
    write(
        "tests/theory/x.rs",
        "proptest! {\n    #[test]\n    /// doc\n    fn checked(x in 0..1) {}\n}\n#[test]\nfn orphan() {}\n",
    );
    write(
        "tests/train/z.rs",
        "#[test]\n#[ignore]\nfn trained() {}\n#[test]\n#[ignore = \"slow: trains\"]\nfn slow() {}\n",
    );
    let problems = drift(root);
    let expected = [
        "theory/a.md: tests/theory/x.rs has no #[test] fn missing",
        "theory/a.md: no test file tests/theory/y.rs",
        "theory/a.md: no test file tests/theory_x.rs",
        "theory/b.md has no **Tests:** line",
        "theory/c.md is not listed in theory/README.md",
        "theory/c.md: tests/train/z.rs::trained is #[ignore]d",
        "tests/theory/x.rs::orphan is not named by any theory document",
        "theory/d.md: the document says \"checked statistically\", theory/README.md \"checked numerically\"",
        "theory/b.md has no **Status.** paragraph",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for message in expected {
        assert!(
            problems.iter().any(|p| p == message),
            "missing {message:?} in {problems:#?}"
        );
    }
}
