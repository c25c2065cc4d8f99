//! One tensor of a GGUF file, whole or a range of its rows, dequantized to float32 as ggml defines its values and
//! written as `.npy` (`ropescope tensor`): for checking another dequantizer against ggml's semantics on any file,
//! whatever its architecture.
//!
//! Shapes are in numpy order, ggml's dimensions (`ne`) reversed. A tensor's rows are the slices of its slowest
//! dimension: numpy's first axis, ggml's last dimension `ne[n-1]` (a matrix's rows; a 1-D tensor's elements). A
//! range of rows is dequantized alone, from the blocks that hold it; the rest of the tensor is not read.

use super::{GgmlType, GgufFile, TensorInfo};
use crate::error::{Error, Result};
use crate::io::inputs::Inputs;
use std::ops::Range;
use std::path::Path;

/// How many of the file's tensor names closest to an unknown one its error lists.
const CLOSE_NAMES: usize = 5;

/// Longest prefix of an unknown name compared with the file's names (the comparison costs its length times
/// theirs).
const COMPARED_CHARS: usize = 256;

/// One tensor (or a range of its rows) to write as float32 `.npy` ([`write_tensor`]).
#[derive(Clone, Debug)]
pub struct TensorRequest<'a> {
    /// The GGUF file; one cut inside its tensor data will do for the tensors wholly in it.
    pub file: &'a Path,
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub tensor: &'a str,
    /// The half-open range of rows to write (of the slowest dimension: numpy's first axis, ggml's last
    /// dimension); `None` writes them all.
    pub rows: Option<Range<u64>>,
    /// The `.npy` file to write, atomically; never the input.
    pub out: &'a Path,
    /// Whether an existing file `out` may be replaced.
    pub force: bool,
}

/// What [`write_tensor`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct WrittenTensor {
    /// The tensor's storage type.
    pub ty: GgmlType,
    /// The shape written, in numpy order.
    pub shape: Vec<usize>,
    /// The rows written, out of [`WrittenTensor::n_rows`].
    pub rows: Range<u64>,
    /// How many rows the tensor has.
    pub n_rows: u64,
}

/// The shape of a tensor in numpy order: ggml's dimensions reversed.
pub fn numpy_shape(info: &TensorInfo) -> Vec<u64> {
    info.dims.iter().rev().copied().collect()
}

/// The number of rows of a tensor (its slowest dimension) and the elements in one row.
fn row_geometry(info: &TensorInfo) -> (u64, u64) {
    let (&n_rows, inner) = info
        .dims
        .split_last()
        .expect("the reader refuses a tensor of no dimension");
    (n_rows, inner.iter().product())
}

/// The error for a tensor `name` that `file` does not have, listing the names closest to it.
fn unknown_tensor(file: &GgufFile, path: &Path, name: &str) -> Error {
    let tensors = file.tensors();
    if tensors.is_empty() {
        return Error::Argument(format!(
            "tensor '{name}' is not in {}, which has no tensors",
            path.display()
        ));
    }
    let prefix = |s: &str| s.chars().take(COMPARED_CHARS).collect::<String>();
    let wanted = prefix(name);
    let wanted_lower = wanted.to_lowercase();
    // Closest first ignoring case (a name differing only in case comes first), then with case.
    let mut ranked: Vec<(usize, usize, &str)> = tensors
        .iter()
        .map(|t| {
            let theirs = prefix(&t.name);
            let lower = strsim::levenshtein(&wanted_lower, &theirs.to_lowercase());
            (
                lower,
                strsim::levenshtein(&wanted, &theirs),
                t.name.as_str(),
            )
        })
        .collect();
    ranked.sort_unstable();
    let close: Vec<&str> = ranked.iter().take(CLOSE_NAMES).map(|r| r.2).collect();
    Error::Argument(format!(
        "tensor '{name}' is not in {} ({} tensors); the closest names: {}",
        path.display(),
        tensors.len(),
        close.join(", ")
    ))
}

/// Refuses a tensor whose type ropescope cannot dequantize, naming it.
fn check_type(info: &TensorInfo) -> Result<()> {
    if info.ty.can_dequantize() {
        Ok(())
    } else {
        Err(Error::UnsupportedType {
            tensor: info.name.clone(),
            type_name: info.ty.name().to_string(),
        })
    }
}

/// Rows `rows` (half-open, of the slowest dimension: numpy's first axis, ggml's last) of tensor `info`, an entry
/// of `file`'s directory, dequantized to f32 in C order; only the blocks holding them are read. Errors: a type that cannot be
/// dequantized, a range that is empty or beyond the tensor's rows, data not wholly in the file, or more values
/// than this machine can allocate.
pub fn dequantize_rows(file: &GgufFile, info: &TensorInfo, rows: Range<u64>) -> Result<Vec<f32>> {
    let name = &info.name;
    check_type(info)?;
    let (n_rows, row_len) = row_geometry(info);
    if rows.start >= rows.end || rows.end > n_rows {
        return Err(Error::parameter(
            "rows",
            format!(
                "{}..{} is not a non-empty range of the {n_rows} rows of tensor '{name}' (its slowest \
                 dimension: numpy's first axis, ggml's ne[{}])",
                rows.start,
                rows.end,
                info.dims.len() - 1
            ),
        ));
    }
    if !file.is_complete(info) {
        return Err(Error::Truncated {
            what: format!("data of tensor '{name}'"),
            offset: file.data_offset().saturating_add(info.offset),
            needed: info.n_bytes,
            len: file.file_size(),
        });
    }
    // Every element index below is at most `n_elements`, which the reader checked; the blocks that hold the
    // rows are inside the tensor's data, which is inside the file.
    let (bs, ts) = (info.ty.block_size() as u64, info.ty.type_size() as u64);
    let (first, end) = (rows.start * row_len, rows.end * row_len);
    let (block_first, block_end) = (first / bs, end.div_ceil(bs));
    let n_values = usize::try_from((block_end - block_first) * bs)
        .map_err(|_| Error::Resource(format!("tensor '{name}' is too large for this machine")))?;
    let mut values = Vec::new();
    values.try_reserve_exact(n_values).map_err(|_| {
        Error::Resource(format!(
            "cannot allocate {n_values} float32 values for rows {}..{} of tensor '{name}'; write fewer rows",
            rows.start, rows.end
        ))
    })?;
    values.resize(n_values, 0f32);
    let bytes = &file.tensor_bytes(info)[(block_first * ts) as usize..(block_end * ts) as usize];
    crate::quant::dequantize_into(info.ty, bytes, &mut values, name)?;
    // A 1-D tensor's rows need not fill whole blocks: keep only the requested elements.
    let skip = (first - block_first * bs) as usize;
    values.truncate(skip + (end - first) as usize);
    values.drain(..skip);
    Ok(values)
}

/// Writes rows `req.rows` of tensor `req.tensor` of `req.file`, dequantized to float32, as the `.npy` file
/// `req.out` (atomically: whole or not at all), and says what it wrote.
///
/// Refused before any work: an `out` that is the input file (through any link or spelling), or neither a regular
/// file (or a link to one), a character device nor a FIFO, or an existing file without `req.force`. Then: a
/// tensor the file does not have (the error lists the closest names), a type ropescope cannot dequantize, rows
/// out of range, and a tensor holding a non-finite value (no output of ropescope holds one).
pub fn write_tensor(req: &TensorRequest) -> Result<WrittenTensor> {
    crate::io::check_output_file(req.out, &Inputs::new([req.file]))?;
    if !req.force && std::fs::metadata(req.out).is_ok_and(|m| m.is_file()) {
        return Err(Error::parameter(
            "force",
            format!(
                "is needed to replace {}, which exists; or choose another file",
                req.out.display()
            ),
        ));
    }
    let file = GgufFile::open_header(req.file)?;
    let info = file
        .tensor(req.tensor)
        .map_err(|_| unknown_tensor(&file, req.file, req.tensor))?;
    let (n_rows, _) = row_geometry(info);
    let rows = req.rows.clone().unwrap_or(0..n_rows);
    let values = if req.rows.is_none() && n_rows == 0 {
        check_type(info)?;
        Vec::new()
    } else {
        dequantize_rows(&file, info, rows.clone())?
    };
    let mut shape = numpy_shape(info);
    shape[0] = rows.end - rows.start;
    let shape: Vec<usize> = shape.into_iter().map(|d| d as usize).collect();
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        let row_len = values.len() / shape[0];
        return Err(Error::BadData {
            path: req.file.to_path_buf(),
            what: format!(
                "tensor '{}' ({}) holds {} at row {}, element {} of the row; ropescope writes no non-finite \
                 value",
                req.tensor,
                info.ty,
                values[i],
                rows.start + (i / row_len) as u64,
                i % row_len
            ),
        });
    }
    crate::io::npy::write(req.out, &shape, &values)?;
    Ok(WrittenTensor {
        ty: info.ty,
        shape,
        rows,
        n_rows,
    })
}
