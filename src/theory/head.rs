//! A single attention head on given pre-RoPE queries and keys.
//!
//! Token `t` sits at position `t`. With `R^p` the block-diagonal rotation of position `p`, the logit between the
//! query at `i` and the key at `j` is `a[i,j] = (R^i q_i)·(R^j k_j) = q_i^T R^{j−i} k_j`.

use crate::rope::{Pairing, RopeSpec};

/// A head's position encoding: the chunk pairing of a [`RopeSpec`] and one angular frequency per chunk.
#[derive(Clone, Debug, PartialEq)]
pub struct Rotation {
    spec: RopeSpec,
    frequencies: Vec<f64>,
}

impl Rotation {
    /// RoPE as `spec` defines it: chunk `l` turns by `g_l = base^(−2l/d_rot)` per position.
    pub fn rope(spec: RopeSpec) -> Self {
        let frequencies = (0..spec.n_chunks()).map(|l| spec.frequency(l)).collect();
        Self { spec, frequencies }
    }

    /// NoPE on `head_dim` coordinates: every frequency 0, so every `R^p` is exactly the identity.
    pub fn nope(head_dim: usize) -> Self {
        Self::with_frequencies(
            RopeSpec::new(head_dim, 10000.0, Pairing::Adjacent),
            vec![0.0; head_dim / 2],
        )
    }

    /// A two-dimensional head with the single frequency `g` (the setting of Thm 5.3's and Thm 6.1's proofs).
    pub fn single_frequency(g: f64) -> Self {
        Self::with_frequencies(RopeSpec::new(2, 10000.0, Pairing::Adjacent), vec![g])
    }

    /// The pairing of `spec` with explicit frequencies, one per chunk.
    ///
    /// # Panics
    /// If `frequencies.len() != spec.n_chunks()`.
    #[track_caller]
    pub fn with_frequencies(spec: RopeSpec, frequencies: Vec<f64>) -> Self {
        assert_eq!(
            frequencies.len(),
            spec.n_chunks(),
            "one frequency per chunk"
        );
        Self { spec, frequencies }
    }

    /// The chunk layout.
    pub fn spec(&self) -> &RopeSpec {
        &self.spec
    }

    /// Angular frequency of each chunk (0 = first chunk of the spec).
    pub fn frequencies(&self) -> &[f64] {
        &self.frequencies
    }

    /// `R^pos x`.
    pub fn at(&self, x: &[f64], pos: usize) -> Vec<f64> {
        let mut y = x.to_vec();
        self.spec
            .rotate_with_frequencies(&mut y, pos, &self.frequencies);
        y
    }

    /// `a = (R^i q)·(R^j k)`.
    pub fn logit(&self, q: &[f64], i: usize, k: &[f64], j: usize) -> f64 {
        dot(&self.at(q, i), &self.at(k, j))
    }

    /// The row-major `n × n` logits of `n` tokens, token `t` at position `t` (all entries, including `j > i`).
    ///
    /// # Panics
    /// If `queries` and `keys` differ in length.
    #[track_caller]
    pub fn logit_matrix(&self, queries: &[Vec<f64>], keys: &[Vec<f64>]) -> Vec<f64> {
        assert_eq!(queries.len(), keys.len(), "one query and one key per token");
        let q: Vec<Vec<f64>> = queries
            .iter()
            .enumerate()
            .map(|(i, x)| self.at(x, i))
            .collect();
        let k: Vec<Vec<f64>> = keys
            .iter()
            .enumerate()
            .map(|(j, x)| self.at(x, j))
            .collect();
        q.iter()
            .flat_map(|qi| k.iter().map(move |kj| dot(qi, kj)))
            .collect()
    }
}

/// Dot product of two equally long slices.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
