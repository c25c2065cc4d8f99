//! The exported notebook: valid nbformat 4, every file it loads exists, and the output is deterministic.

use ropescope::export::notebook;
use ropescope_test_support::report::example;
use serde_json::Value;
use std::path::Path;

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Every `SCAN / "name"` of the code cells, and the `SCAN = Path(...)` value.
fn loads(nb: &Value) -> (String, Vec<String>) {
    let mut scan = String::new();
    let mut files = Vec::new();
    for cell in nb["cells"].as_array().unwrap() {
        let text: String = cell["source"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap())
            .collect();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("SCAN = Path(") {
                scan = serde_json::from_str(rest.trim_end_matches(')')).unwrap();
            }
        }
        for part in text.split("SCAN / \"").skip(1) {
            files.push(part[..part.find('"').unwrap()].to_string());
        }
        for part in text.split("load(\"").skip(1) {
            files.push(part[..part.find('"').unwrap()].to_string());
        }
    }
    (scan, files)
}

#[test]
fn notebook_is_valid_nbformat_4() {
    let dir = example();
    let path = notebook::write(dir.path(), None).unwrap();
    assert_eq!(path, dir.path().join(notebook::NOTEBOOK_FILE));
    let nb = read(&path);
    assert_eq!(nb["nbformat"], 4);
    assert!(nb["nbformat_minor"].as_u64().is_some());
    assert!(nb["metadata"]["kernelspec"]["name"].is_string());
    let cells = nb["cells"].as_array().unwrap();
    assert!(cells.len() > 10);
    let mut ids = std::collections::BTreeSet::new();
    for c in cells {
        let kind = c["cell_type"].as_str().unwrap();
        assert!(kind == "markdown" || kind == "code");
        assert!(c["metadata"].is_object());
        assert!(c["source"].as_array().unwrap().iter().all(Value::is_string));
        assert!(
            ids.insert(c["id"].as_str().unwrap().to_string()),
            "cell ids unique"
        );
        if kind == "code" {
            assert_eq!(c["outputs"], serde_json::json!([]));
            assert!(c["execution_count"].is_null());
        } else {
            assert!(c.get("outputs").is_none());
        }
    }
}

#[test]
fn every_loaded_file_exists_relative_to_the_notebook() {
    let dir = example();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = elsewhere.path().join("nb/scan.ipynb");
    for (path, folder) in [
        (
            notebook::write(dir.path(), None).unwrap(),
            dir.path().to_path_buf(),
        ),
        (
            notebook::write(dir.path(), Some(&out)).unwrap(),
            out.parent().unwrap().to_path_buf(),
        ),
    ] {
        let (scan, files) = loads(&read(&path));
        assert!(
            !Path::new(&scan).is_absolute(),
            "relative scan path, got {scan}"
        );
        assert!(files.len() >= 10, "{files:?}");
        for f in files {
            assert!(
                folder.join(&scan).join(&f).is_file(),
                "{f} not found from {}",
                path.display()
            );
        }
    }
}

#[test]
fn notebook_only_loads_present_files_and_is_deterministic() {
    let dir = example();
    std::fs::remove_file(dir.path().join("attention_map_random.npy")).unwrap();
    std::fs::remove_file(dir.path().join("fourier_amplitude_natural.npy")).unwrap();
    let a = std::fs::read(notebook::write(dir.path(), None).unwrap()).unwrap();
    let b = std::fs::read(notebook::write(dir.path(), None).unwrap()).unwrap();
    assert_eq!(a, b);
    let (_, files) = loads(&serde_json::from_slice(&a).unwrap());
    assert!(!files
        .iter()
        .any(|f| f == "attention_map_random.npy" || f.starts_with("fourier")));
    assert!(files.iter().any(|f| f == "attention_map_natural.npy"));
}
