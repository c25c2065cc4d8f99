//! Executable checks of *Demystifying the Slash Pattern in Attention: the Role of RoPE* (Cheng et al.), as far as
//! its public text states them (see `theory/slash-*.md` for what was reconstructed).

use std::f64::consts::PI;

use proptest::prelude::*;
use rand::Rng;
use ropescope::analysis::cone::cone_spread;
use ropescope::analysis::fourier::{logit_spectrum, BandShares, FrequencyBands};
use ropescope::analysis::rank::{rank_stats, singular_values};
use ropescope::analysis::slash::{
    is_slash_dominant, slash_profile, slash_score, DEFAULT_SLASH_KAPPA,
};
use ropescope::analysis::softmax::causal_attention;
use ropescope::rope::{Pairing, RopeSpec};
use ropescope::theory::head::{dot, Rotation};
use ropescope::theory::slash::{
    cone_rank_one_deficit_bound, minimal_slash_budget, rank_one_logit_perturbation,
    rank_one_slash_score, slash_deviation_bound,
};
use ropescope_test_support::theory::{
    config, gaussian, norm_sq, other, pairing, rng, scaled, unit, SEED,
};

/// `(R^i q)·(R^j k)` through the engine's own rotation.
fn direct_logit(spec: &RopeSpec, q: &[f64], i: usize, k: &[f64], j: usize) -> f64 {
    let (mut q, mut k) = (q.to_vec(), k.to_vec());
    spec.rotate(&mut q, i);
    spec.rotate(&mut k, j);
    dot(&q, &k)
}

/// Scale of a logit's terms, `Σ_l A_l + Σ |q_d k_d|` over unrotated coordinates: the tolerance is relative to it.
fn logit_scale(spec: &RopeSpec, q: &[f64], k: &[f64]) -> f64 {
    let s = logit_spectrum(spec, q, k);
    s.terms.iter().map(|t| t.amplitude).sum::<f64>()
        + (spec.rot_dim..spec.head_dim)
            .map(|d| (q[d] * k[d]).abs())
            .sum::<f64>()
}

// ---------------------------------------------------------------- Fourier identity

/// Relative tolerance of the Fourier identity: angles up to 4096 rad carry absolute errors near 1e-12 in their
/// sines and cosines, so agreement to 1e-10 of the logit's scale is what f64 guarantees with margin.
const FOURIER_REL_TOL: f64 = 1e-10;

proptest! {
    #![proptest_config(config(128))]

    /// The logit Fourier identity `a[i,j] = Σ_l A_l cos(g_l (i − j) + φ_l)` (+ the unrotated dot product under
    /// partial rotary) agrees with the direct dot product of rotated vectors, for both pairings.
    #[test]
    fn slash_fourier_identity_matches_rope_dot_product(
        half_dim in 1usize..17,
        rot_fraction in 0.0f64..=1.0,
        log_base in 1.0f64..6.0,
        adjacent in any::<bool>(),
        i in 0usize..4096,
        j in 0usize..4096,
        seed in any::<u64>(),
    ) {
        let rot_half = 1 + ((half_dim - 1) as f64 * rot_fraction).round() as usize;
        let spec = RopeSpec::partial(2 * half_dim, 2 * rot_half, 10f64.powf(log_base), pairing(adjacent));
        let mut rng = rng(seed);
        let (q, k) = (gaussian(&mut rng, 2 * half_dim), gaussian(&mut rng, 2 * half_dim));
        let reconstructed = logit_spectrum(&spec, &q, &k).logit(i as f64 - j as f64);
        let direct = direct_logit(&spec, &q, i, &k, j);
        prop_assert!((reconstructed - direct).abs() <= FOURIER_REL_TOL * logit_scale(&spec, &q, &k));
    }
}

/// Companion: decomposing with the wrong pairing (chunks taken from the wrong coordinates) breaks the identity.
#[test]
fn slash_fourier_identity_fails_with_wrong_pairing() {
    let mut rng = rng(SEED);
    for pairing in [Pairing::Adjacent, Pairing::HalfSplit] {
        let spec = RopeSpec::new(16, 10_000.0, pairing);
        let wrong = RopeSpec::new(16, 10_000.0, other(pairing));
        let (q, k) = (gaussian(&mut rng, 16), gaussian(&mut rng, 16));
        let spectrum = logit_spectrum(&wrong, &q, &k);
        let worst = (0..32)
            .map(|i| (spectrum.logit(i as f64) - direct_logit(&spec, &q, i, &k, 0)).abs())
            .fold(0.0, f64::max);
        assert!(
            worst > 1e3 * FOURIER_REL_TOL * logit_scale(&spec, &q, &k),
            "{pairing:?}: {worst}"
        );
    }
}

// ---------------------------------------------------------------- rank-one Q, K: Toeplitz, prompt-independent

/// Embedding dimension of the toy model.
const EMBED_DIM: usize = 16;
/// Head dimension of the toy model.
const HEAD_DIM: usize = 16;
/// Prompt length.
const PROMPT_LEN: usize = 48;
/// Vocabulary size.
const VOCAB: usize = 50;
/// The slash offset the toy heads are built for.
const DELTA: usize = 2;
/// Tolerance on "exactly" Toeplitz logits and equal slash scores: rounding of logits of size ~10.
const EXACT_TOL: f64 = 1e-12;

/// A toy model: embeddings `x_v = 3a + (component ⊥ a)`, so every token has the same projection on the axis `a`.
struct ConeModel {
    axis: Vec<f64>,
    /// A unit direction ⊥ `a` in which the tokens differ.
    across: Vec<f64>,
    embeddings: Vec<Vec<f64>>,
    rotation: Rotation,
    /// Query direction `u` (`W_Q = u aᵀ`) and key direction `R^Δ u` (`W_K = R^Δ u aᵀ`): a slash at `Δ`.
    u: Vec<f64>,
    w: Vec<f64>,
}

/// The component of `v` orthogonal to the unit vector `a`.
fn orthogonal_part(v: &[f64], a: &[f64]) -> Vec<f64> {
    let along = dot(v, a);
    v.iter().zip(a).map(|(x, y)| x - along * y).collect()
}

impl ConeModel {
    fn new(seed: u64) -> Self {
        let mut rng = rng(seed);
        let axis = unit(&gaussian(&mut rng, EMBED_DIM));
        let across = unit(&orthogonal_part(&gaussian(&mut rng, EMBED_DIM), &axis));
        let embeddings = (0..VOCAB)
            .map(|_| {
                let perp = orthogonal_part(&gaussian(&mut rng, EMBED_DIM), &axis);
                axis.iter().zip(&perp).map(|(a, p)| 3.0 * a + p).collect()
            })
            .collect();
        let rotation = Rotation::rope(RopeSpec::new(HEAD_DIM, 10_000.0, Pairing::HalfSplit));
        let u = scaled(&unit(&gaussian(&mut rng, HEAD_DIM)), 0.8);
        let w = rotation.at(&u, DELTA);
        Self {
            axis,
            across,
            embeddings,
            rotation,
            u,
            w,
        }
    }

    /// Queries and keys of a prompt; with `rank_two`, `W_Q` gains `u₂ bᵀ` for a direction `b ⊥ a` of token variation.
    fn queries_keys(&self, prompt: &[usize], rank_two: bool) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        let u2 = scaled(&self.w, 2.0);
        let project = |x: &[f64], dir: &[f64], onto: &[f64]| scaled(dir, dot(x, onto));
        prompt
            .iter()
            .map(|&t| {
                let x = &self.embeddings[t];
                let mut q = project(x, &self.u, &self.axis);
                if rank_two {
                    q.iter_mut()
                        .zip(project(x, &u2, &self.across))
                        .for_each(|(a, b)| *a += b);
                }
                (q, project(x, &self.w, &self.axis))
            })
            .unzip()
    }

    fn logits(&self, prompt: &[usize], rank_two: bool) -> Vec<f64> {
        let (queries, keys) = self.queries_keys(prompt, rank_two);
        self.rotation.logit_matrix(&queries, &keys)
    }
}

/// `max |a[i,j] − a[i+1,j+1]|` over the causal part: 0 for a Toeplitz matrix.
fn toeplitz_defect(logits: &[f64], n: usize) -> f64 {
    (0..n - 1)
        .flat_map(|i| (0..=i).map(move |j| (logits[i * n + j] - logits[(i + 1) * n + j + 1]).abs()))
        .fold(0.0, f64::max)
}

fn random_prompt(seed: u64) -> Vec<usize> {
    let mut rng = rng(seed);
    (0..PROMPT_LEN)
        .map(|_| rng.random_range(0..VOCAB))
        .collect()
}

/// The largest difference between the slash profiles of two prompts.
fn slash_profile_gap(model: &ConeModel, rank_two: bool) -> f64 {
    let profiles: Vec<Vec<f64>> = [SEED, SEED + 1]
        .iter()
        .map(|&s| {
            slash_profile(
                &causal_attention(&model.logits(&random_prompt(s), rank_two), PROMPT_LEN),
                PROMPT_LEN,
            )
        })
        .collect();
    profiles[0]
        .iter()
        .zip(&profiles[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
}

/// Rank-one, token-constant queries and keys (embeddings with equal projections on the axis `W_Q`, `W_K` read)
/// give a Toeplitz logit matrix, so two different prompts have the same slash profile.
#[test]
fn slash_rank_one_constant_qk_give_toeplitz_logits_and_prompt_independent_scores() {
    let model = ConeModel::new(SEED);
    let logits = model.logits(&random_prompt(SEED), false);
    assert!(toeplitz_defect(&logits, PROMPT_LEN) <= EXACT_TOL);
    assert!(slash_profile_gap(&model, false) <= EXACT_TOL);
    let attention = causal_attention(&logits, PROMPT_LEN);
    assert!(is_slash_dominant(
        slash_score(&attention, PROMPT_LEN, DELTA).unwrap(),
        DEFAULT_SLASH_KAPPA
    ));
}

/// Companion: with a rank-two `W_Q` that also reads a direction in which tokens differ, the logits are no longer
/// Toeplitz and the slash profile depends on the prompt.
#[test]
fn slash_rank_two_qk_break_toeplitz_and_prompt_independence() {
    let model = ConeModel::new(SEED);
    let logits = model.logits(&random_prompt(SEED), true);
    assert!(toeplitz_defect(&logits, PROMPT_LEN) > 1e-3);
    assert!(slash_profile_gap(&model, true) > 1e-3);
}

// ---------------------------------------------------------------- the definitions the checks build on

proptest! {
    #![proptest_config(config(64))]

    /// RoPE's relative-position identity: the logit `(R^i q)·(R^j k)` equals `(R^{i−j} q)·k` (the pair moved back
    /// to key position 0), through the engine's rotation, for both pairings, to rounding of the angles
    /// (`10⁻⁹ |q||k|` over positions < 4096).
    #[test]
    fn rope_logit_depends_on_the_offset_only(
        half_dim in 1usize..17,
        adjacent in any::<bool>(),
        j in 0usize..4096,
        offset in 0usize..4096,
        seed in any::<u64>(),
    ) {
        let spec = RopeSpec::new(2 * half_dim, 10_000.0, pairing(adjacent));
        let mut rng = rng(seed);
        let (q, k) = (gaussian(&mut rng, 2 * half_dim), gaussian(&mut rng, 2 * half_dim));
        let scale = norm_sq(&q).sqrt() * norm_sq(&k).sqrt();
        let (at, moved) = (direct_logit(&spec, &q, j + offset, &k, j), direct_logit(&spec, &q, offset, &k, 0));
        prop_assert!((at - moved).abs() <= 1e-9 * scale, "{} vs {}", at, moved);
    }

    /// `SlashScore(Δ)` as the slash paper defines it: the mean of the attention on the Δ-th sub-diagonal,
    /// `1/(N−Δ) Σ_{i=Δ}^{N−1} S[i, i−Δ]`, recomputed here on random causal attention matrices (rows softmaxed from
    /// Gaussian logits), to rounding; `None` for `Δ ≥ N`.
    #[test]
    fn slash_score_is_the_mean_of_the_offset_diagonal(n in 1usize..40, seed in any::<u64>()) {
        let mut rng = rng(seed);
        let attention = causal_attention(&gaussian(&mut rng, n * n), n);
        for delta in 0..n {
            let expected = (delta..n).map(|i| attention[i * n + i - delta]).sum::<f64>() / (n - delta) as f64;
            prop_assert!((slash_score(&attention, n, delta).unwrap() - expected).abs() <= 1e-15);
        }
        prop_assert_eq!(slash_score(&attention, n, n), None);
    }
}

/// Companion of the two definitions: a logit with an absolute position term (a key scaled by `1 + j/100`, as a
/// learned absolute encoding would add) is not a function of the offset; and a previous-token head scores 1 at
/// Δ = 1 and `1/N` at Δ = 0 (only the first row, which can attend to nothing else), so a score that read another
/// diagonal would fail.
#[test]
fn absolute_position_terms_break_the_offset_identity_and_scores_read_their_diagonal() {
    let spec = RopeSpec::new(8, 10_000.0, Pairing::HalfSplit);
    let mut rng = rng(SEED);
    let (q, k) = (gaussian(&mut rng, 8), gaussian(&mut rng, 8));
    let absolute = |j: usize| scaled(&k, 1.0 + j as f64 / 100.0);
    let (at, moved) = (
        direct_logit(&spec, &q, 300, &absolute(200), 200),
        direct_logit(&spec, &q, 100, &absolute(0), 0),
    );
    assert!(
        (at - moved).abs() > 0.1 * (at.abs() + moved.abs()) / 2.0,
        "{at} vs {moved}"
    );
    let n = 6;
    let mut previous = vec![0.0; n * n];
    previous[0] = 1.0;
    (1..n).for_each(|i| previous[i * n + i - 1] = 1.0);
    assert_eq!(slash_score(&previous, n, 1), Some(1.0));
    assert_eq!(slash_score(&previous, n, 0), Some(1.0 / n as f64));
}

// ---------------------------------------------------------------- NoPE as the control

/// Control: without rotation (NoPE, as in the NoPE layers of SmolLM3, Llama 4 or Cohere 2), the same rank-one,
/// position-independent queries and keys give one logit for every pair (to rounding: the tokens' axis projections
/// agree to it), so every row's attention is uniform over its causal keys. The slash score at every `Δ ≥ 1` is then
/// `1/(N−Δ) Σ_{i≥Δ} 1/(i+1)` (0.074 at Δ = 1 for 48 tokens, less beyond), below κ: the slash this mechanism makes
/// comes from the rotation. The RoPE model of
/// `slash_rank_one_constant_qk_give_toeplitz_logits_and_prompt_independent_scores` is slash-dominant with the same
/// queries and keys.
#[test]
fn slash_nope_rank_one_qk_is_never_slash_dominant() {
    let model = ConeModel {
        rotation: Rotation::nope(HEAD_DIM),
        ..ConeModel::new(SEED)
    };
    let attention = causal_attention(&model.logits(&random_prompt(SEED), false), PROMPT_LEN);
    for delta in 1..PROMPT_LEN {
        let uniform = (delta..PROMPT_LEN)
            .map(|i| 1.0 / (i + 1) as f64)
            .sum::<f64>()
            / (PROMPT_LEN - delta) as f64;
        let score = slash_score(&attention, PROMPT_LEN, delta).unwrap();
        assert!(
            (score - uniform).abs() <= EXACT_TOL,
            "Δ = {delta}: {score} vs {uniform}"
        );
        assert!(
            !is_slash_dominant(score, DEFAULT_SLASH_KAPPA),
            "Δ = {delta}: {score}"
        );
    }
}

/// Shifts of every position in the NoPE shift check.
const POSITION_SHIFTS: [usize; 3] = [1, 100, 4096];

/// A NoPE head's logits do not depend on the positions at all, so shifting every position by `s` leaves every
/// logit, and so the attention, unchanged bit for bit (random Gaussian queries and keys, 48 positions).
#[test]
fn nope_attention_is_shift_invariant_exactly() {
    let (nope, (queries, keys)) = (Rotation::nope(HEAD_DIM), shift_check_vectors());
    for s in POSITION_SHIFTS {
        for (i, q) in queries.iter().enumerate() {
            for (j, k) in keys.iter().enumerate().take(i + 1) {
                let (at, shifted) = (nope.logit(q, i, k, j), nope.logit(q, i + s, k, j + s));
                assert_eq!(at.to_bits(), shifted.to_bits(), "s = {s}, ({i}, {j})");
            }
        }
    }
}

/// Companion: RoPE's logits depend on `i − j` only, so shifted they agree, but only to rounding: the angles
/// `(i + s) g` and `(j + s) g` are rounded on their own. Exactness is a property of the layer without rotation.
#[test]
fn rope_attention_is_shift_invariant_only_to_rounding() {
    let rope = Rotation::rope(RopeSpec::new(HEAD_DIM, 10_000.0, Pairing::HalfSplit));
    let (queries, keys) = shift_check_vectors();
    let mut largest = 0.0f64;
    for s in POSITION_SHIFTS {
        for (i, q) in queries.iter().enumerate() {
            for (j, k) in keys.iter().enumerate().take(i + 1) {
                let at = rope.logit(q, i, k, j);
                let scale = dot(q, q).sqrt() * dot(k, k).sqrt();
                let difference = (rope.logit(q, i + s, k, j + s) - at).abs();
                assert!(
                    difference <= 1e-9 * scale,
                    "s = {s}, ({i}, {j}): {difference}"
                );
                largest = largest.max(difference);
            }
        }
    }
    assert!(largest > 0.0, "RoPE's shifted logits were bit-identical");
}

/// On a model that has NoPE layers (the converted SmolLM3 fixture: layer 3 of 8 rotates nothing), the queries and
/// keys before RoPE that its float64 pass computes, rotated as each layer does at every position shifted by `s`:
/// the NoPE layer's logits are bit-identical for every shift, the RoPE layer's (layer 0) equal only to rounding.
#[test]
fn a_models_nope_layers_are_shift_invariant_exactly_and_its_rope_layers_to_rounding() {
    use ropescope::reference::write::{compute_reference, ReferenceRequest};
    let path = ropescope_test_support::paths::fixture("converted/smollm3/model.gguf");
    let model =
        ropescope::model::Model::<f64>::load(&ropescope::gguf::GgufFile::open(path).unwrap())
            .unwrap();
    let ids: Vec<u32> = (1..=24).collect();
    let (rope_layer, nope_layer) = (0, 3);
    let req = ReferenceRequest {
        layers: vec![rope_layer, nope_layer],
        rows: 0..ids.len(),
        command: Vec::new(),
    };
    let arrays = compute_reference(&model, &ids, &req, &["q_pre", "k_pre"]).unwrap();
    let array = |name: &str| arrays.iter().find(|a| a.name == name).unwrap();
    for (layer, exact) in [(rope_layer, false), (nope_layer, true)] {
        let spec = model.config.layers[layer].rope.spec(ids.len());
        assert_eq!(spec.rot_dim == 0, exact, "layer {layer}");
        // The reference layout holds q and k half-split.
        let rotation = Rotation::rope(RopeSpec {
            pairing: Pairing::HalfSplit,
            ..spec
        });
        let (q, k) = (
            array(&format!("q_pre_L{layer}")),
            array(&format!("k_pre_L{layer}")),
        );
        let d = q.shape[2];
        let (qh, kh) = (&q.data[..ids.len() * d], &k.data[..ids.len() * d]);
        let mut any_rounding = false;
        for s in POSITION_SHIFTS {
            for i in 0..ids.len() {
                for j in 0..=i {
                    let (qi, kj) = (&qh[i * d..][..d], &kh[j * d..][..d]);
                    let (at, shifted) = (
                        rotation.logit(qi, i, kj, j),
                        rotation.logit(qi, i + s, kj, j + s),
                    );
                    if exact {
                        assert_eq!(
                            at.to_bits(),
                            shifted.to_bits(),
                            "layer {layer}, s = {s}, ({i}, {j})"
                        );
                    } else {
                        let scale = dot(qi, qi).sqrt() * dot(kj, kj).sqrt();
                        assert!(
                            (shifted - at).abs() <= 1e-9 * scale,
                            "layer {layer}, s = {s}, ({i}, {j})"
                        );
                        any_rounding |= shifted != at;
                    }
                }
            }
        }
        assert!(
            exact || any_rounding,
            "layer {layer}: RoPE's shifted logits were bit-identical"
        );
    }
}

/// Gaussian queries and keys of [`PROMPT_LEN`] positions for the shift checks.
fn shift_check_vectors() -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let mut rng = rng(SEED);
    (0..PROMPT_LEN)
        .map(|_| (gaussian(&mut rng, HEAD_DIM), gaussian(&mut rng, HEAD_DIM)))
        .unzip()
}

// ---------------------------------------------------------------- rank one plus noise

/// Noise levels of the perturbation check, largest first.
const NOISE_LEVELS: [f64; 5] = [0.1, 0.03, 0.01, 0.003, 0.001];
/// The rank-one query and key are `3u` and `3R^Δ u`: the toy model's axis projection is 3.
const AXIS_PROJECTION: f64 = 3.0;

/// How far the slash score moves under noise: `|SlashScore_σ(Δ) − SlashScore_0(Δ)|`, the row-wise deviation
/// `1/(N−Δ) Σ_i |S_σ[i,i−Δ] − S_0[i,i−Δ]|` (which bounds it and does not let rows cancel), and the bound on both.
#[derive(Clone, Copy, Debug)]
struct SlashDeviation {
    score: f64,
    rowwise: f64,
    bound: f64,
}

/// A rank-one head `Q = 1qᵀ`, `K = 1kᵀ` and the per-token noise directions added to it.
struct NoisyRankOne<'a> {
    rotation: &'a Rotation,
    q: Vec<f64>,
    k: Vec<f64>,
    /// `N_Q`, one row per token.
    noise_q: Vec<Vec<f64>>,
    /// `N_K`, one row per token.
    noise_k: Vec<Vec<f64>>,
}

impl NoisyRankOne<'_> {
    fn n(&self) -> usize {
        self.noise_q.len()
    }

    /// Causal attention of the noiseless head.
    fn clean_attention(&self) -> Vec<f64> {
        let constant = |v: &[f64]| vec![v.to_vec(); self.n()];
        causal_attention(
            &self
                .rotation
                .logit_matrix(&constant(&self.q), &constant(&self.k)),
            self.n(),
        )
    }

    /// The slash deviation at `Δ` for `Q = 1qᵀ + σ N_Q (+ e_i kᵀ)`, `K = 1kᵀ + σ N_K` against the noiseless head.
    fn deviation(
        &self,
        sigma: f64,
        delta: usize,
        fixed_rank_two: Option<&[f64]>,
    ) -> SlashDeviation {
        let (n, dim) = (self.n(), self.q.len());
        let clean = self.clean_attention();
        let queries: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                let extra = fixed_rank_two.map_or(0.0, |w| w[i]);
                (0..dim)
                    .map(|d| self.q[d] + sigma * self.noise_q[i][d] + extra * self.k[d])
                    .collect()
            })
            .collect();
        let keys: Vec<Vec<f64>> = (0..n)
            .map(|j| {
                (0..dim)
                    .map(|d| self.k[d] + sigma * self.noise_k[j][d])
                    .collect()
            })
            .collect();
        let noisy = causal_attention(&self.rotation.logit_matrix(&queries, &keys), n);
        let score =
            (slash_score(&noisy, n, delta).unwrap() - slash_score(&clean, n, delta).unwrap()).abs();
        let at = |i: usize| i * n + i - delta;
        let rowwise = (delta..n)
            .map(|i| (noisy[at(i)] - clean[at(i)]).abs())
            .sum::<f64>()
            / (n - delta) as f64;
        let norms =
            |rows: &[Vec<f64>]| rows.iter().map(|r| norm_sq(r).sqrt()).collect::<Vec<f64>>();
        let eta = rank_one_logit_perturbation(
            norm_sq(&self.q).sqrt(),
            norm_sq(&self.k).sqrt(),
            &norms(&self.noise_q),
            &norms(&self.noise_k),
            sigma,
        );
        let bound = slash_deviation_bound(&clean, n, delta, &eta).unwrap();
        SlashDeviation {
            score,
            rowwise,
            bound,
        }
    }
}

/// The toy model's rank-one head (`q = 3u`, `k = 3R^Δ u`) with one fixed Gaussian noise realisation.
fn gaussian_noisy_head(model: &ConeModel) -> NoisyRankOne<'_> {
    let mut rng = rng(SEED);
    let mut noise = || -> Vec<Vec<f64>> {
        (0..PROMPT_LEN)
            .map(|_| gaussian(&mut rng, HEAD_DIM))
            .collect()
    };
    let (noise_q, noise_k) = (noise(), noise());
    NoisyRankOne {
        rotation: &model.rotation,
        q: scaled(&model.u, AXIS_PROJECTION),
        k: scaled(&model.w, AXIS_PROJECTION),
        noise_q,
        noise_k,
    }
}

/// The slash deviation of the toy model's head under its Gaussian noise (plus, optionally, a fixed rank-two part).
fn noisy_slash_deviation(
    model: &ConeModel,
    sigma: f64,
    fixed_rank_two: Option<&[f64]>,
) -> SlashDeviation {
    gaussian_noisy_head(model).deviation(sigma, DELTA, fixed_rank_two)
}

/// Rank one plus noise of size σ: the slash score moves by no more than the Cauchy–Schwarz/softmax bound, and the
/// bound and the (row-wise) deviation shrink with σ.
#[test]
fn slash_noisy_rank_one_deviation_is_bounded_and_shrinks() {
    let model = ConeModel::new(SEED);
    let results: Vec<SlashDeviation> = NOISE_LEVELS
        .iter()
        .map(|&s| noisy_slash_deviation(&model, s, None))
        .collect();
    println!("per σ: {results:.5?}");
    assert!(results
        .iter()
        .all(|r| r.score <= r.rowwise + EXACT_TOL && r.rowwise <= r.bound + EXACT_TOL));
    assert!(results
        .windows(2)
        .all(|w| w[1].bound < w[0].bound && w[1].rowwise < w[0].rowwise));
    assert!(results[NOISE_LEVELS.len() - 1].bound < 0.05);
}

/// Companion: a fixed rank-two component (a token-dependent multiple `e_i ∈ [0.5, 1.5]` of the key direction added
/// to the queries, not scaled by σ) keeps the slash pattern away from the rank-one one however small the noise:
/// the row-wise deviation stays above 0.02 at every σ and, at the smallest σ, exceeds the rank-one bound.
#[test]
fn slash_rank_two_deviation_does_not_shrink() {
    let model = ConeModel::new(SEED);
    let mut rng = rng(SEED + 7);
    let weights: Vec<f64> = (0..PROMPT_LEN)
        .map(|_| rng.random_range(0.5..1.5))
        .collect();
    let results: Vec<SlashDeviation> = NOISE_LEVELS
        .iter()
        .map(|&s| noisy_slash_deviation(&model, s, Some(&weights)))
        .collect();
    println!("rank two, per σ: {results:.5?}");
    assert!(results.iter().all(|r| r.rowwise > 0.02));
    let smallest = results[NOISE_LEVELS.len() - 1];
    assert!(smallest.rowwise > smallest.bound);
}

/// Relative slack of "the worst case attains the bound": both sides are computed in f64 from logits of size ≤ 10
/// and rows of at most 64 weights, so they agree to about 10⁻¹³; 10⁻⁹ leaves room and still fails any bound
/// scaled by a factor below `1 − 10⁻⁹`.
const ATTAINED_REL_TOL: f64 = 1e-9;
/// The toy model under first-order worst-case query noise reaches at least `bound / TOY_NOISE_TIGHTNESS` at
/// every σ (measured ratios 0.155–0.174).
const TOY_NOISE_TIGHTNESS: f64 = 6.5;

/// `(R^i)ᵀ y = R^{−i} y`: `y` rotated back by `i` positions (rotations are orthogonal).
fn rotate_back(rotation: &Rotation, y: &[f64], i: usize) -> Vec<f64> {
    (0..y.len())
        .map(|d| {
            let mut e = vec![0.0; y.len()];
            e[d] = 1.0;
            dot(&rotation.at(&e, i), y)
        })
        .collect()
}

/// Unit query noise that moves each row's slash weight as fast as possible to first order. Row `i` (target
/// `t = i − Δ`) gets `n_i = ±R^{−i} y_i / |y_i|` with `y_i = K_t − Σ_{j≠t} w_j K_j`, `K_j = R^j k` the rotated keys and
/// `w_j` the other keys' clean weights renormalised: `x = a_t − ln Σ_{j≠t} e^{a_j}` then moves at rate `σ |y_i|`,
/// against the bound's `2σ|k|`. The sign raises the target when `S[i,t] ≤ 1/2` and lowers it otherwise, the
/// direction in which the weight moves more. Rows without a target get no noise.
fn worst_case_query_noise(head: &NoisyRankOne, delta: usize) -> Vec<Vec<f64>> {
    let (n, dim) = (head.n(), head.q.len());
    let clean = head.clean_attention();
    let rotated_keys: Vec<Vec<f64>> = (0..n).map(|j| head.rotation.at(&head.k, j)).collect();
    (0..n)
        .map(|i| {
            if i < delta {
                return vec![0.0; dim];
            }
            let t = i - delta;
            let target_weight = clean[i * n + t];
            let y: Vec<f64> = (0..dim)
                .map(|d| {
                    rotated_keys[t][d]
                        - (0..=i)
                            .filter(|&j| j != t)
                            .map(|j| clean[i * n + j] / (1.0 - target_weight) * rotated_keys[j][d])
                            .sum::<f64>()
                })
                .collect();
            let sign = if target_weight <= 0.5 { 1.0 } else { -1.0 };
            scaled(&unit(&rotate_back(head.rotation, &y, i)), sign)
        })
        .collect()
}

/// The noise bound is attained: one frequency `g = π`, three tokens, `Δ = 1`. Every key other than a row's target
/// is rotated to `−K_t`, so query noise along `∓ψ` moves the target's logit by `∓η_i` and every other logit by
/// `±η_i`: the slash-score deviation equals the bound at every σ and amplitude, so any smaller bound fails.
#[test]
fn slash_noise_bound_is_attained_by_worst_case_noise() {
    let rotation = Rotation::single_frequency(PI);
    let (n, delta) = (3, 1);
    for amplitude in [0.5f64, 2.0] {
        let psi = vec![amplitude.sqrt(), 0.0];
        let k = rotation.at(&psi, delta);
        let mut head = NoisyRankOne {
            rotation: &rotation,
            q: psi.clone(),
            k,
            noise_q: vec![vec![0.0; 2]; n],
            noise_k: vec![vec![0.0; 2]; n],
        };
        head.noise_q = worst_case_query_noise(&head, delta);
        for sigma in NOISE_LEVELS {
            let r = head.deviation(sigma, delta, None);
            println!("A={amplitude} σ={sigma}: {r:?}");
            assert!(
                r.score <= r.rowwise + EXACT_TOL && r.rowwise <= r.bound * (1.0 + ATTAINED_REL_TOL)
            );
            assert!(r.score >= r.bound * (1.0 - ATTAINED_REL_TOL));
        }
    }
}

/// The per-row logit bound is attained when the rotated query, key and noise vectors all point the same way (the
/// bound sees only norms, which RoPE preserves; here they are numbers on one axis): the logit moves by exactly `σ (|q| |m_j| + |n_i| |k|) + σ² |n_i| |m_j|`, most at the largest key noise so far.
#[test]
fn slash_logit_perturbation_bound_is_attained_by_aligned_noise() {
    let (q, k) = (1.5, 0.7);
    let query_noise = [0.3, 2.0, 0.5, 1.1];
    let key_noise = [0.9, 0.2, 1.7, 0.4];
    for sigma in [0.1, 1.0, 3.0] {
        let eta = rank_one_logit_perturbation(q, k, &query_noise, &key_noise, sigma);
        for (i, &bound) in eta.iter().enumerate() {
            let moved = (0..=i)
                .map(|j| ((q + sigma * query_noise[i]) * (k + sigma * key_noise[j]) - q * k).abs())
                .fold(0.0, f64::max);
            assert!(
                (bound - moved).abs() <= EXACT_TOL,
                "σ={sigma} row {i}: {bound} vs {moved}"
            );
        }
    }
}

/// `slash_deviation_bound` refuses what it cannot bound, each defect alone: `Δ ≥ n`, fewer row bounds than rows, an
/// attention matrix that is not `n × n`.
#[test]
fn slash_deviation_bound_refuses_inconsistent_inputs() {
    let n = 3;
    let attention = [1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.2, 0.3, 0.5];
    let eta = [0.1; 3];
    assert!(slash_deviation_bound(&attention, n, 1, &eta).is_some());
    assert_eq!(slash_deviation_bound(&attention, n, n, &eta), None);
    assert_eq!(slash_deviation_bound(&attention, n, 1, &eta[..2]), None);
    assert_eq!(slash_deviation_bound(&attention[..8], n, 1, &eta), None);
}

/// The noise bound is approached in the toy model itself: first-order worst-case query noise (unit norm per
/// token) moves the slash score by at least `bound / TOY_NOISE_TIGHTNESS` at every σ, where Gaussian noise
/// stays 24–600 times below it. What is left is the toy's geometry: the other keys do not point against the target.
#[test]
fn slash_noise_bound_is_approached_in_the_toy_model() {
    let model = ConeModel::new(SEED);
    let mut head = gaussian_noisy_head(&model);
    head.noise_k = vec![vec![0.0; HEAD_DIM]; PROMPT_LEN];
    head.noise_q = worst_case_query_noise(&head, DELTA);
    for sigma in NOISE_LEVELS {
        let r = head.deviation(sigma, DELTA, None);
        println!("σ={sigma}: {r:?}, ratio {:.3}", r.score / r.bound);
        assert!(r.score <= r.rowwise + EXACT_TOL && r.rowwise <= r.bound + EXACT_TOL);
        assert!(r.score >= r.bound / TOY_NOISE_TIGHTNESS);
    }
}

// ---------------------------------------------------------------- frequency bands

/// Head dimension of the band check (32 chunks, base 10⁴: g from 1 down to 1.3e-4).
const BAND_DIM: usize = 64;
/// Sequence length of the band check.
const BAND_LEN: usize = 64;
/// Total amplitude `Σ_l A_l`, the same whichever band carries it: a bound on the amplitude, under which high and
/// medium frequencies each make a slash peak and low ones do not. (At 16 the medium band reaches κ but its profile
/// still decreases from `Δ = 0`; the peak at `Δ` appears between 32 and 64.)
const BAND_BUDGET: f64 = 64.0;

/// The three RoPE bands of `analysis::fourier::FrequencyBands`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Band {
    Low,
    Medium,
    High,
}

impl Band {
    fn contains(self, bands: &FrequencyBands, g: f64) -> bool {
        match self {
            Band::Low => g < bands.low_max,
            Band::Medium => g >= bands.low_max && g < bands.high_min,
            Band::High => g >= bands.high_min,
        }
    }
}

/// The band check's rotation (d = 64, θ = 10⁴) and a unit direction `ψ̂` whose squared norm is spread evenly, at
/// random phases, over the chunks of `band` under the default band edges. Panics if the band has no chunk.
fn band_direction(band: Band) -> (Rotation, Vec<f64>) {
    let spec = RopeSpec::new(BAND_DIM, 10_000.0, Pairing::HalfSplit);
    let bands = FrequencyBands::default();
    let chunks: Vec<usize> = (0..spec.n_chunks())
        .filter(|&l| band.contains(&bands, spec.frequency(l)))
        .collect();
    assert!(!chunks.is_empty(), "{band:?} band has no chunk");
    let mut psi = vec![0.0; BAND_DIM];
    let mut rng = rng(SEED);
    for &l in &chunks {
        let (a, b) = spec.chunk_dims(l);
        let phase: f64 = rng.random_range(0.0..std::f64::consts::TAU);
        let radius = (1.0 / chunks.len() as f64).sqrt();
        (psi[a], psi[b]) = (radius * phase.cos(), radius * phase.sin());
    }
    (Rotation::rope(spec), psi)
}

/// The slash profile (rotating actual vectors: queries `ψ`, keys `R^Δ ψ`, `‖ψ‖² = budget`) and the band shares of a
/// head carried by `band` alone.
fn band_limited_slash(band: Band, budget: f64) -> (Vec<f64>, BandShares) {
    let (rotation, direction) = band_direction(band);
    let psi = scaled(&direction, budget.sqrt());
    let key = rotation.at(&psi, DELTA);
    let shares =
        logit_spectrum(rotation.spec(), &psi, &key).band_shares(&FrequencyBands::default());
    let logits = rotation.logit_matrix(&vec![psi; BAND_LEN], &vec![key; BAND_LEN]);
    let profile = slash_profile(&causal_attention(&logits, BAND_LEN), BAND_LEN);
    (profile, shares)
}

/// Whether `Δ` is the strict maximum of a slash profile.
fn peak_at_delta(profile: &[f64]) -> bool {
    profile
        .iter()
        .enumerate()
        .all(|(d, &s)| d == DELTA || s < profile[DELTA])
}

/// With only high frequencies (`g_l ≥` the high band's edge) and the budget [`BAND_BUDGET`] the slash peak at `Δ > 0`
/// persists: `SlashScore(Δ) ≥ κ` and `Δ` is the profile's maximum.
#[test]
fn slash_peak_persists_with_high_frequencies_alone() {
    let (profile, shares) = band_limited_slash(Band::High, BAND_BUDGET);
    println!("high: SlashScore({DELTA}) = {:.3}", profile[DELTA]);
    assert!((shares.high - 1.0).abs() < 1e-12);
    assert!(is_slash_dominant(profile[DELTA], DEFAULT_SLASH_KAPPA));
    assert!(peak_at_delta(&profile));
}

/// With only medium frequencies (between the two band edges) and the same budget the peak persists too: the medium
/// band on its own, not only together with the high one, makes a slash. The measurement by rotating vectors agrees
/// with `theory::slash::rank_one_slash_score`, which the budget sweeps use.
#[test]
fn slash_peak_persists_with_medium_frequencies_alone() {
    let (profile, shares) = band_limited_slash(Band::Medium, BAND_BUDGET);
    println!("medium: SlashScore({DELTA}) = {:.3}", profile[DELTA]);
    assert!((shares.medium - 1.0).abs() < 1e-12);
    assert!(is_slash_dominant(profile[DELTA], DEFAULT_SLASH_KAPPA));
    assert!(peak_at_delta(&profile));
    let (rotation, direction) = band_direction(Band::Medium);
    let formula =
        rank_one_slash_score(&rotation, &direction, BAND_BUDGET, BAND_LEN, DELTA).unwrap();
    assert!((formula - profile[DELTA]).abs() < 1e-12);
}

/// Companion: the same budget carried only by low frequencies (medium and high removed) loses the peak:
/// `SlashScore(Δ) < κ`. This holds for bounded amplitude only: see the budget sweep.
#[test]
fn slash_peak_disappears_with_only_low_frequencies() {
    let (profile, shares) = band_limited_slash(Band::Low, BAND_BUDGET);
    println!("low only: SlashScore({DELTA}) = {:.3}", profile[DELTA]);
    assert!((shares.low - 1.0).abs() < 1e-12);
    assert!(!is_slash_dominant(profile[DELTA], DEFAULT_SLASH_KAPPA));
}

/// Largest budget the sweeps search.
const MAX_SWEEP_BUDGET: f64 = 1e14;
/// The low band's slash score at [`LOW_BAND_LARGE_BUDGET`] is at least this: without a bound on the amplitude, low
/// frequencies alone make a sharp slash.
const LOW_BAND_LARGE_SCORE: f64 = 0.97;
/// A budget large enough for the low band's sharp slash.
const LOW_BAND_LARGE_BUDGET: f64 = 1e6;
/// Relative tolerance of "the minimal budget grows like `1/ḡ²`": `B*·ḡ²` against its `g → 0` limit. The quartic
/// term of `cos` changes `B*` by about `ḡ² s²/12` relatively, `s ≈ 6` tokens the width of the peak: 3·10⁻³ at
/// `ḡ = 0.01`.
const INVERSE_SQUARE_REL_TOL: f64 = 0.01;
/// The frequency whose `B*(g) g²` stands for the `g → 0` limit.
const LIMIT_FREQUENCY: f64 = 1e-5;

/// `ḡ² = Σ_l w_l g_l²` of a unit direction (chunk weights `w_l`): near a slash peak the logit is
/// `B (1 − ḡ² (δ − Δ)²/2 + …)`, so the peak's width, and the budget it needs, are set by `ḡ`.
fn mean_square_frequency(rotation: &Rotation, direction: &[f64]) -> f64 {
    rotation
        .frequencies()
        .iter()
        .enumerate()
        .map(|(l, &g)| {
            let (a, b) = rotation.spec().chunk_dims(l);
            (direction[a].powi(2) + direction[b].powi(2)) * g * g
        })
        .sum()
}

/// `B*(g) g²` for a single frequency `g`: the minimal budget for `SlashScore(Δ) ≥ κ` times `g²`.
fn single_frequency_budget_product(g: f64, delta: usize) -> f64 {
    let budget = minimal_slash_budget(
        &Rotation::single_frequency(g),
        &[1.0, 0.0],
        BAND_LEN,
        delta,
        DEFAULT_SLASH_KAPPA,
        MAX_SWEEP_BUDGET,
    )
    .unwrap();
    budget * g * g
}

/// The smallest budget `B*` that reaches `SlashScore(Δ) ≥ κ`, per band: high < medium ≤ [`BAND_BUDGET`] < low, so the
/// two band checks above are about bounded amplitude. The low band does reach κ, at `B*·ḡ²` equal to the
/// single-frequency limit within [`INVERSE_SQUARE_REL_TOL`], and a sharp slash (score ≥ 0.97) at budget 10⁶.
#[test]
fn slash_minimal_budget_per_band() {
    let budget = |band: Band| {
        let (rotation, direction) = band_direction(band);
        let b = minimal_slash_budget(
            &rotation,
            &direction,
            BAND_LEN,
            DELTA,
            DEFAULT_SLASH_KAPPA,
            MAX_SWEEP_BUDGET,
        )
        .unwrap();
        (b, mean_square_frequency(&rotation, &direction))
    };
    let (high, medium, (low, low_g2)) = (
        budget(Band::High).0,
        budget(Band::Medium).0,
        budget(Band::Low),
    );
    let limit = single_frequency_budget_product(LIMIT_FREQUENCY, DELTA);
    println!(
        "B*: high {high:.3}, medium {medium:.3}, low {low:.3} (B*·ḡ² = {:.5}, limit {limit:.5})",
        low * low_g2
    );
    assert!(high < medium && medium <= BAND_BUDGET && BAND_BUDGET < low);
    assert!((low * low_g2 / limit - 1.0).abs() <= INVERSE_SQUARE_REL_TOL);
    let (rotation, direction) = band_direction(Band::Low);
    let sharp = rank_one_slash_score(
        &rotation,
        &direction,
        LOW_BAND_LARGE_BUDGET,
        BAND_LEN,
        DELTA,
    )
    .unwrap();
    println!("low band at budget {LOW_BAND_LARGE_BUDGET:e}: SlashScore({DELTA}) = {sharp:.4}");
    assert!(sharp >= LOW_BAND_LARGE_SCORE);
}

proptest! {
    #![proptest_config(config(32))]

    /// Frequency sweep at low frequency: a single chunk of frequency `g ∈ [10⁻⁴, 10⁻²]` needs the budget
    /// `B*(g) = C/g²` to reach `SlashScore(Δ) ≥ κ`, with `C` the `g → 0` limit of `B* g²` (for the same `Δ`), within
    /// [`INVERSE_SQUARE_REL_TOL`].
    #[test]
    fn slash_minimal_budget_grows_like_inverse_square_frequency(log_g in -4.0f64..=-2.0, delta in 1usize..6) {
        let product = single_frequency_budget_product(10f64.powf(log_g), delta);
        let limit = single_frequency_budget_product(LIMIT_FREQUENCY, delta);
        prop_assert!((product / limit - 1.0).abs() <= INVERSE_SQUARE_REL_TOL, "{product} vs {limit}");
    }
}

// ---------------------------------------------------------------- cone ⇒ near rank one

/// Token count of the cone check.
const CONE_TOKENS: usize = 64;
/// Cone half-angles, widest first.
const CONE_ANGLES: [f64; 3] = [0.3, 0.1, 0.03];
/// Gain `s` of `W_Q = s u aᵀ + W_⊥` on the axis.
const AXIS_GAIN: f64 = 3.0;

/// Embeddings at angle `θ_t` uniform in `[0, θ_max]` from the axis `a` (or, with `None`, uniform on the sphere).
fn embeddings(axis: &[f64], max_angle: Option<f64>, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = rng(seed);
    (0..CONE_TOKENS)
        .map(|_| match max_angle {
            Some(max) => {
                let theta = rng.random_range(0.0..max);
                let z = unit(&orthogonal_part(&gaussian(&mut rng, EMBED_DIM), axis));
                axis.iter()
                    .zip(&z)
                    .map(|(a, z)| theta.cos() * a + theta.sin() * z)
                    .collect()
            }
            None => unit(&gaussian(&mut rng, EMBED_DIM)),
        })
        .collect()
}

/// `W = s u aᵀ + W_⊥` (row-major `HEAD_DIM × EMBED_DIM`) with `W_⊥ a = 0`, and `‖W_⊥‖₂`.
fn projection(axis: &[f64], seed: u64) -> (Vec<f64>, f64) {
    let mut rng = rng(seed);
    let u = unit(&gaussian(&mut rng, HEAD_DIM));
    let perp: Vec<f64> = (0..HEAD_DIM)
        .flat_map(|_| orthogonal_part(&scaled(&gaussian(&mut rng, EMBED_DIM), 0.25), axis))
        .collect();
    let perp_norm = singular_values(&perp, HEAD_DIM, EMBED_DIM).unwrap()[0];
    let w = (0..HEAD_DIM * EMBED_DIM)
        .map(|x| AXIS_GAIN * u[x / EMBED_DIM] * axis[x % EMBED_DIM] + perp[x])
        .collect();
    (w, perp_norm)
}

/// `X Wᵀ` (one row per token), flattened row-major.
fn project_all(x: &[Vec<f64>], w: &[f64]) -> Vec<f64> {
    x.iter()
        .flat_map(|x| w.chunks(EMBED_DIM).map(move |row| dot(row, x)))
        .collect()
}

/// Token embeddings on a cone whose axis `W_Q`, `W_K` project onto give near-rank-one queries and keys: the
/// rank-one deficit stays under the Eckart–Young bound `n sin²θ_max ‖W_⊥‖₂² / ‖Q‖_F²`, which shrinks with the
/// cone's angle; the measured cone spread is within twice the construction's angle.
#[test]
fn slash_cone_embeddings_give_near_rank_one_qk() {
    let axis = unit(&gaussian(&mut rng(SEED), EMBED_DIM));
    for (role, seed) in [("Q", SEED + 1), ("K", SEED + 2)] {
        let (w, perp_norm) = projection(&axis, seed);
        let mut previous_bound = f64::INFINITY;
        for max_angle in CONE_ANGLES {
            let x = embeddings(&axis, Some(max_angle), seed + 10);
            assert!(cone_spread(&x).unwrap().max_angle <= 2.0 * max_angle);
            let q = project_all(&x, &w);
            let stats = rank_stats(&singular_values(&q, CONE_TOKENS, HEAD_DIM).unwrap()).unwrap();
            let bound = cone_rank_one_deficit_bound(CONE_TOKENS, max_angle, perp_norm, norm_sq(&q));
            println!(
                "{role} θ={max_angle}: share {:.6} eff. rank {:.3} deficit bound {bound:.2e}",
                stats.rank_one_share, stats.effective_rank
            );
            assert!(1.0 - stats.rank_one_share <= bound + EXACT_TOL);
            assert!(bound < previous_bound);
            previous_bound = bound;
        }
        assert!(previous_bound < 1e-3);
    }
}

/// Gain `γ` of the worst-case `W_⊥ = γ w vᵀ` (its spectral norm).
const PERP_GAIN: f64 = 1.0;

/// The cone bound is attained: every embedding exactly at `θ_max`, `x_t = cos θ_max a ± sin θ_max v` with signs
/// alternating, and `W = s u aᵀ + γ w vᵀ` with `w ⊥ u`, `v ⊥ a`. Then `Q = s cos θ_max 1uᵀ + γ sin θ_max εwᵀ` with
/// `1 ⊥ ε` and `u ⊥ w` is its own singular value decomposition, `σ_2² = n γ² sin²θ_max`, and the rank-one deficit
/// equals the bound: any smaller bound fails.
#[test]
fn slash_cone_bound_is_attained_by_worst_case_embeddings() {
    let mut rng = rng(SEED + 3);
    let axis = unit(&gaussian(&mut rng, EMBED_DIM));
    let v = unit(&orthogonal_part(&gaussian(&mut rng, EMBED_DIM), &axis));
    let u = unit(&gaussian(&mut rng, HEAD_DIM));
    let w = unit(&orthogonal_part(&gaussian(&mut rng, HEAD_DIM), &u));
    let projection: Vec<f64> = (0..HEAD_DIM * EMBED_DIM)
        .map(|x| {
            let (r, c) = (x / EMBED_DIM, x % EMBED_DIM);
            AXIS_GAIN * u[r] * axis[c] + PERP_GAIN * w[r] * v[c]
        })
        .collect();
    for max_angle in CONE_ANGLES {
        let x: Vec<Vec<f64>> = (0..CONE_TOKENS)
            .map(|t| {
                let side = if t % 2 == 0 { 1.0 } else { -1.0 };
                axis.iter()
                    .zip(&v)
                    .map(|(a, v)| max_angle.cos() * a + side * max_angle.sin() * v)
                    .collect()
            })
            .collect();
        let q = project_all(&x, &projection);
        let stats = rank_stats(&singular_values(&q, CONE_TOKENS, HEAD_DIM).unwrap()).unwrap();
        let deficit = 1.0 - stats.rank_one_share;
        let bound = cone_rank_one_deficit_bound(CONE_TOKENS, max_angle, PERP_GAIN, norm_sq(&q));
        println!("θ={max_angle}: deficit {deficit:.6e}, bound {bound:.6e}");
        assert!(deficit <= bound * (1.0 + ATTAINED_REL_TOL));
        assert!(deficit >= bound * (1.0 - ATTAINED_REL_TOL));
    }
}

/// Companion: embeddings spread over the whole sphere (no cone) give queries far from rank one.
#[test]
fn slash_embeddings_off_a_cone_give_high_rank_qk() {
    let axis = unit(&gaussian(&mut rng(SEED), EMBED_DIM));
    let (w, _) = projection(&axis, SEED + 1);
    let x = embeddings(&axis, None, SEED + 10);
    assert!(cone_spread(&x).unwrap().mean_angle > 1.0);
    let stats =
        rank_stats(&singular_values(&project_all(&x, &w), CONE_TOKENS, HEAD_DIM).unwrap()).unwrap();
    assert!(
        stats.rank_one_share < 0.9 && stats.effective_rank > 2.0,
        "{stats:?}"
    );
}
