//! The RoPE tables of a model: the smallest golden reference another implementation can diff its rotary
//! embedding against, without running a forward pass.
//!
//! A table directory holds, for `L` layers, `P` chosen positions and `C = rot_dim / 2` chunks (`rot_dim` the most
//! any layer rotates; a layer that rotates fewer chunks, none on a NoPE layer, has NaN for the others):
//!
//! | file | dtype, shape | content |
//! |---|---|---|
//! | `positions.npy` | int64 `[P]` | the positions, in the order they were asked for (no duplicates) |
//! | `inv_freq.npy` | float64 `[L, C]` | `g_l` of every layer: the angular frequency (rad/token) chunk `l` rotates by, after scaling; chunk 0 is the fastest for plain RoPE |
//! | `cos.npy` | float64 `[L, P, C]` | `m · cos(p · g_l)` |
//! | `sin.npy` | float64 `[L, P, C]` | `m · sin(p · g_l)` |
//! | `meta.json` | | what the tables are for (below) |
//!
//! `m` is the layer's magnitude (YaRN's and LongRoPE's attention factor, 1 otherwise). The cosines and sines are
//! the values the forward pass multiplies by ([`RopeSpec::cos_sin`]): the angle `p · g_l` is one f64 product
//! and the cosine, sine and magnitude product are each rounded once.
//!
//! The frequencies are those for a sequence of `length` tokens: only LongRoPE depends on it, using its long
//! factors when `length` exceeds the original context (HF transformers' rule, applied to max position + 1).
//!
//! `meta.json` holds `producer`, `model_file`, `model_sha256`, `architecture`, `head_dim` and `rot_dim` (the
//! largest of any layer), `pairing` (`adjacent` or `half-split`) with `pairing_dims` saying which coordinates of
//! a head form chunk `l`, `length`, `n_layers`, `n_positions`, `n_chunks`, `layers` (per layer: `layer`,
//! `head_dim`, `rot_dim` (0 on a NoPE layer),
//! `base`, `scaling` with its parameters, `magnitude`, `window`, and `longrope_factors`, `short` or `long` for
//! LongRoPE and null
//! otherwise), `shapes` (file → shape) and `files` (file → content). Every file is written atomically and
//! `meta.json` last, so a directory with `meta.json` is complete.

use crate::error::{Error, Result};
use crate::io::hashing::sha256_file;
use crate::io::{npy, write_json};
use crate::model::config::ModelConfig;
use crate::rope::{Pairing, RopeSpec, Scaling};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The largest size, in bytes, of the data of `cos.npy` and `sin.npy` together (1 GiB).
pub const MAX_TABLE_BYTES: u128 = 1 << 30;

/// Bytes of one (layer, position, chunk) entry over `cos.npy` and `sin.npy`: two f64.
const BYTES_PER_ENTRY: u128 = 16;

/// The dimensions of a table directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableShape {
    /// Layers, `L`.
    pub n_layers: usize,
    /// Positions, `P`.
    pub n_positions: usize,
    /// Chunks per layer, `C = rot_dim / 2`.
    pub n_chunks: usize,
}

impl TableShape {
    /// The shape of `n_positions` positions of every layer of `config` (`C` the most chunks of any layer); an
    /// error when there is no layer or no layer rotates.
    pub fn of(config: &ModelConfig, n_positions: usize) -> Result<Self> {
        if config.layers.is_empty() {
            return Err(Error::Malformed("the model has no layer".into()));
        }
        let n_chunks = config.n_chunks();
        if n_chunks == 0 {
            return Err(Error::Unsupported(
                "RoPE tables of a model none of whose layers rotates".into(),
            ));
        }
        Ok(Self {
            n_layers: config.layers.len(),
            n_positions,
            n_chunks,
        })
    }

    /// Refuses tables whose `cos.npy` and `sin.npy` would hold more than [`MAX_TABLE_BYTES`] of data.
    pub fn check_size(&self) -> Result<()> {
        let bytes = [self.n_layers, self.n_positions, self.n_chunks]
            .into_iter()
            .try_fold(BYTES_PER_ENTRY, |acc, n| acc.checked_mul(n as u128));
        match bytes {
            Some(b) if b <= MAX_TABLE_BYTES => Ok(()),
            _ => Err(Error::Resource(format!(
                "the cos and sin tables would take {} bytes ({} layers × {} positions × {} chunks × \
                 {BYTES_PER_ENTRY} bytes), more than the limit of {MAX_TABLE_BYTES} bytes (1 GiB); ask for \
                 fewer positions",
                bytes.map_or("over 2^128".into(), |b| b.to_string()),
                self.n_layers,
                self.n_positions,
                self.n_chunks
            ))),
        }
    }
}

/// One layer's entry in `meta.json`.
#[derive(Serialize)]
struct LayerMeta<'a> {
    layer: usize,
    head_dim: usize,
    rot_dim: usize,
    base: f64,
    scaling: &'a Scaling,
    magnitude: f64,
    window: Option<usize>,
    longrope_factors: Option<&'static str>,
}

/// `meta.json`.
#[derive(Serialize)]
struct Meta<'a> {
    producer: String,
    model_file: Option<String>,
    model_sha256: String,
    architecture: &'a str,
    head_dim: usize,
    rot_dim: usize,
    pairing: &'static str,
    pairing_dims: &'static str,
    length: usize,
    n_layers: usize,
    n_positions: usize,
    n_chunks: usize,
    layers: Vec<LayerMeta<'a>>,
    shapes: BTreeMap<&'static str, Vec<usize>>,
    files: BTreeMap<&'static str, &'static str>,
}

/// Which coordinates of a head form chunk `l`, in words.
fn pairing_dims(pairing: Pairing) -> &'static str {
    match pairing {
        Pairing::HalfSplit => {
            "chunk l rotates dims (l, l + rot_dim/2) of each query and key head; dims from rot_dim on do not \
             rotate"
        }
        Pairing::Adjacent => {
            "chunk l rotates dims (2l, 2l + 1) of each query and key head in the file's Q/K row order; in HF \
             transformers' order (before the converter's permutation of the rows) these are dims \
             (l, l + rot_dim/2), half-split; dims from rot_dim on do not rotate"
        }
    }
}

/// Checks the positions and the length before anything is written.
fn validate(positions: &[usize], length: usize) -> Result<()> {
    let Some(&max) = positions.iter().max() else {
        return Err(Error::Argument("no positions were given".into()));
    };
    let mut sorted = positions.to_vec();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Argument(format!("position {} is given twice", w[0])));
    }
    if length <= max {
        return Err(Error::Argument(format!(
            "length {length} does not cover position {max}: the length must be above every position"
        )));
    }
    if i64::try_from(max).is_err() {
        return Err(Error::Argument(format!(
            "position {max} does not fit the int64 of positions.npy"
        )));
    }
    Ok(())
}

/// One `[L, P, C]` table: `pick` chooses the cosine or the sine of [`RopeSpec::cos_sin`]; NaN for the chunks
/// beyond a layer's own.
fn table(
    specs: &[RopeSpec],
    positions: &[usize],
    n_chunks: usize,
    pick: impl Fn((f64, f64)) -> f64,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(specs.len() * positions.len() * n_chunks);
    for spec in specs {
        for &p in positions {
            out.extend(padded(
                (0..spec.n_chunks()).map(|l| pick(spec.cos_sin(p, l))),
                n_chunks,
            ));
        }
    }
    out
}

/// `values` followed by NaN up to `n` entries.
fn padded(values: impl Iterator<Item = f64>, n: usize) -> impl Iterator<Item = f64> {
    values.chain(std::iter::repeat(f64::NAN)).take(n)
}

/// Writes the RoPE tables of every layer of `config` (read from `model_path`) at `positions` for a sequence of
/// `length` tokens into `out` (created if needed; the command line gives a staging directory), in the format of
/// this module's documentation, `meta.json` last. Refuses, before writing anything, an empty or repeated position, a `length` not above every position, and tables over
/// [`MAX_TABLE_BYTES`].
pub fn write_rope_tables(
    config: &ModelConfig,
    model_path: &Path,
    positions: &[usize],
    length: usize,
    out: &Path,
) -> Result<TableShape> {
    let shape = TableShape::of(config, positions.len())?;
    shape.check_size()?;
    validate(positions, length)?;
    let (l_n, p_n, c_n) = (shape.n_layers, shape.n_positions, shape.n_chunks);
    let specs = config.rope_specs(length);
    let model_sha256 = sha256_file(model_path)?;
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;

    // `validate` checked that the largest position fits an i64.
    let positions64: Vec<i64> = positions.iter().map(|&p| p as i64).collect();
    npy::write(&out.join("positions.npy"), &[p_n], &positions64)?;
    let inv_freq: Vec<f64> = specs
        .iter()
        .flat_map(|s| padded(s.inv_freq.iter().copied(), c_n))
        .collect();
    npy::write_with_absent(&out.join("inv_freq.npy"), &[l_n, c_n], &inv_freq)?;
    npy::write_with_absent(
        &out.join("cos.npy"),
        &[l_n, p_n, c_n],
        &table(&specs, positions, c_n, |(c, _)| c),
    )?;
    npy::write_with_absent(
        &out.join("sin.npy"),
        &[l_n, p_n, c_n],
        &table(&specs, positions, c_n, |(_, s)| s),
    )?;

    let layers = config
        .layers
        .iter()
        .zip(&specs)
        .enumerate()
        .map(|(i, (layer, spec))| LayerMeta {
            layer: i,
            head_dim: layer.head_dim(),
            rot_dim: spec.rot_dim,
            base: layer.rope.base,
            scaling: &layer.rope.scaling,
            magnitude: spec.magnitude,
            window: layer.window,
            longrope_factors: layer.rope.scaling.switches_above().map(|above| {
                if length > above {
                    "long"
                } else {
                    "short"
                }
            }),
        })
        .collect();
    let meta = Meta {
        producer: format!("ropescope {}", env!("CARGO_PKG_VERSION")),
        model_file: model_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
        model_sha256,
        architecture: &config.architecture,
        head_dim: config.layers.iter().map(|l| l.head_dim()).max().unwrap_or(0),
        rot_dim: 2 * c_n,
        pairing: config.pairing.name(),
        pairing_dims: pairing_dims(config.pairing),
        length,
        n_layers: l_n,
        n_positions: p_n,
        n_chunks: c_n,
        layers,
        shapes: BTreeMap::from([
            ("positions.npy", vec![p_n]),
            ("inv_freq.npy", vec![l_n, c_n]),
            ("cos.npy", vec![l_n, p_n, c_n]),
            ("sin.npy", vec![l_n, p_n, c_n]),
        ]),
        files: BTreeMap::from([
            (
                "positions.npy",
                "int64 [P]: the positions, in the order asked for",
            ),
            (
                "inv_freq.npy",
                "float64 [L, C]: per layer, the angular frequency g_l (rad/token) of each chunk after scaling; NaN beyond the chunks a layer rotates (none on a NoPE layer)",
            ),
            (
                "cos.npy",
                "float64 [L, P, C]: m cos(p g_l), m the layer's magnitude",
            ),
            (
                "sin.npy",
                "float64 [L, P, C]: m sin(p g_l), m the layer's magnitude",
            ),
        ]),
    };
    write_json(&out.join("meta.json"), &meta)?;
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_positions_and_short_lengths_are_refused() {
        assert!(validate(&[0, 1, 2], 3).is_ok());
        let twice = validate(&[4, 1, 4], 10).unwrap_err().to_string();
        assert!(twice.contains("position 4 is given twice"), "{twice}");
        let short = validate(&[0, 7], 7).unwrap_err().to_string();
        assert!(
            short.contains("length 7 does not cover position 7"),
            "{short}"
        );
        assert!(validate(&[], 1).is_err());
    }

    #[test]
    fn size_limit_is_one_gibibyte_of_cos_and_sin() {
        let at = |n_positions| TableShape {
            n_layers: 4,
            n_positions,
            n_chunks: 64,
        };
        // 4 × 64 × 16 = 4096 bytes per position: 2^18 positions are exactly 1 GiB.
        assert!(at(1 << 18).check_size().is_ok());
        let over = at((1 << 18) + 1).check_size().unwrap_err().to_string();
        assert!(over.contains("1 GiB"), "{over}");
        assert!(at(usize::MAX).check_size().is_err());
    }
}
