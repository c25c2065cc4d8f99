//! Golden vectors (`ropescope conformance vectors`): for each model of a set, the model file, the prompt, the
//! float64 pass at every stage in the reference layout and the RoPE tables, with one `manifest.json` naming each
//! stage as ropescope, HF transformers and llama.cpp call it. Small enough to vendor into another engine's tests;
//! the format is documented in `fixtures/conformance/VECTORS.md`.

use crate::error::{Error, Result};
use crate::io::hashing::sha256_file;
use crate::io::json::{read_json, write_json};
use crate::io::token_ids;
use crate::model::config::QkNorm;
use crate::model::{Model, ModelConfig};
use crate::reference::rope_tables::write_rope_tables;
use crate::reference::write::{compute_reference, ReferenceRequest, LAYER_KINDS};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The `format` of a vectors manifest.
pub const FORMAT: &str = "ropescope-conformance-vectors";

/// The version of the vectors format; a reader refuses another.
pub const FORMAT_VERSION: u32 = 1;

/// Query rows kept for attention, scores and logits: the last ones of the prompt.
pub const ROWS: usize = 8;

/// One model and prompt of a vectors set.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Family {
    /// The entry's name: the variant, with `-CASE` for a case other than `main`.
    pub name: String,
    /// The variant (the directory of the model).
    pub variant: String,
    /// The case whose prompt is used.
    pub case: String,
    /// The model's architecture as its file names it.
    pub architecture: String,
    /// The model file, relative to the vectors directory.
    pub model_file: String,
    /// sha256 of the model file.
    pub model_sha256: String,
    /// The prompt's token ids.
    pub ids: Vec<u32>,
    /// Number of layers.
    pub n_layers: usize,
    /// Query rows `[A, B)` of the attention, scores and logits files.
    pub rows: [usize; 2],
    /// The RoPE and attention features the model exercises (`pairing:half-split`, `scaling:yarn`,
    /// `partial-rotation`, `nope-layers`, `sliding-window`, `sinks`, `mla`, ...).
    pub features: Vec<String>,
    /// Every file of the entry's directory holding a stage.
    pub stages: Vec<Stage>,
}

/// One stage file of a vectors entry.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stage {
    /// The file, relative to the entry's directory (`q_L0.npy`).
    pub file: String,
    /// The quantity in ropescope's reference layout (`q`, `attn`, `logits`, ...).
    pub kind: String,
    /// The layer; `None` for the logits.
    pub layer: Option<usize>,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// What the quantity is in HF transformers' modeling code.
    pub hf: String,
    /// The tensor of llama.cpp's graph it corresponds to.
    pub llama_cpp: String,
}

/// The manifest of a vectors directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The ropescope version that wrote it.
    pub producer: String,
    /// The dtype of every stage file.
    pub dtype: String,
    /// Coordinate order of every q and k file.
    pub coordinate_order: String,
    /// The entries.
    pub families: Vec<Family>,
}

/// A model and prompt to write vectors for.
#[derive(Clone, Debug)]
pub struct Source {
    /// The entry's name.
    pub name: String,
    /// The variant.
    pub variant: String,
    /// The case.
    pub case: String,
    /// The model file.
    pub model: PathBuf,
    /// The prompt's token ids.
    pub ids: Vec<u32>,
}

/// The models of a converted-fixtures directory (`fixtures/converted`): every subdirectory holding `model.gguf`,
/// one source per case directory holding `ids.npy` (named after the variant for the case `main`, `VARIANT-CASE`
/// otherwise), in name order. Errors when there is none.
pub fn sources_in(dir: &Path) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    for variant in sorted_dirs(dir)? {
        let model = variant.join("model.gguf");
        if !model.is_file() {
            continue;
        }
        let name = file_name(&variant);
        for case in sorted_dirs(&variant)? {
            let ids_path = case.join("ids.npy");
            if !ids_path.is_file() {
                continue;
            }
            let case_name = file_name(&case);
            out.push(Source {
                name: match case_name.as_str() {
                    "main" => name.clone(),
                    other => format!("{name}-{other}"),
                },
                variant: name.clone(),
                case: case_name,
                model: model.clone(),
                ids: token_ids::read_file(&ids_path)?,
            });
        }
    }
    if out.is_empty() {
        return Err(Error::Argument(format!(
            "{} holds no model: expected subdirectories with model.gguf and case directories with ids.npy \
             (the layout of fixtures/converted)",
            dir.display()
        )));
    }
    Ok(out)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// The RoPE and attention features of `c`, for a sequence of `t` tokens.
pub fn features(c: &ModelConfig, t: usize) -> Vec<String> {
    let mut f = vec![format!("pairing:{}", c.pairing.name())];
    let mut scalings: Vec<&str> = c
        .layers
        .iter()
        .map(|l| l.rope.scaling.name())
        .filter(|n| *n != "none")
        .collect();
    scalings.sort_unstable();
    scalings.dedup();
    f.extend(scalings.iter().map(|s| format!("scaling:{s}")));
    let specs = c.rope_specs(t);
    let flags = [
        (
            "partial-rotation",
            c.layers
                .iter()
                .any(|l| l.rope.rotates() && l.rope.rot_dim < l.head_dim()),
        ),
        (
            "zero-frequency-chunks",
            specs.iter().any(|s| s.inv_freq.contains(&0.0)),
        ),
        ("nope-layers", c.layers.iter().any(|l| !l.rope.rotates())),
        (
            "several-bases",
            c.layers
                .windows(2)
                .any(|w| w[0].rope.base != w[1].rope.base),
        ),
        (
            "sliding-window",
            c.layers.iter().any(|l| l.window.is_some()),
        ),
        (
            "chunked-attention",
            c.layers.iter().any(|l| l.chunk.is_some()),
        ),
        (
            "attention-temperature",
            c.layers.iter().any(|l| l.temperature.is_some()),
        ),
        ("soft-cap", c.attn_softcap.is_some()),
        ("sinks", c.sinks),
        ("mla", c.mla.is_some()),
        ("qk-norm", c.qk_norm != QkNorm::None),
        ("moe", c.moe.is_some()),
        ("shared-kv", c.layers.iter().any(|l| l.kv_from.is_some())),
        (
            "per-layer-shapes",
            c.layers
                .windows(2)
                .any(|w| (w[0].head_dim(), w[0].n_kv_heads) != (w[1].head_dim(), w[1].n_kv_heads)),
        ),
    ];
    f.extend(
        flags
            .iter()
            .filter(|(_, on)| *on)
            .map(|(n, _)| n.to_string()),
    );
    f
}

/// How HF transformers' modeling code and llama.cpp's graph name the quantity `kind` of layer `l`.
fn names(kind: &str, l: Option<usize>) -> (String, String) {
    let l = l.map_or(String::new(), |l| l.to_string());
    let (hf, cpp) = match kind {
        "q_pre" => (
            "query_states after the projection (and q_norm), before apply_rotary_pos_emb",
            format!("Qcur-{l} before the rope node (Qcur_normed-{l} with a QK-norm)"),
        ),
        "k_pre" => (
            "key_states after the projection (and k_norm), before apply_rotary_pos_emb",
            format!("Kcur-{l} before the rope node (Kcur_normed-{l} with a QK-norm)"),
        ),
        "v" => ("value_states", format!("Vcur-{l}")),
        "kv_latent" => ("kv_a_layernorm's output", format!("kv_cmpr-{l}")),
        "q" => (
            "query_states after apply_rotary_pos_emb",
            format!("Qcur-{l}, the rope node"),
        ),
        "k" => (
            "key_states after apply_rotary_pos_emb",
            format!("Kcur-{l}, the rope node"),
        ),
        "scores" => (
            "attn_weights before softmax: scaled (and soft-capped), unmasked",
            format!("kq-{l} times the scale kq_soft_max-{l} applies"),
        ),
        "attn" => ("attn_weights after softmax", format!("kq_soft_max-{l}")),
        "sink" => (
            "the sink's column of the softmax (GPT-OSS)",
            format!("kq_soft_max-{l} (sinks)"),
        ),
        "out" => ("attn_output before o_proj", format!("kqv_out-{l}")),
        "hidden" => ("hidden_states after decoder layer", format!("l_out-{l}")),
        _ => ("logits", "result_output".to_string()),
    };
    (hf.to_string(), cpp)
}

/// Writes the vectors of every source into `out` (an existing, empty directory: the command line gives a
/// staging directory), `manifest.json` last, and returns the manifest.
pub fn write_vectors(sources: &[Source], out: &Path) -> Result<Manifest> {
    let mut families = Vec::new();
    for s in sources {
        families.push(write_family(s, out)?);
    }
    let manifest = Manifest {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        producer: format!("ropescope {}", env!("CARGO_PKG_VERSION")),
        dtype: "float64".into(),
        coordinate_order: "half-split, each head's rotated part first".into(),
        families,
    };
    write_json(&out.join("manifest.json"), &manifest)?;
    Ok(manifest)
}

/// One source's directory: the model, `ids.npy`, every stage of every layer, `rope/`.
fn write_family(s: &Source, out: &Path) -> Result<Family> {
    let dir = out.join(&s.name);
    std::fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    std::fs::copy(&s.model, dir.join("model.gguf")).map_err(|e| Error::io(&s.model, e))?;
    let file = crate::gguf::GgufFile::open(&s.model)?;
    let model = Model::<f64>::load(&file)?;
    let c = &model.config;
    let t = s.ids.len();
    let rows = t.saturating_sub(ROWS)..t;
    let req = ReferenceRequest {
        layers: (0..c.n_layers).collect(),
        rows: rows.clone(),
        command: Vec::new(),
    };
    let mut kinds = vec!["logits"];
    kinds.extend(LAYER_KINDS);
    let arrays = compute_reference(&model, &s.ids, &req, &kinds)?;
    let ids64: Vec<i64> = s.ids.iter().map(|&i| i as i64).collect();
    crate::io::npy::write(&dir.join("ids.npy"), &[t], &ids64)?;
    let mut stages = Vec::new();
    for a in &arrays {
        let file = format!("{}.npy", a.name);
        crate::io::npy::write(&dir.join(&file), &a.shape, &a.data)?;
        let (kind, layer) = match a.name.rsplit_once("_L") {
            Some((k, l)) => (k.to_string(), l.parse().ok()),
            None => (a.name.clone(), None),
        };
        let (hf, llama_cpp) = names(&kind, layer);
        stages.push(Stage {
            file,
            kind,
            layer,
            shape: a.shape.clone(),
            hf,
            llama_cpp,
        });
    }
    let positions: Vec<usize> = (0..t).collect();
    write_rope_tables(c, &s.model, &positions, t, &dir.join("rope"))?;
    Ok(Family {
        name: s.name.clone(),
        variant: s.variant.clone(),
        case: s.case.clone(),
        architecture: c.architecture.clone(),
        model_file: format!("{}/model.gguf", s.name),
        model_sha256: sha256_file(&s.model)?,
        ids: s.ids.clone(),
        n_layers: c.n_layers,
        rows: [rows.start, rows.end],
        features: features(c, t),
        stages,
    })
}

/// Reads and checks the manifest of the vectors directory `dir`: its format and version, and that every
/// family's model file is inside `dir` and exists.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join("manifest.json");
    let m: Manifest = read_json(&path, "a vectors manifest")?;
    if m.format != FORMAT || m.format_version != FORMAT_VERSION {
        return Err(Error::bad_data(
            &path,
            format!(
                "format '{}' version {}, expected '{FORMAT}' version {FORMAT_VERSION}",
                m.format, m.format_version
            ),
        ));
    }
    for f in &m.families {
        let bad_name = f.name.is_empty() || f.name.contains(['/', '\\']) || f.name.starts_with('.');
        if bad_name || f.model_file != format!("{}/model.gguf", f.name) {
            return Err(Error::bad_data(
                &path,
                format!(
                    "family '{}': a name must be one directory holding model.gguf",
                    f.name
                ),
            ));
        }
    }
    Ok(m)
}
