//! Hostile or broken GGUF files give a clear error: never a panic, an abort, or an allocation sized by
//! unchecked file contents. One test per kind of damage.

use ropescope::gguf::{type_id, Array, GgufFile, GgufWriter, Value};
use ropescope::quant::GgmlType;
use ropescope::Error;

/// A byte-level GGUF builder for files the writer would refuse to make.
#[derive(Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64).bytes(s)
    }
    /// A tensor directory entry.
    fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name.as_bytes()).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    fn parse(&self) -> Result<GgufFile, Error> {
        GgufFile::from_bytes(self.0.clone())
    }
}

fn small_valid_file() -> Vec<u8> {
    GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("general.name", Value::String("tiny".into()))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(vec!["a".into(), "b".into()])),
        )
        .tensor_f32("a", &[4, 2], &[1.0; 8])
        .tensor_f32("b", &[8], &[2.0; 8])
        .to_bytes()
}

fn err_text(r: Result<GgufFile, Error>) -> String {
    r.expect_err("the file must be rejected").to_string()
}

#[test]
fn wrong_magic() {
    let mut bytes = small_valid_file();
    bytes[..4].copy_from_slice(b"GGML");
    let e = GgufFile::from_bytes(bytes).unwrap_err();
    assert!(matches!(e, Error::BadMagic { .. }), "{e}");
    assert!(e.to_string().contains("not a GGUF file"));
}

#[test]
fn unsupported_versions() {
    for v in [0, 1, 4, u32::MAX] {
        let e = Raw::header(v, 0, 0).parse().unwrap_err();
        assert!(matches!(e, Error::UnsupportedVersion(x) if x == v), "{e}");
    }
}

#[test]
fn truncated_at_every_byte() {
    let bytes = small_valid_file();
    assert!(GgufFile::from_bytes(bytes.clone()).is_ok());
    for len in 0..bytes.len() {
        let r = GgufFile::from_bytes(bytes[..len].to_vec());
        assert!(
            r.is_err(),
            "a file cut at {len} of {} bytes was accepted",
            bytes.len()
        );
    }
}

#[test]
fn tensor_data_past_end_of_file() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("w", &[8], GgmlType::F32.id(), 0);
    r.bytes(&vec![0u8; 32 - r.0.len() % 32]); // pad to the data section
    r.bytes(&[0u8; 16]); // 16 of the 32 bytes the tensor needs
    let msg = err_text(r.parse());
    assert!(msg.contains("truncated") && msg.contains("'w'"), "{msg}");
}

#[test]
fn shape_product_overflows() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("huge", &[1 << 32, 1 << 32, 1 << 2], GgmlType::F32.id(), 0);
    let msg = err_text(r.parse());
    assert!(msg.contains("overflow") && msg.contains("huge"), "{msg}");
}

#[test]
fn byte_size_overflows() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("big", &[1 << 62], GgmlType::F32.id(), 0);
    let msg = err_text(r.parse());
    assert!(msg.contains("overflow"), "{msg}");
}

#[test]
fn absurd_tensor_count() {
    let msg = err_text(Raw::header(3, u64::MAX, 0).parse());
    assert!(msg.contains("tensor count"), "{msg}");
}

#[test]
fn absurd_key_count() {
    let msg = err_text(Raw::header(3, 0, 1 << 60).parse());
    assert!(msg.contains("metadata key count"), "{msg}");
}

#[test]
fn absurd_array_length() {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"tokenizer.ggml.tokens")
        .u32(type_id::ARRAY)
        .u32(type_id::STRING)
        .u64(u64::MAX / 2);
    let msg = err_text(r.parse());
    assert!(msg.contains("length of array"), "{msg}");
}

#[test]
fn absurd_string_length() {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"general.name").u32(type_id::STRING).u64(u64::MAX);
    let msg = err_text(r.parse());
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn invalid_utf8_key() {
    let mut r = Raw::header(3, 0, 1);
    r.str(&[0x66, 0xff, 0xfe]).u32(type_id::U8).bytes(&[1]);
    let msg = err_text(r.parse());
    assert!(msg.contains("UTF-8"), "{msg}");
}

#[test]
fn invalid_utf8_string_value() {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"general.name")
        .u32(type_id::STRING)
        .str(&[0xc3, 0x28]);
    let msg = err_text(r.parse());
    assert!(
        msg.contains("UTF-8") && msg.contains("general.name"),
        "{msg}"
    );
}

#[test]
fn invalid_utf8_tensor_name() {
    let mut r = Raw::header(3, 1, 0);
    r.str(&[0xed, 0xa0, 0x80]).u32(1).u64(8).u32(0).u64(0);
    let msg = err_text(r.parse());
    assert!(msg.contains("UTF-8"), "{msg}");
}

#[test]
fn misaligned_tensor_offset() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("w", &[8], GgmlType::F32.id(), 4);
    r.bytes(&[0u8; 128]);
    let msg = err_text(r.parse());
    assert!(msg.contains("alignment"), "{msg}");
}

#[test]
fn invalid_alignment_value() {
    for bad in [0u32, 3, 48] {
        let mut r = Raw::header(3, 0, 1);
        r.str(b"general.alignment").u32(type_id::U32).u32(bad);
        let msg = err_text(r.parse());
        assert!(msg.contains("general.alignment"), "{msg}");
    }
}

#[test]
fn duplicate_tensor_names() {
    let bytes = GgufWriter::new()
        .tensor_f32("w", &[8], &[0.0; 8])
        .tensor_f32("w", &[8], &[0.0; 8])
        .to_bytes();
    let msg = err_text(GgufFile::from_bytes(bytes));
    assert!(msg.contains("duplicate tensor name 'w'"), "{msg}");
}

#[test]
fn duplicate_metadata_keys() {
    let bytes = GgufWriter::new()
        .kv("general.name", Value::U8(1))
        .kv("general.name", Value::U8(2))
        .to_bytes();
    let msg = err_text(GgufFile::from_bytes(bytes));
    assert!(
        msg.contains("duplicate metadata key 'general.name'"),
        "{msg}"
    );
}

#[test]
fn unknown_tensor_type() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("w", &[8], 200, 0);
    let e = r.parse().unwrap_err();
    assert!(matches!(e, Error::UnsupportedType { .. }), "{e}");
    assert!(e.to_string().contains("200") && e.to_string().contains("'w'"));
}

#[test]
fn unknown_metadata_value_type() {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"k").u32(99).u64(0);
    let msg = err_text(r.parse());
    assert!(msg.contains("unknown value type 99"), "{msg}");
}

#[test]
fn bad_dimension_counts() {
    for n_dims in [0u32, 5, u32::MAX] {
        let mut r = Raw::header(3, 1, 0);
        r.str(b"w").u32(n_dims).bytes(&[0u8; 64]);
        let msg = err_text(r.parse());
        assert!(msg.contains("dimensions"), "{msg}");
    }
}

#[test]
fn row_not_whole_blocks() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("q", &[48], GgmlType::Q4_0.id(), 0);
    let msg = err_text(r.parse());
    assert!(msg.contains("block size"), "{msg}");
}

#[test]
fn arrays_nested_too_deep() {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"deep").u32(type_id::ARRAY);
    for _ in 0..64 {
        r.u32(type_id::ARRAY).u64(1);
    }
    r.u32(type_id::U8).u64(0);
    let msg = err_text(r.parse());
    assert!(msg.contains("nests arrays deeper"), "{msg}");
}

#[test]
fn invalid_bool_byte() {
    let mut r = Raw::header(3, 0, 1);
    r.str(b"flag").u32(type_id::BOOL).bytes(&[7]);
    let msg = err_text(r.parse());
    assert!(msg.contains("bool"), "{msg}");
}

#[test]
fn missing_and_empty_files_are_errors() {
    let e = GgufFile::open("/nonexistent/model.gguf").unwrap_err();
    assert!(matches!(e, Error::Io { .. }));
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        GgufFile::open(&empty).unwrap_err(),
        Error::Truncated { .. }
    ));
}

#[test]
fn every_value_type_round_trips_through_writer_and_reader() {
    let values = vec![
        ("u8", Value::U8(250)),
        ("i8", Value::I8(-5)),
        ("u16", Value::U16(65000)),
        ("i16", Value::I16(-30000)),
        ("u32", Value::U32(4_000_000_000)),
        ("i32", Value::I32(-2_000_000_000)),
        ("u64", Value::U64(u64::MAX)),
        ("i64", Value::I64(i64::MIN)),
        ("f32", Value::F32(1.5e-7)),
        ("f64", Value::F64(-2.25e300)),
        ("bool", Value::Bool(true)),
        ("string", Value::String("héllo ▁ 🙂".into())),
        (
            "strings",
            Value::Array(Array::String(vec!["a".into(), String::new(), "ü".into()])),
        ),
        ("f32s", Value::Array(Array::F32(vec![0.5, -1.0]))),
        ("i32s", Value::Array(Array::I32(vec![-1, 2, 3]))),
        ("bools", Value::Array(Array::Bool(vec![true, false]))),
        (
            "nested",
            Value::Array(Array::Array(vec![
                Array::U8(vec![1, 2]),
                Array::String(vec!["x".into()]),
            ])),
        ),
        ("empty", Value::Array(Array::U64(vec![]))),
    ];
    for version in [2, 3] {
        let mut w = GgufWriter::new();
        w.version = version;
        for (k, v) in &values {
            w = w.kv(k, v.clone());
        }
        let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
        assert_eq!(file.version(), version);
        for (k, v) in &values {
            assert_eq!(file.get(k), Some(v), "{k}");
        }
    }
}

#[test]
fn custom_alignment_is_honoured() {
    let bytes = GgufWriter::new()
        .kv("general.alignment", Value::U32(64))
        .tensor_f32("a", &[3], &[1.0, 2.0, 3.0])
        .tensor_f32("b", &[2], &[4.0, 5.0])
        .to_bytes();
    let file = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.data_offset() % 64, 0);
    assert_eq!(file.tensor("b").unwrap().offset, 64);
    assert_eq!(file.dequantize_f32("b").unwrap(), vec![4.0, 5.0]);
}

/// Found by fuzzing (`gguf_directory`): an empty tensor in a file that ends inside the padding before the data
/// section passed the bounds check, and reading its bytes panicked.
#[test]
fn empty_tensor_in_a_file_cut_before_the_data_section() {
    let mut raw = Raw::header(3, 1, 0);
    raw.tensor("empty", &[0], 0, 0);
    assert!(
        !raw.0.len().is_multiple_of(32),
        "the directory must end before an alignment boundary"
    );
    let e = raw.parse().unwrap_err();
    assert!(
        matches!(e, Error::TruncatedData { incomplete: 1, .. }),
        "{e}"
    );

    raw.0.resize(raw.0.len().next_multiple_of(32), 0);
    let file = raw.parse().expect("with its padding the file is whole");
    let info = file.tensor("empty").unwrap();
    assert!(file.tensor_bytes(info).is_empty());
}

/// A file cut inside its tensor data: refused whole, with the bytes missing; its header opens on its own, says how
/// much is missing, and no incomplete tensor can be read through it.
#[test]
fn file_cut_inside_its_tensor_data() {
    let whole = small_valid_file();
    let parsed = GgufFile::from_bytes(whole.clone()).unwrap();
    let b = parsed.tensor("b").unwrap().clone();
    // Cut 5 bytes into the data of "b" (8 f32 values): "a" stays whole.
    let cut = (parsed.data_offset() + b.offset + 5) as usize;
    let expected_size = parsed.data_offset() + b.offset + b.n_bytes;
    let missing = expected_size - cut as u64;
    let truncated = whole[..cut].to_vec();

    let e = GgufFile::from_bytes(truncated.clone()).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::TruncatedData { missing: m, incomplete: 1, n_tensors: 2, first, .. }
            if *m == missing && first == "b"),
        "{msg}"
    );
    assert!(msg.contains(&format!("{missing} bytes short")), "{msg}");
    assert_eq!(e.kind(), ropescope::ErrorKind::BadFile);

    let header = GgufFile::header_from_bytes(truncated).unwrap();
    let extent = header.data_extent();
    assert_eq!(
        (
            extent.expected_size,
            extent.file_size,
            extent.missing_bytes(),
            extent.complete_tensors,
            extent.incomplete_tensors
        ),
        (expected_size, cut as u64, missing, 1, 1)
    );
    assert!(!extent.is_whole());
    assert_eq!(header.get_str("general.name").unwrap(), Some("tiny"));
    assert_eq!(header.dequantize_f32("a").unwrap(), vec![1.0; 8]);
    let e = header.dequantize_f32("b").unwrap_err();
    assert!(matches!(e, Error::Truncated { .. }), "{e}");
    assert!(!header.is_complete(header.tensor("b").unwrap()));
    let e = header.require_whole_data().unwrap_err();
    assert!(
        e.to_string().contains(&format!("{missing} bytes short")),
        "{e}"
    );

    // At every cut, the header alone either is refused (cut inside the header) or says exactly how much is missing.
    for len in 0..whole.len() {
        if let Ok(f) = GgufFile::header_from_bytes(whole[..len].to_vec()) {
            let d = f.data_extent();
            assert_eq!(d.expected_size, expected_size, "cut at {len}");
            assert_eq!(
                d.missing_bytes(),
                expected_size - len as u64,
                "cut at {len}"
            );
            assert_eq!(d.complete_tensors + d.incomplete_tensors, 2, "cut at {len}");
        }
    }

    let whole = GgufFile::header_from_bytes(whole).unwrap();
    assert!(whole.data_extent().is_whole());
    assert_eq!(whole.data_extent().missing_bytes(), 0);
    assert!(whole.require_whole_data().is_ok());
}
