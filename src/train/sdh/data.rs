//! Token embeddings (on a cone or isotropic) and the prompt distributions of the slash-pattern experiment.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use serde::Serialize;

/// How the fixed token embeddings are placed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EmbeddingGeometry {
    /// On a cone: `e_v = cos(ψ) u + sin(ψ) w_v` with one shared unit axis `u` and unit token-specific parts
    /// `w_v ⟂ u` drawn at random (the modelling assumption of Demystifying the Slash Pattern).
    Cone {
        /// Half-angle `ψ` of the cone, in radians.
        half_angle: f64,
    },
    /// Independent uniformly random unit vectors: no shared axis (the broken condition).
    Isotropic,
}

fn gaussian_vector(dim: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    (0..dim)
        .map(|_| rng.sample::<f64, _>(StandardNormal))
        .collect()
}

fn normalized(mut v: Vec<f64>) -> Vec<f64> {
    let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

/// `vocab` unit embeddings of dimension `dim` (`dim >= 2`) placed as `geometry` says.
pub fn embeddings(
    geometry: EmbeddingGeometry,
    vocab: usize,
    dim: usize,
    rng: &mut ChaCha8Rng,
) -> Vec<Vec<f64>> {
    match geometry {
        EmbeddingGeometry::Isotropic => (0..vocab)
            .map(|_| normalized(gaussian_vector(dim, rng)))
            .collect(),
        EmbeddingGeometry::Cone { half_angle } => {
            let axis = normalized(gaussian_vector(dim, rng));
            (0..vocab)
                .map(|_| {
                    let mut w = gaussian_vector(dim, rng);
                    let along: f64 = w.iter().zip(&axis).map(|(a, b)| a * b).sum();
                    w.iter_mut().zip(&axis).for_each(|(x, a)| *x -= along * a);
                    let w = normalized(w);
                    axis.iter()
                        .zip(&w)
                        .map(|(a, b)| half_angle.cos() * a + half_angle.sin() * b)
                        .collect()
                })
                .collect()
        }
    }
}

/// The in-distribution prompt source: a Markov chain in which every token has `branching` equally likely
/// successors, chosen at random once. Its prompts are far from i.i.d. uniform tokens (the out-of-distribution
/// prompts), so a head that relied on their statistics would not transfer.
#[derive(Clone, Debug)]
pub struct MarkovSource {
    successors: Vec<Vec<usize>>,
}

impl MarkovSource {
    /// Draws the successor lists for a vocabulary of `vocab` tokens.
    pub fn new(vocab: usize, branching: usize, rng: &mut ChaCha8Rng) -> Self {
        let successors = (0..vocab)
            .map(|_| {
                (0..branching.max(1))
                    .map(|_| rng.random_range(0..vocab))
                    .collect()
            })
            .collect();
        Self { successors }
    }

    /// One prompt of `len` tokens; the first is uniform.
    pub fn sample(&self, len: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
        let mut prompt = Vec::with_capacity(len);
        let mut t = rng.random_range(0..self.successors.len());
        for _ in 0..len {
            prompt.push(t);
            let next = &self.successors[t];
            t = next[rng.random_range(0..next.len())];
        }
        prompt
    }
}

/// A prompt of `len` i.i.d. uniform tokens (the out-of-distribution prompts of the paper).
pub fn uniform_prompt(vocab: usize, len: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    (0..len).map(|_| rng.random_range(0..vocab)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::metrics::cone_spread;
    use rand::SeedableRng;
    use std::collections::BTreeSet;

    #[test]
    fn cone_embeddings_have_the_requested_spread() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let cone = embeddings(
            EmbeddingGeometry::Cone { half_angle: 0.3 },
            200,
            16,
            &mut rng,
        );
        let iso = embeddings(EmbeddingGeometry::Isotropic, 200, 16, &mut rng);
        assert!((cone_spread(&cone) - 0.3).abs() < 0.03);
        assert!(cone_spread(&iso) > 1.2);
        // Unit vectors (on the cone, only when the token parts are orthogonal to the axis), each at the
        // half-angle from the axis, up to the error of estimating the axis from 200 of them.
        for e in cone.iter().chain(&iso) {
            let norm = e.iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!((norm - 1.0).abs() < 1e-12, "norm {norm}");
        }
        let spread = crate::analysis::cone::cone_spread(&cone).unwrap();
        assert!((spread.max_angle - 0.3).abs() < 0.03, "{}", spread.max_angle);
    }

    /// Each token has `branching` successors drawn once; a prompt steps from token to one of them, each taken;
    /// the first token, and every token of a uniform prompt, is any of the vocabulary.
    #[test]
    fn markov_prompts_step_through_the_successor_lists() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let source = MarkovSource::new(20, 3, &mut rng);
        assert_eq!(source.successors.len(), 20);
        assert!(source.successors.iter().all(|s| s.len() == 3 && s.iter().all(|&t| t < 20)));
        let mut seen = vec![BTreeSet::new(); 20];
        let mut first = BTreeSet::new();
        for _ in 0..400 {
            let prompt = source.sample(12, &mut rng);
            assert_eq!(prompt.len(), 12);
            first.insert(prompt[0]);
            for w in prompt.windows(2) {
                assert!(source.successors[w[0]].contains(&w[1]), "{} after {}", w[1], w[0]);
                seen[w[0]].insert(w[1]);
            }
        }
        assert_eq!(first.len(), 20, "the first token is uniform");
        for (t, s) in seen.iter().enumerate() {
            let listed: BTreeSet<usize> = source.successors[t].iter().copied().collect();
            assert!(s.is_empty() || *s == listed, "token {t}: {s:?} of {listed:?}");
        }
        assert!(seen.iter().filter(|s| s.len() > 1).count() > 10);
        let uniform = uniform_prompt(20, 2000, &mut rng);
        assert_eq!(uniform.len(), 2000);
        let values: BTreeSet<usize> = uniform.iter().copied().collect();
        assert_eq!(values, (0..20).collect());
    }
}
