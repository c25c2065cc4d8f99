//! Streaming statistics of a head's pre-RoPE queries and keys and its values, from [`HeadVectors`]:
//! the rank-one structure (analysis 3), the mean vectors of the logit Fourier decomposition (analysis 4) and
//! the mean chunk norms of frequency usage (analysis 5), with the mean norm of the coordinates that never rotate
//! ([`RopeSpec::unrotated_dims`]) beside them.
//!
//! Chunks are indexed by frequency through [`RopeSpec::chunk_dims`] (chunk 0 fastest), never by raw coordinate.
//! Value vectors, which do not rotate, are paired the same way over `value_dim`.

use crate::capture::{Capture, HeadCapture, HeadInfo, HeadRows, HeadVectors, LayerPlan};
use crate::linalg::gemm_transb;
use crate::numeric::Real;
use crate::rope::RopeSpec;
use std::sync::Arc;

/// Rows per batch of the Gram-matrix update.
pub const GRAM_ROWS: usize = 512;

/// Sums over the rows of one head's vectors (one of q, k): everything the statistics need, additive over
/// prompts.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSums {
    /// Number of rows summed.
    pub count: usize,
    /// `Σ x_i` (length `d`).
    pub sum: Vec<f64>,
    /// `Σ x_i x_iᵀ`, row-major `d × d` (empty unless Gram matrices were asked for).
    pub gram: Vec<f64>,
    /// `Σ u_i`, `u_i = x_i / ‖x_i‖` (zero rows skipped).
    pub unit_sum: Vec<f64>,
    /// `Σ u_i u_iᵀ`, row-major `d × d` (empty unless Gram matrices were asked for).
    pub unit_gram: Vec<f64>,
    /// `Σ ‖x_i^(l)‖` per chunk.
    pub chunk_norm_sum: Vec<f64>,
    /// `Σ ‖x_i^(u)‖`, the norm of the coordinates that never rotate (0 for full RoPE and for values).
    pub unrotated_norm_sum: f64,
}

impl RowSums {
    pub(crate) fn new(dim: usize, n_chunks: usize, grams: bool) -> Self {
        let g = if grams { dim * dim } else { 0 };
        Self {
            count: 0,
            sum: vec![0.0; dim],
            gram: vec![0.0; g],
            unit_sum: vec![0.0; dim],
            unit_gram: vec![0.0; g],
            chunk_norm_sum: vec![0.0; n_chunks],
            unrotated_norm_sum: 0.0,
        }
    }

    /// Adds every row of `rows`, with chunks `chunks` and never-rotating coordinates `unrotated`, [`GRAM_ROWS`]
    /// rows at a time (memory stays `O(d)` per row of a batch, whatever the sequence length).
    ///
    /// Every sum takes its terms in row order, and a row's norm its squares in coordinate order. The loops run
    /// along whichever layout makes them independent lanes (coordinates for the sums, rows for the norms,
    /// which read the batch transposed), so that they vectorize without changing any sum's order.
    fn add_rows<T: Real>(
        &mut self,
        rows: &HeadRows<'_, T>,
        chunks: &[(usize, usize)],
        unrotated: &[usize],
    ) {
        let (n, d) = (rows.len(), rows.dim());
        let batch = GRAM_ROWS.min(n);
        let mut x = Vec::with_capacity(batch * d);
        let (mut x_t, mut u, mut u_t) = (vec![0.0; batch * d], vec![0.0; batch * d], Vec::new());
        let mut norms = Vec::with_capacity(batch);
        for start in (0..n).step_by(GRAM_ROWS) {
            let m = GRAM_ROWS.min(n - start);
            x.clear();
            for i in start..start + m {
                x.extend(rows.row(i).iter().map(|v| v.to_f64_exact()));
            }
            transpose(&x, &mut x_t[..m * d], m, d);
            norms.clear();
            norms.resize(m, 0.0);
            for column in x_t.chunks_exact(m).take(d) {
                for (s, &v) in norms.iter_mut().zip(column) {
                    *s += v * v;
                }
            }
            for (row, (unit, &norm_sq)) in x.chunks_exact(d).zip(u.chunks_exact_mut(d).zip(&norms))
            {
                let norm = norm_sq.sqrt();
                for (s, &v) in self.sum.iter_mut().zip(row) {
                    *s += v;
                }
                if norm > 0.0 {
                    for ((s, o), &v) in self.unit_sum.iter_mut().zip(unit.iter_mut()).zip(row) {
                        *o = v / norm;
                        *s += *o;
                    }
                } else {
                    unit.fill(0.0);
                }
                for (s, &(a, b)) in self.chunk_norm_sum.iter_mut().zip(chunks) {
                    *s += (row[a] * row[a] + row[b] * row[b]).sqrt();
                }
                if !unrotated.is_empty() {
                    self.unrotated_norm_sum += unrotated
                        .iter()
                        .map(|&c| row[c] * row[c])
                        .sum::<f64>()
                        .sqrt();
                }
            }
            if !self.gram.is_empty() {
                u_t.resize(m * d, 0.0);
                transpose(&u[..m * d], &mut u_t, m, d);
                accumulate_gram(&mut self.gram, &x_t[..m * d], d, m);
                accumulate_gram(&mut self.unit_gram, &u_t, d, m);
            }
        }
        self.count += n;
    }

    fn merge(&mut self, other: &RowSums) {
        self.count += other.count;
        self.unrotated_norm_sum += other.unrotated_norm_sum;
        let pairs = [
            (&mut self.sum, &other.sum),
            (&mut self.gram, &other.gram),
            (&mut self.unit_sum, &other.unit_sum),
            (&mut self.unit_gram, &other.unit_gram),
            (&mut self.chunk_norm_sum, &other.chunk_norm_sum),
        ];
        for (a, b) in pairs {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
    }

    /// Mean vector `Σ x_i / n` (zero when empty).
    pub fn mean(&self) -> Vec<f64> {
        let n = self.count.max(1) as f64;
        self.sum.iter().map(|s| s / n).collect()
    }

    /// Mean chunk norms `Σ ‖x_i^(l)‖ / n`.
    pub fn mean_chunk_norms(&self) -> Vec<f64> {
        let n = self.count.max(1) as f64;
        self.chunk_norm_sum.iter().map(|s| s / n).collect()
    }

    /// Mean norm of the coordinates that never rotate, `Σ ‖x_i^(u)‖ / n`.
    pub fn mean_unrotated_norm(&self) -> f64 {
        self.unrotated_norm_sum / self.count.max(1) as f64
    }

    /// Mean and standard deviation of the cosine of `x_i` to the mean direction `â = U/‖U‖`, `U = Σ u_i`:
    /// `‖U‖/n` and `√(âᵀ G_u â / n − mean²)`. `None` without Gram matrices or rows.
    pub fn cosine_to_mean_direction(&self) -> Option<(f64, f64)> {
        let d = self.unit_sum.len();
        let norm = self.unit_sum.iter().map(|v| v * v).sum::<f64>().sqrt();
        if self.unit_gram.is_empty() || self.count == 0 || norm == 0.0 {
            return None;
        }
        let n = self.count as f64;
        let axis: Vec<f64> = self.unit_sum.iter().map(|v| v / norm).collect();
        let quad: f64 = (0..d)
            .map(|r| {
                axis[r]
                    * (0..d)
                        .map(|c| self.unit_gram[r * d + c] * axis[c])
                        .sum::<f64>()
            })
            .sum();
        let mean = norm / n;
        Some((mean, (quad / n - mean * mean).max(0.0).sqrt()))
    }

    /// Singular values, largest first, of the matrix stacking every row summed: `√λ_k(Σ x_i x_iᵀ)`.
    pub fn singular_values(&self) -> Option<Vec<f64>> {
        let d = self.sum.len();
        if self.gram.is_empty() {
            return None;
        }
        let eig = super::rank::singular_values(&self.gram, d, d).ok()?;
        Some(eig.iter().map(|l| l.max(0.0).sqrt()).collect())
    }
}

/// `out = xᵀ` for `x` of `m` rows of `d`, row-major (`out[c · m + i] = x[i · d + c]`).
fn transpose(x: &[f64], out: &mut [f64], m: usize, d: usize) {
    for (c, column) in out.chunks_exact_mut(m).take(d).enumerate() {
        for (o, row) in column.iter_mut().zip(x.chunks_exact(d)) {
            *o = row[c];
        }
    }
}

/// `gram += xᵀ x` for `x` given transposed (`d × n`, row-major).
fn accumulate_gram(gram: &mut [f64], x_t: &[f64], d: usize, n: usize) {
    let mut product = vec![0.0; d * d];
    gemm_transb(&mut product, d, x_t, n, x_t, n, (d, d, n), 1.0);
    gram.iter_mut().zip(&product).for_each(|(g, p)| *g += p);
}

/// The sums of one head: pre-RoPE queries, pre-RoPE keys (of its KV head) and values.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadSums {
    /// Pre-RoPE queries.
    pub q: RowSums,
    /// Pre-RoPE keys: the sums of the head's key/value head, one allocation shared by every query head of the
    /// group (their keys are the same rows; with Gram matrices, copies would multiply the scan's memory by the
    /// group size).
    pub k: Arc<RowSums>,
    /// Values (no Gram matrices).
    pub v: RowSums,
    /// The layer's rotary embedding (set once a prompt has run).
    pub rope: Option<RopeSpec>,
}

/// Streams [`HeadSums`] of every head over a prompt set.
#[derive(Clone, Debug)]
pub struct VectorStatsCapture {
    pub(crate) n_heads: usize,
    pub(crate) grams: bool,
    /// Query heads per key/value head, per layer (1 where the heads do not divide into groups).
    pub(crate) group: Vec<usize>,
    /// `[L·H]` sums, `None` until a prompt has run.
    pub(crate) heads: Vec<Option<HeadSums>>,
}

impl VectorStatsCapture {
    /// Statistics of `n_layers × n_heads` heads (`kv_heads[l]` key/value heads in layer `l`); `grams` adds the
    /// `d × d` Gram matrices the rank statistics need.
    pub fn new(n_layers: usize, n_heads: usize, kv_heads: &[usize], grams: bool) -> Self {
        let group = (0..n_layers)
            .map(|l| match kv_heads.get(l) {
                Some(&kv) if kv > 0 && n_heads.is_multiple_of(kv) => n_heads / kv,
                _ => 1,
            })
            .collect();
        Self {
            n_heads,
            grams,
            group,
            heads: vec![None; n_layers * n_heads],
        }
    }

    /// The sums of `(layer, head)`, once a prompt has run.
    pub fn head(&self, layer: usize, head: usize) -> Option<&HeadSums> {
        self.heads.get(layer * self.n_heads + head)?.as_ref()
    }

    /// The query head of `(layer, head)`'s group that accumulates the group's key sums: its first.
    fn key_owner(&self, layer: usize, head: usize) -> usize {
        let g = self.group[layer];
        head - head % g
    }

    /// Adds one head's sums over a prompt (`k` given by the group's owner only) to its running sums, and keeps
    /// every query head of the group pointing at the owner's key sums.
    fn fold(
        &mut self,
        layer: usize,
        head: usize,
        q: RowSums,
        k: Option<RowSums>,
        v: RowSums,
        rope: Option<RopeSpec>,
    ) {
        let n = self.n_heads;
        let owner = layer * n + self.key_owner(layer, head);
        let group = owner..owner + self.group[layer];
        let at = layer * n + head;
        if k.is_some() {
            // The other heads of the group let go of the owner's sums, so that they are added to in place.
            for i in group.clone().filter(|&i| i != owner) {
                if let Some(s) = &mut self.heads[i] {
                    s.k = no_keys();
                }
            }
        }
        match &mut self.heads[at] {
            Some(total) => {
                total.q.merge(&q);
                if let Some(k) = k {
                    Arc::make_mut(&mut total.k).merge(&k);
                }
                total.v.merge(&v);
            }
            slot => {
                // A head of the group other than the owner points at the owner's sums below.
                let k = k.map_or_else(no_keys, Arc::new);
                *slot = Some(HeadSums { q, k, v, rope });
            }
        }
        let shared = self.heads[owner].as_ref().map(|s| Arc::clone(&s.k));
        if let Some(shared) = shared {
            for i in group.filter(|&i| i != owner) {
                if let Some(s) = &mut self.heads[i] {
                    s.k = Arc::clone(&shared);
                }
            }
        }
    }

    /// Points every query head at its group owner's key sums, dropping their copies (read back from files,
    /// which hold one per query head).
    pub(crate) fn share_keys(&mut self) {
        let n = self.n_heads;
        for i in 0..self.heads.len() {
            let owner = (i / n) * n + self.key_owner(i / n, i % n);
            if owner != i {
                if let Some(shared) = self.heads[owner].as_ref().map(|s| Arc::clone(&s.k)) {
                    if let Some(s) = &mut self.heads[i] {
                        s.k = shared;
                    }
                }
            }
        }
    }

    /// Adds the sums of `other` (the same heads, later prompts) to these, head by head, exactly as the capture
    /// adds a prompt's sums when a head ends: folding single-prompt captures in prompt order gives the capture
    /// of all the prompts bit for bit.
    pub fn absorb(&mut self, other: VectorStatsCapture) {
        let n = self.n_heads;
        for (i, sums) in other.heads.into_iter().enumerate() {
            if let Some(s) = sums {
                let (layer, head) = (i / n, i % n);
                let k = (self.key_owner(layer, head) == head).then(|| (*s.k).clone());
                self.fold(layer, head, s.q, k, s.v, s.rope);
            }
        }
    }
}

/// Key sums standing in for a group's until its owner's are shared: empty.
fn no_keys() -> Arc<RowSums> {
    Arc::new(RowSums::new(0, 0, false))
}

/// The two coordinates of a chunk.
type ChunkDims = (usize, usize);

/// Chunk coordinate pairs of q/k (from the layer's RoPE) and of v (the same pairing over `value_dim`).
fn chunk_pairs(info: &HeadInfo) -> (Vec<ChunkDims>, Vec<ChunkDims>) {
    let qk = (0..info.rope.n_chunks())
        .map(|l| info.rope.chunk_dims(l))
        .collect();
    let v_spec = RopeSpec::new(info.value_dim, info.rope.base, info.rope.pairing);
    let v = (0..v_spec.n_chunks())
        .map(|l| v_spec.chunk_dims(l))
        .collect();
    (qk, v)
}

/// One head's sums for the current prompt (the keys only in the head that owns its group's key sums).
pub struct VectorStatsHead {
    q: RowSums,
    k: Option<RowSums>,
    v: RowSums,
    rope: RopeSpec,
}

impl<T: Real> HeadCapture<T> for VectorStatsHead {
    fn vectors(&mut self, info: &HeadInfo, vectors: &HeadVectors<'_, T>) {
        let (qk, v) = chunk_pairs(info);
        let unrotated = info.rope.unrotated_dims();
        // The group's owner also sums the keys: its queries and its keys and values run as two tasks, so that an
        // idle thread takes one instead of waiting for the owner's head to end.
        let (q, k, values) = (&mut self.q, &mut self.k, &mut self.v);
        rayon::join(
            || q.add_rows(&vectors.q_pre, &qk, &unrotated),
            || {
                if let Some(k) = k {
                    k.add_rows(&vectors.k_pre, &qk, &unrotated);
                }
                values.add_rows(&vectors.v, &v, &[]);
            },
        );
    }
}

impl<T: Real> Capture<T> for VectorStatsCapture {
    type Head = VectorStatsHead;

    fn plan(&self, _layer: usize) -> LayerPlan {
        LayerPlan {
            vectors: true,
            ..LayerPlan::default()
        }
    }

    fn begin_head(&self, info: &HeadInfo) -> VectorStatsHead {
        let (d, c) = (info.head_dim, info.rope.n_chunks());
        let owns_keys = self.key_owner(info.layer, info.head) == info.head;
        VectorStatsHead {
            q: RowSums::new(d, c, self.grams),
            k: owns_keys.then(|| RowSums::new(d, c, self.grams)),
            v: RowSums::new(info.value_dim, info.value_dim / 2, false),
            rope: info.rope.clone(),
        }
    }

    fn end_head(&mut self, info: &HeadInfo, head: VectorStatsHead) {
        self.fold(
            info.layer,
            info.head,
            head.q,
            head.k,
            head.v,
            Some(head.rope),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` rows of `d` values, element `i` being `(7919 i mod 101 − 40) / 17`: no short period.
    fn spread_rows(n: usize, d: usize) -> Vec<f64> {
        (0..n * d)
            .map(|i| ((i * 7919 % 101) as f64 - 40.0) / 17.0)
            .collect()
    }

    /// Over more rows than one batch, every sum equals its definition computed row by row, and the cosines to
    /// the mean direction have the mean and standard deviation of the cosines themselves.
    #[test]
    fn sums_and_cosines_are_their_definitions() {
        let (n, d) = (GRAM_ROWS + 37, 6);
        let data = spread_rows(n, d);
        let chunks = [(0, 3), (1, 4), (2, 5)];
        let mut s = RowSums::new(d, chunks.len(), true);
        s.add_rows(&HeadRows::new(&data, d, 0, d), &chunks, &[]);

        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        let units: Vec<Vec<f64>> = data
            .chunks(d)
            .map(|r| {
                let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
                r.iter().map(|v| v / norm).collect()
            })
            .collect();
        assert_eq!(s.count, n);
        for a in 0..d {
            assert!(close(s.sum[a], data.chunks(d).map(|r| r[a]).sum()));
            assert!(close(s.unit_sum[a], units.iter().map(|u| u[a]).sum()));
            for b in 0..d {
                let gram: f64 = data.chunks(d).map(|r| r[a] * r[b]).sum();
                let unit_gram: f64 = units.iter().map(|u| u[a] * u[b]).sum();
                assert!(close(s.gram[a * d + b], gram), "gram ({a}, {b})");
                assert!(
                    close(s.unit_gram[a * d + b], unit_gram),
                    "unit gram ({a}, {b})"
                );
            }
        }
        for (c, &(a, b)) in chunks.iter().enumerate() {
            let want: f64 = data
                .chunks(d)
                .map(|r| (r[a] * r[a] + r[b] * r[b]).sqrt())
                .sum();
            assert!(close(s.chunk_norm_sum[c], want));
        }

        let norm = s.unit_sum.iter().map(|v| v * v).sum::<f64>().sqrt();
        let axis: Vec<f64> = s.unit_sum.iter().map(|v| v / norm).collect();
        let cosines: Vec<f64> = units
            .iter()
            .map(|u| u.iter().zip(&axis).map(|(a, b)| a * b).sum())
            .collect();
        let mean = cosines.iter().sum::<f64>() / n as f64;
        let var = cosines.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / n as f64;
        let (got_mean, got_std) = s.cosine_to_mean_direction().unwrap();
        assert!(
            close(got_mean, mean) && close(got_std, var.sqrt()),
            "{got_mean} {got_std}"
        );
        assert!(
            var.sqrt() > 0.1,
            "the rows spread: the standard deviation is measured, not 0"
        );
    }

    /// With partial rotation, the coordinates no chunk rotates are summed apart: their norm per row, as
    /// [`RowSums::mean_unrotated_norm`] reports it (p-RoPE's and partial rotation's unrotated share).
    #[test]
    fn unrotated_norms_are_the_norms_of_the_unrotated_coordinates() {
        let (n, d) = (GRAM_ROWS + 5, 6);
        let data = spread_rows(n, d);
        let (chunks, unrotated) = ([(0, 3), (1, 4)], [2, 5]);
        let mut s = RowSums::new(d, chunks.len(), false);
        s.add_rows(&HeadRows::new(&data, d, 0, d), &chunks, &unrotated);
        let want: f64 = data
            .chunks(d)
            .map(|r| (r[2] * r[2] + r[5] * r[5]).sqrt())
            .sum();
        assert!(
            (s.unrotated_norm_sum - want).abs() <= 1e-9 * want,
            "{} against {want}",
            s.unrotated_norm_sum
        );
        assert!((s.mean_unrotated_norm() - want / n as f64).abs() <= 1e-12 * want);
    }

    /// A head's running sums over several prompts: the sums of the rows of the first merged with those of the
    /// second are the sums of all the rows at once, every field (up to the order of the additions).
    #[test]
    fn merged_sums_are_the_sums_of_all_rows() {
        let (n, d) = (40, 6);
        let data = spread_rows(n, d);
        let (chunks, unrotated) = ([(0, 3), (1, 4)], [2, 5]);
        let sums_of = |rows: &[f64]| {
            let mut s = RowSums::new(d, chunks.len(), true);
            s.add_rows(&HeadRows::new(rows, d, 0, d), &chunks, &unrotated);
            s
        };
        let whole = sums_of(&data);
        let mut merged = sums_of(&data[..15 * d]);
        merged.merge(&sums_of(&data[15 * d..]));
        assert_eq!(merged.count, n);
        let close = |a: &[f64], b: &[f64]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| (x - y).abs() <= 1e-9 * y.abs().max(1.0))
        };
        for (name, got, want) in [
            ("sum", &merged.sum, &whole.sum),
            ("gram", &merged.gram, &whole.gram),
            ("unit sum", &merged.unit_sum, &whole.unit_sum),
            ("unit gram", &merged.unit_gram, &whole.unit_gram),
            ("chunk norms", &merged.chunk_norm_sum, &whole.chunk_norm_sum),
        ] {
            assert!(close(got, want), "{name}: {got:?} against {want:?}");
        }
        assert!(close(
            &[merged.unrotated_norm_sum],
            &[whole.unrotated_norm_sum]
        ));
    }

    /// Rows that are all zero have no direction: the cosines to the mean direction are undefined (`None`),
    /// though rows were counted, as they are without rows or without Gram matrices.
    #[test]
    fn zero_rows_have_no_mean_direction() {
        let d = 4;
        let zeros = vec![0.0f64; 3 * d];
        let mut s = RowSums::new(d, 2, true);
        assert_eq!(s.cosine_to_mean_direction(), None);
        s.add_rows(&HeadRows::new(&zeros, d, 0, d), &[(0, 2), (1, 3)], &[]);
        assert_eq!(s.count, 3);
        assert_eq!(s.cosine_to_mean_direction(), None);
        let mut no_grams = RowSums::new(d, 2, false);
        no_grams.add_rows(
            &HeadRows::new(&[1.0, 0.0, 0.0, 0.0], d, 0, d),
            &[(0, 2), (1, 3)],
            &[],
        );
        assert_eq!(no_grams.cosine_to_mean_direction(), None);
    }
}
