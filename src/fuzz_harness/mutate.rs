//! A seeded mutator: byte-level mutations (bit flips, byte overwrites, truncation, insertion, deletion,
//! duplication, splicing and crossover with other inputs, dictionary tokens) and GGUF-aware ones that find the
//! header counts, string lengths, value and tensor type ids, dimensions and offsets of a GGUF file and rewrite
//! them with boundary values.
//!
//! Written here rather than taken from a crate: `arbitrary` builds typed values from bytes and `mutatis`
//! mutates typed Rust values, and neither knows where the fields of a GGUF file lie. The parser's edge cases
//! need exactly those fields rewritten in place inside otherwise valid bytes (a count that disagrees with what
//! follows it cannot be expressed by re-serialising a typed model), which takes a walk over the layout, below.

use super::Target;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What a GGUF field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// The format version (u32).
    Version,
    /// A number of items: tensors, metadata pairs, array elements (u64).
    Count,
    /// A string's length in bytes (u64).
    Length,
    /// A metadata value or array element type id (u32).
    ValueType,
    /// A scalar metadata value or array element (1 to 8 bytes).
    Scalar,
    /// A tensor's number of dimensions (u32).
    DimCount,
    /// One tensor dimension (u64).
    Dim,
    /// A tensor's ggml type id (u32).
    TensorType,
    /// A tensor's data offset (u64).
    Offset,
}

/// One field of a GGUF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// What it holds.
    pub kind: FieldKind,
    /// Byte offset in the file.
    pub pos: usize,
    /// Width in bytes.
    pub width: usize,
}

/// Elements of one metadata array whose fields are recorded (the rest are walked over): enough to mutate the
/// start of a 50,000-token vocabulary without recording all of it.
const RECORDED_ELEMENTS: u64 = 16;
/// Deepest array nesting walked, as the reader allows.
const MAX_DEPTH: u32 = crate::gguf::MAX_ARRAY_DEPTH;

/// The fields of `bytes` read as a GGUF file, in file order, as far as the layout can be followed (a walk
/// stops at the first field that does not fit, so damaged files give the fields before the damage).
pub fn gguf_fields(bytes: &[u8]) -> Vec<Field> {
    let mut w = Walk {
        b: bytes,
        pos: 4,
        recording: true,
        out: Vec::new(),
    };
    w.header();
    w.out
}

struct Walk<'a> {
    b: &'a [u8],
    pos: usize,
    recording: bool,
    out: Vec<Field>,
}

impl Walk<'_> {
    fn field(&mut self, kind: FieldKind, width: usize) -> Option<u64> {
        let bytes = self.b.get(self.pos..self.pos.checked_add(width)?)?;
        let mut v = [0u8; 8];
        v[..width].copy_from_slice(bytes);
        if self.recording {
            self.out.push(Field {
                kind,
                pos: self.pos,
                width,
            });
        }
        self.pos += width;
        Some(u64::from_le_bytes(v))
    }

    fn skip(&mut self, n: u64) -> Option<()> {
        let end = self.pos.checked_add(usize::try_from(n).ok()?)?;
        (end <= self.b.len()).then(|| self.pos = end)
    }

    fn header(&mut self) -> Option<()> {
        self.field(FieldKind::Version, 4)?;
        let n_tensors = self.field(FieldKind::Count, 8)?;
        let n_kv = self.field(FieldKind::Count, 8)?;
        for _ in 0..n_kv {
            let key_len = self.field(FieldKind::Length, 8)?;
            self.skip(key_len)?;
            let ty = self.field(FieldKind::ValueType, 4)?;
            self.value(ty, 0)?;
        }
        for _ in 0..n_tensors {
            let name_len = self.field(FieldKind::Length, 8)?;
            self.skip(name_len)?;
            let n_dims = self.field(FieldKind::DimCount, 4)?;
            for _ in 0..n_dims.min(crate::gguf::MAX_DIMS as u64) {
                self.field(FieldKind::Dim, 8)?;
            }
            self.field(FieldKind::TensorType, 4)?;
            self.field(FieldKind::Offset, 8)?;
        }
        Some(())
    }

    fn value(&mut self, ty: u64, depth: u32) -> Option<()> {
        use crate::gguf::type_id as t;
        let width = match u32::try_from(ty).ok()? {
            t::U8 | t::I8 | t::BOOL => 1,
            t::U16 | t::I16 => 2,
            t::U32 | t::I32 | t::F32 => 4,
            t::U64 | t::I64 | t::F64 => 8,
            t::STRING => {
                let len = self.field(FieldKind::Length, 8)?;
                return self.skip(len);
            }
            t::ARRAY if depth < MAX_DEPTH => {
                let elem = self.field(FieldKind::ValueType, 4)?;
                let count = self.field(FieldKind::Count, 8)?;
                let was_recording = self.recording;
                for i in 0..count {
                    self.recording = was_recording && i < RECORDED_ELEMENTS;
                    let fixed = match elem {
                        0 | 1 | 7 => 1,
                        2 | 3 => 2,
                        4..=6 => 4,
                        10..=12 => 8,
                        _ => 0,
                    };
                    if fixed > 0 && !self.recording {
                        // Skip the rest of a fixed-width array at once.
                        self.skip((count - i).checked_mul(fixed)?)?;
                        break;
                    }
                    self.value(elem, depth + 1)?;
                }
                self.recording = was_recording;
                return Some(());
            }
            _ => return None,
        };
        self.field(FieldKind::Scalar, width).map(drop)
    }
}

/// Tokens the dictionary mutation inserts, per target.
fn dictionary(target: Target) -> &'static [&'static [u8]] {
    match target {
        Target::Npy => &[
            b"\x93NUMPY\x01\x00",
            b"'descr': '<f8'",
            b"'descr': '<i4'",
            b"'fortran_order': False",
            b"'shape': (",
            b"(18446744073709551615,",
            b"(0,)",
            b", ",
            b")",
            b"}",
        ],
        Target::NpyIds => &[
            b"\x93NUMPY\x01\x00",
            b"'descr': '<i8'",
            b"'descr': '<i4'",
            b"'shape': (1, ",
            b"'shape': (",
            b"(4294967296,",
            b", 1)",
            b"\xff\xff\xff\xff",
        ],
        Target::DivergeDump => &[
            super::PART_SEPARATOR,
            b"\n",
            b"q_L0.npy",
            b"attn_L18446744073709551615.npy",
            b"logits.npy",
            b"ids.npy",
            b"\"rows\": [",
            b"18446744073709551615",
            b"'shape': (",
            b"'descr': '<f4'",
        ],
        Target::ScanJson | Target::ScanDir => &[
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"",
            b",",
            b":",
            b"null",
            b"1e999",
            b"-0",
            b"18446744073709551616",
            b"\"\\ud800\"",
            b"\"n_layers\":",
            b"\"format_version\":",
            super::PART_SEPARATOR,
            b"\"layer\": 1000000000",
            b"\"of\": 4294967296",
            b"\"kv_head\":",
            b"\"delta_max\":",
        ],
        _ => &[
            b"GGUF",
            b"general.architecture",
            b"general.alignment",
            b"tokenizer.ggml.model",
            b"tokenizer.ggml.tokens",
            b"tokenizer.ggml.merges",
            b"llama.block_count",
            b"gemma3.attention.sliding_window",
            b"blk.0.attn_q.weight",
            b"token_embd.weight",
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"\x00\x00\x00\x00\x00\x00\x00\x00",
        ],
    }
}

/// A seeded, reproducible mutator for one target.
pub struct Mutator {
    rng: ChaCha8Rng,
    target: Target,
}

impl Mutator {
    /// A mutator for `target` whose choices follow from `seed`.
    pub fn new(target: Target, seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            target,
        }
    }

    /// Applies one to four mutations to `data` (splicing and crossover draw on `others`, which may be empty),
    /// then cuts it to at most `max_len` bytes.
    pub fn mutate(&mut self, data: &mut Vec<u8>, others: &[Vec<u8>], max_len: usize) {
        let n = self.rng.random_range(1..=4);
        for _ in 0..n {
            if self.target.is_gguf() && self.rng.random_bool(0.5) {
                self.gguf_mutation(data);
            } else {
                self.byte_mutation(data, others);
            }
        }
        data.truncate(max_len);
    }

    /// A boundary value for a field that held `current` in a file of `len` bytes.
    fn interesting(&mut self, current: u64, len: u64) -> u64 {
        const FIXED: [u64; 16] = [
            0,
            1,
            2,
            3,
            7,
            8,
            0x7f,
            0x80,
            0xff,
            0xffff,
            0x1_0000,
            0x7fff_ffff,
            0xffff_ffff,
            0x1_0000_0000,
            i64::MAX as u64,
            u64::MAX,
        ];
        match self.rng.random_range(0..8) {
            0..=2 => FIXED[self.rng.random_range(0..FIXED.len())],
            3 => current.wrapping_add(1),
            4 => current.wrapping_sub(1),
            5 if self.rng.random_bool(0.5) => current / 2,
            5 => current.wrapping_mul(2),
            6 => len
                .wrapping_add(self.rng.random_range(0..64))
                .wrapping_sub(32),
            _ => self.rng.random(),
        }
    }

    fn gguf_mutation(&mut self, data: &mut Vec<u8>) {
        let fields = gguf_fields(data);
        if fields.is_empty() {
            return self.byte_mutation(data, &[]);
        }
        let f = fields[self.rng.random_range(0..fields.len())];
        let mut cur = [0u8; 8];
        cur[..f.width].copy_from_slice(&data[f.pos..f.pos + f.width]);
        let current = u64::from_le_bytes(cur);
        let new = match f.kind {
            FieldKind::ValueType if self.rng.random_bool(0.8) => self.rng.random_range(0..=13),
            FieldKind::TensorType if self.rng.random_bool(0.8) => self.rng.random_range(0..=40),
            FieldKind::Version if self.rng.random_bool(0.8) => self.rng.random_range(1..=4),
            FieldKind::DimCount if self.rng.random_bool(0.8) => self.rng.random_range(0..=5),
            FieldKind::Scalar if f.width == 4 && self.rng.random_bool(0.5) => {
                const FLOATS: [f32; 9] = [
                    f32::NAN,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    0.0,
                    -0.0,
                    -1.0,
                    f32::MIN_POSITIVE,
                    1e-45,
                    f32::MAX,
                ];
                FLOATS[self.rng.random_range(0..FLOATS.len())].to_bits() as u64
            }
            FieldKind::Scalar if f.width == 8 && self.rng.random_bool(0.5) => {
                const FLOATS: [f64; 6] = [f64::NAN, f64::INFINITY, 0.0, -1.0, 1e-300, f64::MAX];
                FLOATS[self.rng.random_range(0..FLOATS.len())].to_bits()
            }
            _ => self.interesting(current, data.len() as u64),
        };
        match self.rng.random_range(0..10) {
            // Usually rewrite the field in place; sometimes remove it or put it twice, shifting what follows.
            0 => {
                data.drain(f.pos..f.pos + f.width);
            }
            1 => {
                let copy = data[f.pos..f.pos + f.width].to_vec();
                data.splice(f.pos..f.pos, copy);
            }
            _ => data[f.pos..f.pos + f.width].copy_from_slice(&new.to_le_bytes()[..f.width]),
        }
    }

    fn byte_mutation(&mut self, data: &mut Vec<u8>, others: &[Vec<u8>]) {
        let len = data.len();
        let at = |rng: &mut ChaCha8Rng, end: usize| rng.random_range(0..=end);
        match self.rng.random_range(0..11) {
            0 if len > 0 => {
                let i = self.rng.random_range(0..len);
                data[i] ^= 1 << self.rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = self.rng.random_range(0..len);
                data[i] = [0, 1, 0x7f, 0x80, 0xff, self.rng.random()][self.rng.random_range(0..6)];
            }
            2 => data.truncate(at(&mut self.rng, len)),
            3 => {
                let i = at(&mut self.rng, len);
                let n = self.rng.random_range(1..=16);
                let bytes: Vec<u8> = (0..n).map(|_| self.rng.random()).collect();
                data.splice(i..i, bytes);
            }
            4 if len > 0 => {
                let i = self.rng.random_range(0..len);
                let n = self.rng.random_range(1..=(len - i).min(64));
                data.drain(i..i + n);
            }
            5 if len > 0 => {
                let i = self.rng.random_range(0..len);
                let n = self.rng.random_range(1..=(len - i).min(256));
                let copy = data[i..i + n].to_vec();
                let j = at(&mut self.rng, len);
                data.splice(j..j, copy);
            }
            6 if len >= 8 => {
                let width = [2, 4, 8][self.rng.random_range(0..3)];
                let i = self.rng.random_range(0..=len - width);
                let mut cur = [0u8; 8];
                cur[..width].copy_from_slice(&data[i..i + width]);
                let new = self.interesting(u64::from_le_bytes(cur), len as u64);
                data[i..i + width].copy_from_slice(&new.to_le_bytes()[..width]);
            }
            7 if !others.is_empty() => {
                // Splice: a prefix of this input and a suffix of another.
                let other = &others[self.rng.random_range(0..others.len())];
                let i = at(&mut self.rng, len);
                let j = at(&mut self.rng, other.len());
                data.truncate(i);
                data.extend_from_slice(&other[j..]);
            }
            8 if !others.is_empty() && len > 0 => {
                // Crossover: overwrite a range with bytes from the same place in another input.
                let other = &others[self.rng.random_range(0..others.len())];
                let i = self.rng.random_range(0..len);
                let end = (i + self.rng.random_range(1..=256))
                    .min(len)
                    .min(other.len());
                if end > i {
                    data[i..end].copy_from_slice(&other[i..end]);
                }
            }
            9 => {
                let words = dictionary(self.target);
                let word = words[self.rng.random_range(0..words.len())];
                let i = at(&mut self.rng, len);
                if self.rng.random_bool(0.5) || i + word.len() > len {
                    data.splice(i..i, word.iter().copied());
                } else {
                    data[i..i + word.len()].copy_from_slice(word);
                }
            }
            _ => {
                let i = at(&mut self.rng, len);
                data.insert(i, self.rng.random());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{Array, GgufWriter, Value};

    #[test]
    fn fields_of_a_written_file_are_found_in_order() {
        let bytes = GgufWriter::new()
            .kv("a", Value::U32(5))
            .kv(
                "b",
                Value::Array(Array::String(vec!["x".into(), "yz".into()])),
            )
            .tensor_f32("t", &[4, 2], &[0.0; 8])
            .to_bytes();
        let kinds: Vec<FieldKind> = gguf_fields(&bytes).iter().map(|f| f.kind).collect();
        use FieldKind::*;
        assert_eq!(
            kinds,
            [
                Version, Count, Count, Length, ValueType, Scalar, Length, ValueType, ValueType,
                Count, Length, Length, Length, DimCount, Dim, Dim, TensorType, Offset
            ]
        );
        let dims: Vec<u64> = gguf_fields(&bytes)
            .iter()
            .filter(|f| f.kind == Dim)
            .map(|f| u64::from_le_bytes(bytes[f.pos..f.pos + 8].try_into().unwrap()))
            .collect();
        assert_eq!(dims, [4, 2]);
    }

    #[test]
    fn mutation_is_reproducible_from_the_seed_and_bounded() {
        let seed = GgufWriter::new().kv("k", Value::U8(1)).to_bytes();
        let run = |s| {
            let mut m = Mutator::new(Target::GgufFile, s);
            let mut data = seed.clone();
            (0..50).for_each(|_| m.mutate(&mut data, std::slice::from_ref(&seed), 100));
            data
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
        assert!(run(5).len() <= 100);
    }
}
