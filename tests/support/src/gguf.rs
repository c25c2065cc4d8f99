//! GGUF files built for a test from another one.

use ropescope::gguf::{GgufFile, GgufWriter};
use std::path::Path;

/// Writes to `dest` a copy of the GGUF file at `src` (its metadata and tensors, in order) after `edit` has
/// changed them: the way tests build a file that breaks one rule.
pub fn rewrite_gguf(src: &Path, edit: impl FnOnce(&mut GgufWriter), dest: &Path) {
    let file = GgufFile::open(src).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in file.metadata() {
        w = w.kv(k, v.clone());
    }
    for t in file.tensors() {
        w = w.tensor_raw(&t.name, &t.dims, t.ty, file.tensor_bytes(t).to_vec());
    }
    edit(&mut w);
    std::fs::write(dest, w.to_bytes()).unwrap();
}
