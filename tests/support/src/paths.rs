//! Where the tests find their files: the repository, its `fixtures/` folder and the cache of real models
//! `fixtures/models.sh` fills.

use std::path::{Path, PathBuf};

/// File name of the cached SmolLM2-135M-Instruct Q4_1 model.
pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// File name of the cached Gemma 3 270M Q4_K_M model.
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";
/// File name of the cached first 95 MB of DeepSeek-R1-Distill-Qwen-7B Q4_K_M (architecture qwen2): whole header,
/// incomplete tensor data.
pub const QWEN7B_HEAD: &str = "DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.head.gguf";

/// The repository's root: the `ropescope` package's folder (this crate is `tests/support/` inside it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("tests/support/ sits two folders below the repository's root")
        .to_path_buf()
}

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
    repo_root().join("fixtures").join(rel)
}
