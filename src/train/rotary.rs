//! RoPE as a trained head applies it: the crate's [`RopeTable`] followed by a [`ChunkGate`], and its transpose
//! for back-propagation.

use super::gate::ChunkGate;
use crate::rope::{RopeSpec, RopeTable};

/// The map `x ↦ G R_pos x` (rotation to `pos`, then zeroing the chunks the gate drops) and its transpose.
#[derive(Clone, Debug)]
pub struct GatedRope {
    table: RopeTable<f64>,
    gate: ChunkGate,
}

impl GatedRope {
    /// Tabulates positions `0..n_pos` of `spec`; `gate` must have one entry per chunk of `spec`.
    pub fn new(spec: RopeSpec, gate: ChunkGate, n_pos: usize) -> Self {
        assert_eq!(
            gate.n_chunks(),
            spec.n_chunks(),
            "gate and RoPE disagree on the number of chunks"
        );
        assert_eq!(
            spec.rot_dim, spec.head_dim,
            "trained heads use full-dimension RoPE"
        );
        Self {
            table: RopeTable::new(spec, n_pos),
            gate,
        }
    }

    /// The RoPE specification.
    pub fn spec(&self) -> &RopeSpec {
        self.table.spec()
    }

    /// Returns `G R_pos x`.
    pub fn apply(&self, x: &[f64], pos: usize) -> Vec<f64> {
        let mut y = x.to_vec();
        self.table.rotate(&mut y, pos);
        self.mask(&mut y);
        y
    }

    /// Returns `(G R_pos)^T g = R_pos^T G g`. The inverse rotation is computed as `F R_pos F` with `F` the
    /// reflection negating the second coordinate of every chunk, since `F R(θ) F = R(−θ)`.
    pub fn apply_transpose(&self, g: &[f64], pos: usize) -> Vec<f64> {
        let mut y = g.to_vec();
        self.mask(&mut y);
        self.reflect(&mut y);
        self.table.rotate(&mut y, pos);
        self.reflect(&mut y);
        y
    }

    fn mask(&self, x: &mut [f64]) {
        for l in 0..self.gate.n_chunks() {
            if !self.gate.keeps(l) {
                let (a, b) = self.spec().chunk_dims(l);
                x[a] = 0.0;
                x[b] = 0.0;
            }
        }
    }

    fn reflect(&self, x: &mut [f64]) {
        for l in 0..self.spec().n_chunks() {
            let (_, b) = self.spec().chunk_dims(l);
            x[b] = -x[b];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::Pairing;

    #[test]
    fn transpose_is_the_adjoint() {
        for pairing in [Pairing::Adjacent, Pairing::HalfSplit] {
            let spec = RopeSpec::new(8, 100.0, pairing);
            let gate = ChunkGate::from_chunks(4, &[0, 2, 3]).unwrap();
            let r = GatedRope::new(spec, gate, 10);
            let x: Vec<f64> = (0..8).map(|i| (i as f64 * 0.7).sin()).collect();
            let g: Vec<f64> = (0..8).map(|i| (i as f64 * 1.3).cos()).collect();
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
            let lhs = dot(&r.apply(&x, 7), &g);
            let rhs = dot(&x, &r.apply_transpose(&g, 7));
            assert!((lhs - rhs).abs() < 1e-12);
        }
    }

    #[test]
    fn dropped_chunks_are_zero_and_kept_chunks_rotate() {
        // Chunks 0 and 2 of 3 kept, adjacent pairs: chunk l turns by pos · base^(−2l/6).
        let spec = RopeSpec::new(6, 100.0, Pairing::Adjacent);
        let r = GatedRope::new(spec, ChunkGate::from_chunks(3, &[0, 2]).unwrap(), 8);
        let x = [1.0, 2.0, 3.0, 4.0, -1.0, 0.5];
        let (pos, y) = (5, r.apply(&x, 5));
        for l in 0..3 {
            let angle = pos as f64 * 100f64.powf(-2.0 * l as f64 / 6.0);
            let (c, s) = (angle.cos(), angle.sin());
            let (a, b) = (x[2 * l], x[2 * l + 1]);
            let want = if l == 1 {
                [0.0, 0.0]
            } else {
                [a * c - b * s, a * s + b * c]
            };
            for (got, w) in y[2 * l..2 * l + 2].iter().zip(want) {
                assert!((got - w).abs() < 1e-14, "chunk {l}: {got} against {w}");
            }
        }
        // The transpose rotates back: on kept chunks it undoes `apply`.
        let back = r.apply_transpose(&y, pos);
        for d in [0, 1, 4, 5] {
            assert!((back[d] - x[d]).abs() < 1e-14);
        }
        assert_eq!(&back[2..4], &[0.0, 0.0]);
    }
}
