//! NumPy `.npy` files (format version 1.0, C order, little-endian): writing arrays of f32, f64 and i64, and
//! reading them back as f64 or i64.
//!
//! Written here rather than taken from a crate: the format is a short header plus raw little-endian data, and
//! the reader must bound everything by the file's size, which the few small npy crates do not promise.

use crate::error::{Error, Result};
use std::path::Path;

/// Element types ropescope writes and reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `<f4`
    F32,
    /// `<f8`
    F64,
    /// `<i4`
    I32,
    /// `<i8`
    I64,
}

impl Dtype {
    fn descr(self) -> &'static str {
        match self {
            Dtype::F32 => "<f4",
            Dtype::F64 => "<f8",
            Dtype::I32 => "<i4",
            Dtype::I64 => "<i8",
        }
    }
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F64 | Dtype::I64 => 8,
        }
    }
}

/// A value type that can be stored in a `.npy` file.
pub trait NpyElement: Copy {
    /// Its dtype.
    const DTYPE: Dtype;
    /// Appends its little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
    /// The value as f64 (exact for every element type written here but i64 beyond 2⁵³, which is finite).
    fn as_f64(self) -> f64;
}

impl NpyElement for f32 {
    const DTYPE: Dtype = Dtype::F32;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn as_f64(self) -> f64 {
        f64::from(self)
    }
}
impl NpyElement for f64 {
    const DTYPE: Dtype = Dtype::F64;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn as_f64(self) -> f64 {
        self
    }
}
impl NpyElement for i64 {
    const DTYPE: Dtype = Dtype::I64;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn as_f64(self) -> f64 {
        self as f64
    }
}

/// The header of a version 1.0 file for `dtype` and `shape`, padded so the data starts at a multiple of 64.
fn header(dtype: Dtype, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = if shape.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
        dtype.descr(),
        shape_text
    );
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat(unpadded.div_ceil(64) * 64 - unpadded));
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Writes `data` with `shape` to `path` atomically. Every value must be finite: an output of ropescope never
/// holds a NaN or an infinity (the forward pass refuses them where they arise, [`crate::Error::NonFinite`]), so
/// one here is a defect, refused ([`crate::Error::Internal`]) with the file and the index of the first.
pub fn write<E: NpyElement>(path: &Path, shape: &[usize], data: &[E]) -> Result<()> {
    write_checked(path, shape, data, false)
}

/// [`write()`] for an array whose format marks an entry that does not exist with NaN (a head with no value for
/// a chunk, a spread over no tokens; `fixtures/scan/FORMAT.md` says which). Infinities are still refused.
pub fn write_with_absent<E: NpyElement>(path: &Path, shape: &[usize], data: &[E]) -> Result<()> {
    write_checked(path, shape, data, true)
}

fn write_checked<E: NpyElement>(
    path: &Path,
    shape: &[usize],
    data: &[E],
    nan_is_absent: bool,
) -> Result<()> {
    check_shape(shape, data.len())
        .map_err(|e| Error::Internal(format!("npy {}: {e}", path.display())))?;
    let bad = |v: f64| !(v.is_finite() || nan_is_absent && v.is_nan());
    if let Some(i) = data.iter().position(|v| bad(v.as_f64())) {
        return Err(Error::Internal(format!(
            "refusing to write {}: element {:?} is {}, and no output holds a non-finite value",
            path.display(),
            unravel(i, shape),
            data[i].as_f64()
        )));
    }
    crate::io::write_atomic(path, |w| {
        w.write_all(&header(E::DTYPE, shape))?;
        let mut buf = Vec::with_capacity(1 << 16);
        for chunk in data.chunks(8192) {
            buf.clear();
            chunk.iter().for_each(|&v| v.put(&mut buf));
            w.write_all(&buf)?;
        }
        Ok(())
    })
}

/// The bytes of a `.npy` file holding `data` with `shape`, whatever the values: for tests that stand in for
/// another engine's files (which may hold non-finite values that ropescope must report, not write).
pub fn encode<E: NpyElement>(shape: &[usize], data: &[E]) -> Result<Vec<u8>> {
    check_shape(shape, data.len()).map_err(Error::Internal)?;
    let mut out = header(E::DTYPE, shape);
    data.iter().for_each(|&v| v.put(&mut out));
    Ok(out)
}

/// Whether `shape` holds exactly `n` values.
fn check_shape(shape: &[usize], n: usize) -> std::result::Result<(), String> {
    let size = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if size == Some(n) {
        Ok(())
    } else {
        Err(format!("shape {shape:?} does not hold {n} values"))
    }
}

/// The multi-index of C-order element `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[k] = i % d;
            i /= d;
        }
    }
    idx
}

/// An array read from a `.npy` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// Element type in the file.
    pub dtype: Dtype,
    /// Shape.
    pub shape: Vec<usize>,
    /// Raw little-endian data.
    data: Vec<u8>,
}

impl Array {
    /// Reads `path`; only C-order little-endian f32, f64, i32 and i64 arrays are accepted. Only a regular file
    /// is read, of at most 16 GiB (`MAX_NPY_BYTES`; [`Error::Resource`] above it).
    pub fn read(path: &Path) -> Result<Self> {
        Self::read_limited(path, super::input_file::MAX_NPY_BYTES, "a .npy file")
    }

    /// Reads `path` like [`Array::read`], refusing a file larger than `limit` bytes, the limit for `what` (`"a
    /// token-id file"`), which the error states.
    pub fn read_limited(path: &Path, limit: u64, what: &str) -> Result<Self> {
        let bytes = super::input_file::read_capped(path, limit, what)?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// Parses the bytes of a `.npy` file held in memory, with the same rules as [`Array::read`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::parse(bytes, "in-memory array")
    }

    /// Parses `bytes`, naming `origin` in any error.
    fn parse(bytes: &[u8], origin: &str) -> Result<Self> {
        let bad = |why: &str| Error::bad_data(origin, format!("not a readable .npy file ({why})"));
        if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
            return Err(bad("no NUMPY magic"));
        }
        let (hlen, start) = match bytes[6] {
            1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
            2 | 3 if bytes.len() >= 12 => (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            ),
            _ => return Err(bad("unsupported version")),
        };
        let dict = bytes
            .get(start..start + hlen)
            .ok_or_else(|| bad("truncated header"))?;
        let dict = std::str::from_utf8(dict).map_err(|_| bad("header is not text"))?;
        let field = |key: &str| -> Option<&str> {
            let at = dict.find(&format!("'{key}'"))? + key.len() + 2;
            Some(dict[at..].trim_start().trim_start_matches(':').trim_start())
        };
        let descr = field("descr").ok_or_else(|| bad("no descr"))?;
        let dtype = [Dtype::F32, Dtype::F64, Dtype::I32, Dtype::I64]
            .into_iter()
            .find(|d| descr.starts_with(&format!("'{}'", d.descr())))
            .ok_or_else(|| bad("dtype is not <f4, <f8, <i4 or <i8"))?;
        if !field("fortran_order").is_some_and(|f| f.starts_with("False")) {
            return Err(bad("Fortran order"));
        }
        let shape_text = field("shape").ok_or_else(|| bad("no shape"))?;
        let inner = shape_text
            .strip_prefix('(')
            .and_then(|s| s.split(')').next())
            .ok_or_else(|| bad("bad shape"))?;
        let shape = inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<usize>().map_err(|_| bad("bad shape")))
            .collect::<Result<Vec<_>>>()?;
        let data = bytes[start + hlen..].to_vec();
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| bad("shape overflows"))?;
        if n.checked_mul(dtype.size()) != Some(data.len()) {
            return Err(bad("data length does not match the shape"));
        }
        Ok(Self { dtype, shape, data })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The values as f64 (exact for f32, f64 and i32; i64 beyond 2^53 rounds).
    pub fn to_f64(&self) -> Vec<f64> {
        let b = &self.data;
        match self.dtype {
            Dtype::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect(),
            Dtype::F64 => b
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect(),
            Dtype::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect(),
            Dtype::I64 => b
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
                .collect(),
        }
    }

    /// The values, if the array holds f32.
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        (self.dtype == Dtype::F32).then(|| {
            self.data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        })
    }

    /// The values as i64, if the array holds integers.
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        let b = &self.data;
        match self.dtype {
            Dtype::I32 => Some(
                b.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default()) as i64)
                    .collect(),
            ),
            Dtype::I64 => Some(
                b.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_values_are_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let mut data = vec![0.5f32; 24];
        data[13] = f32::NAN;
        let e = write(&p, &[2, 3, 4], &data).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Internal);
        assert!(e.to_string().contains("element [1, 0, 1] is NaN"), "{e}");
        assert!(!p.exists());
        // NaN marks an absent entry where the format says so; an infinity never does.
        write_with_absent(&p, &[2, 3, 4], &data).unwrap();
        assert!(Array::read(&p).unwrap().to_f64()[13].is_nan());
        data[2] = f32::NEG_INFINITY;
        let e = write_with_absent(&p, &[24], &data).unwrap_err();
        assert!(e.to_string().contains("element [2] is -inf"), "{e}");
        // The bytes of any array, for files that stand in for another engine's.
        let bytes = encode(&[24], &data).unwrap();
        let a = Array::from_bytes(&bytes).unwrap();
        assert_eq!(a.to_f64()[2], f64::NEG_INFINITY);
        assert!(encode(&[5], &data).is_err());
    }

    #[test]
    fn round_trip_and_header_alignment() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let data: Vec<f64> = (0..24).map(|i| i as f64 * 0.25 - 3.0).collect();
        write(&p, &[2, 3, 4], &data).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let a = Array::read(&p).unwrap();
        assert_eq!(a.shape, vec![2, 3, 4]);
        assert_eq!(a.to_f64(), data);
        let q = dir.path().join("ids.npy");
        write(&q, &[3], &[5i64, -1, 7]).unwrap();
        assert_eq!(Array::read(&q).unwrap().to_i64(), Some(vec![5, -1, 7]));
    }

    #[test]
    fn truncated_data_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        write(&p, &[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 3]).unwrap();
        assert!(Array::read(&p)
            .unwrap_err()
            .to_string()
            .contains("does not match"));
    }
}
