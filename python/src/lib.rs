//! The native module of the `ropescope` Python package (`ropescope._native`): the engine's model, forward pass,
//! reference writer, comparison and conformance check, with the GIL released while they compute. The Python layer
//! (`ropescope/__init__.py`) checks and converts arguments and documents the API; this module trusts only what
//! the engine itself checks again.

use numpy::{Element, PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use ropescope::conformance::budget::Precision as Budget;
use ropescope::conformance::stages::check_dump;
use ropescope::gguf::GgufFile;
use ropescope::interrupt::with_check;
use ropescope::io::inputs::Inputs;
use ropescope::io::staged::{Record, StagedDir, Staging};
use ropescope::model::{packed_weight_bytes, Arithmetic, Model as Engine};
use ropescope::numeric::{Precision, Real};
use ropescope::reference::compare::{apply_override, compare_report, default_tolerances};
use ropescope::reference::write::{compute_reference, write_reference, ReferenceRequest};
use ropescope::scan::{Analysis, MergeRequest, NoProgress, ScanParams, ScanRequest, Shard};
use ropescope::tokenizer::Tokenizer;
use ropescope::{Error, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pyo3::create_exception!(
    ropescope,
    RopescopeError,
    PyValueError,
    "A failure the ropescope command line would report, with its message; `kind` names its class \
     (argument, bad_file, unsupported, resource, io, mismatch, internal)."
);

/// The Python exception for an engine error: the command line's message, and its kind as `kind`;
/// `KeyboardInterrupt` for a pass stopped by Ctrl-C.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    error_to_py(py, e.kind(), e.to_string())
}

/// The Python exception for a failure of kind `kind` with `message`.
fn error_to_py(py: Python<'_>, kind: ErrorKind, message: String) -> PyErr {
    let kind = match kind {
        ErrorKind::Interrupted => return PyKeyboardInterrupt::new_err("interrupted"),
        ErrorKind::Mismatch => "mismatch",
        ErrorKind::Argument => "argument",
        ErrorKind::BadFile => "bad_file",
        ErrorKind::Unsupported => "unsupported",
        ErrorKind::Resource => "resource",
        ErrorKind::Io => "io",
        ErrorKind::Internal => "internal",
    };
    let err = RopescopeError::new_err(message);
    match err.value(py).setattr("kind", kind) {
        Ok(()) => err,
        Err(setattr_failed) => setattr_failed,
    }
}

/// Whether Ctrl-C was pressed: runs the interpreter's pending signal handlers (a no-op off the main thread).
fn ctrl_c() -> bool {
    Python::attach(|py| py.check_signals().is_err())
}

/// Runs `f` with the GIL released and Ctrl-C checked before every layer of every pass
/// ([`ropescope::interrupt`]).
fn engine_call<R: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<R, Error> + Send,
) -> PyResult<R> {
    py.detach(|| with_check(ctrl_c, f))
        .map_err(|e| to_py(py, e))
}

/// The engine in either [`Precision`].
enum AnyEngine {
    F64(Engine<f64>),
    F32(Engine<f32>),
}

/// A loaded model (see `ropescope.Model`).
#[pyclass(frozen, module = "ropescope._native")]
struct Model {
    file: GgufFile,
    engine: AnyEngine,
    tokenizer: OnceLock<Tokenizer>,
}

/// The [`Precision`] named `name` (`f64` or `f32`).
fn precision_of(name: &str) -> Result<Precision, Error> {
    Precision::from_name(name)
        .ok_or_else(|| Error::parameter("precision", format!("'{name}' is not one of f64, f32")))
}

/// The [`Arithmetic`] named `name` (`exact` or `ggml`).
fn arithmetic_of(name: &str) -> Result<Arithmetic, Error> {
    Arithmetic::ALL
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| {
            Error::parameter("arithmetic", format!("'{name}' is not one of exact, ggml"))
        })
}

/// Loads `path` in `precision` (`f64` or `f32`) and `arithmetic` (`exact` or `ggml`).
fn load(path: &Path, precision: &str, arithmetic: &str) -> Result<(GgufFile, AnyEngine), Error> {
    let precision = precision_of(precision)?;
    let arithmetic = arithmetic_of(arithmetic)?;
    let file = GgufFile::open(path)?;
    let engine = match precision {
        Precision::F64 => AnyEngine::F64(Engine::load_with(&file, arithmetic)?),
        Precision::F32 => AnyEngine::F32(Engine::load_with(&file, arithmetic)?),
    };
    Ok((file, engine))
}

/// The requested arrays of one forward pass as `(name, ndarray)` pairs, each array owning the engine's buffer.
fn forward_in<'py, T: Real + Element>(
    py: Python<'py>,
    engine: &Engine<T>,
    ids: &[u32],
    req: &ReferenceRequest,
    kinds: &[String],
) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    let arrays = engine_call(py, || compute_reference(engine, ids, req, &kinds))?;
    arrays
        .into_iter()
        .map(|a| {
            let flat = PyArray1::from_vec(py, a.data);
            Ok((a.name, flat.reshape(a.shape)?.into_any()))
        })
        .collect()
}

#[pymethods]
impl Model {
    /// Loads a GGUF model in `precision` (`f64` or `f32`) and `arithmetic` (`exact` or `ggml`).
    #[new]
    fn new(py: Python<'_>, path: PathBuf, precision: &str, arithmetic: &str) -> PyResult<Self> {
        let (file, engine) = engine_call(py, || load(&path, precision, arithmetic))?;
        Ok(Self {
            file,
            engine,
            tokenizer: OnceLock::new(),
        })
    }

    /// The resolved configuration as JSON text.
    fn config_json(&self, py: Python<'_>) -> PyResult<String> {
        let config = match &self.engine {
            AnyEngine::F64(m) => &m.config,
            AnyEngine::F32(m) => &m.config,
        };
        serde_json::to_string(config).map_err(|e| to_py(py, Error::Internal(e.to_string())))
    }

    /// The ids of `text` under the model's own tokenizer (BOS/EOS as its metadata asks when `add_special`).
    fn tokenize(&self, py: Python<'_>, text: &str, add_special: bool) -> PyResult<Vec<u32>> {
        let tokenizer = match self.tokenizer.get() {
            Some(t) => t,
            None => {
                let built = Tokenizer::from_gguf(&self.file).map_err(|e| to_py(py, e))?;
                self.tokenizer.get_or_init(|| built)
            }
        };
        tokenizer
            .encode(text, add_special)
            .map_err(|e| to_py(py, e))
    }

    /// One forward pass: the arrays `kinds` (`logits` and reference kinds) for `layers` and query rows
    /// `rows.0..rows.1`, as `(name, ndarray)` pairs named as the reference files (`attn_L5`, `logits`).
    fn forward<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<u32>,
        layers: Vec<usize>,
        rows: (usize, usize),
        kinds: Vec<String>,
    ) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
        let req = ReferenceRequest {
            layers,
            rows: rows.0..rows.1,
            command: Vec::new(),
        };
        match &self.engine {
            AnyEngine::F64(m) => forward_in(py, m, &ids, &req, &kinds),
            AnyEngine::F32(m) => forward_in(py, m, &ids, &req, &kinds),
        }
    }
}

/// Writes the reference directory of one forward pass, as `ropescope reference` does.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn reference(
    py: Python<'_>,
    model: PathBuf,
    ids: Vec<u32>,
    out: PathBuf,
    layers: Option<Vec<usize>>,
    rows: Option<(usize, usize)>,
    precision: &str,
    arithmetic: &str,
    force: bool,
) -> PyResult<()> {
    let run = || -> Result<(), Error> {
        let staged = StagedDir::begin(
            &out,
            &Staging {
                force,
                inputs: &Inputs::new([&model]),
                records: &[Record::REFERENCE],
            },
        )?;
        let (_file, engine) = load(&model, precision, arithmetic)?;
        let n_layers = match &engine {
            AnyEngine::F64(m) => m.config.n_layers,
            AnyEngine::F32(m) => m.config.n_layers,
        };
        let req = ReferenceRequest {
            layers: layers.unwrap_or_else(|| (0..n_layers).collect()),
            rows: rows.map_or(0..ids.len(), |(a, b)| a..b),
            command: Vec::new(),
        };
        match &engine {
            AnyEngine::F64(m) => write_reference(m, &model, &ids, &req, staged.path())?,
            AnyEngine::F32(m) => write_reference(m, &model, &ids, &req, staged.path())?,
        }
        staged.commit().map(|_| ())
    };
    engine_call(py, run)
}

/// Compares reference directory `a` with `b` (the reference) as `ropescope compare --json` does, with `tol`
/// overrides `KIND=nmse:X` or `KIND=max_abs:X`; returns the report as JSON text.
#[pyfunction]
fn compare(py: Python<'_>, a: PathBuf, b: PathBuf, tol: Vec<String>) -> PyResult<String> {
    let run = || -> Result<String, Error> {
        let mut tols = default_tolerances();
        for spec in &tol {
            apply_override(&mut tols, spec)?;
        }
        let report = compare_report(&a, &b, &tols)?;
        serde_json::to_string(&report).map_err(|e| Error::Internal(e.to_string()))
    };
    engine_call(py, run)
}

/// Judges every RoPE and attention stage of the dump directory `dump_dir` (the reference layout) of a pass of
/// `model_path` over `ids` by an engine working in `precision` (`f32`, `bf16`, `f16`), as `ropescope
/// conformance check --json` does; returns the report as JSON text. A dump with no stage to judge is an error,
/// as on the command line.
#[pyfunction]
fn conformance_check(
    py: Python<'_>,
    model_path: PathBuf,
    ids: Vec<u32>,
    dump_dir: PathBuf,
    precision: &str,
) -> PyResult<String> {
    let run = || -> Result<String, Error> {
        let budget: Budget = precision
            .parse()
            .map_err(|why: String| Error::parameter("precision", why))?;
        let file = GgufFile::open(&model_path)?;
        let model = Engine::<f64>::load(&file)?;
        let report = check_dump(&model, &ids, &dump_dir, budget)?;
        if report.stages == 0 {
            return Err(Error::Argument(format!(
                "{} holds no stage to judge: a stage needs q_pre_L{{l}}.npy with q_L{{l}}.npy, k_pre with k, or \
                 q and k with attn_L{{l}}.npy",
                dump_dir.display()
            )));
        }
        serde_json::to_string(&report).map_err(|e| Error::Internal(e.to_string()))
    };
    engine_call(py, run)
}

/// Runs a scan into `out` as `ropescope scan` does (`ropescope::scan::run`), with the GIL released and Ctrl-C
/// checked between layers; returns the ranked text summary (empty for a shard) and the summary's warnings.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn scan(
    py: Python<'_>,
    model: PathBuf,
    out: PathBuf,
    analyses: &str,
    length: Option<usize>,
    count: Option<usize>,
    prompts: Vec<PathBuf>,
    precision: &str,
    arithmetic: &str,
    seed: Option<u64>,
    delta_max: Option<usize>,
    kappa: Option<f64>,
    shard: Option<(usize, usize)>,
    force: bool,
    packed_weights: Option<usize>,
) -> PyResult<(String, Vec<String>)> {
    let run = || -> Result<(String, Vec<String>), Error> {
        let defaults = ScanParams::default();
        let packed_weight_bytes = match packed_weights {
            None => ropescope::scan::DEFAULT_PACKED_WEIGHT_BYTES,
            Some(mib) => packed_weight_bytes(mib)?,
        };
        let req = ScanRequest {
            model,
            prompts,
            count,
            precision: precision_of(precision)?,
            arithmetic: arithmetic_of(arithmetic)?,
            params: ScanParams {
                analyses: Analysis::parse_list(analyses)?,
                delta_max: delta_max.unwrap_or(defaults.delta_max),
                kappa: kappa.unwrap_or(defaults.kappa),
                seed: seed.unwrap_or(defaults.seed),
                prompt_length: length.unwrap_or(defaults.prompt_length),
                ..defaults
            },
            shard: shard.map(|(k, n)| Shard::new(k, n)).transpose()?,
            force,
            command: std::env::args().collect(),
            packed_weight_bytes,
        };
        let done = ropescope::scan::run(&req, &out, &NoProgress)?;
        Ok((done.text, done.warnings))
    };
    engine_call(py, run)
}

/// Folds the shard directories of a scan into `out` as `ropescope merge` does (`ropescope::scan::merge`);
/// returns the ranked text summary and the summary's warnings.
#[pyfunction]
fn merge(
    py: Python<'_>,
    shards: Vec<PathBuf>,
    out: PathBuf,
    model: Option<PathBuf>,
    force: bool,
) -> PyResult<(String, Vec<String>)> {
    let run = || -> Result<(String, Vec<String>), Error> {
        let req = MergeRequest {
            shards,
            model,
            force,
            command: std::env::args().collect(),
        };
        let done = ropescope::scan::merge(&req, &out, &NoProgress)?;
        Ok((done.text, done.warnings))
    };
    engine_call(py, run)
}

/// The module `ropescope._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Model>()?;
    m.add_function(wrap_pyfunction!(reference, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(conformance_check, m)?)?;
    m.add("RopescopeError", m.py().get_type::<RopescopeError>())?;
    Ok(())
}
