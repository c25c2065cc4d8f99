//! Weight matrices kept in the file's encoding, dequantized tile by tile inside the products that use them.
//!
//! A model's weights stay in the GGUF memory map, quantized, as they are in llama.cpp: loading a model costs a
//! map and a check of every tensor rather than the dequantization of every weight into fresh memory, and a
//! model takes its file's size in memory instead of four (f32) or eight (f64) bytes per weight. A product
//! dequantizes each tile of weight rows right before multiplying by it (the crate's internal
//! `linalg::matmul_transb_tiles`), into a buffer that stays in cache; the values are the same f32 values
//! whole-tensor dequantization gives (both run the same block kernels), widened exactly in f64. As with any
//! reader of a memory map (and llama.cpp), the file must not be truncated or rewritten while a model made from it
//! is alive.
//!
//! Under [`Arithmetic::Ggml`] a product with a quantized weight is llama.cpp's instead: the activations
//! quantized to eight bits, the weight tile decoded to integers, and integer block dot products
//! ([`crate::quant::int_blocks`]).

use super::arithmetic::Arithmetic;
use crate::error::{Error, Result};
use crate::gguf::TensorData;
use crate::linalg::block_sums::PanelCache;
use crate::linalg::{
    matmul_transb_many, matmul_transb_tiles, weight_tiles, with_thread_buffer, Isa, StripOut, WeightTiles,
};
use crate::numeric::Real;
use crate::profile::{count_flops, time, Step};
use crate::quant::int_blocks::{Activations, IntLayout, IntRows, ACT_ROWS};
use crate::quant::q8::{Q8Rounding, Q8Rows};
use crate::quant::{Dequantizer, GgmlType};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A `rows × cols` weight matrix `W` of `y = W x`, row-major, in its file encoding.
#[derive(Clone)]
pub struct WeightMatrix {
    data: TensorData,
    deq: Dequantizer,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    arithmetic: Arithmetic,
    /// The matrix dequantized and packed for the product kernel, kept where `budget` allowed it.
    panels: Arc<PanelCache>,
    /// Bytes left for packed matrices, shared with the matrices of the same model ([`PanelBudget`]).
    budget: PanelBudget,
}

/// Memory for weight matrices kept dequantized and packed for the product kernel between products, shared by
/// the matrices given it ([`WeightMatrix::sharing`]). A matrix is packed at its first exact product if its
/// packed size fits in what is left, and then multiplies from its packing without dequantizing tiles again:
/// the same bits at less work, for runs of many passes (a scan). Zero (the default) keeps every matrix in its
/// file encoding.
#[derive(Clone, Debug, Default)]
pub struct PanelBudget(Arc<AtomicUsize>);

impl PanelBudget {
    /// Allows `bytes` more of packed matrices.
    pub fn grant(&self, bytes: usize) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Bytes not yet taken.
    #[cfg(test)]
    fn left(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for WeightMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WeightMatrix({} × {}, {})",
            self.rows,
            self.cols,
            self.ty()
        )
    }
}

impl WeightMatrix {
    /// The matrix `rows × cols` of type `ty` held by `data` (the tensor `name`, for errors). Errors when the
    /// type cannot be dequantized, a row is not a whole number of blocks, or `data` is not exactly the matrix.
    pub fn new(
        name: &str,
        data: TensorData,
        ty: GgmlType,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        let deq = Dequantizer::new(ty, name)?;
        let row_bytes = ty.byte_size(cols as u64).ok_or_else(|| {
            Error::Malformed(format!(
                "tensor '{name}': rows of {cols} elements are not whole {ty} blocks of {}",
                ty.block_size()
            ))
        })? as usize;
        if Some(data.bytes().len()) != rows.checked_mul(row_bytes) {
            return Err(Error::Malformed(format!(
                "tensor '{name}': {} bytes of {ty} cannot hold {rows} × {cols} elements",
                data.bytes().len()
            )));
        }
        Ok(Self {
            data,
            deq,
            rows,
            cols,
            row_bytes,
            arithmetic: Arithmetic::Exact,
            panels: Arc::default(),
            budget: PanelBudget::default(),
        })
    }

    /// This matrix drawing its packing from `budget` ([`PanelBudget`]), not yet packed.
    pub fn sharing(self, budget: &PanelBudget) -> Self {
        Self {
            budget: budget.clone(),
            panels: Arc::default(),
            ..self
        }
    }

    /// This matrix multiplied with `arithmetic` (`name` for errors). Errors when llama.cpp's arithmetic for
    /// the matrix's type is not implemented (the i-quants, ternary and FP4 types: their products take their
    /// own paths through ggml).
    pub fn with_arithmetic(self, arithmetic: Arithmetic, name: &str) -> Result<Self> {
        let ty = self.ty();
        let plain = matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16);
        if arithmetic == Arithmetic::Ggml && !plain && IntLayout::of(ty).is_none() {
            return Err(Error::Unsupported(format!(
                "tensor '{name}': the ggml arithmetic of {ty} weights is not implemented"
            )));
        }
        Ok(Self { arithmetic, ..self })
    }

    /// Number of rows (outputs).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (inputs).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The storage type.
    pub fn ty(&self) -> GgmlType {
        self.deq.ty()
    }

    /// Consecutive row groups of the given sizes, sharing this matrix's bytes (fused tensors such as
    /// `attn_qkv`). Errors when the sizes do not add up to the row count.
    pub fn split_rows(&self, sizes: &[usize], name: &str) -> Result<Vec<WeightMatrix>> {
        if sizes.iter().sum::<usize>() != self.rows {
            return Err(Error::Malformed(format!(
                "tensor '{name}': {} rows cannot be split into {sizes:?}",
                self.rows
            )));
        }
        let mut start = 0;
        Ok(sizes
            .iter()
            .map(|&n| {
                let part = WeightMatrix {
                    data: self
                        .data
                        .slice(start * self.row_bytes..(start + n) * self.row_bytes),
                    rows: n,
                    // A part is packed on its own.
                    panels: Arc::default(),
                    ..self.clone()
                };
                start += n;
                part
            })
            .collect())
    }

    /// Writes rows `rows` (each `cols` long) into `out`. Panics if the range is outside the matrix or `out`
    /// has the wrong length.
    pub fn dequantize_rows<T: Real>(&self, rows: Range<usize>, out: &mut [T]) {
        assert!(rows.start <= rows.end && rows.end <= self.rows);
        assert_eq!(out.len(), rows.len() * self.cols);
        let bytes = &self.data.bytes()[rows.start * self.row_bytes..rows.end * self.row_bytes];
        T::fill_from_f32(out, |buf| self.deq.run(bytes, buf));
    }

    /// Row `i`, dequantized. Panics if `i` is not a row.
    pub fn row<T: Real>(&self, i: usize) -> Vec<T> {
        let mut out = vec![T::zero(); self.cols];
        self.dequantize_rows(i..i + 1, &mut out);
        out
    }

    /// `x · Wᵀ (+ bias)` for `n` rows of `x` (row-major `n × cols`): the `n × rows` outputs `y = W x + b` of
    /// every row. Panics on a shape mismatch.
    pub fn apply<T: Real>(&self, x: &[T], n: usize, bias: Option<&[T]>) -> Vec<T> {
        let mut y = Self::apply_all(&[(self, bias)], x, n);
        y.pop().expect("one product")
    }

    /// [`WeightMatrix::apply`] of each `(matrix, bias)` of `products` to the same `n` rows of `x`, in order.
    /// Under exact arithmetic the matrices multiply as one product ([`crate::linalg::matmul_transb_many`]: the
    /// activations packed once, the threads joined once), with the bits each would give alone. Panics on a
    /// shape mismatch.
    pub fn apply_all<T: Real>(
        products: &[(&WeightMatrix, Option<&[T]>)],
        x: &[T],
        n: usize,
    ) -> Vec<Vec<T>> {
        let exact = |m: &WeightMatrix| {
            m.arithmetic == Arithmetic::Exact || m.ty() == GgmlType::F32
        };
        let (joint, alone): (Vec<_>, Vec<_>) = (0..products.len()).partition(|&i| exact(products[i].0));
        let cols = products.first().map_or(0, |(m, _)| m.cols);
        assert!(products.iter().all(|(m, _)| m.cols == cols), "products of one input");
        let fills: Vec<_> = joint
            .iter()
            .map(|&i| {
                let m = products[i].0;
                move |r: Range<usize>, buf: &mut [T]| m.dequantize_rows(r, buf)
            })
            .collect();
        let tiles: Vec<WeightTiles<'_, T>> = joint
            .iter()
            .zip(&fills)
            .map(|(&i, fill)| {
                let m = products[i].0;
                let shape = (m.rows, m.cols);
                match m.panels.get_or_pack(Isa::best(), shape, &m.budget.0, fill) {
                    Some(panels) => WeightTiles::Packed(panels),
                    None => WeightTiles::Fill(m.rows, fill as &(dyn Fn(Range<usize>, &mut [T]) + Sync)),
                }
            })
            .collect();
        let mut ys: Vec<Option<Vec<T>>> = vec![None; products.len()];
        for (&i, y) in joint.iter().zip(matmul_transb_many(x, n, cols, &tiles)) {
            ys[i] = Some(y);
        }
        for i in alone {
            ys[i] = Some(products[i].0.apply_ggml(x, n));
        }
        ys.into_iter()
            .zip(products)
            .map(|(y, &(m, bias))| {
                let mut y = y.expect("every product computed");
                if let Some(b) = bias {
                    assert_eq!(b.len(), m.rows);
                    y.par_chunks_mut(m.rows)
                        .for_each(|row| row.iter_mut().zip(b).for_each(|(v, &bi)| *v = *v + bi));
                }
                y
            })
            .collect()
    }

    /// `x · Wᵀ` under [`Arithmetic::Ggml`] for a matrix that is not F32: llama.cpp's integer products for a
    /// quantized type; for F16 and BF16 the activations converted to the weight's type first (ggml's
    /// `vec_dot_type`; the other types were refused by `with_arithmetic`).
    fn apply_ggml<T: Real>(&self, x: &[T], n: usize) -> Vec<T> {
        let exact = |x: &[T]| {
            matmul_transb_tiles(x, n, self.cols, self.rows, |r, buf| {
                self.dequantize_rows(r, buf)
            })
        };
        match (self.ty(), IntLayout::of(self.ty())) {
            (_, Some(layout)) => {
                let x32: Vec<f32> = x.iter().map(|v| v.to_f64_exact() as f32).collect();
                let y = self.integer_product(layout, &x32, n);
                y.into_iter().map(T::of_f32).collect()
            }
            (ty, None) => {
                let round = |v: T| match ty {
                    GgmlType::F16 => half::f16::from_f64(v.to_f64_exact()).to_f64(),
                    _ => half::bf16::from_f64(v.to_f64_exact()).to_f64(),
                };
                exact(&x.iter().map(|&v| T::of_f64(round(v))).collect::<Vec<T>>())
            }
        }
    }

    /// `x · Wᵀ` for the `n` rows of `x` as llama.cpp computes it: each row quantized to `layout`'s activation
    /// blocks, each tile of weight rows decoded to integers, integer block dot products. Parallel over the
    /// tiles of [`weight_tiles`]; every output is one dot product, the same at any thread count.
    fn integer_product(&self, layout: IntLayout, x: &[f32], n: usize) -> Vec<f32> {
        let (cols, rows) = (self.cols, self.rows);
        assert_eq!(x.len(), n * cols);
        if cols == 0 {
            // Products over no columns: the empty sums.
            return vec![0.0; n * rows];
        }
        let xq = time(Step::Dequantize, || {
            Q8Rows::quantize(x, cols, layout.kind(), Q8Rounding::native())
        });
        let acts = Activations::new(layout, &xq);
        let bytes = self.data.bytes();
        // Not cleared first: every element is written by exactly one tile.
        let mut y: Vec<f32> = Vec::with_capacity(n * rows);
        let dst = StripOut(y.as_mut_ptr());
        weight_tiles(rows, DECODED_ROWS).into_par_iter().for_each(|tile| {
            // `DECODED_ROWS` rows decoded at a time stay in cache while every row of activations meets them;
            // their products go to the thread's buffer, then to their columns of `y`.
            with_thread_buffer(&PRODUCTS, n * DECODED_ROWS, |out| {
                for start in tile.clone().step_by(DECODED_ROWS) {
                    let end = (start + DECODED_ROWS).min(tile.end);
                    let w = time(Step::Dequantize, || {
                        let raw = &bytes[start * self.row_bytes..end * self.row_bytes];
                        IntRows::decode(layout, raw, cols)
                    });
                    let ld = end - start;
                    time(Step::Multiply, || {
                        for a in (0..n).step_by(ACT_ROWS) {
                            let xs = a..(a + ACT_ROWS).min(n);
                            w.dots(&acts, xs, &mut out[a * ld..], ld);
                        }
                        let dst = &dst;
                        for (a, products) in out.chunks_exact(ld).take(n).enumerate() {
                            // SAFETY: row `a`'s columns `start..end` lie inside the `n × rows` buffer `y`; the
                            // tiles address disjoint columns, so no other task writes them, and `y` outlives
                            // the parallel loop.
                            unsafe {
                                let to = dst.0.add(a * rows + start);
                                // A whole group's length as a constant: a few vector moves, not a call.
                                match ld {
                                    DECODED_ROWS => {
                                        std::ptr::copy_nonoverlapping(products.as_ptr(), to, DECODED_ROWS)
                                    }
                                    _ => std::ptr::copy_nonoverlapping(products.as_ptr(), to, ld),
                                }
                            }
                        }
                    });
                }
            });
            count_flops(Step::Multiply, 2 * n * cols * tile.len());
        });
        // SAFETY: the tiles cover the rows `0..rows` of the weights (`weight_tiles`), and each wrote its
        // columns of every row of `y`.
        unsafe { y.set_len(n * rows) };
        y
    }
}

/// Weight rows an integer product decodes at a time.
const DECODED_ROWS: usize = 16;

thread_local! {
    /// Each thread's products of [`DECODED_ROWS`] weight rows with every activation row, kept between calls.
    static PRODUCTS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{GgufFile, GgufWriter};
    use crate::linalg::block_sums::Panels;

    const COLS: usize = 64;

    /// Q8_0 blocks (an f16 scale, then 32 signed bytes) for `rows × COLS` varied values.
    fn q8_bytes(rows: usize) -> Vec<u8> {
        let mut data = Vec::new();
        for b in 0..rows * COLS / 32 {
            data.extend(half::f16::from_f32(0.01 * (b as f32 + 1.0)).to_le_bytes());
            data.extend((0..32).map(|i| ((i * 37 + b * 11) % 255) as u8));
        }
        data
    }

    fn file(rows: usize) -> GgufFile {
        let w = GgufWriter::new().tensor_raw(
            "w",
            &[COLS as u64, rows as u64],
            GgmlType::Q8_0,
            q8_bytes(rows),
        );
        GgufFile::from_bytes(w.to_bytes()).unwrap()
    }

    fn dense<T: Real>(m: &WeightMatrix) -> Vec<T> {
        let mut out = vec![T::zero(); m.rows() * m.cols()];
        m.dequantize_rows(0..m.rows(), &mut out);
        out
    }

    fn matrix(f: &GgufFile, rows: usize) -> WeightMatrix {
        let info = f.tensor("w").unwrap();
        WeightMatrix::new("w", f.tensor_data(info), GgmlType::Q8_0, rows, COLS).unwrap()
    }

    #[test]
    fn matrices_kept_packed_within_a_shared_budget_give_the_same_bits() {
        let (rows, n) = (70, 5);
        let f = file(rows);
        let x: Vec<f32> = (0..n * COLS).map(|i| ((i * 13) % 29) as f32 / 7.0 - 2.0).collect();
        let plain = matrix(&f, rows);
        let parts = plain.split_rows(&[40, 30], "w").unwrap();
        let want: Vec<Vec<f32>> = parts.iter().map(|p| p.apply(&x, n, None)).collect();
        let whole = plain.apply(&x, n, None);
        // Room for the first part only: it is packed at its first product, the second is not.
        let bytes = |r| Panels::<f32>::bytes(Isa::best(), r, COLS);
        let budget = PanelBudget::default();
        budget.grant(bytes(40) + bytes(30) - 1);
        let shared: Vec<WeightMatrix> = plain
            .clone()
            .sharing(&budget)
            .split_rows(&[40, 30], "w")
            .unwrap();
        let products: Vec<_> = shared.iter().map(|m| (m, None)).collect();
        for _ in 0..2 {
            let got = WeightMatrix::apply_all(&products, &x, n);
            assert_eq!(got, want);
            assert_eq!(budget.left(), bytes(30) - 1);
        }
        // The unsplit matrix is packed on its own, once: a clone shares its panels.
        let whole_shared = plain.sharing(&budget);
        budget.grant(bytes(rows));
        assert_eq!(whole_shared.clone().apply(&x, n, None), whole);
        assert_eq!(budget.left(), bytes(30) - 1);
        assert_eq!(whole_shared.apply(&x, n, None), whole);
    }

    #[test]
    fn rows_and_products_match_whole_tensor_dequantization() {
        let rows = 37;
        let f = file(rows);
        let m = matrix(&f, rows);
        let whole = f.dequantize_f32("w").unwrap();
        assert_eq!(dense::<f32>(&m), whole);
        let wide: Vec<f64> = whole.iter().map(|&v| v as f64).collect();
        assert_eq!(dense::<f64>(&m), wide);
        assert_eq!(m.row::<f32>(5), whole[5 * COLS..6 * COLS]);

        let n = 3;
        let x: Vec<f64> = (0..n * COLS).map(|i| (i % 13) as f64 - 6.0).collect();
        let bias: Vec<f64> = (0..rows).map(|i| i as f64).collect();
        let y = m.apply(&x, n, Some(&bias));
        for r in 0..n {
            for c in 0..rows {
                let want: f64 = (0..COLS)
                    .map(|i| x[r * COLS + i] * wide[c * COLS + i])
                    .sum::<f64>()
                    + bias[c];
                assert!((y[r * rows + c] - want).abs() <= 1e-12 * want.abs().max(1.0));
            }
        }
    }

    #[test]
    fn split_rows_shares_the_bytes_of_each_part() {
        let f = file(10);
        let m = matrix(&f, 10);
        let whole = dense::<f32>(&m);
        let parts = m.split_rows(&[3, 0, 7], "w").unwrap();
        assert_eq!(dense::<f32>(&parts[0]), whole[..3 * COLS]);
        assert_eq!(parts[1].rows(), 0);
        assert_eq!(dense::<f32>(&parts[2]), whole[3 * COLS..]);
        assert!(m.split_rows(&[3, 8], "w").is_err());
    }

    /// Under ggml's arithmetic a product is the dequantized weights times the activations quantized to Q8_0
    /// and dequantized (`d · q` per block of 32), up to float32 rounding.
    #[test]
    fn ggml_products_multiply_by_the_eight_bit_activations() {
        let rows = 20;
        let f = file(rows);
        let m = matrix(&f, rows)
            .with_arithmetic(Arithmetic::Ggml, "w")
            .unwrap();
        let n = 5;
        let x: Vec<f32> = (0..n * COLS)
            .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 17.0)
            .collect();
        let xq = Q8Rows::quantize(
            &x,
            COLS,
            crate::quant::q8::Q8Kind::Q8_0,
            Q8Rounding::native(),
        );
        let w = dense::<f64>(&m);
        let y = m.apply(&x, n, None);
        let exact = matrix(&f, rows).apply(&x, n, None);
        let mut far_from_exact = 0.0f64;
        for r in 0..n {
            for c in 0..rows {
                let mut want = 0.0f64;
                let mut scale = 0.0f64;
                for i in 0..COLS {
                    let xv = xq.d[(r * COLS + i) / 32] as f64 * xq.q[r * COLS + i] as f64;
                    want += w[c * COLS + i] * xv;
                    scale += (w[c * COLS + i] * xv).abs();
                }
                let got = y[r * rows + c] as f64;
                assert!((got - want).abs() <= 1e-6 * scale, "({r}, {c}): {got} against {want}");
                far_from_exact = far_from_exact.max((got - exact[r * rows + c] as f64).abs() / scale);
            }
        }
        // The 8-bit activations are what moves the product: far more than float32 rounding.
        assert!(far_from_exact > 1e-4, "{far_from_exact}");
    }

    #[test]
    fn the_ggml_arithmetic_of_a_type_it_does_not_model_is_refused_by_name() {
        let w = GgufWriter::new().tensor_raw("w", &[32, 2], GgmlType::IQ4_NL, vec![0u8; 2 * 18]);
        let f = GgufFile::from_bytes(w.to_bytes()).unwrap();
        let data = f.tensor_data(f.tensor("w").unwrap());
        let m = WeightMatrix::new("w", data, GgmlType::IQ4_NL, 2, 32).unwrap();
        let err = m.clone().with_arithmetic(Arithmetic::Ggml, "w").unwrap_err();
        assert!(err.to_string().contains("IQ4_NL"), "{err}");
        assert!(m.with_arithmetic(Arithmetic::Exact, "w").is_ok());
    }

    #[test]
    fn malformed_shapes_and_types_are_errors() {
        let f = file(4);
        let data = f.tensor_data(f.tensor("w").unwrap());
        // 96 columns are three blocks a row, but 4 rows of them need 12 blocks, not 8.
        assert!(WeightMatrix::new("w", data.clone(), GgmlType::Q8_0, 4, 96).is_err());
        // 48 columns are not whole blocks of 32.
        assert!(WeightMatrix::new("w", data.clone(), GgmlType::Q8_0, 4, 48).is_err());
        let unsupported = GgmlType::from_name("Q8_1").unwrap();
        let err = WeightMatrix::new("w", data, unsupported, 4, COLS).unwrap_err();
        assert!(err.to_string().contains("Q8_1"), "{err}");
    }
}
