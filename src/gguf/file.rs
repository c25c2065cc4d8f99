//! Parsing a whole GGUF file: header, metadata, tensor directory, and access to tensor data over a memory map.

use super::cursor::Cursor;
use super::value::{type_id, Array, Value};
use crate::error::{Error, Result};
use crate::quant::GgmlType;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The magic bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's maximum number of tensor dimensions.
pub const MAX_DIMS: u32 = 4;
/// How deeply metadata arrays may nest (arrays of arrays of ...). Real files use at most one level.
pub const MAX_ARRAY_DEPTH: u32 = 8;

/// Smallest encoding of a metadata key-value pair: key length (8), empty key, type (4), one byte of value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Smallest encoding of a tensor directory entry: name length (8), n_dims (4), one dim (8), type (4), offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

/// One entry of the tensor directory.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Tensor name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Shape in ggml order: `dims[0]` is the contiguous (fastest) dimension.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ty: GgmlType,
    /// Offset of the data relative to the start of the data section.
    pub offset: u64,
    /// Number of elements (product of `dims`, checked for overflow).
    pub n_elements: u64,
    /// Number of bytes of data.
    pub n_bytes: u64,
}

/// How much of the tensor data the directory announces is in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DataExtent {
    /// The file size the tensor directory implies: the end of the data of the tensor that ends last (saturating
    /// at `u64::MAX`), or the file's own size when there are no tensors and the file ends before the data section.
    pub expected_size: u64,
    /// The actual file size.
    pub file_size: u64,
    /// Tensors whose data lies wholly inside the file.
    pub complete_tensors: usize,
    /// Tensors whose data ends past the end of the file.
    pub incomplete_tensors: usize,
}

impl DataExtent {
    /// Bytes of tensor data missing from the end of the file (0 for a whole file).
    pub fn missing_bytes(&self) -> u64 {
        self.expected_size.saturating_sub(self.file_size)
    }

    /// Whether every tensor's data is in the file (exactly when no byte is missing).
    pub fn is_whole(&self) -> bool {
        self.incomplete_tensors == 0
    }

    /// The error refusing a file with this extent, of `n_tensors` tensors, the first incomplete one `first`.
    fn truncated(&self, n_tensors: usize, first: &str) -> Error {
        Error::TruncatedData {
            missing: self.missing_bytes(),
            expected_size: self.expected_size,
            file_size: self.file_size,
            incomplete: self.incomplete_tensors,
            n_tensors,
            first: first.to_string(),
        }
    }
}

/// Whether parsing refuses a file whose tensor data is incomplete.
#[derive(Clone, Copy, PartialEq)]
enum Data {
    /// Every tensor's data must be in the file.
    Whole,
    /// The header is enough; tensors whose data is missing are marked incomplete.
    HeaderOnly,
}

enum Storage {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// The bytes of one tensor, sharing the file's memory map: a handle that keeps the data readable after the
/// [`GgufFile`] it came from is dropped, without copying it.
#[derive(Clone)]
pub struct TensorData {
    storage: Arc<Storage>,
    range: Range<usize>,
}

impl TensorData {
    /// The raw bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.storage.bytes()[self.range.clone()]
    }

    /// The sub-range `range` of these bytes (relative to their start). Panics if it does not lie inside them.
    pub fn slice(&self, range: Range<usize>) -> TensorData {
        assert!(range.start <= range.end && range.end <= self.range.len());
        TensorData {
            storage: Arc::clone(&self.storage),
            range: self.range.start + range.start..self.range.start + range.end,
        }
    }
}

/// A parsed GGUF file whose tensor data stays in a read-only memory map until asked for.
pub struct GgufFile {
    path: Option<PathBuf>,
    storage: Arc<Storage>,
    version: u32,
    metadata: Vec<(String, Value)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
    extent: DataExtent,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("n_kv", &self.metadata.len())
            .field("n_tensors", &self.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Opens and parses the file at `path` over a read-only memory map. A file whose tensor data is incomplete
    /// is refused ([`Error::TruncatedData`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), Data::Whole)
    }

    /// Opens the file at `path` like [`GgufFile::open`], but needs only its header (metadata and tensor
    /// directory) to be whole: a file cut inside its tensor data opens, [`GgufFile::data_extent`] says how much is
    /// missing, and the data of its incomplete tensors cannot be read ([`GgufFile::dequantize_f32`] refuses them,
    /// [`GgufFile::require_whole_data`] refuses the file).
    pub fn open_header(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), Data::HeaderOnly)
    }

    /// Opens `path` over a memory map (not read into memory, so its size is not capped); a FIFO, a device or a
    /// directory is refused by name before it is opened.
    fn open_with(path: &Path, data: Data) -> Result<Self> {
        let file = crate::io::input_file::open_regular(path)?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let storage = if len == 0 {
            // An empty file cannot be mapped; it fails below as truncated.
            Storage::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only and the file is opened read-only; as with every mmap-based reader,
            // the file must not be truncated by another process while it is mapped.
            Storage::Mapped(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?)
        };
        let mut parsed = Self::parse(storage, data)?;
        parsed.path = Some(path.to_path_buf());
        Ok(parsed)
    }

    /// Parses a GGUF file held in memory; incomplete tensor data is refused, as by [`GgufFile::open`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::parse(Storage::Owned(bytes), Data::Whole)
    }

    /// Parses the header of a GGUF file held in memory, tolerating incomplete tensor data, as
    /// [`GgufFile::open_header`] does.
    pub fn header_from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::parse(Storage::Owned(bytes), Data::HeaderOnly)
    }

    fn parse(storage: Storage, data: Data) -> Result<Self> {
        let buf = storage.bytes();
        let mut c = Cursor::new(buf);
        let magic: [u8; 4] = c.take(4, &|| "magic".into())?.try_into().expect("4 bytes");
        if magic != MAGIC {
            return Err(Error::BadMagic { found: magic });
        }
        let version = c.u32(&|| "version".into())?;
        if version != 2 && version != 3 {
            return Err(Error::UnsupportedVersion(version));
        }
        let n_tensors = c.u64(&|| "tensor count".into())?;
        let n_kv = c.u64(&|| "metadata count".into())?;

        let n_kv = c.check_count(n_kv, MIN_KV_BYTES, &|| "metadata key count".into())?;
        let mut metadata = Vec::with_capacity(n_kv);
        let mut key_index = HashMap::with_capacity(n_kv);
        for i in 0..n_kv {
            let key = c.string(&|| format!("metadata key #{i}"))?;
            let ty = c.u32(&|| format!("type of metadata '{key}'"))?;
            let value = read_value(&mut c, ty, &key, 0)?;
            if key_index.insert(key.clone(), metadata.len()).is_some() {
                return Err(Error::Malformed(format!("duplicate metadata key '{key}'")));
            }
            metadata.push((key, value));
        }

        let alignment = match metadata.get(
            key_index
                .get("general.alignment")
                .copied()
                .unwrap_or(usize::MAX),
        ) {
            None => DEFAULT_ALIGNMENT,
            Some((_, Value::U32(a))) if *a > 0 && a.is_power_of_two() => *a as u64,
            Some((_, v)) => {
                return Err(Error::Malformed(format!(
                    "general.alignment must be a u32 power of two, found {v:?}"
                )))
            }
        };

        let n_tensors =
            c.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, &|| "tensor count".into())?;
        let mut tensors = Vec::with_capacity(n_tensors);
        let mut tensor_index = HashMap::with_capacity(n_tensors);
        for i in 0..n_tensors {
            let info = read_tensor_info(&mut c, i, alignment)?;
            if tensor_index
                .insert(info.name.clone(), tensors.len())
                .is_some()
            {
                return Err(Error::Malformed(format!(
                    "duplicate tensor name '{}'",
                    info.name
                )));
            }
            tensors.push(info);
        }
        check_disjoint(&tensors)?;

        let data_offset = (c.pos() as u64).div_ceil(alignment) * alignment;
        let file_size = buf.len() as u64;
        let mut extent = DataExtent {
            expected_size: data_offset.min(file_size),
            file_size,
            complete_tensors: 0,
            incomplete_tensors: 0,
        };
        let mut first_incomplete = None;
        for t in &tensors {
            // A tensor ends inside the file only if the file reaches the data section (an empty tensor in a file
            // cut inside the padding before it is incomplete too).
            let end = data_offset
                .saturating_add(t.offset)
                .saturating_add(t.n_bytes);
            extent.expected_size = extent.expected_size.max(end);
            if end <= file_size {
                extent.complete_tensors += 1;
            } else {
                extent.incomplete_tensors += 1;
                first_incomplete.get_or_insert(t.name.as_str());
            }
        }
        if let (Data::Whole, Some(first)) = (data, first_incomplete) {
            return Err(extent.truncated(tensors.len(), first));
        }

        Ok(Self {
            path: None,
            storage: Arc::new(storage),
            version,
            metadata,
            key_index,
            tensors,
            tensor_index,
            alignment,
            data_offset,
            extent,
        })
    }

    /// The path the file was opened from (`None` for in-memory files).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// GGUF format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Size of the whole file in bytes.
    pub fn file_size(&self) -> u64 {
        self.storage.bytes().len() as u64
    }

    /// Alignment of the tensor data section.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Offset of the tensor data section from the start of the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// All metadata, in file order.
    pub fn metadata(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.metadata.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The value of metadata key `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.key_index.get(key).map(|&i| &self.metadata[i].1)
    }

    /// The tensor directory, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The directory entry of tensor `name`.
    pub fn tensor(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor_index
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    /// How much of the tensor data the directory announces is in the file (all of it unless the file was
    /// opened with [`GgufFile::open_header`]).
    pub fn data_extent(&self) -> DataExtent {
        self.extent
    }

    /// Refuses a file whose tensor data is incomplete, with the error [`GgufFile::open`] gives for it.
    pub fn require_whole_data(&self) -> Result<()> {
        match self.tensors.iter().find(|t| !self.is_complete(t)) {
            None => Ok(()),
            Some(first) => Err(self.extent.truncated(self.tensors.len(), &first.name)),
        }
    }

    /// Whether the data of tensor `info` (an entry of this file's directory) lies wholly inside the file.
    pub fn is_complete(&self, info: &TensorInfo) -> bool {
        self.data_offset
            .checked_add(info.offset)
            .and_then(|start| start.checked_add(info.n_bytes))
            .is_some_and(|end| end <= self.extent.file_size)
    }

    /// The raw bytes of a tensor. Panics if its data is incomplete, which only a file opened with
    /// [`GgufFile::open_header`] can have (see [`GgufFile::is_complete`]).
    #[track_caller]
    pub fn tensor_bytes(&self, info: &TensorInfo) -> &[u8] {
        assert!(
            self.is_complete(info),
            "the data of tensor '{}' is incomplete",
            info.name
        );
        let start = (self.data_offset + info.offset) as usize;
        &self.storage.bytes()[start..start + info.n_bytes as usize]
    }

    /// A shared handle to the bytes of a tensor (no copy). Panics if its data is incomplete, as
    /// [`GgufFile::tensor_bytes`] does.
    #[track_caller]
    pub fn tensor_data(&self, info: &TensorInfo) -> TensorData {
        assert!(
            self.is_complete(info),
            "the data of tensor '{}' is incomplete",
            info.name
        );
        let start = (self.data_offset + info.offset) as usize;
        TensorData {
            storage: Arc::clone(&self.storage),
            range: start..start + info.n_bytes as usize,
        }
    }

    /// Dequantizes tensor `name` to f32 (row-major over ggml's dims: `dims[0]` fastest).
    pub fn dequantize_f32(&self, name: &str) -> Result<Vec<f32>> {
        let info = self.tensor(name)?;
        if !self.is_complete(info) {
            return Err(Error::Truncated {
                what: format!("data of tensor '{name}'"),
                offset: self.data_offset.saturating_add(info.offset),
                needed: info.n_bytes,
                len: self.extent.file_size,
            });
        }
        let n = usize::try_from(info.n_elements).map_err(|_| {
            Error::Malformed(format!("tensor '{name}' is too large for this machine"))
        })?;
        let mut out = vec![0f32; n];
        crate::quant::dequantize_into(info.ty, self.tensor_bytes(info), &mut out, name)?;
        Ok(out)
    }
}

/// Refuses a tensor directory in which the data of two tensors overlap, naming both: each tensor's bytes must be
/// its own (llama.cpp goes further and requires them in directory order without gaps). Tensors of no bytes
/// occupy nothing.
fn check_disjoint(tensors: &[TensorInfo]) -> Result<()> {
    let end = |t: &TensorInfo| t.offset.saturating_add(t.n_bytes);
    let mut by_offset: Vec<&TensorInfo> = tensors.iter().filter(|t| t.n_bytes > 0).collect();
    by_offset.sort_by_key(|t| t.offset);
    // The tensor ending last among those before `t`: `t` overlaps an earlier tensor exactly when it overlaps
    // that one.
    let mut reach: Option<&TensorInfo> = None;
    for t in by_offset {
        match reach {
            Some(r) if end(r) > t.offset => {
                return Err(Error::Malformed(format!(
                    "the data of tensors '{}' (bytes {} to {} of the data section) and '{}' (from byte {}) \
                     overlap; every tensor's data must be disjoint from the others'",
                    r.name,
                    r.offset,
                    end(r),
                    t.name,
                    t.offset
                )))
            }
            Some(r) if end(r) >= end(t) => {}
            _ => reach = Some(t),
        }
    }
    Ok(())
}

/// Reads one metadata value of type `ty`; `depth` counts enclosing arrays.
fn read_value(c: &mut Cursor, ty: u32, key: &str, depth: u32) -> Result<Value> {
    let what = || format!("value of metadata '{key}'");
    Ok(match ty {
        type_id::U8 => Value::U8(c.u8(&what)?),
        type_id::I8 => Value::I8(c.u8(&what)? as i8),
        type_id::U16 => Value::U16(c.u16(&what)?),
        type_id::I16 => Value::I16(c.u16(&what)? as i16),
        type_id::U32 => Value::U32(c.u32(&what)?),
        type_id::I32 => Value::I32(c.u32(&what)? as i32),
        type_id::U64 => Value::U64(c.u64(&what)?),
        type_id::I64 => Value::I64(c.u64(&what)? as i64),
        type_id::F32 => Value::F32(c.f32(&what)?),
        type_id::F64 => Value::F64(c.f64(&what)?),
        type_id::BOOL => Value::Bool(read_bool(c, key)?),
        type_id::STRING => Value::String(c.string(&what)?),
        type_id::ARRAY => Value::Array(read_array(c, key, depth)?),
        other => {
            return Err(Error::Malformed(format!(
                "metadata '{key}' has unknown value type {other}"
            )))
        }
    })
}

fn read_bool(c: &mut Cursor, key: &str) -> Result<bool> {
    match c.u8(&|| format!("value of metadata '{key}'"))? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(Error::Malformed(format!(
            "metadata '{key}' holds bool byte {b}, expected 0 or 1"
        ))),
    }
}

/// Reads a metadata array: element type, count, elements.
fn read_array(c: &mut Cursor, key: &str, depth: u32) -> Result<Array> {
    if depth >= MAX_ARRAY_DEPTH {
        return Err(Error::Malformed(format!(
            "metadata '{key}' nests arrays deeper than {MAX_ARRAY_DEPTH}"
        )));
    }
    let elem = c.u32(&|| format!("element type of array '{key}'"))?;
    let count = c.u64(&|| format!("length of array '{key}'"))?;
    let min_bytes = match elem {
        type_id::U8 | type_id::I8 | type_id::BOOL => 1,
        type_id::U16 | type_id::I16 => 2,
        type_id::U32 | type_id::I32 | type_id::F32 => 4,
        type_id::U64 | type_id::I64 | type_id::F64 | type_id::STRING => 8,
        type_id::ARRAY => 12,
        other => {
            return Err(Error::Malformed(format!(
                "array '{key}' has unknown element type {other}"
            )))
        }
    };
    let n = c.check_count(count, min_bytes, &|| format!("length of array '{key}'"))?;
    let what = || format!("elements of array '{key}'");
    macro_rules! fixed {
        ($variant:ident, $read:ident, $conv:expr) => {{
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push($conv(c.$read(&what)?));
            }
            Array::$variant(v)
        }};
    }
    Ok(match elem {
        type_id::U8 => fixed!(U8, u8, |x| x),
        type_id::I8 => fixed!(I8, u8, |x: u8| x as i8),
        type_id::U16 => fixed!(U16, u16, |x| x),
        type_id::I16 => fixed!(I16, u16, |x: u16| x as i16),
        type_id::U32 => fixed!(U32, u32, |x| x),
        type_id::I32 => fixed!(I32, u32, |x: u32| x as i32),
        type_id::U64 => fixed!(U64, u64, |x| x),
        type_id::I64 => fixed!(I64, u64, |x: u64| x as i64),
        type_id::F32 => fixed!(F32, f32, |x| x),
        type_id::F64 => fixed!(F64, f64, |x| x),
        type_id::BOOL => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(read_bool(c, key)?);
            }
            Array::Bool(v)
        }
        type_id::STRING => {
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                v.push(c.string(&|| format!("element {i} of array '{key}'"))?);
            }
            Array::String(v)
        }
        _ => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                match read_value(c, type_id::ARRAY, key, depth + 1)? {
                    Value::Array(a) => v.push(a),
                    _ => unreachable!("read_value of ARRAY returns an array"),
                }
            }
            Array::Array(v)
        }
    })
}

/// Reads one tensor directory entry and checks its shape, type and alignment.
fn read_tensor_info(c: &mut Cursor, index: usize, alignment: u64) -> Result<TensorInfo> {
    let name = c.string(&|| format!("name of tensor #{index}"))?;
    let what = || format!("directory entry of tensor '{name}'");
    let n_dims = c.u32(&what)?;
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(Error::Malformed(format!(
            "tensor '{name}' has {n_dims} dimensions (allowed: 1 to {MAX_DIMS})"
        )));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(c.u64(&what)?);
    }
    let type_raw = c.u32(&what)?;
    let offset = c.u64(&what)?;
    let ty = GgmlType::from_id(type_raw).ok_or_else(|| Error::UnsupportedType {
        tensor: name.clone(),
        type_name: format!("unknown ggml type id {type_raw}"),
    })?;
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(|| {
            Error::Malformed(format!(
                "tensor '{name}': shape {dims:?} overflows the element count"
            ))
        })?;
    if dims[0] % ty.block_size() as u64 != 0 {
        return Err(Error::Malformed(format!(
            "tensor '{name}': first dimension {} is not a multiple of the {ty} block size {}",
            dims[0],
            ty.block_size()
        )));
    }
    let n_bytes = ty.byte_size(n_elements).ok_or_else(|| {
        Error::Malformed(format!(
            "tensor '{name}': byte size of shape {dims:?} overflows"
        ))
    })?;
    if offset % alignment != 0 {
        return Err(Error::Malformed(format!(
            "tensor '{name}': data offset {offset} is not a multiple of the alignment {alignment}"
        )));
    }
    Ok(TensorInfo {
        name,
        dims,
        ty,
        offset,
        n_elements,
        n_bytes,
    })
}
