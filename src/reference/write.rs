//! The golden-reference directory: everything a forward pass computes for chosen layers and rows, as `.npy`
//! files another implementation can be compared against (`ropescope compare`). The format is documented in
//! `fixtures/reference/README.md`.
//!
//! Per-head vectors are written in *half-split* coordinate order (dims `l` and `l + d_rot/2` form RoPE chunk
//! `l`, fastest first), the order HF transformers uses, whatever the pairing of the model file.

use crate::capture::{CollectSink, HeadRecord};
use crate::error::{Error, Result};
use crate::io::hashing::sha256_file;
use crate::io::{npy, write_atomic};
use crate::model::{ForwardOptions, Model};
use crate::numeric::Real;
use crate::rope::{Pairing, RopeSpec};
use serde_json::json;
use std::ops::Range;
use std::path::Path;

/// What to write.
#[derive(Clone, Debug)]
pub struct ReferenceRequest {
    /// Layers to capture.
    pub layers: Vec<usize>,
    /// Query rows of attention and logits.
    pub rows: Range<usize>,
    /// The command that asked for the reference, argument by argument, recorded in `meta.json` (empty when
    /// the caller is not a command line).
    pub command: Vec<String>,
}

/// Reorders each `d`-wide row of `v` from the model's coordinate order to half-split order. A NoPE layer
/// (`rot_dim` 0) is reordered over the whole head: its rows are in the model's order too, since the converter
/// permutes every layer's Q/K rows alike.
pub fn to_half_split<T: Copy>(v: &[T], spec: &RopeSpec) -> Vec<T> {
    let d = spec.head_dim;
    let half = if spec.n_chunks() > 0 {
        spec.n_chunks()
    } else {
        d / 2
    };
    let mut out = v.to_vec();
    for (src, dst) in v.chunks(d).zip(out.chunks_mut(d)) {
        for l in 0..half {
            let (a, b) = match spec.pairing {
                Pairing::Adjacent => (2 * l, 2 * l + 1),
                Pairing::HalfSplit => (l, l + half),
            };
            dst[l] = src[a];
            dst[l + half] = src[b];
        }
    }
    out
}

/// The coordinates of a head that RoPE turns, in the half-split order [`to_half_split`] writes: `l` and `l + C`
/// for every chunk `l` of nonzero frequency (`C` the layer's chunks). Every other coordinate (a partial rotation's
/// tail, p-RoPE's still chunks, all of a NoPE layer's) passes through RoPE unchanged.
pub fn rotated_dims(spec: &RopeSpec) -> Vec<usize> {
    let c = spec.n_chunks();
    let mut dims: Vec<usize> = (0..c)
        .filter(|&l| spec.rotates(l))
        .flat_map(|l| [l, l + c])
        .collect();
    dims.sort_unstable();
    dims
}

/// Memory the captured results of `req` take over `t` tokens: per captured layer and head the probabilities and
/// logits of the rows (and their sink masses), q and k before and after RoPE, the values and the head output, per
/// captured layer the residual stream, and the logits of the rows, plus one layer's arrays again while they are
/// stacked for writing.
fn capture_bytes<T: Real>(model: &Model<T>, t: usize, req: &ReferenceRequest) -> u64 {
    let c = &model.config;
    let widest = |f: fn(&crate::model::LayerConfig) -> usize| {
        c.layers.iter().map(f).max().unwrap_or(0) as u64
    };
    let (r, d, dv) = (
        req.rows.len() as u64,
        widest(|l| l.head_dim()),
        widest(|l| l.value_dim),
    );
    let t = t as u64;
    let sink = if c.sinks { r } else { 0 };
    let per_head = 2 * r * t + sink + 5 * t * d + 2 * t * dv;
    let per_layer = c.n_heads as u64 * per_head + t * c.n_embd as u64;
    let layers = req.layers.len() as u64 + 1;
    let elements = layers
        .saturating_mul(per_layer)
        .saturating_add(r * c.vocab_size as u64);
    elements.saturating_mul(std::mem::size_of::<T>() as u64)
}

/// The quantities of one captured layer, in the order the forward pass computes them: the projections (q and k
/// before RoPE `[heads, T, d]` and `[kv_heads, T, d]`, values `[kv_heads, T, d_v]`), q and k after RoPE,
/// attention logits and probabilities `[heads, rows, T]`, in a model with attention sinks the sink's column of
/// the softmax `[heads, rows, 1]` (each row's probabilities over the keys sum to one minus it; absent in other
/// models), head outputs `[heads, T, d_v]`, and the residual stream after the layer `[T, n_embd]`. A layer's
/// file is `{kind}_L{layer}.npy`.
pub const LAYER_KINDS: [&str; 11] = [
    "q_pre",
    "k_pre",
    "v",
    "kv_latent",
    "q",
    "k",
    "scores",
    "attn",
    "sink",
    "out",
    "hidden",
];

/// One array of a reference: its file stem (`attn_L5`, `logits`), shape and values (row-major).
#[derive(Clone, Debug)]
pub struct ReferenceArray<T> {
    /// The array's name, the reference file's name without `.npy`.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    pub data: Vec<T>,
}

/// Checks `ids` and `req` against `model`: a valid prompt, layers that exist, a non-empty range of rows inside
/// the sequence, and memory for the pass and everything it keeps.
fn check_request<T: Real>(model: &Model<T>, ids: &[u32], req: &ReferenceRequest) -> Result<()> {
    model.validate(ids)?;
    let c = &model.config;
    let t = ids.len();
    if let Some(&bad) = req.layers.iter().find(|&&l| l >= c.n_layers) {
        return Err(Error::Argument(format!(
            "layer {bad} does not exist (the model has {})",
            c.n_layers
        )));
    }
    if req.rows.start >= req.rows.end || req.rows.end > t {
        return Err(Error::Argument(format!(
            "rows {}..{} are not inside the {t} positions",
            req.rows.start, req.rows.end
        )));
    }
    model.validate_with_capture(
        ids,
        capture_bytes(model, t, req),
        "; capture fewer layers (layers) or rows (rows)",
    )
}

/// Runs `model` on `ids` and returns the arrays of the reference directory `req` describes, keeping only the
/// kinds in `kinds` (`logits` and any of [`LAYER_KINDS`]; unknown names are refused): `logits` first, then for
/// each layer of `req.layers` its kinds in [`LAYER_KINDS`] order. Vectors are in half-split coordinate order.
pub fn compute_reference<T: Real>(
    model: &Model<T>,
    ids: &[u32],
    req: &ReferenceRequest,
    kinds: &[&str],
) -> Result<Vec<ReferenceArray<T>>> {
    if let Some(bad) = kinds
        .iter()
        .find(|k| **k != "logits" && !LAYER_KINDS.contains(k))
    {
        return Err(Error::Argument(format!(
            "unknown quantity '{bad}' (logits, {})",
            LAYER_KINDS.join(", ")
        )));
    }
    check_request(model, ids, req)?;
    let c = &model.config;
    let t = ids.len();
    let layer_kinds: Vec<&str> = LAYER_KINDS
        .into_iter()
        .filter(|k| kinds.contains(k) && (*k != "sink" || c.sinks))
        .filter(|k| *k != "kv_latent" || c.mla.is_some())
        .collect();
    let captured = if layer_kinds.is_empty() {
        Vec::new()
    } else {
        req.layers.clone()
    };
    let mut sink = CollectSink::<T>::new(captured.clone(), req.rows.clone());
    let opts = ForwardOptions {
        logits_rows: if kinds.contains(&"logits") {
            req.rows.clone()
        } else {
            0..0
        },
        rope_keep: None,
    };
    let fwd = model.forward(ids, &opts, &mut sink)?;

    let mut arrays = Vec::new();
    if kinds.contains(&"logits") {
        arrays.push(ReferenceArray {
            name: "logits".into(),
            shape: vec![req.rows.len(), c.vocab_size],
            data: fwd.logits,
        });
    }
    let r = req.rows.len();
    for &l in &captured {
        let lc = &c.layers[l];
        let (d, vd, kvh) = (lc.head_dim(), lc.value_dim, lc.n_kv_heads);
        let heads: Vec<&HeadRecord<T>> = (0..c.n_heads).filter_map(|h| sink.get(l, h)).collect();
        let kv_heads: Vec<&HeadRecord<T>> = (0..kvh)
            .filter_map(|g| sink.get(l, g * (c.n_heads / kvh)))
            .collect();
        let spec = &c.layers[l].rope.spec(t);
        let half_split = |records: &[&HeadRecord<T>], pick: fn(&HeadRecord<T>) -> &[T]| {
            records
                .iter()
                .flat_map(|h| to_half_split(pick(h), spec))
                .collect::<Vec<T>>()
        };
        let as_is = |records: &[&HeadRecord<T>], pick: fn(&HeadRecord<T>) -> &[T]| {
            records
                .iter()
                .flat_map(|h| pick(h).iter().copied())
                .collect::<Vec<T>>()
        };
        for &kind in &layer_kinds {
            let (shape, data) = match kind {
                "hidden" => (
                    vec![t, c.n_embd],
                    sink.residual_of(l).unwrap_or_default().to_vec(),
                ),
                "attn" => (vec![c.n_heads, r, t], as_is(&heads, |h| &h.probs)),
                "scores" => (vec![c.n_heads, r, t], as_is(&heads, |h| &h.logits)),
                "sink" => (vec![c.n_heads, r, 1], as_is(&heads, |h| &h.sink_mass)),
                "kv_latent" => {
                    let latent = sink.latent_of(l).unwrap_or_default();
                    (vec![t, latent.len() / t.max(1)], latent.to_vec())
                }
                "q_pre" => (vec![c.n_heads, t, d], half_split(&heads, |h| &h.q_pre)),
                "q" => (vec![c.n_heads, t, d], half_split(&heads, |h| &h.q)),
                "k_pre" => (vec![kvh, t, d], half_split(&kv_heads, |h| &h.k_pre)),
                "k" => (vec![kvh, t, d], half_split(&kv_heads, |h| &h.k)),
                "v" => (vec![kvh, t, vd], as_is(&kv_heads, |h| &h.v)),
                _ => (vec![c.n_heads, t, vd], as_is(&heads, |h| &h.output)),
            };
            arrays.push(ReferenceArray {
                name: format!("{kind}_L{l}"),
                shape,
                data,
            });
        }
    }
    Ok(arrays)
}

/// Runs `model` on `ids` and writes the reference directory `out` (created if needed). Every file is written
/// atomically; `meta.json` is written last, so a directory with `meta.json` is complete.
pub fn write_reference<T: Real + npy::NpyElement>(
    model: &Model<T>,
    model_path: &Path,
    ids: &[u32],
    req: &ReferenceRequest,
    out: &Path,
) -> Result<()> {
    let c = &model.config;
    let t = ids.len();
    check_request(model, ids, req)?;
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let model_sha256 = sha256_file(model_path)?;
    let mut kinds = vec!["logits"];
    kinds.extend(LAYER_KINDS);
    let arrays = compute_reference(model, ids, req, &kinds)?;

    let mut shapes = serde_json::Map::new();
    let ids64: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
    npy::write(&out.join("ids.npy"), &[t], &ids64)?;
    shapes.insert("ids.npy".into(), json!([t]));
    for a in &arrays {
        let name = format!("{}.npy", a.name);
        npy::write(&out.join(&name), &a.shape, &a.data)?;
        shapes.insert(name, json!(a.shape));
    }
    let meta = json!({
        "producer": format!("ropescope {}", env!("CARGO_PKG_VERSION")),
        "model_file": model_path.file_name().map(|n| n.to_string_lossy().into_owned()),
        "model_sha256": model_sha256,
        "architecture": c.architecture,
        "precision": T::NAME,
        "arithmetic": c.arithmetic.name(),
        "rows": [req.rows.start, req.rows.end],
        "layers": req.layers,
        "n_tokens": t,
        "coordinate_order": "half-split",
        "rotated_dims": (req.layers.iter())
            .map(|&l| rotated_dims(&c.layers[l].rope.spec(t)))
            .collect::<Vec<_>>(),
        "shapes": shapes,
        "command": req.command,
        "complete": true,
    });
    let text = serde_json::to_string_pretty(&meta).map_err(|e| Error::Internal(e.to_string()))?;
    write_atomic(&out.join("meta.json"), |w| w.write_all(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::Pairing;

    #[test]
    fn adjacent_pairs_are_reordered_to_half_split() {
        let spec = RopeSpec::new(6, 10000.0, Pairing::Adjacent);
        // adjacent layout: chunk l at (2l, 2l+1) holds (l, 10 + l)
        let v = [0.0, 10.0, 1.0, 11.0, 2.0, 12.0];
        assert_eq!(
            to_half_split(&v, &spec),
            vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]
        );
        let hs = RopeSpec::new(6, 10000.0, Pairing::HalfSplit);
        assert_eq!(to_half_split(&v, &hs), v.to_vec());
    }
}
