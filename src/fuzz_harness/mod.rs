//! Fuzzing entry points: one function per parser of untrusted input, each taking raw bytes and returning the
//! parser's own result. The cargo-fuzz targets in `fuzz/` and the in-process fuzz test
//! (`tests/fuzz_inprocess.rs`) drive the same functions, so a crash found by either reproduces in the other.
//!
//! A harness must never panic, hang or allocate more than a small multiple of its input: an `Err` is the only
//! acceptable way to refuse input. [`Target::run`] also checks that every error it sees has a message.

pub mod mutate;
pub mod seeds;

use crate::error::{Error, Result};
use crate::export::{duoattention, minference, notebook};
use crate::gguf::{GgufFile, Hparams, Value};
use crate::io::{npy, token_ids};
use crate::model::{arch, Model};
use crate::reference::compare::Tolerance;
use crate::reference::diverge;
use crate::reference::write::ReferenceArray;
use crate::report::data::ScanData;
use crate::report::{compare_scans, html};
use crate::scan::format::{Meta, Prompts, Summary};
use crate::scan::shard::{self, ShardRecord};
use crate::tokenizer::Tokenizer;
use std::path::Path;

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
    /// A scan directory's JSON files read together as `report` and `merge` read them ([`scan_dir`]).
    ScanDir,
    /// A `.npy` file of token ids (`--ids`, `.npy` `--prompts`, a dump's `ids.npy`).
    NpyIds,
    /// The readers of another engine's dump directory that `diverge` compares against ([`diverge_dump`]).
    DivergeDump,
}

impl Target {
    /// Every target, in a fixed order.
    pub const ALL: [Target; 9] = [
        Target::GgufFile,
        Target::GgufDirectory,
        Target::Resolve,
        Target::Tokenizer,
        Target::Npy,
        Target::ScanJson,
        Target::ScanDir,
        Target::NpyIds,
        Target::DivergeDump,
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
            Target::ScanDir => "scan_dir",
            Target::NpyIds => "npy_ids",
            Target::DivergeDump => "diverge_dump",
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
            Target::ScanDir => scan_dir(data),
            Target::NpyIds => npy::Array::from_bytes(data)
                .and_then(|a| token_ids::from_array(&a, "ids.npy"))
                .map(drop),
            Target::DivergeDump => diverge_dump(data),
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
    let bad =
        |e: serde_json::Error| Error::bad_data("input", format!("not a valid scan file ({e})"));
    let meta = serde_json::from_slice::<Meta>(data).map(drop).map_err(bad);
    let summary = serde_json::from_slice::<Summary>(data)
        .map(drop)
        .map_err(bad);
    let any = serde_json::from_slice::<serde_json::Value>(data)
        .map(drop)
        .map_err(bad);
    meta.or(summary).or(any)
}

/// What separates the files of a multi-file input (a line no JSON, `.npy` or name list of the seeds holds).
pub const PART_SEPARATOR: &[u8] = b"\n--ropescope-part--\n";

/// The files of a multi-file input: `data` cut at [`PART_SEPARATOR`] into `N` parts (the last one takes the
/// rest), the missing ones empty.
pub fn parts<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out = [&[][..]; N];
    let mut rest = data;
    for (i, slot) in out.iter_mut().enumerate() {
        let at = (i + 1 < N)
            .then(|| {
                rest.windows(PART_SEPARATOR.len())
                    .position(|w| w == PART_SEPARATOR)
            })
            .flatten();
        match at {
            Some(at) => {
                *slot = &rest[..at];
                rest = &rest[at + PART_SEPARATOR.len()..];
            }
            None => {
                *slot = rest;
                rest = &[];
            }
        }
    }
    out
}

/// Parses one JSON file of a multi-file input, naming it in the error.
fn json<T: serde::de::DeserializeOwned>(bytes: &[u8], name: &str) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::bad_data(name, format!("not valid ({e})")))
}

/// A scan directory: the parts ([`parts`]) `meta.json`, `summary.json`, `ablation.json`, `shard.json` and
/// `prompts.json` (an empty part is an absent file). The first three are read as `report` reads them
/// (`ScanData::from_json`) and, when accepted, drawn by every reader: the page, the notebook, the
/// comparison, the MInference and DuoAttention patterns. A `shard.json` is checked with its `prompts.json` as
/// `merge` checks them (`scan::shard::check_shard`). Succeeds when both are accepted.
fn scan_dir(data: &[u8]) -> Result<()> {
    let [meta, summary, ablation, shard_json, prompts] = parts::<5>(data);
    let dir = Path::new("scan");
    let shard = if shard_json.is_empty() {
        Ok(())
    } else {
        json::<ShardRecord>(shard_json, "shard.json").and_then(|record| {
            let prompts: Prompts = json(prompts, "prompts.json")?;
            shard::check_shard(&record, &prompts, dir)
        })
    };
    let ablation = (!ablation.is_empty())
        .then(|| json(ablation, "ablation.json"))
        .transpose()?;
    let data = ScanData::from_json(
        dir,
        json::<Meta>(meta, "meta.json")?,
        json::<Summary>(summary, "summary.json")?,
        ablation,
    )?;
    let _ = clean(minference::patterns(&data));
    let _ = clean(duoattention::full_attention_heads(&data));
    let _ = notebook::build(&data, "scan");
    let _ = html::render(&data);
    let _ = compare_scans::render(&compare_scans::compare(std::slice::from_ref(&data)));
    clean(shard)
}

/// Tokens of the pass a [`Target::DivergeDump`] input is compared with.
pub const DUMP_IDS: [u32; 16] = [1, 5, 9, 2, 6, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4];
/// Shape `[heads, rows, cols]` of the tensor a [`Target::DivergeDump`] input is compared with.
pub const DUMP_SHAPE: [usize; 3] = [2, 4, 4];

/// Another engine's dump directory, as `diverge` reads it: the parts ([`parts`]) a list of file names (one a
/// line), `meta.json`, `ids.npy` and one tensor `q_L0.npy`. The names are sorted into the layout, the rows read
/// for a pass of [`DUMP_IDS`], the ids checked against them, and the tensor compared with one of
/// [`DUMP_SHAPE`]. Succeeds when every part is accepted.
fn diverge_dump(data: &[u8]) -> Result<()> {
    let [names, meta, ids, tensor] = parts::<4>(data);
    let names: Vec<String> = String::from_utf8_lossy(names)
        .lines()
        .map(String::from)
        .collect();
    let n_names = names.len();
    let listing = diverge::sort_names(names);
    assert!(listing.tensors.len() + listing.ignored.len() <= n_names);
    let rows = clean(diverge::rows_of(meta, DUMP_IDS.len(), "meta.json"));
    let ids =
        npy::Array::from_bytes(ids).and_then(|a| diverge::check_ids(&a, &DUMP_IDS, "ids.npy"));
    let ours = ReferenceArray {
        name: "q_L0".into(),
        shape: DUMP_SHAPE.to_vec(),
        data: (0..DUMP_SHAPE.iter().product::<usize>())
            .map(|i| i as f64 / 7.0)
            .collect(),
    };
    let tolerance = Tolerance {
        nmse: Some(1e-6),
        max_abs: None,
    };
    let row0 = rows.as_ref().map_or(0, |r| r.start);
    let tensor = npy::Array::from_bytes(tensor).and_then(|dump| {
        diverge::compare_tensor(Path::new("dump"), "q_L0.npy", &dump, &ours, row0, tolerance)
    });
    rows?;
    clean(ids)?;
    clean(tensor).map(drop)
}
