//! Dequantization throughput per ggml type, on the fixture file written by gguf-py (`fixtures/quant/`), each
//! tensor repeated to about one million elements. The fixture holds one tensor of every type ropescope
//! dequantizes (the bench refuses to run otherwise): float, legacy, K-quant, i-quant, ternary and 4-bit float
//! types alike.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ropescope::gguf::GgufFile;
use ropescope::quant::{dequantize_into, GgmlType};

fn dequant(c: &mut Criterion) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/quant/quant_types.gguf");
    let file = GgufFile::open(path).expect("fixture file");
    let missing: Vec<&str> = (0..=u8::MAX as u32)
        .filter_map(GgmlType::from_id)
        .filter(|ty| ty.can_dequantize() && !file.tensors().iter().any(|t| t.ty == *ty))
        .map(GgmlType::name)
        .collect();
    assert!(missing.is_empty(), "no fixture tensor of {missing:?}");
    let mut group = c.benchmark_group("dequantize");
    for t in file.tensors() {
        let block = file.tensor_bytes(t);
        let repeat = (1 << 20) / t.n_elements as usize;
        let data = block.repeat(repeat);
        let mut out = vec![0f32; t.n_elements as usize * repeat];
        group.throughput(Throughput::Elements(out.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(t.ty.name()), |b| {
            b.iter(|| dequantize_into(t.ty, &data, &mut out, &t.name).expect("supported type"))
        });
    }
    group.finish();
}

criterion_group!(benches, dequant);
criterion_main!(benches);
