//! One prompt's streaming measures as files: what a scan shard writes per prompt and a merge folds back
//! (`fixtures/scan/SHARDS.md` describes the layout).
//!
//! The measures of a prompt are the sums its forward pass added (slash and sink sums and counts, the vector
//! sums and Gram matrices of every head) and, for a set's first prompt, its attention map. They are stored as
//! they are, in `.npy` files indexed `[layer][query head]`, so that folding them in prompt order repeats the
//! additions of an unsharded scan exactly.

use super::measure::{self, SetMeasures};
use super::params::ScanParams;
use crate::analysis::attention_map::AttentionMapCapture;
use crate::analysis::vector_stats::{HeadSums, RowSums};
use crate::error::{Error, Result};
use crate::io::npy::{self, Array, Dtype};
use crate::model::{LayerConfig, Model, ModelConfig};
use crate::numeric::Real;
use std::path::Path;

/// The three vector kinds of [`HeadSums`], with whether they rotate and carry Gram matrices (values do neither).
const VECTORS: [(&str, bool); 3] = [("q", true), ("k", true), ("v", false)];

/// Writes the measures of one prompt into `dir` (created).
pub fn write<T: Real>(dir: &Path, model: &Model<T>, m: &SetMeasures) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let c = &model.config;
    let grid = [c.n_layers, c.n_heads];
    if let Some(s) = &m.slash {
        let w = s.delta_max + 1;
        let counts = |v: &[u32]| v.iter().map(|&c| i64::from(c)).collect::<Vec<i64>>();
        npy::write(
            &dir.join("slash_sums.npy"),
            &[grid[0], grid[1], w],
            &s.score_sums,
        )?;
        npy::write(
            &dir.join("slash_counts.npy"),
            &[grid[0], grid[1], w],
            &counts(&s.score_counts),
        )?;
        npy::write(&dir.join("sink_sums.npy"), &grid, &s.sink_sums)?;
        npy::write(&dir.join("sink_counts.npy"), &grid, &counts(&s.sink_counts))?;
        if c.sinks {
            npy::write(
                &dir.join("learned_sink_sums.npy"),
                &grid,
                &s.learned_sink_sums,
            )?;
            npy::write(
                &dir.join("learned_sink_counts.npy"),
                &grid,
                &counts(&s.learned_sink_counts),
            )?;
        }
    }
    if let Some(map) = &m.map {
        let side = map.side;
        npy::write(
            &dir.join("attention_map.npy"),
            &[grid[0], grid[1], side, side],
            &map.maps,
        )?;
    }
    if let Some(v) = &m.vectors {
        let heads: Vec<&HeadSums> = v
            .heads
            .iter()
            .map(|h| h.as_ref())
            .collect::<Option<_>>()
            .ok_or_else(|| Error::Internal("a head ended without vector sums".into()))?;
        for (name, gram_kind) in VECTORS {
            let rows: Vec<&RowSums> = heads
                .iter()
                .map(|h| match name {
                    "q" => &h.q,
                    "k" => &h.k,
                    _ => &h.v,
                })
                .collect();
            let field = |f: &str, data: Vec<f64>, width: &[usize]| {
                let shape: Vec<usize> = grid.iter().chain(width).copied().collect();
                npy::write(&dir.join(format!("{name}_{f}.npy")), &shape, &data)
            };
            let counts: Vec<i64> = rows.iter().map(|r| r.count as i64).collect();
            npy::write(&dir.join(format!("{name}_count.npy")), &grid, &counts)?;
            let (dim, chunks) = widths(c, name);
            // Each head's sums, zero-padded to the widest layer's (Gemma 4's layers differ).
            let cat = |f: fn(&RowSums) -> &Vec<f64>, width: usize| {
                rows.iter()
                    .flat_map(|r| pad(f(r), width))
                    .collect::<Vec<f64>>()
            };
            if gram_kind {
                let still: Vec<f64> = rows.iter().map(|r| r.unrotated_norm_sum).collect();
                field("unrotated_norm_sum", still, &[])?;
            }
            field("sum", cat(|r| &r.sum, dim), &[dim])?;
            field("unit_sum", cat(|r| &r.unit_sum, dim), &[dim])?;
            field(
                "chunk_norm_sum",
                cat(|r| &r.chunk_norm_sum, chunks),
                &[chunks],
            )?;
            if gram_kind && v.grams {
                let grams = |f: fn(&RowSums) -> &Vec<f64>| {
                    rows.iter()
                        .flat_map(|r| pad_square(f(r), r.sum.len(), dim))
                        .collect::<Vec<f64>>()
                };
                field("gram", grams(|r| &r.gram), &[dim, dim])?;
                field("unit_gram", grams(|r| &r.unit_gram), &[dim, dim])?;
            }
        }
    }
    Ok(())
}

/// Reads the measures of one prompt of `n_tokens` tokens from `dir`: the arrays the analyses of `params` need,
/// each with the dtype and shape the model and parameters fix; `first` marks the set's first prompt, whose
/// attention map must be there.
pub fn read<T: Real>(
    dir: &Path,
    model: &Model<T>,
    params: &ScanParams,
    n_tokens: usize,
    first: bool,
) -> Result<SetMeasures> {
    let c = &model.config;
    let grid = [c.n_layers, c.n_heads];
    let cells = grid[0] * grid[1];
    let mut m = measure::empty(model, params);
    let array = |file: &str, dtype: Dtype, width: &[usize]| -> Result<Array> {
        let path = dir.join(file);
        let a = Array::read(&path)?;
        let shape: Vec<usize> = grid.iter().chain(width).copied().collect();
        if a.dtype != dtype || a.shape != shape {
            return Err(Error::bad_data(
                path,
                format!(
                    "expected {dtype:?} {shape:?}, found {:?} {:?}",
                    a.dtype, a.shape
                ),
            ));
        }
        Ok(a)
    };
    let sums = |file: &str, width: &[usize]| -> Result<Vec<f64>> {
        let v = array(file, Dtype::F64, width)?.to_f64();
        match v.iter().all(|x| x.is_finite()) {
            true => Ok(v),
            false => Err(Error::bad_data(
                dir.join(file),
                "holds a value that is not finite",
            )),
        }
    };
    let counts = |file: &str, width: &[usize], max: usize| -> Result<Vec<u32>> {
        let a = array(file, Dtype::I64, width)?;
        a.to_i64()
            .unwrap_or_default()
            .into_iter()
            .map(|v| {
                u32::try_from(v)
                    .ok()
                    .filter(|&v| v as usize <= max)
                    .ok_or_else(|| {
                        Error::bad_data(dir.join(file), format!("count {v} is outside 0..={max}"))
                    })
            })
            .collect()
    };
    if let Some(s) = &mut m.slash {
        let w = s.delta_max + 1;
        s.score_sums = sums("slash_sums.npy", &[w])?;
        s.score_counts = counts("slash_counts.npy", &[w], 1)?;
        s.sink_sums = sums("sink_sums.npy", &[])?;
        s.sink_counts = counts("sink_counts.npy", &[], 1)?;
        if c.sinks {
            s.learned_sink_sums = sums("learned_sink_sums.npy", &[])?;
            s.learned_sink_counts = counts("learned_sink_counts.npy", &[], 1)?;
        }
        if first {
            let side = params.map_size.max(1).min(n_tokens);
            let maps = array("attention_map.npy", Dtype::F32, &[side, side])?
                .to_f64()
                .into_iter()
                .map(|v| v as f32)
                .collect();
            m.map = Some(AttentionMapCapture {
                n_layers: grid[0],
                n_heads: grid[1],
                max_side: params.map_size.max(1),
                side,
                maps,
            });
        }
    }
    if let Some(v) = &mut m.vectors {
        let mut per_kind = Vec::new();
        for (name, gram_kind) in VECTORS {
            let (dim, chunks) = widths(c, name);
            let f = |field: &str, width: &[usize]| sums(&format!("{name}_{field}.npy"), width);
            let count = counts(&format!("{name}_count.npy"), &[], n_tokens)?;
            let sum = f("sum", &[dim])?;
            let unit_sum = f("unit_sum", &[dim])?;
            let chunk_norm_sum = f("chunk_norm_sum", &[chunks])?;
            let unrotated_norm_sum = match gram_kind {
                true => f("unrotated_norm_sum", &[])?,
                false => vec![0.0; cells],
            };
            let (gram, unit_gram) = if gram_kind && v.grams {
                (f("gram", &[dim, dim])?, f("unit_gram", &[dim, dim])?)
            } else {
                (Vec::new(), Vec::new())
            };
            let g = gram.len() / cells;
            per_kind.push(
                (0..cells)
                    .map(|i| {
                        // The head's own widths within the padded rows.
                        let (d, ch) = layer_widths(&c.layers[i / grid[1]], name);
                        let square = |all: &[f64]| match g {
                            0 => Vec::new(),
                            _ => unpad_square(&all[i * g..(i + 1) * g], dim, d),
                        };
                        RowSums {
                            count: count[i] as usize,
                            sum: sum[i * dim..i * dim + d].to_vec(),
                            gram: square(&gram),
                            unit_sum: unit_sum[i * dim..i * dim + d].to_vec(),
                            unit_gram: square(&unit_gram),
                            chunk_norm_sum: chunk_norm_sum[i * chunks..i * chunks + ch].to_vec(),
                            unrotated_norm_sum: unrotated_norm_sum[i],
                        }
                    })
                    .collect::<Vec<_>>(),
            );
        }
        let [q, k, vv] = <[Vec<RowSums>; 3]>::try_from(per_kind)
            .map_err(|_| Error::Internal("three vector kinds".into()))?;
        v.heads = q
            .into_iter()
            .zip(k)
            .zip(vv)
            .enumerate()
            .map(|(i, ((q, k), v))| {
                Some(HeadSums {
                    q,
                    k: k.into(),
                    v,
                    rope: Some(c.layers[i / grid[1]].rope.spec(n_tokens)),
                })
            })
            .collect();
        v.share_keys();
    }
    Ok(m)
}

/// The widths of vector kind `name`'s sums in the files (dimensions, chunks): the widest layer's.
fn widths(c: &ModelConfig, name: &str) -> (usize, usize) {
    match name {
        "v" => (c.max_value_dim(), c.max_value_dim() / 2),
        _ => (c.max_head_dim(), c.n_chunks()),
    }
}

/// The widths of vector kind `name`'s sums for one head of layer `lc` (as `vector_stats` makes them).
fn layer_widths(lc: &LayerConfig, name: &str) -> (usize, usize) {
    match name {
        "v" => (lc.value_dim, lc.value_dim / 2),
        _ => (lc.head_dim(), lc.rope.n_chunks()),
    }
}

/// `v` followed by zeros up to `width`.
fn pad(v: &[f64], width: usize) -> impl Iterator<Item = f64> + '_ {
    v.iter()
        .copied()
        .chain(std::iter::repeat_n(0.0, width - v.len()))
}

/// The `d × d` matrix `m` (row-major) in the top-left corner of a `width × width` one of zeros.
fn pad_square(m: &[f64], d: usize, width: usize) -> Vec<f64> {
    match m.is_empty() {
        true => Vec::new(),
        false => m
            .chunks(d)
            .flat_map(|row| pad(row, width))
            .chain(std::iter::repeat_n(0.0, (width - d) * width))
            .collect(),
    }
}

/// The top-left `d × d` corner of the `width × width` matrix `m` (row-major).
fn unpad_square(m: &[f64], width: usize, d: usize) -> Vec<f64> {
    m.chunks(width)
        .take(d)
        .flat_map(|row| &row[..d])
        .copied()
        .collect()
}
