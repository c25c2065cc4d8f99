//! Helpers shared by the theory checks: the fixed seed, the proptest configuration and random vectors.

use proptest::test_runner::{Config, RngSeed};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use ropescope::rope::{Pairing, RopeTable};

/// The seed of every property test and every sampled check: runs are reproducible on any machine.
pub const SEED: u64 = 0x0005_EED0_F7E0;

/// A proptest configuration with `cases` cases from the fixed seed and no failure files.
pub fn config(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(SEED),
        failure_persistence: None,
        ..Config::default()
    }
}

/// A deterministic generator for one property-test case or sampled check.
pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// `n` independent standard normal numbers.
pub fn gaussian(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.sample(StandardNormal)).collect()
}

/// `v / |v|`.
pub fn unit(v: &[f64]) -> Vec<f64> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

/// `s · v`.
pub fn scaled(v: &[f64], s: f64) -> Vec<f64> {
    v.iter().map(|x| x * s).collect()
}

/// `|v|²`.
pub fn norm_sq(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum()
}

/// `R_mask^pos x` through the engine's table (chunks whose mask entry is false stay unrotated).
pub fn rotated(table: &RopeTable<f64>, mask: &[bool], x: &[f64], pos: usize) -> Vec<f64> {
    let mut y = x.to_vec();
    table.rotate_masked(&mut y, pos, mask);
    y
}

/// The pairing a property test draws: adjacent coordinates (GGUF `llama`) or the half-split of the others.
pub fn pairing(adjacent: bool) -> Pairing {
    if adjacent {
        Pairing::Adjacent
    } else {
        Pairing::HalfSplit
    }
}

/// The pairing that is not `pairing`: the wrong one, for the checks that must fail with it.
pub fn other(pairing: Pairing) -> Pairing {
    match pairing {
        Pairing::Adjacent => Pairing::HalfSplit,
        Pairing::HalfSplit => Pairing::Adjacent,
    }
}
