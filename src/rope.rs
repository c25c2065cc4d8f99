//! Rotary position embeddings (RoPE), once for the whole crate.
//!
//! A head vector of even dimension `d` is split into `d/2` two-dimensional *chunks*. Chunk `l` (0-based here,
//! `l + 1` in the papers' 1-based notation) rotates by the angle `pos * g_l`. Plain RoPE has
//! `g_l = base^(-2l / d_rot)`, so chunk 0 is the fastest (highest frequency) and chunk `d_rot/2 - 1` the slowest;
//! checkpoints trained for long contexts rescale these frequencies ([`Scaling`]: linear, YaRN, Llama 3's
//! per-chunk factors, Phi-3's LongRoPE), and YaRN and LongRoPE also scale the rotation's magnitude. A
//! [`RopeSpec`] holds the frequencies a layer really rotates by, so every analysis that asks it for `g_l` sees
//! the scaled ones.
//!
//! Which two coordinates form chunk `l` depends on the [`Pairing`]; analyses index chunks by frequency through
//! [`RopeSpec::chunk_dims`] and never by raw coordinate, so they are correct for both pairings.
//!
//! The rotation of a pair `(x_a, x_b)` by `θ` is `m · (x_a cos θ − x_b sin θ, x_a sin θ + x_b cos θ)` with the
//! magnitude `m` (1 unless YaRN or LongRoPE set it), the convention of both llama.cpp and HF transformers, which
//! multiply their cosine and sine tables by `m`. Only the first `d_rot` coordinates rotate (partial rotary); the
//! rest pass through unchanged and unscaled. Angles, cosines and sines are computed in f64 whatever the engine's
//! precision, then rounded once to it.

pub mod scaling;

pub use scaling::{Llama3, LongRope, Scaling, Yarn};

use crate::numeric::Real;

/// Which coordinates of a head vector rotate together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairing {
    /// Dims `2l` and `2l + 1` form chunk `l` (llama.cpp "NORM"; GGUF `llama`, whose Q/K rows the converter permuted).
    Adjacent,
    /// Dims `l` and `l + d_rot/2` form chunk `l` (llama.cpp "NEOX"; HF `rotate_half`; qwen2/3, gemma*, phi3).
    HalfSplit,
}

impl Pairing {
    /// The name the CLI and JSON outputs use (`"adjacent"` or `"half-split"`).
    pub fn name(self) -> &'static str {
        match self {
            Pairing::Adjacent => "adjacent",
            Pairing::HalfSplit => "half-split",
        }
    }
}

/// The complete description of one layer's rotary embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeSpec {
    /// Head dimension `d` (even).
    pub head_dim: usize,
    /// Number of leading coordinates that rotate (`d_rot <= d`, even). Equal to `head_dim` for full RoPE.
    pub rot_dim: usize,
    /// Frequency base (`10000`, `1e5`, `1e6`, ...) before any scaling.
    pub base: f64,
    /// Coordinate pairing.
    pub pairing: Pairing,
    /// Angular frequency `g_l` of each chunk in radians per token, after scaling (`d_rot / 2` entries).
    pub inv_freq: Vec<f64>,
    /// Magnitude `m` multiplying the cosines and sines (YaRN's and LongRoPE's attention factor; 1 otherwise).
    pub magnitude: f64,
}

impl RopeSpec {
    /// Full-dimension plain RoPE with the given base and pairing.
    pub fn new(head_dim: usize, base: f64, pairing: Pairing) -> Self {
        Self::partial(head_dim, head_dim, base, pairing)
    }

    /// Plain RoPE over the first `rot_dim` of `head_dim` coordinates.
    pub fn partial(head_dim: usize, rot_dim: usize, base: f64, pairing: Pairing) -> Self {
        Self::scaled(head_dim, rot_dim, base, pairing, &Scaling::None, 0)
    }

    /// RoPE over the first `rot_dim` coordinates with the frequencies and magnitude `scaling` gives for a
    /// sequence of `n_tokens` positions (only LongRoPE depends on it).
    pub fn scaled(
        head_dim: usize,
        rot_dim: usize,
        base: f64,
        pairing: Pairing,
        scaling: &Scaling,
        n_tokens: usize,
    ) -> Self {
        let (inv_freq, magnitude) = scaling.frequencies(base, rot_dim, n_tokens);
        Self {
            head_dim,
            rot_dim,
            base,
            pairing,
            inv_freq,
            magnitude,
        }
    }

    /// Number of rotating chunks, `d_rot / 2`.
    pub fn n_chunks(&self) -> usize {
        self.rot_dim / 2
    }

    /// Whether chunk `l` turns at all: a chunk of frequency exactly 0 (the pairs p-RoPE and Gemma 4's proportional
    /// RoPE leave still) passes through unrotated.
    pub fn rotates(&self, chunk: usize) -> bool {
        self.inv_freq[chunk] != 0.0
    }

    /// The coordinates that never rotate, ascending: those past `d_rot` (partial rotation) and both of every
    /// chunk of frequency 0. Empty for full RoPE.
    pub fn unrotated_dims(&self) -> Vec<usize> {
        let mut dims: Vec<usize> = (0..self.n_chunks())
            .filter(|&l| !self.rotates(l))
            .flat_map(|l| <[usize; 2]>::from(self.chunk_dims(l)))
            .chain(self.rot_dim..self.head_dim)
            .collect();
        dims.sort_unstable();
        dims
    }

    /// Angular frequency `g_l` of chunk `l` (0 = fastest for plain RoPE), rounded to `T`.
    pub fn frequency<T: Real>(&self, chunk: usize) -> T {
        T::of_f64(self.inv_freq[chunk])
    }

    /// The two coordinates `(a, b)` of chunk `l`, rotated as `(x_a, x_b)`.
    pub fn chunk_dims(&self, chunk: usize) -> (usize, usize) {
        match self.pairing {
            Pairing::Adjacent => (2 * chunk, 2 * chunk + 1),
            Pairing::HalfSplit => (chunk, chunk + self.rot_dim / 2),
        }
    }

    /// `m cos(pos · g_l)` and `m sin(pos · g_l)`, computed in f64.
    pub fn cos_sin(&self, pos: usize, chunk: usize) -> (f64, f64) {
        let theta = pos as f64 * self.inv_freq[chunk];
        (theta.cos() * self.magnitude, theta.sin() * self.magnitude)
    }

    /// Rotates `x` (length `head_dim`) in place to position `pos`.
    pub fn rotate<T: Real>(&self, x: &mut [T], pos: usize) {
        for l in 0..self.n_chunks() {
            let (cos, sin) = self.cos_sin(pos, l);
            rotate_pair(x, self.chunk_dims(l), T::of_f64(cos), T::of_f64(sin));
        }
    }

    /// Rotates `x` in place to position `pos` with explicit angular frequencies, chunk `l` by `pos * freqs[l]`,
    /// in place of the spec's `g_l` (the pairing still comes from the spec, the magnitude is 1). Theory checks
    /// use it for frequencies the RoPE formula cannot produce, such as a rational multiple of 2π, and for NoPE
    /// (all frequencies 0, an exact identity). `freqs` has one entry per chunk; chunks beyond its length are
    /// left unrotated.
    pub fn rotate_with_frequencies<T: Real>(&self, x: &mut [T], pos: usize, freqs: &[T]) {
        for (l, &g) in freqs.iter().enumerate().take(self.n_chunks()) {
            let theta = T::of_f64(pos as f64) * g;
            rotate_pair(x, self.chunk_dims(l), theta.cos(), theta.sin());
        }
    }
}

/// Rotates the pair of coordinates `dims` of `x` by the angle whose cosine and sine are given.
#[inline]
pub fn rotate_pair<T: Real>(x: &mut [T], dims: (usize, usize), cos: T, sin: T) {
    let (a, b) = (x[dims.0], x[dims.1]);
    x[dims.0] = a * cos - b * sin;
    x[dims.1] = a * sin + b * cos;
}

/// Cosines and sines of `pos * g_l` (times the magnitude) for the positions actually run (never the model's
/// whole context).
#[derive(Clone, Debug)]
pub struct RopeTable<T> {
    spec: RopeSpec,
    n_pos: usize,
    /// `cos[pos * n_chunks + l]`.
    cos: Vec<T>,
    /// `sin[pos * n_chunks + l]`.
    sin: Vec<T>,
}

impl<T: Real> RopeTable<T> {
    /// Tabulates positions `0..n_pos` for `spec`, every angle computed in f64 and rounded once to `T`.
    pub fn new(spec: RopeSpec, n_pos: usize) -> Self {
        let n_chunks = spec.n_chunks();
        let mut cos = Vec::with_capacity(n_pos * n_chunks);
        let mut sin = Vec::with_capacity(n_pos * n_chunks);
        for pos in 0..n_pos {
            for l in 0..n_chunks {
                let (c, s) = spec.cos_sin(pos, l);
                cos.push(T::of_f64(c));
                sin.push(T::of_f64(s));
            }
        }
        Self {
            spec,
            n_pos,
            cos,
            sin,
        }
    }

    /// The specification the table was built for.
    pub fn spec(&self) -> &RopeSpec {
        &self.spec
    }

    /// Number of tabulated positions.
    pub fn n_pos(&self) -> usize {
        self.n_pos
    }

    /// Rotates `x` in place to position `pos` (which must be `< n_pos`).
    pub fn rotate(&self, x: &mut [T], pos: usize) {
        let n = self.spec.n_chunks();
        let row = pos * n;
        for l in 0..n {
            rotate_pair(
                x,
                self.spec.chunk_dims(l),
                self.cos[row + l],
                self.sin[row + l],
            );
        }
    }

    /// Rotates `x` in place to position `pos`, leaving the chunks where `keep_rotation[l]` is false unrotated
    /// (p-RoPE and band-masking ablations). `keep_rotation` has one entry per chunk.
    pub fn rotate_masked(&self, x: &mut [T], pos: usize, keep_rotation: &[bool]) {
        let n = self.spec.n_chunks();
        let row = pos * n;
        for (l, &keep) in keep_rotation.iter().enumerate().take(n) {
            if keep {
                rotate_pair(
                    x,
                    self.spec.chunk_dims(l),
                    self.cos[row + l],
                    self.sin[row + l],
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_zero_is_fastest_for_both_pairings() {
        for pairing in [Pairing::Adjacent, Pairing::HalfSplit] {
            let spec = RopeSpec::new(8, 10000.0, pairing);
            let g: Vec<f64> = (0..4).map(|l| spec.frequency(l)).collect();
            assert_eq!(g[0], 1.0);
            assert!(g.windows(2).all(|w| w[0] > w[1]));
        }
    }

    #[test]
    fn table_matches_direct_rotation_and_preserves_norm() {
        let spec = RopeSpec::new(8, 10000.0, Pairing::HalfSplit);
        let table = RopeTable::<f64>::new(spec.clone(), 20);
        let x0: Vec<f64> = (0..8).map(|i| (i as f64 * 0.37).sin() + 0.1).collect();
        let (mut a, mut b) = (x0.clone(), x0.clone());
        table.rotate(&mut a, 17);
        spec.rotate(&mut b, 17);
        assert_eq!(a, b);
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>();
        assert!((norm(&a) - norm(&x0)).abs() < 1e-12);
    }

    #[test]
    fn magnitude_scales_rotated_coordinates_only() {
        let scaling = Scaling::Yarn(Yarn {
            factor: 4.0,
            original_context: 32,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attention_factor: Some(1.5),
            truncate: true,
        });
        let spec = RopeSpec::scaled(8, 4, 10000.0, Pairing::HalfSplit, &scaling, 0);
        let mut x = vec![1.0f64; 8];
        spec.rotate(&mut x, 0);
        assert_eq!(x, [1.5, 1.5, 1.5, 1.5, 1.0, 1.0, 1.0, 1.0]);
    }
}
