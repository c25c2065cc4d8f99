//! A scan output directory read back from disk: `meta.json`, `summary.json` and the `.npy` arrays, each array
//! checked against the model's shape. Arrays of analyses that did not run are `None`.

use crate::error::{Error, Result};
use crate::export::npy::Array;
use crate::scan::format::{files, Meta, Summary};
use std::path::{Path, PathBuf};

/// An `.npy` array's values in C order: f64, or f32 for the attention maps (kept in their file's precision,
/// half the memory: on an 8B model the two sets' maps are 0.5 GiB as f32).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor<E = f64> {
    /// Shape.
    pub shape: Vec<usize>,
    /// Values.
    pub data: Vec<E>,
}

impl<E> Tensor<E> {
    /// The contiguous block at leading indices `idx` (e.g. `[layer, head]` of an `[L, H, C]` array gives the
    /// `C` values); `None` when an index is out of range.
    pub fn at(&self, idx: &[usize]) -> Option<&[E]> {
        if idx.len() > self.shape.len() {
            return None;
        }
        let mut start = 0;
        for (k, &i) in idx.iter().enumerate() {
            if i >= self.shape[k] {
                return None;
            }
            start = start * self.shape[k] + i;
        }
        let block: usize = self.shape[idx.len()..].iter().product();
        self.data.get(start * block..(start + 1) * block)
    }
}

/// The files of one scan directory needed to draw its figures.
pub struct ScanData {
    /// The directory.
    pub dir: PathBuf,
    /// `meta.json`.
    pub meta: Meta,
    /// `summary.json`.
    pub summary: Summary,
    /// Per prompt set (natural, random): `slash_{set}.npy`.
    pub slash: [Option<Tensor>; 2],
    /// Per prompt set: `attention_map_{set}.npy`.
    pub attention: [Option<Tensor<f32>>; 2],
    /// `chunk_norms_q_natural.npy`.
    pub chunk_norms_q: Option<Tensor>,
    /// `chunk_norms_k_natural.npy`.
    pub chunk_norms_k: Option<Tensor>,
    /// `chunk_frequency.npy`.
    pub chunk_frequency: Option<Tensor>,
    /// `singular_values_q_natural.npy`.
    pub singular_q: Option<Tensor>,
    /// `singular_values_k_natural.npy`.
    pub singular_k: Option<Tensor>,
    /// `fourier_amplitude_natural.npy`.
    pub fourier_amplitude: Option<Tensor>,
    /// The `ablation.json` report, when that analysis ran.
    pub ablation: Option<serde_json::Value>,
}

/// Reads a JSON file of the scan directory.
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    crate::export::read_json(path, "scan")
}

impl ScanData {
    /// Reads the scan directory `dir`. `meta.json` and `summary.json` must exist; every array is optional, but
    /// a present array must be readable and start with the dimensions `[L, H]` (`[L]` for `chunk_frequency`).
    pub fn open(dir: &Path) -> Result<Self> {
        let meta: Meta = read_json(&dir.join(files::META))?;
        if let Some(why) = meta.incomplete() {
            return Err(Error::BadData(format!(
                "{}: not a complete scan directory: its {} says {why}; it was written by a scan that did not \
                 finish or by an older ropescope: run the scan again",
                dir.display(),
                files::META
            )));
        }
        let summary: Summary = read_json(&dir.join(files::SUMMARY))?;
        let (l, h) = (meta.model.n_layers, meta.model.n_heads);
        let lh = [l, h];
        let set = |pattern: &str, i: usize| files::for_set(pattern, ["natural", "random"][i]);
        let get = |name: String, lead: &[usize], rank: usize| {
            load(dir, &name, lead, rank).map(|a| {
                a.map(|a| Tensor {
                    data: a.to_f64(),
                    shape: a.shape,
                })
            })
        };
        let get_map = |i: usize| -> Result<Option<Tensor<f32>>> {
            let name = set(files::ATTENTION_MAP, i);
            let Some(a) = load(dir, &name, &lh, 4)? else {
                return Ok(None);
            };
            let data = a.to_f32().ok_or_else(|| {
                Error::BadData(format!(
                    "{}: expected float32 values",
                    dir.join(&name).display()
                ))
            })?;
            Ok(Some(Tensor {
                data,
                shape: a.shape,
            }))
        };
        let ablation_path = dir.join("ablation.json");
        let ablation = if ablation_path.exists() {
            Some(read_json(&ablation_path)?)
        } else {
            None
        };
        Ok(Self {
            slash: [
                get(set(files::SLASH, 0), &lh, 3)?,
                get(set(files::SLASH, 1), &lh, 3)?,
            ],
            attention: [get_map(0)?, get_map(1)?],
            chunk_norms_q: get(set(files::CHUNK_NORMS_Q, 0), &lh, 3)?,
            chunk_norms_k: get(set(files::CHUNK_NORMS_K, 0), &lh, 3)?,
            chunk_frequency: get(files::CHUNK_FREQUENCY.into(), &[l], 2)?,
            singular_q: get(set(files::SINGULAR_VALUES_Q, 0), &lh, 3)?,
            singular_k: get(set(files::SINGULAR_VALUES_K, 0), &lh, 3)?,
            fourier_amplitude: get(set(files::FOURIER_AMPLITUDE, 0), &lh, 3)?,
            ablation,
            dir: dir.to_path_buf(),
            meta,
            summary,
        })
    }

    /// Length in tokens of the first prompt of set `set` (0 natural, 1 random), the prompt the maps show.
    pub fn first_prompt_length(&self, set: usize) -> Option<usize> {
        let name = ["natural", "random"][set];
        let s = self.meta.prompt_sets.iter().find(|p| p.name == name)?;
        s.lengths.first().copied()
    }
}

/// Reads `dir/name` when it exists; checks it has `rank` dimensions starting with `lead`.
fn load(dir: &Path, name: &str, lead: &[usize], rank: usize) -> Result<Option<Array>> {
    let path = dir.join(name);
    if !path.exists() {
        return Ok(None);
    }
    let array = Array::read(&path)?;
    if array.shape.len() != rank || !array.shape.starts_with(lead) {
        return Err(Error::BadData(format!(
            "{}: shape {:?} does not fit the model (expected {rank} dimensions starting {lead:?})",
            path.display(),
            array.shape
        )));
    }
    Ok(Some(array))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_slices_leading_indices() {
        let t = Tensor {
            shape: vec![2, 3, 2],
            data: (0..12).map(f64::from).collect(),
        };
        assert_eq!(t.at(&[1, 2]), Some(&[10.0, 11.0][..]));
        assert_eq!(t.at(&[1]).map(<[f64]>::len), Some(6));
        assert_eq!(t.at(&[2, 0]), None);
        assert_eq!(t.at(&[0, 0, 0, 0]), None);
    }
}
