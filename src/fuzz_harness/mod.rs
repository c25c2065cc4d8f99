//! Fuzzing entry points: one function per parser of untrusted input, each taking raw bytes and returning the
//! parser's own result. The cargo-fuzz targets in `fuzz/` and the in-process fuzz test
//! (`tests/fuzz_inprocess.rs`) drive the same functions, so a crash found by either reproduces in the other.
//!
//! A harness must never panic, hang or allocate more than a small multiple of its input: an `Err` is the only
//! acceptable way to refuse input. [`Target::run`] also checks that every error it sees has a message.

pub mod mutate;
pub mod seeds;

use crate::error::{Error, Result};
use crate::export::npy;
use crate::gguf::{GgufFile, Hparams, Value};
use crate::model::{arch, Model};
use crate::scan::format::{Meta, Summary};
use crate::tokenizer::Tokenizer;

/// Tensors up to this many elements are dequantized by [`Target::GgufDirectory`] (larger ones are only sliced),
/// which keeps one execution fast while still running every dequantizer on hostile blocks.
pub const MAX_DEQUANTIZED_ELEMENTS: u64 = 1 << 16;

/// Text the tokenizer harness encodes: ASCII words, digits, whitespace runs, a chat marker and multi-byte
/// characters, so every pre-tokenizer branch and the special-token matcher run.
pub const TOKENIZER_TEXT: &str = "Hello world!  <|im_start|>user 12345\n\tcafé ☃ 日本 <bos><eos>";

/// One parser of untrusted input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `GgufFile::from_bytes`: header, metadata and tensor directory.
    GgufFile,
    /// A parsed file's metadata values and tensor directory as consumers read them: typed accessors, tensor
    /// bytes, dequantization of small tensors, hyper-parameters and the list of keys not understood.
    GgufDirectory,
    /// Configuration resolution (`arch::resolve`) and `Model::<f32>::load` on the result.
    Resolve,
    /// `Tokenizer::from_gguf`, then encoding and decoding a fixed text.
    Tokenizer,
    /// The `.npy` reader (`npy::Array::from_bytes`) and its conversions.
    Npy,
    /// The JSON files of a scan directory (`meta.json`, `summary.json`, `ablation.json`).
    ScanJson,
}

impl Target {
    /// Every target, in a fixed order.
    pub const ALL: [Target; 6] = [
        Target::GgufFile,
        Target::GgufDirectory,
        Target::Resolve,
        Target::Tokenizer,
        Target::Npy,
        Target::ScanJson,
    ];

    /// The target's name, as used for the cargo-fuzz target and its corpus directory.
    pub fn name(self) -> &'static str {
        match self {
            Target::GgufFile => "gguf_file",
            Target::GgufDirectory => "gguf_directory",
            Target::Resolve => "resolve",
            Target::Tokenizer => "tokenizer",
            Target::Npy => "npy",
            Target::ScanJson => "scan_json",
        }
    }

    /// Whether the target's input is a GGUF file (and the GGUF-aware mutations apply).
    pub fn is_gguf(self) -> bool {
        matches!(
            self,
            Target::GgufFile | Target::GgufDirectory | Target::Resolve | Target::Tokenizer
        )
    }

    /// Runs the target's parser on `data`. Panics only when a parser breaks its contract: an error without a
    /// message.
    pub fn run(self, data: &[u8]) -> Result<()> {
        let result = match self {
            Target::GgufFile => GgufFile::from_bytes(data.to_vec()).map(drop),
            Target::GgufDirectory => gguf_directory(data),
            Target::Resolve => resolve(data),
            Target::Tokenizer => tokenizer(data),
            Target::Npy => npy_array(data),
            Target::ScanJson => scan_json(data),
        };
        clean(result)
    }
}

/// Checks that an error, if any, says something.
fn clean<T>(result: Result<T>) -> Result<T> {
    if let Err(e) = &result {
        assert!(
            !e.to_string().trim().is_empty(),
            "an error without a message: {e:?}"
        );
    }
    result
}

/// Reads every metadata value and tensor of a parsed file the ways the rest of the crate does, after reading its
/// header alone as `inspect` and `tokenize` do.
fn gguf_directory(data: &[u8]) -> Result<()> {
    header_only(data);
    let file = GgufFile::from_bytes(data.to_vec())?;
    for (key, value) in file.metadata() {
        assert!(std::ptr::eq(file.get(key).expect("a listed key"), value));
        let _ = (
            value.as_u64(),
            value.as_f64(),
            value.as_str(),
            value.type_id(),
        );
        if let Value::Array(a) = value {
            let _ = (a.len(), a.elem_type_id(), a.to_i64s(), a.to_bools());
        }
        let _ = clean(file.get_usize(key));
        let _ = clean(file.get_positive_f64(key));
        let _ = clean(file.get_bools(key));
    }
    for info in file.tensors() {
        let found = file.tensor(&info.name)?;
        let bytes = file.tensor_bytes(found);
        let shared = file.tensor_data(found);
        assert_eq!(shared.bytes(), bytes);
        let _ = shared.slice(bytes.len() / 2..bytes.len());
        if info.n_elements <= MAX_DEQUANTIZED_ELEMENTS {
            let _ = clean(file.dequantize_f32(&info.name));
        }
    }
    let _ = clean(Hparams::from_gguf(&file));
    let _ = arch::keys::not_understood(&file);
    Ok(())
}

/// The header of a file whose tensor data may be incomplete: the counts of complete and incomplete tensors add up,
/// complete tensors read, incomplete ones are refused, and a model is loaded only from a whole file.
fn header_only(data: &[u8]) {
    let Ok(file) = clean(GgufFile::header_from_bytes(data.to_vec())) else {
        return;
    };
    let extent = file.data_extent();
    assert_eq!(
        extent.complete_tensors + extent.incomplete_tensors,
        file.tensors().len()
    );
    assert_eq!(extent.is_whole(), clean(file.require_whole_data()).is_ok());
    assert_eq!(extent.is_whole(), extent.missing_bytes() == 0);
    for info in file.tensors() {
        if file.is_complete(info) {
            let _ = file.tensor_bytes(info);
        } else {
            assert!(clean(file.dequantize_f32(&info.name)).is_err());
        }
    }
    let _ = clean(arch::resolve_unchecked(&file));
    if !extent.is_whole() {
        assert!(clean(Model::<f32>::load(&file)).is_err());
    }
}

/// Resolves the configuration of a parsed file, then loads the model on it.
fn resolve(data: &[u8]) -> Result<()> {
    let file = GgufFile::from_bytes(data.to_vec())?;
    let _ = clean(arch::resolve_unchecked(&file));
    arch::resolve(&file)?;
    Model::<f32>::load(&file).map(drop)
}

/// Builds the tokenizer a parsed file describes and round-trips [`TOKENIZER_TEXT`] through it.
fn tokenizer(data: &[u8]) -> Result<()> {
    let file = GgufFile::from_bytes(data.to_vec())?;
    let tok = Tokenizer::from_gguf(&file)?;
    for add_special in [false, true] {
        let ids = tok.encode(TOKENIZER_TEXT, add_special)?;
        tok.decode(&ids)?;
    }
    let _ = (tok.bos_id(), tok.eos_id(), tok.token(0));
    if tok.vocab_size() <= u32::MAX as usize {
        assert!(
            clean(tok.decode(&[u32::MAX])).is_err(),
            "decoded an id outside the vocabulary"
        );
    }
    Ok(())
}

/// Reads a `.npy` array and converts it both ways.
fn npy_array(data: &[u8]) -> Result<()> {
    let a = npy::Array::from_bytes(data)?;
    let values = a.to_f64();
    assert_eq!(values.len(), a.len());
    assert_eq!(a.shape.iter().product::<usize>(), a.len());
    if let Some(ints) = a.to_i64() {
        assert_eq!(ints.len(), a.len());
    }
    Ok(())
}

/// Parses the bytes as each JSON file a scan directory holds; succeeds when any of them accepts it.
fn scan_json(data: &[u8]) -> Result<()> {
    let bad = |e: serde_json::Error| Error::BadData(format!("not a valid scan file ({e})"));
    let meta = serde_json::from_slice::<Meta>(data).map(drop).map_err(bad);
    let summary = serde_json::from_slice::<Summary>(data)
        .map(drop)
        .map_err(bad);
    let any = serde_json::from_slice::<serde_json::Value>(data)
        .map(drop)
        .map_err(bad);
    meta.or(summary).or(any)
}
