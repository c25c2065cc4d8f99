//! What a scan directory read back from disk must satisfy before anything is allocated from it: `meta.json`'s
//! model and prompt sets within named maxima and consistent with each other, `summary.json` naming every head of
//! that model exactly once, `ablation.json`'s per-head lists of the model's shape, every `.npy` array of exactly
//! the shape `meta.json` fixes (`fixtures/scan/FORMAT.md`). A file that breaks a rule is [`Error::BadData`]
//! naming the file, the value and its allowed range.
//!
//! The maxima are far above every published model, so no real scan meets them, and low enough that what a
//! reader allocates from them (one record per head, one list per layer) stays small.

use super::format::{files, Meta, ModelMeta, PromptSetMeta, Prompts, Summary, FORMAT_VERSION};
use super::params::Analysis;
use crate::error::{Error, Result};
use crate::io::npy::Dtype;
use crate::numeric::Precision;
use std::path::Path;

/// Most layers a scan directory may describe: the deepest published decoders have 126 (Llama 3.1 405B) to a
/// few hundred layers.
pub const MAX_LAYERS: usize = 1024;
/// Most query heads per layer: the widest published models have 128 (Llama 3.1 405B, DeepSeek-V3).
pub const MAX_HEADS: usize = 1024;
/// Largest query, key or value head dimension: published heads have 64 to 256 dimensions.
pub const MAX_HEAD_DIM: usize = 4096;
/// Most prompts in a prompt set: as many as a scan may run ([`crate::scan::memory::MAX_PROMPT_COUNT`]).
pub const MAX_PROMPTS: usize = crate::scan::memory::MAX_PROMPT_COUNT;
/// Longest prompt, trained context or map side, in tokens: 16 Mi, above the longest trained contexts (10 Mi).
pub const MAX_TOKENS: usize = 1 << 24;
/// Most bytes of one array read back: the attention maps of a 405B model (126 layers × 128 heads × 256² f32)
/// are 3.9 GiB.
pub const MAX_ARRAY_BYTES: u64 = 4 << 30;
/// Most bytes of a `.npy` header (format 1.0: a 10-byte preamble and a 16-bit header length).
pub const MAX_NPY_HEADER: u64 = 10 + u16::MAX as u64;

/// `what is value, outside allowed` for `file`.
fn outside(file: &Path, what: &str, value: impl std::fmt::Display, allowed: &str) -> Error {
    Error::bad_data(
        file,
        format!("{what} is {value}, outside the allowed {allowed}"),
    )
}

/// Checks that `value` of `what` lies in `lo..=hi`.
fn in_range(file: &Path, what: &str, value: usize, lo: usize, hi: usize) -> Result<()> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(outside(file, what, value, &format!("{lo}..={hi}")))
    }
}

/// Checks the per-layer lists of a model whose layers differ in shape: each absent or one entry per layer, each
/// entry within the model-wide value (the widest), which some layer reaches, and every layer's key/value heads a
/// divisor of its query heads with room for its rotated chunks.
fn check_layer_shapes(m: &ModelMeta, file: &Path) -> Result<()> {
    let per_layer = format!("n_layers = {}", m.n_layers);
    for (name, list, widest, lo) in [
        ("kv_heads", &m.kv_heads, m.n_heads, 1),
        ("head_dims", &m.head_dims, m.head_dim, 2),
        ("value_dims", &m.value_dims, m.value_dim, 1),
    ] {
        if list.is_empty() {
            continue;
        }
        if list.len() != m.n_layers {
            return Err(outside(
                file,
                &format!("the length of model.{name}"),
                list.len(),
                &per_layer,
            ));
        }
        if let Some(v) = list.iter().find(|&&v| !(lo..=widest).contains(&v)) {
            return Err(outside(
                file,
                &format!("a model.{name} entry"),
                v,
                &format!("{lo}..={widest}"),
            ));
        }
    }
    for (name, list, widest) in [
        ("head_dim", &m.head_dims, m.head_dim),
        ("value_dim", &m.value_dims, m.value_dim),
    ] {
        if !list.is_empty() && !list.contains(&widest) {
            return Err(Error::bad_data(
                file,
                format!("model.{name} {widest} is not the widest of model.{name}s"),
            ));
        }
    }
    for l in 0..m.n_layers {
        let kv = m.kv_heads_of(l);
        if !m.n_heads.is_multiple_of(kv) {
            return Err(outside(
                file,
                &format!("the key/value heads of layer {l}"),
                kv,
                &format!("divisors of n_heads {}", m.n_heads),
            ));
        }
        if 2 * m.chunks_of(l) > m.head_dim_of(l) {
            return Err(outside(
                file,
                &format!("the rotated chunks of layer {l}"),
                m.chunks_of(l),
                &format!("0..={}", m.head_dim_of(l) / 2),
            ));
        }
    }
    Ok(())
}

/// Checks the model, prompt sets, parameters and analyses of `meta` (read from `file`, a `meta.json` or a
/// shard's `shard.json`): every count within its maximum and every list as long as its count. Does not look at
/// `complete` (a shard's meta is not complete by design; [`Meta::incomplete`] says whether a scan is).
pub fn check_meta(meta: &Meta, file: &Path) -> Result<()> {
    in_range(
        file,
        "format_version",
        meta.format_version as usize,
        1,
        FORMAT_VERSION as usize,
    )?;
    let m = &meta.model;
    in_range(file, "model.n_layers", m.n_layers, 1, MAX_LAYERS)?;
    in_range(file, "model.n_heads", m.n_heads, 1, MAX_HEADS)?;
    in_range(file, "model.n_kv_heads", m.n_kv_heads, 1, m.n_heads)?;
    if !m.n_heads.is_multiple_of(m.n_kv_heads) {
        return Err(outside(
            file,
            "model.n_kv_heads",
            m.n_kv_heads,
            &format!("divisors of n_heads {}", m.n_heads),
        ));
    }
    in_range(file, "model.head_dim", m.head_dim, 2, MAX_HEAD_DIM)?;
    in_range(file, "model.value_dim", m.value_dim, 1, MAX_HEAD_DIM)?;
    in_range(file, "model.n_chunks", m.n_chunks, 1, m.head_dim / 2)?;
    in_range(
        file,
        "model.context_length",
        m.context_length,
        1,
        MAX_TOKENS,
    )?;
    in_range(
        file,
        "model.vocab_size",
        m.vocab_size,
        1,
        u32::MAX as usize + 1,
    )?;
    let per_layer = format!("n_layers = {}", m.n_layers);
    if m.rope_bases.len() != m.n_layers {
        return Err(outside(
            file,
            "the length of model.rope_bases",
            m.rope_bases.len(),
            &per_layer,
        ));
    }
    if let Some(b) = m.rope_bases.iter().find(|b| !(b.is_finite() && **b > 0.0)) {
        return Err(outside(
            file,
            "a model.rope_bases entry",
            b,
            "finite positive numbers",
        ));
    }
    if !m.rotated_chunks.is_empty() && m.rotated_chunks.len() != m.n_layers {
        return Err(outside(
            file,
            "the length of model.rotated_chunks",
            m.rotated_chunks.len(),
            &per_layer,
        ));
    }
    if let Some(c) = m.rotated_chunks.iter().find(|&&c| c > m.n_chunks) {
        return Err(outside(
            file,
            "a model.rotated_chunks entry",
            c,
            &format!("0..={}", m.n_chunks),
        ));
    }
    check_layer_shapes(m, file)?;
    // Spans of positions per layer: sliding windows (always listed) and attention chunks (absent when no
    // layer has them).
    for (name, list, optional) in [("windows", &m.windows, false), ("chunks", &m.chunks, true)] {
        if !(optional && list.is_empty()) && list.len() != m.n_layers {
            return Err(outside(
                file,
                &format!("the length of model.{name}"),
                list.len(),
                &per_layer,
            ));
        }
        if let Some(w) = list.iter().flatten().find(|&&w| w == 0 || w > MAX_TOKENS) {
            return Err(outside(
                file,
                &format!("a model.{name} entry"),
                w,
                &format!("1..={MAX_TOKENS} or null"),
            ));
        }
    }
    if Precision::from_name(&meta.precision).is_none() {
        return Err(outside(
            file,
            "precision",
            &meta.precision,
            "\"f32\" or \"f64\"",
        ));
    }
    for name in &meta.analyses {
        if !Analysis::ALL.iter().any(|a| a.name() == name) {
            let known: Vec<&str> = Analysis::ALL.iter().map(|a| a.name()).collect();
            return Err(outside(file, "an analysis", name, &known.join(", ")));
        }
    }
    check_prompt_sets(meta, file)?;
    let p = &meta.parameters;
    let shortest = meta.prompt_sets[0]
        .lengths
        .iter()
        .min()
        .copied()
        .unwrap_or(1);
    in_range(file, "parameters.delta_max", p.delta_max, 0, shortest - 1)?;
    in_range(file, "parameters.map_size", p.map_size, 1, MAX_TOKENS)?;
    in_range(
        file,
        "parameters.prompt_length",
        p.prompt_length,
        1,
        MAX_TOKENS,
    )?;
    let reals = [
        ("parameters.kappa", p.kappa),
        (
            "parameters.low_band_max_frequency",
            p.low_band_max_frequency,
        ),
        (
            "parameters.high_band_min_frequency",
            p.high_band_min_frequency,
        ),
        ("parameters.sink_threshold", p.sink_threshold),
    ];
    if let Some((what, v)) = reals.iter().find(|(_, v)| !v.is_finite()) {
        return Err(outside(file, what, v, "finite numbers"));
    }
    Ok(())
}

/// The prompt sets: `natural` first, then `random` exactly when `intrinsic` ran, with the natural prompts'
/// lengths; each with 1..=[`MAX_PROMPTS`] prompts of 1..=[`MAX_TOKENS`] tokens, and one length and one source
/// per prompt.
fn check_prompt_sets(meta: &Meta, file: &Path) -> Result<()> {
    let intrinsic = meta
        .analyses
        .iter()
        .any(|a| a == Analysis::Intrinsic.name());
    let names: Vec<&str> = meta.prompt_sets.iter().map(|s| s.name.as_str()).collect();
    let expected: &[&str] = if intrinsic {
        &["natural", "random"]
    } else {
        &["natural"]
    };
    if names != expected {
        return Err(outside(
            file,
            "the list of prompt_sets",
            format!("{names:?}"),
            &format!("{expected:?} (with the analyses {:?})", meta.analyses),
        ));
    }
    for s in &meta.prompt_sets {
        let what = |field: &str| format!("prompt_sets[{}].{field}", s.name);
        in_range(file, &what("count"), s.count, 1, MAX_PROMPTS)?;
        let count = format!("count = {}", s.count);
        if s.lengths.len() != s.count {
            return Err(outside(
                file,
                &format!("the length of {}", what("lengths")),
                s.lengths.len(),
                &count,
            ));
        }
        if s.sources.len() != s.count {
            return Err(outside(
                file,
                &format!("the length of {}", what("sources")),
                s.sources.len(),
                &count,
            ));
        }
        if let Some(&n) = s.lengths.iter().find(|&&n| n == 0 || n > MAX_TOKENS) {
            return Err(outside(
                file,
                &format!("a {} entry", what("lengths")),
                n,
                &format!("1..={MAX_TOKENS}"),
            ));
        }
    }
    if let [natural, random] = &meta.prompt_sets[..] {
        if random.lengths != natural.lengths {
            return Err(Error::bad_data(
                file,
                "prompt_sets[random].lengths differ from prompt_sets[natural].lengths (the random prompts have \
                 the natural prompts' lengths)",
            ));
        }
    }
    Ok(())
}

/// The prompt set `name` of `meta`, if it has one.
pub fn prompt_set<'a>(meta: &'a Meta, name: &str) -> Option<&'a PromptSetMeta> {
    meta.prompt_sets.iter().find(|s| s.name == name)
}

/// Checks `summary` (read from `file`) against the model `meta` (already checked by [`check_meta`]): every
/// `(layer, head)` of the model exactly once, each head's KV head the one its GQA group reads, every offset
/// within `0..=delta_max`, every slash-dominant triple inside the model and listed once.
pub fn check_summary(summary: &Summary, meta: &Meta, file: &Path) -> Result<()> {
    in_range(
        file,
        "format_version",
        summary.format_version as usize,
        1,
        FORMAT_VERSION as usize,
    )?;
    let m = &meta.model;
    let (l_count, h_count) = (m.n_layers, m.n_heads);
    let delta_max = meta.parameters.delta_max;
    let mut seen = vec![false; l_count * h_count];
    for h in &summary.heads {
        let name = format!("head L{}H{}", h.layer, h.head);
        in_range(
            file,
            &format!("the layer of {name}"),
            h.layer,
            0,
            l_count - 1,
        )?;
        in_range(file, &format!("the head of {name}"), h.head, 0, h_count - 1)?;
        let cell = &mut seen[h.layer * h_count + h.head];
        if std::mem::replace(cell, true) {
            return Err(Error::bad_data(file, format!("{name} is listed twice")));
        }
        let kv = h.head / (m.n_heads / m.kv_heads_of(h.layer));
        in_range(file, &format!("the kv_head of {name}"), h.kv_head, kv, kv)?;
        let deltas = [
            h.slash.as_ref().map(|s| s.best_delta),
            h.slash.as_ref().and_then(|s| s.random_best_delta),
            h.fourier.as_ref().map(|f| f.predicted_delta),
            h.fourier.as_ref().and_then(|f| f.measured_delta),
        ];
        if let Some(d) = deltas.into_iter().flatten().find(|&d| d > delta_max) {
            return Err(outside(
                file,
                &format!("an offset Δ of {name}"),
                d,
                &format!("0..={delta_max}"),
            ));
        }
    }
    if let Some(i) = seen.iter().position(|s| !s) {
        return Err(Error::bad_data(
            file,
            format!(
                "lists {} heads, the model has {l_count} × {h_count} = {}; head L{}H{} is missing",
                summary.heads.len(),
                l_count * h_count,
                i / h_count,
                i % h_count
            ),
        ));
    }
    if let Some(sets) = &summary.slash_dominant {
        for (set, triples) in [("natural", &sets.natural), ("random", &sets.random)] {
            let mut sorted = triples.clone();
            sorted.sort_unstable();
            for t in &sorted {
                let what = format!(
                    "slash_dominant.{set} entry L{}H{} Δ {}",
                    t.layer, t.head, t.delta
                );
                in_range(
                    file,
                    &format!("the layer of the {what}"),
                    t.layer,
                    0,
                    l_count - 1,
                )?;
                in_range(
                    file,
                    &format!("the head of the {what}"),
                    t.head,
                    0,
                    h_count - 1,
                )?;
                in_range(
                    file,
                    &format!("the offset of the {what}"),
                    t.delta,
                    0,
                    delta_max,
                )?;
            }
            if let Some(t) = sorted.windows(2).find(|w| w[0] == w[1]) {
                return Err(Error::bad_data(
                    file,
                    format!(
                        "slash_dominant.{set} lists L{}H{} Δ {} twice",
                        t[0].layer, t[0].head, t[0].delta
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Checks `ablation.json` (`report`, read from `file`) against the model `meta` and `summary` (both checked):
/// a list of `variants`, each per-head field of a variant and of the baseline `[n_layers][n_heads]`, every
/// per-chunk list `n_chunks` long, and every head's `ablation` record with one entry per variant.
pub fn check_ablation(
    report: &serde_json::Value,
    summary: &Summary,
    meta: &Meta,
    file: &Path,
) -> Result<()> {
    let m = &meta.model;
    let variants = report
        .get("variants")
        .and_then(|v| v.as_array())
        .ok_or_else(|| Error::bad_data(file, "has no list of variants"))?;
    let records = std::iter::once(("baseline".to_string(), report.get("baseline"))).chain(
        variants
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("variants[{i}]"), Some(v))),
    );
    for (name, record) in records {
        let Some(record) = record.and_then(|r| r.as_object()) else {
            continue;
        };
        for field in ["peak_delta", "peak_score", "baseline_peak_change"] {
            let Some(v) = record.get(field) else { continue };
            let rows = v.as_array().map(|rows| {
                rows.iter()
                    .map(|r| r.as_array().map_or(usize::MAX, Vec::len))
                    .collect::<Vec<_>>()
            });
            if rows
                .as_ref()
                .is_none_or(|r| r.len() != m.n_layers || r.iter().any(|&n| n != m.n_heads))
            {
                return Err(Error::bad_data(
                    file,
                    format!(
                        "{name}.{field} is not a list of {} layers of {} heads",
                        m.n_layers, m.n_heads
                    ),
                ));
            }
        }
        let chunks = record
            .get("rotated_chunks")
            .map(|v| v.as_array().map(Vec::len));
        if chunks.is_some_and(|n| n != Some(m.n_chunks)) {
            return Err(Error::bad_data(
                file,
                format!(
                    "{name}.rotated_chunks is not a list of n_chunks = {} entries",
                    m.n_chunks
                ),
            ));
        }
        let per_layer = record.get("layer_rotated_chunks").map(|v| {
            v.as_array().map(|layers| {
                layers
                    .iter()
                    .map(|l| l.as_array().map_or(usize::MAX, Vec::len))
                    .collect::<Vec<_>>()
            })
        });
        let expected: Vec<usize> = (0..m.n_layers).map(|l| m.chunks_of(l)).collect();
        if per_layer.is_some_and(|n| n.as_ref() != Some(&expected)) {
            return Err(Error::bad_data(
                file,
                format!(
                    "{name}.layer_rotated_chunks is not a list of each layer's chunks {expected:?}"
                ),
            ));
        }
    }
    for h in &summary.heads {
        let Some(a) = &h.ablation else { continue };
        let n = a.get("variants").and_then(|v| v.as_array()).map(Vec::len);
        if n != Some(variants.len()) {
            return Err(Error::bad_data(
                file.parent().unwrap_or(file).join(files::SUMMARY),
                format!(
                    "head L{}H{} has {} ablation variants, {} has {}",
                    h.layer,
                    h.head,
                    n.map_or("no list of".into(), |n| n.to_string()),
                    file.display(),
                    variants.len()
                ),
            ));
        }
    }
    Ok(())
}

/// The dtype and shape `meta` (checked by [`check_meta`]) fixes for the array file `name` of a scan directory,
/// `None` for a name the format does not have (`fixtures/scan/FORMAT.md`, "Files").
pub fn array_shape(meta: &Meta, name: &str) -> Option<(Dtype, Vec<usize>)> {
    let m = &meta.model;
    let (l, h) = (m.n_layers, m.n_heads);
    if name == files::CHUNK_FREQUENCY {
        return Some((Dtype::F64, vec![l, m.n_chunks]));
    }
    if name == files::CONE_Q || name == files::CONE_K {
        return Some((Dtype::F64, vec![l, h, 2]));
    }
    for set in ["natural", "random"] {
        let width = |pattern: &str| -> Option<Vec<usize>> {
            let w = match pattern {
                files::SLASH => meta.parameters.delta_max + 1,
                files::CHUNK_NORMS_Q | files::CHUNK_NORMS_K => m.n_chunks,
                files::FOURIER_AMPLITUDE | files::FOURIER_PHASE => m.n_chunks,
                files::CHUNK_NORMS_V => m.value_dim / 2,
                files::SINGULAR_VALUES_Q | files::SINGULAR_VALUES_K => m.head_dim,
                files::SINK | files::LEARNED_SINK => return Some(vec![l, h]),
                files::ATTENTION_MAP => {
                    let first = prompt_set(meta, set)?.lengths.first().copied()?;
                    let side = first.min(meta.parameters.map_size);
                    return Some(vec![l, h, side, side]);
                }
                _ => return None,
            };
            Some(vec![l, h, w])
        };
        let patterns = [
            files::SLASH,
            files::SINK,
            files::LEARNED_SINK,
            files::ATTENTION_MAP,
            files::CHUNK_NORMS_Q,
            files::CHUNK_NORMS_K,
            files::CHUNK_NORMS_V,
            files::SINGULAR_VALUES_Q,
            files::SINGULAR_VALUES_K,
            files::FOURIER_AMPLITUDE,
            files::FOURIER_PHASE,
        ];
        if let Some(p) = patterns.iter().find(|p| files::for_set(p, set) == name) {
            let dtype = if *p == files::ATTENTION_MAP {
                Dtype::F32
            } else {
                Dtype::F64
            };
            return width(p).map(|shape| (dtype, shape));
        }
    }
    None
}

/// The bytes of data an array of `dtype` and `shape` holds, refused ([`Error::BadData`] naming `file`) beyond
/// [`MAX_ARRAY_BYTES`]; computed with checked arithmetic.
pub fn array_bytes(dtype: Dtype, shape: &[usize], file: &Path) -> Result<u64> {
    shape
        .iter()
        .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d as u64))
        .filter(|&b| b <= MAX_ARRAY_BYTES)
        .ok_or_else(|| {
            Error::bad_data(file, format!("the shape {shape:?} meta.json implies needs more than the {MAX_ARRAY_BYTES} bytes an array \
                 read back may hold"))
        })
}

/// Checks `prompts.json` (`prompts`, read from `file`) against `meta` (checked by [`check_meta`]): as many
/// prompts per set as `meta` counts (no random prompts without that set), each of its recorded length, every
/// id inside the vocabulary.
pub fn check_prompts(prompts: &Prompts, meta: &Meta, file: &Path) -> Result<()> {
    let vocab = meta.model.vocab_size;
    for (name, ids) in [("natural", &prompts.natural), ("random", &prompts.random)] {
        let lengths = prompt_set(meta, name).map_or(&[][..], |s| &s.lengths[..]);
        let found: Vec<usize> = ids.iter().map(Vec::len).collect();
        if found != lengths {
            return Err(Error::bad_data(file, format!("holds {} {name} prompts of lengths {}, the scan's meta records {} of lengths {}", found.len(),
                summarize(&found),
                lengths.len(),
                summarize(lengths)
            )));
        }
        if let Some(&id) = ids.iter().flatten().find(|&&id| id as usize >= vocab) {
            return Err(outside(
                file,
                &format!("a {name} token id"),
                id,
                &format!("0..={}", vocab - 1),
            ));
        }
    }
    Ok(())
}

/// A list of lengths for a message: the first few, then how many more.
fn summarize(v: &[usize]) -> String {
    const SHOWN: usize = 4;
    let head: Vec<String> = v.iter().take(SHOWN).map(usize::to_string).collect();
    match v.len().saturating_sub(SHOWN) {
        0 => format!("[{}]", head.join(", ")),
        more => format!("[{}, … {more} more]", head.join(", ")),
    }
}
