//! The machine's FMA peak and the engine's projection GEMMs as a fraction of it, beside matrixmultiply and faer.
//!
//! For the widest instruction set the CPU runs (`Isa::best`) and each precision: the register-only FMA peak at
//! one thread and at the pool's thread count (`linalg::peak`), then `x[512 × k] · Wᵀ` for the projection shapes
//! of the two real models at the pool's thread count, as the engine runs them (`linalg::matmul_transb_tiles`:
//! fixed weight tiles in parallel, each multiplied sequentially by block sums, in f32 and in f64), with
//! the weight dense (a copy per tile) and quantized (dequantized tile by tile). Beside them, the same dense
//! products measured in the same run through matrixmultiply per engine tile (the f32 engine's product before
//! block sums) and through faer: one parallel product on the rayon pool, and sequential products per engine
//! tile (what the engine would run to keep its results independent of the thread count). Each rate is the
//! median of several runs. Then the projections that read one input (a layer's queries, keys and values; the
//! feed-forward gate and up) with quantized weights, multiplied one after another (`WeightMatrix::apply`), as
//! one product (`WeightMatrix::apply_all`, as the engine runs them), and as one product of the matrices kept
//! packed (as a scan keeps them, `Model::keep_packed_weights`), in alternating runs: medians and time ratios.
//!
//! `cargo bench --bench kernels` (add `-- f32` or `-- f64` for one precision; threads: `RAYON_NUM_THREADS`).

use rayon::prelude::*;
use ropescope::gguf::{GgufFile, GgufWriter};
use ropescope::linalg::{
    block_sums, matmul_transb_tiles, peak::fma_peak_gflops, weight_tiles, Isa,
};
use ropescope::model::matrix::{PanelBudget, WeightMatrix};
use ropescope::numeric::Real;
use ropescope::quant::GgmlType;
use std::time::Instant;

/// Activation rows (tokens) of every product.
const ROWS: usize = 512;
/// Timed runs per product; the median is reported.
const RUNS: usize = 7;
/// Alternating runs of the products of one input, apart and together (each a few milliseconds).
const JOINT_RUNS: usize = 41;
/// Seconds per peak measurement.
const PEAK_SECONDS: f64 = 0.5;

/// `(label, n = outputs, k = inputs, quant type)` of the projections of SmolLM2-135M and Gemma 3 270M, with
/// the type the real file stores most of them in.
const SHAPES: [(&str, usize, usize, &str); 8] = [
    ("smollm2 q/o 576x576", 576, 576, "Q4_1"),
    ("smollm2 k/v 192x576", 192, 576, "Q4_1"),
    ("smollm2 gate/up 1536x576", 1536, 576, "Q4_1"),
    ("smollm2 down 576x1536", 576, 1536, "Q4_1"),
    ("gemma3 q 1024x640", 1024, 640, "Q5_0"),
    ("gemma3 k/v 256x640", 256, 640, "Q5_0"),
    ("gemma3 gate/up 2048x640", 2048, 640, "Q5_0"),
    ("gemma3 down 640x2048", 640, 2048, "Q4_K"),
];

/// `(label, k = inputs, [n = outputs of each weight], quant type)` of the projections of one input in each real
/// model: queries, keys and values; the feed-forward gate and up.
const JOINT: [(&str, usize, &[usize], &str); 4] = [
    ("smollm2 q, k, v", 576, &[576, 192, 192], "Q4_1"),
    ("smollm2 gate, up", 576, &[1536, 1536], "Q4_1"),
    ("gemma3 q, k, v", 640, &[1024, 256, 256], "Q5_0"),
    ("gemma3 gate, up", 640, &[2048, 2048], "Q5_0"),
];

/// A deterministic pseudo-random value in [-1, 1).
fn noise(i: usize) -> f32 {
    let h = (i as u64 ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    ((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// An `n × k` weight of type `ty` (one whose blocks start with an f16 scale, then an f16 minimum or other
/// bits) with varied quants and sane scales.
fn quant_weight(n: usize, k: usize, ty: &str) -> WeightMatrix {
    let ty = GgmlType::from_name(ty).expect("known type");
    let block = ty.byte_size(ty.block_size() as u64).expect("one block") as usize;
    let blocks = n * k / ty.block_size();
    let mut bytes: Vec<u8> = (0..blocks * block)
        .map(|i| (noise(i) * 127.0 + 128.0) as u8)
        .collect();
    for b in bytes.chunks_exact_mut(block) {
        b[..2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        if matches!(ty.to_string().as_str(), "Q4_1" | "Q4_K") {
            b[2..4].copy_from_slice(&half::f16::from_f32(0.005).to_le_bytes());
        }
    }
    let w = GgufWriter::new().tensor_raw("w", &[k as u64, n as u64], ty, bytes);
    let file = GgufFile::from_bytes(w.to_bytes()).expect("valid file");
    let data = file.tensor_data(file.tensor("w").expect("w"));
    WeightMatrix::new("w", data, ty, n, k).expect("weight")
}

/// Median GFLOP/s of `product(out)`, which computes `x[ROWS × k] · Wᵀ` for an `n × k` weight (one warm-up run).
fn median_rate<T: Real>((n, k): (usize, usize), mut product: impl FnMut(&mut [T])) -> f64 {
    let mut out = vec![T::zero(); ROWS * n];
    let mut rates: Vec<f64> = (0..=RUNS)
        .map(|_| {
            let start = Instant::now();
            product(&mut out);
            2.0 * (ROWS * n * k) as f64 / start.elapsed().as_secs_f64() / 1e9
        })
        .skip(1)
        .collect();
    rates.sort_by(f64::total_cmp);
    rates[RUNS / 2]
}

/// Median GFLOP/s of `x · Wᵀ` as the engine runs it, with the weight produced by `fill`.
fn measure<T: Real>(
    x: &[T],
    (n, k): (usize, usize),
    fill: impl Fn(std::ops::Range<usize>, &mut [T]) + Sync,
) -> f64 {
    median_rate((n, k), |out| {
        out.copy_from_slice(&matmul_transb_tiles(x, ROWS, k, n, &fill))
    })
}

/// An output pointer shared by the tasks that write its disjoint column strips.
#[derive(Clone, Copy)]
struct Strips<T>(*mut T);
// SAFETY: each task writes only its own columns (see `per_tile`).
unsafe impl<T> Send for Strips<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Strips<T> {}

impl<T> Strips<T> {
    /// The element at offset `i` (a method, so closures capture the whole `Send` wrapper).
    ///
    /// # Safety
    /// `i` must be inside the output.
    unsafe fn at(self, i: usize) -> *mut T {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.add(i) }
    }
}

/// Runs `product(c0, nc, dst)` for every engine weight tile (columns `c0..c0 + nc`) of the `ROWS × n` output
/// `out`, tiles in parallel, as `linalg::matmul_transb_tiles` does; `dst` points at column `c0` of row 0 (row
/// stride `n`), and only that tile writes those columns.
fn per_tile<T: Real>(n: usize, out: &mut [T], product: impl Fn(usize, usize, *mut T) + Sync) {
    assert_eq!(out.len(), ROWS * n);
    let dst = Strips(out.as_mut_ptr());
    weight_tiles(n, block_sums::panel_width::<T>(Isa::best()))
        .into_par_iter()
        .for_each(|tile| {
            let (c0, nc) = (tile.start, tile.len());
            // SAFETY: column `c0 < n` of row 0 is inside `out` (length asserted).
            product(c0, nc, unsafe { dst.at(c0) })
        });
}

/// The same dense product `out = x · wᵀ` (`x`: `ROWS × k`, `w`: `n × k`) through matrixmultiply and faer.
trait Peers: Real + faer::traits::ComplexField {
    /// faer's parallel product on the rayon pool.
    fn faer(x: &[Self], w: &[Self], (n, k): (usize, usize), out: &mut [Self]) {
        faer::linalg::matmul::matmul(
            faer::MatMut::from_row_major_slice_mut(out, ROWS, n),
            faer::Accum::Replace,
            faer::MatRef::from_row_major_slice(x, ROWS, k),
            faer::MatRef::from_row_major_slice(w, n, k).transpose(),
            Self::one(),
            faer::Par::rayon(rayon::current_num_threads()),
        );
    }

    /// matrixmultiply's sequential product per engine weight tile, tiles in parallel: the engine's f32 product
    /// before block sums, and its f64 product.
    fn matrixmultiply_tiles(x: &[Self], w: &[Self], (n, k): (usize, usize), out: &mut [Self]) {
        assert_eq!((x.len(), w.len()), (ROWS * k, n * k));
        per_tile(n, out, |c0, nc, dst| {
            // SAFETY: `x` and the tile of `w` hold their views (lengths asserted); the output columns
            // `c0..c0 + nc` of every row (row stride `n`) lie inside `out`, and tiles write disjoint columns.
            unsafe {
                Self::gemm_raw(
                    (ROWS, k, nc),
                    Self::one(),
                    (x.as_ptr(), k as isize, 1),
                    (w[c0 * k..].as_ptr(), 1, k as isize),
                    (dst, n as isize, 1),
                )
            }
        });
    }

    /// faer's sequential product per engine weight tile, tiles in parallel.
    fn faer_tiles(x: &[Self], w: &[Self], (n, k): (usize, usize), out: &mut [Self]) {
        assert_eq!((x.len(), w.len()), (ROWS * k, n * k));
        per_tile(n, out, |c0, nc, dst| {
            // SAFETY: the output columns `c0..c0 + nc` of every row (row stride `n`) lie inside `out`, and tiles
            // write disjoint columns.
            let o = unsafe { faer::MatMut::from_raw_parts_mut(dst, ROWS, nc, n as isize, 1) };
            faer::linalg::matmul::matmul(
                o,
                faer::Accum::Replace,
                faer::MatRef::from_row_major_slice(x, ROWS, k),
                faer::MatRef::from_row_major_slice(&w[c0 * k..(c0 + nc) * k], nc, k).transpose(),
                Self::one(),
                faer::Par::Seq,
            );
        });
    }
}
impl Peers for f32 {}
impl Peers for f64 {}

fn run<T: Peers>(isa: Isa, threads: usize) {
    let double = T::NAME == "f64";
    let peak1 = fma_peak_gflops(isa, double, 1, PEAK_SECONDS);
    let peak = fma_peak_gflops(isa, double, threads, PEAK_SECONDS);
    let show = |p: Option<f64>| p.map_or("-".to_string(), |g| format!("{g:.1}"));
    println!(
        "\n{isa} {}: FMA peak {} GFLOP/s at 1 thread, {} at {threads}",
        T::NAME,
        show(peak1),
        show(peak)
    );
    println!(
        "| product | dense GFLOP/s | of peak | type | quantized GFLOP/s | of peak | kernel per tile | matrixmultiply per tile | faer parallel | faer per tile |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let frac = |g: f64| peak.map_or("-".to_string(), |p| format!("{:.0}%", 100.0 * g / p));
    for (label, n, k, ty) in SHAPES {
        let x: Vec<T> = (0..ROWS * k).map(|i| T::of_f32(noise(i))).collect();
        let dense: Vec<T> = (0..n * k).map(|i| T::of_f32(noise(i + 7) * 0.05)).collect();
        let g_dense = measure(&x, (n, k), |r, buf| {
            buf.copy_from_slice(&dense[r.start * k..r.end * k])
        });
        let w = quant_weight(n, k, ty);
        let g_q = measure(&x, (n, k), |r, buf| w.dequantize_rows(r, buf));
        let mm = median_rate((n, k), |out| {
            T::matrixmultiply_tiles(&x, &dense, (n, k), out)
        });
        let packed = block_sums::pack_activations(&x, ROWS, k);
        let own = median_rate((n, k), |out| {
            // SAFETY: `dst` points at column `c0` of the `ROWS × n` output (row stride `n`), whose columns
            // `c0..c0 + nc` only this tile writes; `packed` and the weight rows hold their views.
            per_tile(n, out, |c0, nc, dst| unsafe {
                block_sums::tile_product(
                    isa,
                    &packed,
                    ROWS,
                    k,
                    &dense[c0 * k..(c0 + nc) * k],
                    nc,
                    dst,
                    n,
                )
            })
        });
        let fa = median_rate((n, k), |out| T::faer(&x, &dense, (n, k), out));
        let ft = median_rate((n, k), |out| T::faer_tiles(&x, &dense, (n, k), out));
        let peer_rates = format!(
            " {own:.1} ({}) | {mm:.1} ({}) | {fa:.1} ({}) | {ft:.1} ({}) |",
            frac(own),
            frac(mm),
            frac(fa),
            frac(ft)
        );
        println!(
            "| {label} | {g_dense:.1} | {} | {ty} | {g_q:.1} | {} |{peer_rates}",
            frac(g_dense),
            frac(g_q)
        );
    }
}

/// The [`JOINT`] products apart and together: medians of alternating runs, GFLOP/s and the ratio of times.
fn joint<T: Real>() {
    println!(
        "\n{}: projections of one input, apart, as one product, and as one product of packed matrices",
        T::NAME
    );
    println!(
        "| products | apart GFLOP/s | together GFLOP/s | together ÷ apart (time) | together, packed once | ÷ apart |"
    );
    println!("|---|---|---|---|---|---|");
    for (label, k, sizes, ty) in JOINT {
        let x: Vec<T> = (0..ROWS * k).map(|i| T::of_f32(noise(i))).collect();
        let weights: Vec<WeightMatrix> = sizes.iter().map(|&n| quant_weight(n, k, ty)).collect();
        let products: Vec<(&WeightMatrix, Option<&[T]>)> =
            weights.iter().map(|w| (w, None)).collect();
        // The same matrices kept packed (the budget has room for all).
        let budget = PanelBudget::default();
        budget.grant(usize::MAX / 2);
        let kept: Vec<WeightMatrix> = weights.iter().map(|w| w.clone().sharing(&budget)).collect();
        let kept_products: Vec<(&WeightMatrix, Option<&[T]>)> =
            kept.iter().map(|w| (w, None)).collect();
        let flops = 2.0 * (ROWS * k * sizes.iter().sum::<usize>()) as f64;
        let (mut apart, mut together, mut packed) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..=JOINT_RUNS {
            let start = Instant::now();
            let ys: Vec<Vec<T>> = weights.iter().map(|w| w.apply(&x, ROWS, None)).collect();
            let t_apart = start.elapsed().as_secs_f64();
            let start = Instant::now();
            let joint = WeightMatrix::apply_all(&products, &x, ROWS);
            let t_together = start.elapsed().as_secs_f64();
            let start = Instant::now();
            let from_panels = WeightMatrix::apply_all(&kept_products, &x, ROWS);
            let t_packed = start.elapsed().as_secs_f64();
            assert_eq!(ys, joint, "the same products");
            assert_eq!(ys, from_panels, "the same products from panels");
            // The first run warms up (and packs).
            if run > 0 {
                apart.push(t_apart);
                together.push(t_together);
                packed.push(t_packed);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (a, t, p) = (
            median(&mut apart),
            median(&mut together),
            median(&mut packed),
        );
        println!(
            "| {label} | {:.1} | {:.1} | {:.3} | {:.1} | {:.3} |",
            flops / a / 1e9,
            flops / t / 1e9,
            t / a,
            flops / p / 1e9,
            p / a
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let want =
        |p: &str| !args.iter().any(|a| a == "f32" || a == "f64") || args.iter().any(|a| a == p);
    let threads = rayon::current_num_threads();
    println!(
        "instruction sets: {:?}; threads: {threads}",
        Isa::available()
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
    );
    let isa = Isa::best();
    if want("f32") {
        run::<f32>(isa, threads);
        joint::<f32>();
    }
    if want("f64") {
        run::<f64>(isa, threads);
        joint::<f64>();
    }
}
