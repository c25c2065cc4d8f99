//! Executable checks of p-RoPE (*Round and Round We Go*, Section 6.1 and Appendix D), run through the engine's
//! own masked rotation `RopeTable::rotate_masked`.

use proptest::prelude::*;
use ropescope::rope::{Pairing, RopeSpec, RopeTable};
use ropescope::theory::head::{dot, Rotation};
use ropescope::theory::prope::{
    chunk_contribution, masked_logit, p_rope_mask, reversed_p_rope_mask, rotating_chunks,
};
use ropescope_test_support::theory;
use ropescope_test_support::theory::{config, gaussian, rng, rotated};

/// Positions tabulated for the p-RoPE checks.
const N_POS: usize = 512;

/// A random p-RoPE instance: spec, table, query and key.
fn instance(
    half_dim: usize,
    adjacent: bool,
    seed: u64,
) -> (RopeSpec, RopeTable<f64>, Vec<f64>, Vec<f64>) {
    let pairing = if adjacent {
        Pairing::Adjacent
    } else {
        Pairing::HalfSplit
    };
    let spec = RopeSpec::new(2 * half_dim, 10_000.0, pairing);
    let table = RopeTable::new(spec.clone(), N_POS);
    let mut rng = rng(seed);
    let (q, k) = (
        gaussian(&mut rng, 2 * half_dim),
        gaussian(&mut rng, 2 * half_dim),
    );
    (spec, table, q, k)
}

proptest! {
    #![proptest_config(config(128))]

    /// p-RoPE: every chunk p-RoPE leaves unrotated contributes exactly `q^(l)·k^(l)` to the logit at every pair of
    /// positions, so its contribution does not depend on the distance (bit-for-bit equality), and exactly the
    /// `⌊p · d/2⌋` fastest chunks rotate.
    #[test]
    fn p_rope_unrotated_chunks_are_distance_independent_exactly(
        half_dim in 1usize..33,
        adjacent in any::<bool>(),
        p in 0.0f64..=1.0,
        i in 0usize..N_POS,
        j in 0usize..N_POS,
        seed in any::<u64>(),
    ) {
        let (spec, table, q, k) = instance(half_dim, adjacent, seed);
        let mask = p_rope_mask(half_dim, p);
        let kept = rotating_chunks(half_dim, p);
        prop_assert!(kept as f64 <= p * half_dim as f64 && p * (half_dim as f64) < (kept + 1) as f64);
        prop_assert!(mask.iter().enumerate().all(|(l, &rotates)| rotates == (l < kept)));
        let (qi, kj) = (rotated(&table, &mask, &q, i), rotated(&table, &mask, &k, j));
        for l in (0..half_dim).filter(|&l| !mask[l]) {
            prop_assert_eq!(chunk_contribution(&spec, &qi, &kj, l), chunk_contribution(&spec, &q, &k, l));
        }
    }

    /// p-RoPE's end points: `p = 0` is NoPE and `p = 1` is RoPE, bit for bit.
    #[test]
    fn p_rope_endpoints_are_nope_and_rope_exactly(
        half_dim in 1usize..33,
        adjacent in any::<bool>(),
        i in 0usize..N_POS,
        j in 0usize..N_POS,
        seed in any::<u64>(),
    ) {
        let (spec, table, q, k) = instance(half_dim, adjacent, seed);
        prop_assert_eq!(masked_logit(&table, &p_rope_mask(half_dim, 0.0), &q, i, &k, j), dot(&q, &k));
        let rope = Rotation::rope(spec);
        prop_assert_eq!(masked_logit(&table, &p_rope_mask(half_dim, 1.0), &q, i, &k, j), rope.logit(&q, i, &k, j));
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// p-RoPE with `0 < p < 1` keeps each rotated chunk's own frequency `g_l = θ^{−2l/d}` (the whole head's, not
    /// one recomputed over the rotated dimensions): every chunk it rotates comes out exactly as under full RoPE,
    /// bit for bit, and every other chunk exactly as it went in.
    #[test]
    fn p_rope_rotated_chunks_keep_their_own_frequencies_exactly(
        half_dim in 2usize..33,
        adjacent in any::<bool>(),
        p in 0.01f64..0.99,
        i in 0usize..N_POS,
        seed in any::<u64>(),
    ) {
        let (spec, table, q, _) = instance(half_dim, adjacent, seed);
        let mask = p_rope_mask(half_dim, p);
        let full = rotated(&table, &vec![true; half_dim], &q, i);
        let partial = rotated(&table, &mask, &q, i);
        for (l, &rotates) in mask.iter().enumerate() {
            let (a, b) = spec.chunk_dims(l);
            let expected = if rotates { (full[a], full[b]) } else { (q[a], q[b]) };
            prop_assert_eq!((partial[a], partial[b]), expected, "chunk {}", l);
        }
    }
}

/// Companion: the other convention, partial rotation with frequencies recomputed over the rotated dimensions
/// (`θ^{−2l/d_rot}`, as GPT-NeoX's `rotary_pct` does), rotates chunk 1 of a half-rotated 32-dimensional head by
/// another angle than p-RoPE does, so the check above tells the two apart.
#[test]
fn p_rope_is_not_partial_rotation_with_recomputed_frequencies() {
    let (spec, table, q, _) = instance(16, false, theory::SEED);
    let mask = p_rope_mask(16, 0.5);
    let kept = rotating_chunks(16, 0.5);
    let recomputed: Vec<f64> = (0..16)
        .map(|l| {
            if l < kept {
                10_000f64.powf(-2.0 * l as f64 / (2 * kept) as f64)
            } else {
                0.0
            }
        })
        .collect();
    let p_rope = rotated(&table, &mask, &q, 100);
    let partial = Rotation::with_frequencies(spec.clone(), recomputed).at(&q, 100);
    let (a, b) = spec.chunk_dims(1);
    assert!(
        (p_rope[a] - partial[a]).abs() + (p_rope[b] - partial[b]).abs() > 1e-3,
        "chunk 1: {:?} vs {:?}",
        (p_rope[a], p_rope[b]),
        (partial[a], partial[b])
    );
    let (a0, b0) = spec.chunk_dims(0);
    assert_eq!(
        (p_rope[a0], p_rope[b0]),
        (partial[a0], partial[b0]),
        "chunk 0 has g = 1 in both"
    );
}

/// Companion: a chunk that keeps its rotation (here the slowest chunk under reversed 0.25-RoPE, and the fastest
/// under 0.25-RoPE) contributes differently at distance 0 and at distance 100, so distance independence is
/// exactly a property of the unrotated chunks.
#[test]
fn p_rope_rotated_chunk_depends_on_distance() {
    let (spec, table, q, k) = instance(16, false, theory::SEED);
    for mask in [p_rope_mask(16, 0.25), reversed_p_rope_mask(16, 0.25)] {
        let l = mask.iter().position(|&rotates| rotates).unwrap();
        let near = chunk_contribution(
            &spec,
            &rotated(&table, &mask, &q, 200),
            &rotated(&table, &mask, &k, 200),
            l,
        );
        let far = chunk_contribution(
            &spec,
            &rotated(&table, &mask, &q, 300),
            &rotated(&table, &mask, &k, 200),
            l,
        );
        assert!((near - far).abs() > 1e-6, "chunk {l}: {near} vs {far}");
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// The chunk contributions the p-RoPE checks compare add up to the whole dot product, under both pairings.
    #[test]
    fn p_rope_chunk_contributions_add_up_to_the_dot_product(
        half_dim in 1usize..33,
        adjacent in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let (spec, _, q, k) = instance(half_dim, adjacent, seed);
        let total: f64 = (0..spec.n_chunks()).map(|l| chunk_contribution(&spec, &q, &k, l)).sum();
        prop_assert!((total - dot(&q, &k)).abs() <= 1e-12 * (1.0 + dot(&q, &q).sqrt() * dot(&k, &k).sqrt()));
    }
}
