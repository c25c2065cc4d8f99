//! Helpers of the sharded-scan tests: check that a merged scan directory is the directory of an unsharded run
//! (the CLI runners they use are [`crate::cli::ropescope`] and [`crate::cli::ok`]).

use crate::cli::ok;
use std::path::Path;

/// The fields of `meta.json` that belong to one run (its time and command line), not to what was measured.
pub const RUN_FIELDS: [&str; 3] = ["elapsed_seconds", "step_seconds", "command"];

fn meta_without_run_fields(dir: &Path) -> serde_json::Value {
    let text = std::fs::read(dir.join("meta.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&text).unwrap();
    for f in RUN_FIELDS {
        v.as_object_mut().unwrap().remove(f);
    }
    v
}

/// Asserts that `merged` is the scan directory `one` is: the same file names (those of `tables/` too); every
/// file but `meta.json` and `report.html` equal byte for byte; `meta.json` equal but for [`RUN_FIELDS`]; and, once `merged` is given
/// `one`'s `meta.json`, `ropescope report` writing the same `report.html` bytes in both.
pub fn assert_same_scan(one: &Path, merged: &Path) {
    let names = |d: &Path| {
        let mut v: Vec<String> = Vec::new();
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            match e.file_type().unwrap().is_dir() {
                true => v.extend(
                    std::fs::read_dir(e.path())
                        .unwrap()
                        .map(|f| format!("{name}/{}", f.unwrap().file_name().to_string_lossy())),
                ),
                false => v.push(name),
            }
        }
        v.sort();
        v
    };
    assert_eq!(names(one), names(merged));
    for name in names(one) {
        if name == "meta.json" || name == "report.html" {
            continue;
        }
        let (a, b) = (
            std::fs::read(one.join(&name)).unwrap(),
            std::fs::read(merged.join(&name)).unwrap(),
        );
        assert!(
            a == b,
            "{name} differs between {} and {}",
            one.display(),
            merged.display()
        );
    }
    assert_eq!(
        meta_without_run_fields(one),
        meta_without_run_fields(merged)
    );
    std::fs::copy(one.join("meta.json"), merged.join("meta.json")).unwrap();
    for d in [one, merged] {
        ok(&["report", d.to_str().unwrap()]);
    }
    assert!(
        std::fs::read(one.join("report.html")).unwrap()
            == std::fs::read(merged.join("report.html")).unwrap(),
        "report.html differs"
    );
}
