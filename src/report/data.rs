//! A scan output directory read back from disk: `meta.json`, `summary.json`, `ablation.json` and the `.npy`
//! arrays, every file checked against the model `meta.json` records (`scan::read_back`) before anything is
//! allocated from it. Arrays of analyses that did not run are `None`.

use crate::error::{Error, Result};
use crate::io::npy::Array;
use crate::scan::format::{files, Meta, Summary};
use crate::scan::read_back;
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
    crate::io::read_json(path, "scan")
}

impl ScanData {
    /// Reads the scan directory `dir`. `meta.json` and `summary.json` must exist and pass
    /// [`ScanData::from_json`]'s checks; every array is optional, but a present array must have exactly the
    /// dtype and shape `meta.json` fixes (`scan::read_back::array_shape`), its size checked before it is read.
    pub fn open(dir: &Path) -> Result<Self> {
        let meta: Meta = read_json(&dir.join(files::META))?;
        let summary: Summary = read_json(&dir.join(files::SUMMARY))?;
        let ablation_path = dir.join(ABLATION_FILE);
        let ablation = if ablation_path.exists() {
            Some(read_json(&ablation_path)?)
        } else {
            None
        };
        let data = Self::from_json(dir, meta, summary, ablation)?;
        let set = |pattern: &str, i: usize| files::for_set(pattern, ["natural", "random"][i]);
        let get = |name: String| {
            load(dir, &name, &data.meta).map(|a| {
                a.map(|a| Tensor {
                    data: a.to_f64(),
                    shape: a.shape,
                })
            })
        };
        let get_map = |i: usize| -> Result<Option<Tensor<f32>>> {
            let Some(a) = load(dir, &set(files::ATTENTION_MAP, i), &data.meta)? else {
                return Ok(None);
            };
            Ok(a.to_f32().map(|data| Tensor {
                data,
                shape: a.shape,
            }))
        };
        Ok(Self {
            slash: [get(set(files::SLASH, 0))?, get(set(files::SLASH, 1))?],
            attention: [get_map(0)?, get_map(1)?],
            chunk_norms_q: get(set(files::CHUNK_NORMS_Q, 0))?,
            chunk_norms_k: get(set(files::CHUNK_NORMS_K, 0))?,
            chunk_frequency: get(files::CHUNK_FREQUENCY.into())?,
            singular_q: get(set(files::SINGULAR_VALUES_Q, 0))?,
            singular_k: get(set(files::SINGULAR_VALUES_K, 0))?,
            fourier_amplitude: get(set(files::FOURIER_AMPLITUDE, 0))?,
            ..data
        })
    }

    /// The scan of directory `dir` from its parsed `meta.json`, `summary.json` and `ablation.json`, without
    /// arrays. Refuses an incomplete scan, and a directory whose files break `scan::read_back`'s rules: counts
    /// beyond its maxima, a head missing, listed twice or outside the model, a per-head list of another length.
    pub fn from_json(
        dir: &Path,
        meta: Meta,
        summary: Summary,
        ablation: Option<serde_json::Value>,
    ) -> Result<Self> {
        let meta_path = dir.join(files::META);
        if let Some(why) = meta.incomplete() {
            return Err(Error::bad_data(dir, format!("not a complete scan directory: its {} says {why}; it was written by a scan that did not \
                 finish or by an older ropescope: run the scan again", files::META
            )));
        }
        read_back::check_meta(&meta, &meta_path)?;
        read_back::check_summary(&summary, &meta, &dir.join(files::SUMMARY))?;
        if let Some(a) = &ablation {
            read_back::check_ablation(a, &summary, &meta, &dir.join(ABLATION_FILE))?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            meta,
            summary,
            slash: [None, None],
            attention: [None, None],
            chunk_norms_q: None,
            chunk_norms_k: None,
            chunk_frequency: None,
            singular_q: None,
            singular_k: None,
            fourier_amplitude: None,
            ablation,
        })
    }

    /// Length in tokens of the first prompt of set `set` (0 natural, 1 random), the prompt the maps show.
    pub fn first_prompt_length(&self, set: usize) -> Option<usize> {
        let s = read_back::prompt_set(&self.meta, ["natural", "random"][set])?;
        s.lengths.first().copied()
    }
}

/// The multi-pass ablation's report in a scan directory.
const ABLATION_FILE: &str = "ablation.json";

/// Reads `dir/name` when it exists: a regular file whose size fits the dtype and shape `meta` fixes for it
/// (checked before reading, so nothing beyond that shape is allocated), then holding exactly that dtype and shape.
fn load(dir: &Path, name: &str, meta: &Meta) -> Result<Option<Array>> {
    let path = dir.join(name);
    let Ok(stat) = std::fs::metadata(&path) else {
        return Ok(None);
    };
    let (dtype, shape) = read_back::array_shape(meta, name)
        .ok_or_else(|| Error::Internal(format!("{name} is not an array of the scan format")))?;
    let bytes = read_back::array_bytes(dtype, &shape, &path)?;
    let expected = format!("{dtype:?} {shape:?} as {} implies", files::META);
    if !stat.is_file() {
        return Err(Error::bad_data(path, format!("not a regular file (expected {expected})")));
    }
    if !(bytes..=bytes + read_back::MAX_NPY_HEADER).contains(&stat.len()) {
        return Err(Error::bad_data(path, format!("a file of {} bytes does not fit the model: not the {bytes} bytes of data (plus a header of at most {} \
             bytes) of {expected}", stat.len(),
            read_back::MAX_NPY_HEADER
        )));
    }
    let array = Array::read(&path)?;
    if array.dtype != dtype || array.shape != shape {
        return Err(Error::bad_data(path, format!("{:?} {:?} does not fit the model: expected {expected}", array.dtype,
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
