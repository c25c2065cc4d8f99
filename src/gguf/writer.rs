//! A small GGUF writer: builds synthetic models for tests and the malformed files the reader must reject, and
//! encodes the header that `synth` streams its tensor data after.

use super::file::{DEFAULT_ALIGNMENT, MAGIC};
use super::value::{Array, Value};
use crate::quant::GgmlType;

/// A tensor to be written: name, ggml dims (fastest first), type and raw data bytes.
#[derive(Clone, Debug)]
pub struct TensorSpec {
    /// Tensor name.
    pub name: String,
    /// Shape in ggml order.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ty: GgmlType,
    /// Raw block data (for F32, the little-endian values).
    pub data: Vec<u8>,
}

/// Builder of a GGUF file in memory.
#[derive(Clone, Debug)]
pub struct GgufWriter {
    /// Version written in the header (2 or 3).
    pub version: u32,
    /// Metadata in the order it will be written.
    pub metadata: Vec<(String, Value)>,
    /// Tensors in the order they will be written.
    pub tensors: Vec<TensorSpec>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self {
            version: 3,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }
}

impl GgufWriter {
    /// An empty GGUF v3 file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a metadata key.
    pub fn kv(mut self, key: &str, value: Value) -> Self {
        self.metadata.push((key.to_string(), value));
        self
    }

    /// Adds an F32 tensor with ggml dims `dims` (fastest first) and values `values`.
    pub fn tensor_f32(self, name: &str, dims: &[u64], values: &[f32]) -> Self {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor_raw(name, dims, GgmlType::F32, data)
    }

    /// Adds a tensor of any type from its raw bytes.
    pub fn tensor_raw(mut self, name: &str, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> Self {
        self.tensors.push(TensorSpec {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
            data,
        });
        self
    }

    fn alignment(&self) -> u64 {
        match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Value::U32(a))) if *a > 0 => *a as u64,
            _ => DEFAULT_ALIGNMENT,
        }
    }

    /// Serialises the file: header, metadata, tensor directory, padding, aligned tensor data.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = self.alignment();
        let entries: Vec<DirectoryEntry> = self
            .tensors
            .iter()
            .map(|t| DirectoryEntry::new(&t.name, &t.dims, t.ty, t.data.len() as u64))
            .collect();
        let (mut out, offsets) = encode_header(self.version, &self.metadata, &entries, align);
        let data_start = out.len() as u64;
        for (t, off) in self.tensors.iter().zip(&offsets) {
            out.resize((data_start + off) as usize, 0);
            out.extend_from_slice(&t.data);
        }
        out
    }
}

/// A tensor directory entry to be written: the tensor's name, ggml dims, type and the bytes of its data.
#[derive(Clone, Copy, Debug)]
pub struct DirectoryEntry<'a> {
    /// Tensor name.
    pub name: &'a str,
    /// Shape in ggml order.
    pub dims: &'a [u64],
    /// Storage type.
    pub ty: GgmlType,
    /// Bytes of data.
    pub n_bytes: u64,
}

impl<'a> DirectoryEntry<'a> {
    /// The entry of tensor `name` with dims `dims`, type `ty` and `n_bytes` of data.
    pub fn new(name: &'a str, dims: &'a [u64], ty: GgmlType, n_bytes: u64) -> Self {
        Self {
            name,
            dims,
            ty,
            n_bytes,
        }
    }
}

/// Encodes everything before the tensor data: magic, version, counts, metadata and the tensor directory, padded
/// with zeros to the first multiple of `alignment`, where the data section starts. Returns those bytes and each
/// tensor's offset in the data section (tensors in the given order, each starting at a multiple of
/// `alignment`), so that a writer can stream the data after them.
pub fn encode_header(
    version: u32,
    metadata: &[(String, Value)],
    tensors: &[DirectoryEntry],
    alignment: u64,
) -> (Vec<u8>, Vec<u64>) {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    for (k, v) in metadata {
        put_str(&mut out, k);
        out.extend_from_slice(&v.type_id().to_le_bytes());
        put_value(&mut out, v);
    }
    let mut offset = 0u64;
    let mut offsets = Vec::with_capacity(tensors.len());
    for t in tensors {
        offsets.push(offset);
        offset = (offset + t.n_bytes).div_ceil(alignment) * alignment;
    }
    for (t, off) in tensors.iter().zip(&offsets) {
        put_str(&mut out, t.name);
        out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
        for d in t.dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&t.ty.id().to_le_bytes());
        out.extend_from_slice(&off.to_le_bytes());
    }
    let data_start = (out.len() as u64).div_ceil(alignment) * alignment;
    out.resize(data_start as usize, 0);
    (out, offsets)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(*x as u8),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a),
    }
}

fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&a.elem_type_id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr, $f:expr) => {
            for x in $v {
                $f(out, x)
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each!(v, |o: &mut Vec<u8>, x: &i8| o.push(*x as u8)),
        Array::U16(v) => each!(v, |o: &mut Vec<u8>, x: &u16| o
            .extend_from_slice(&x.to_le_bytes())),
        Array::I16(v) => each!(v, |o: &mut Vec<u8>, x: &i16| o
            .extend_from_slice(&x.to_le_bytes())),
        Array::U32(v) => each!(v, |o: &mut Vec<u8>, x: &u32| o
            .extend_from_slice(&x.to_le_bytes())),
        Array::I32(v) => each!(v, |o: &mut Vec<u8>, x: &i32| o
            .extend_from_slice(&x.to_le_bytes())),
        Array::U64(v) => each!(v, |o: &mut Vec<u8>, x: &u64| o
            .extend_from_slice(&x.to_le_bytes())),
        Array::I64(v) => each!(v, |o: &mut Vec<u8>, x: &i64| o
            .extend_from_slice(&x.to_le_bytes())),
        Array::F32(v) => each!(v, |o: &mut Vec<u8>, x: &f32| o
            .extend_from_slice(&x.to_le_bytes())),
        Array::F64(v) => each!(v, |o: &mut Vec<u8>, x: &f64| o
            .extend_from_slice(&x.to_le_bytes())),
        Array::Bool(v) => each!(v, |o: &mut Vec<u8>, x: &bool| o.push(*x as u8)),
        Array::String(v) => each!(v, |o: &mut Vec<u8>, x: &String| put_str(o, x)),
        Array::Array(v) => each!(v, put_array),
    }
}
