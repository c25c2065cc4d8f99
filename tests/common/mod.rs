//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test crate uses its own subset

use std::path::PathBuf;

/// File name of the cached SmolLM2-135M-Instruct Q4_1 model.
pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// File name of the cached Gemma 3 270M Q4_K_M model.
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";
/// File name of the cached first 95 MB of DeepSeek-R1-Distill-Qwen-7B Q4_K_M (architecture qwen2): whole header,
/// incomplete tensor data.
pub const QWEN7B_HEAD: &str = "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.head.gguf";

/// The project's cache outside the clone: `$ROPESCOPE_CACHE`, default `~/.cache/ropescope`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ROPESCOPE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/ropescope")
        })
}

/// Path of a real model in the cache `fixtures/models.sh` fills (`$ROPESCOPE_CACHE/models`, default
/// `~/.cache/ropescope/models`). Panics with the command to run when the model is not there.
pub fn model(file: &str) -> PathBuf {
    let path = cache_dir().join("models").join(file);
    assert!(
        path.is_file(),
        "{} is missing: run fixtures/models.sh first",
        path.display()
    );
    path
}

/// Path of a file under the repository's `fixtures/` folder.
pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// Writes to `dest` a copy of the GGUF file at `src` (its metadata and tensors, in order) after `edit` has
/// changed them: the way tests build a file that breaks one rule.
pub fn rewrite_gguf(
    src: &std::path::Path,
    edit: impl FnOnce(&mut ropescope::gguf::GgufWriter),
    dest: &std::path::Path,
) {
    let file = ropescope::gguf::GgufFile::open(src).unwrap();
    let mut w = ropescope::gguf::GgufWriter::new();
    for (k, v) in file.metadata() {
        w = w.kv(k, v.clone());
    }
    for t in file.tensors() {
        w = w.tensor_raw(&t.name, &t.dims, t.ty, file.tensor_bytes(t).to_vec());
    }
    edit(&mut w);
    std::fs::write(dest, w.to_bytes()).unwrap();
}
