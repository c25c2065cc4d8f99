//! The cached real models and the prompt the model benches share.

use std::path::PathBuf;

/// Tokens per forward pass.
pub const TOKENS: usize = 512;

/// `(bench name, file name)` of the two real models `fixtures/models.sh` caches.
pub const MODELS: [(&str, &str); 2] = [
    ("smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("gemma3-270m", "gemma-3-270m-q4_k_m.gguf"),
];

/// The model cache of `fixtures/models.sh`.
pub fn model_dir() -> PathBuf {
    match std::env::var_os("ROPESCOPE_CACHE") {
        Some(dir) => PathBuf::from(dir).join("models"),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/ropescope/models"),
    }
}

/// The path of model `file_name`, or `None` after printing a note when it is absent.
pub fn cached(name: &str, file_name: &str) -> Option<PathBuf> {
    let path = model_dir().join(file_name);
    if path.is_file() {
        Some(path)
    } else {
        println!(
            "skipping {name}: {} is absent (fixtures/models.sh downloads it)",
            path.display()
        );
        None
    }
}

/// `n` deterministic in-vocabulary token ids (a fixed stride through the vocabulary; the forward pass costs the
/// same for any ids).
pub fn token_ids(vocab: usize, n: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 17) % vocab) as u32).collect()
}
