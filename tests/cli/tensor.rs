//! `ropescope tensor`: one tensor of a GGUF file dequantized to float32 `.npy` holds gguf-py's values bit for
//! bit (`fixtures/quant/quant_types.expected`), in numpy order; `--rows` writes the slice of the whole; and
//! every bad request is refused with one line, writing nothing and never touching the input.

use ropescope::gguf::{GgmlType, GgufFile, GgufWriter, Value};
use ropescope::io::npy::Array;
use ropescope_test_support::cli::{arg, assert_ok, assert_refused, run};
use ropescope_test_support::paths;
use std::path::{Path, PathBuf};

/// The fixture's tensors in file order, each with gguf-py's values and its numpy shape.
fn fixture_tensors() -> Vec<(String, GgmlType, Vec<usize>, Vec<f32>)> {
    let file = GgufFile::open(paths::fixture("quant/quant_types.gguf")).unwrap();
    let bytes = std::fs::read(paths::fixture("quant/quant_types.expected")).unwrap();
    let mut expected = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()));
    file.tensors()
        .iter()
        .map(|t| {
            let values: Vec<f32> = expected.by_ref().take(t.n_elements as usize).collect();
            let shape = t.dims.iter().rev().map(|&d| d as usize).collect();
            (t.name.clone(), t.ty, shape, values)
        })
        .collect()
}

/// Runs `ropescope tensor FILE NAME --out OUT EXTRA...` and reads the array back; panics unless it succeeds.
fn extract(file: &Path, name: &str, out: &Path, extra: &[&str]) -> Array {
    let mut args = vec!["tensor", arg(file), name, "--out", arg(out)];
    args.extend_from_slice(extra);
    assert_ok(&run(&args));
    Array::read(out).unwrap()
}

/// Whether two f32 slices hold the same bits.
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// A GGUF file of an architecture ropescope does not run, written to `dir/name`, with a 3-D F32 tensor
/// `cube` (ggml dims [4, 3, 5]: numpy shape [5, 3, 4]), a 1-D Q8_0 tensor `line` of 64 elements, a Q1_0
/// tensor `q1` (a type ropescope cannot dequantize) and an F32 tensor `inf` holding an infinity.
fn odd_file(dir: &Path, name: &str) -> PathBuf {
    let cube: Vec<f32> = (0..60).map(|i| i as f32 * 0.5 - 7.0).collect();
    let mut line = Vec::new();
    for b in 0..2u8 {
        line.extend(half::f16::from_f32(0.25 * (b as f32 + 1.0)).to_le_bytes());
        line.extend((0..32u8).map(|i| i.wrapping_mul(7).wrapping_add(b)));
    }
    let bytes = GgufWriter::new()
        .kv("general.architecture", Value::String("no-such-arch".into()))
        .tensor_f32("cube", &[4, 3, 5], &cube)
        .tensor_raw("line", &[64], GgmlType::Q8_0, line)
        .tensor_raw("q1", &[128], GgmlType::Q1_0, vec![0; 18])
        .tensor_f32("inf", &[2], &[1.0, f32::INFINITY])
        .to_bytes();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn every_type_of_the_fixture_equals_gguf_py_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let file = paths::fixture("quant/quant_types.gguf");
    let tensors = fixture_tensors();
    assert_eq!(tensors.len(), 27);
    for (name, ty, shape, want) in &tensors {
        let out = dir.path().join(format!("{name}.npy"));
        let got = extract(&file, name, &out, &[]);
        assert_eq!(&got.shape, shape, "{name}");
        assert!(same_bits(&got.to_f32().unwrap(), want), "{name} ({ty})");
    }
}

#[test]
fn rows_are_the_slice_of_the_whole_along_numpys_first_axis() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = paths::fixture("quant/quant_types.gguf");
    for (name, _, shape, want) in fixture_tensors()
        .into_iter()
        .filter(|(n, ..)| ["t.Q4_K", "t.IQ2_S", "t.MXFP4", "t.F16"].contains(&n.as_str()))
    {
        let out = dir.path().join("row.npy");
        let got = extract(&fixture, &name, &out, &["--rows", "1..2", "--force"]);
        assert_eq!(got.shape, [1, shape[1]], "{name}");
        assert!(
            same_bits(&got.to_f32().unwrap(), &want[shape[1]..]),
            "{name}"
        );
    }
    // A 3-D tensor: rows are its slowest dimension; a 1-D quantized tensor: rows are elements, cut inside blocks.
    let odd = odd_file(dir.path(), "odd.gguf");
    let (whole, part) = (dir.path().join("whole.npy"), dir.path().join("part.npy"));
    let cube = extract(&odd, "cube", &whole, &[]);
    assert_eq!(cube.shape, [5, 3, 4]);
    let rows = extract(&odd, "cube", &part, &["--rows", "1..3"]);
    assert_eq!(rows.shape, [2, 3, 4]);
    assert!(same_bits(
        &rows.to_f32().unwrap(),
        &cube.to_f32().unwrap()[12..36]
    ));
    let line = extract(&odd, "line", &whole, &["--force"])
        .to_f32()
        .unwrap();
    let cut = extract(&odd, "line", &part, &["--rows", "5..40", "--force"]);
    assert_eq!(cut.shape, [35]);
    assert!(same_bits(&cut.to_f32().unwrap(), &line[5..40]));
}

#[test]
fn bad_requests_are_refused_with_one_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let odd = odd_file(dir.path(), "odd.gguf");
    let fixture = paths::fixture("quant/quant_types.gguf");
    let out = dir.path().join("out.npy");
    let o = arg(&out);
    let refused = |args: &[&str], code: i32, needles: &[&str]| {
        let mut all = vec!["tensor"];
        all.extend_from_slice(args);
        assert_refused(&run(&all), code, needles);
        assert!(!out.exists(), "{args:?} wrote its output");
    };
    refused(
        &[arg(&fixture), "t.Q4_k", "--out", o],
        2,
        &[
            "tensor 't.Q4_k' is not in",
            "(27 tensors)",
            "closest names: t.Q4_K",
        ],
    );
    refused(
        &[arg(&odd), "q1", "--out", o],
        4,
        &["tensor 'q1'", "unsupported tensor type Q1_0"],
    );
    refused(
        &[arg(&odd), "inf", "--out", o],
        3,
        &[
            "tensor 'inf' (F32) holds inf at row 1",
            "no non-finite value",
        ],
    );
    refused(
        &[arg(&odd), "cube", "--out", o, "--rows", "3..6"],
        2,
        &[
            "--rows 3..6 is not a non-empty range of the 5 rows of tensor 'cube'",
            "ne[2]",
        ],
    );
    for (rows, needle) in [
        ("2..2", "--rows 2..2 is empty"),
        ("4..1", "--rows 4..1 is reversed"),
        ("1-3", "must look like A..B"),
        ("a..3", "'a' is not a row index"),
        ("0..99999999999999999999", "is not a row index"),
    ] {
        refused(
            &[arg(&odd), "cube", "--out", o, "--rows", rows],
            2,
            &[needle],
        );
    }
    refused(
        &[arg(&dir.path().join("none.gguf")), "cube", "--out", o],
        6,
        &["none.gguf"],
    );
}

#[cfg(unix)]
#[test]
fn the_input_is_never_the_output_and_an_existing_output_needs_force() {
    let dir = tempfile::tempdir().unwrap();
    let odd = odd_file(dir.path(), "odd.gguf");
    let before = std::fs::read(&odd).unwrap();
    let link = dir.path().join("link.npy");
    std::os::unix::fs::symlink(&odd, &link).unwrap();
    let dotted = dir.path().join(".").join("odd.gguf");
    for out in [&odd, &link, &dotted] {
        for force in [false, true] {
            let mut args = vec!["tensor", arg(&odd), "cube", "--out", arg(out)];
            if force {
                args.push("--force");
            }
            assert_refused(&run(&args), 2, &["is an input of this command"]);
        }
    }
    assert_eq!(std::fs::read(&odd).unwrap(), before);
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    // An existing output is replaced only with --force; a directory never.
    let out = dir.path().join("out.npy");
    std::fs::write(&out, b"earlier").unwrap();
    let args = ["tensor", arg(&odd), "cube", "--out", arg(&out)];
    assert_refused(&run(&args), 2, &["--force is needed to replace"]);
    assert_eq!(std::fs::read(&out).unwrap(), b"earlier");
    assert_ok(&run(&[&args[..], &["--force"]].concat()));
    assert_eq!(Array::read(&out).unwrap().shape, [5, 3, 4]);
    let args = [
        "tensor",
        arg(&odd),
        "cube",
        "--out",
        arg(dir.path()),
        "--force",
    ];
    assert_refused(&run(&args), 2, &["is a directory"]);
}
