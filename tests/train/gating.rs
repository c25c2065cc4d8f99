//! Canonical tasks under frequency gating (Decoupling Positional and Symbolic Attention): which RoPE angles a
//! one-layer attention-only head needs for Index, Retrieval and partial induction, the shape of accuracy over the
//! answer position, and where the trained heads land on the positional-symbolic plane.
//!
//! Every claim is a statistic: its per-seed condition is evaluated on [`SEEDS`] independently seeded runs and the
//! test asserts that at least `p_min` (7 of 8) of them satisfy it (theory/train-gating.md, "Statistics"). A claim
//! and its companion (the same condition with the hypothesis broken, which at most 1 of 8 may satisfy) share their
//! runs.

use ropescope::train::canonical::tasks::Task;
use ropescope::train::canonical::{run, CanonicalConfig, CanonicalReport};
use ropescope::train::gate::ChunkGate;
use ropescope_test_support::train::{seed_count, tally, verdict, SharedRuns, Verdict};
use std::sync::{Arc, OnceLock};

/// Seeds `K` of every claim of this file.
const SEEDS: u64 = 8;
/// Accuracy above which a task counts as learned.
const LEARNED: f64 = 0.9;
/// Accuracy below which a task counts as failed (chance is 1/8).
const FAILED: f64 = 0.6;
/// Smallest `s_pos` (`s_sym`) of a positional (symbolic) head.
const ON_AXIS: f64 = 0.9;
/// Largest `s_sym` (`s_pos`) of a positional (symbolic) head.
const OFF_AXIS: f64 = 0.3;
/// Smallest edge-minus-middle accuracy of a U shape: below the least of 64 seeds at gate {3} (0.251), above the
/// most at gate {1} (0.033) or {7} (0.156).
const U_SHAPE: f64 = 0.2;
/// Largest edge-minus-middle accuracy of an inverse U.
const INVERSE_U: f64 = -0.15;
/// Largest test accuracy of a failing inverse-U run.
const INVERSE_U_ACCURACY: f64 = 0.8;
/// Smallest test accuracy of an inverse-U run: a shape needs accuracy above chance (1/8) at some positions; below
/// the least of 64 seeds at gate {2} (0.541), above the most at gate {1} (0.350).
const INVERSE_U_ACCURACY_MIN: f64 = 0.45;

/// Least fraction of seeds on which a claim must hold (7 of 8): a regression to a per-seed rate of 70% passes
/// with probability 0.26 (at 5 of 8 it was 0.81); theory/train-gating.md, "Statistics".
const P_MIN: f64 = 0.875;
/// A companion (a claim's condition with its hypothesis broken) must hold on fewer than this fraction of the
/// seeds: at most 1 of 8.
const COMPANION_BELOW: f64 = 0.25;

/// The runs of `task` gated to `chunks`, for seeds `0..K`, shared by every test that asks for them.
fn runs(task: Task, chunks: &[usize]) -> Arc<Vec<CanonicalReport>> {
    static RUNS: OnceLock<SharedRuns<CanonicalReport>> = OnceLock::new();
    RUNS.get_or_init(SharedRuns::new).get(
        &format!("{task:?} {chunks:?}"),
        seed_count(SEEDS),
        |seed| {
            let mut config = CanonicalConfig::for_task(task);
            config.seed = seed;
            config.gate = ChunkGate::from_chunks(config.head_dim / 2, chunks).unwrap();
            config.n_test = 512;
            run(&config, &mut |_| {})
                .expect("valid configuration")
                .report
        },
    )
}

fn values(r: &CanonicalReport) -> String {
    format!(
        "acc {:.3} edge-middle {:+.3} s_pos {:.3} s_sym {:.3}",
        r.test_accuracy, r.edge_minus_middle, r.scores.positional, r.scores.symbolic
    )
}

fn learned(r: &CanonicalReport) -> Verdict {
    verdict(r.test_accuracy > LEARNED, values(r))
}

fn failed(r: &CanonicalReport) -> Verdict {
    verdict(r.test_accuracy < FAILED, values(r))
}

fn positional_head(r: &CanonicalReport) -> bool {
    r.scores.positional > ON_AXIS && r.scores.symbolic < OFF_AXIS
}

fn symbolic_head(r: &CanonicalReport) -> bool {
    r.scores.symbolic > ON_AXIS && r.scores.positional < OFF_AXIS
}

fn learned_by_a_positional_head(r: &CanonicalReport) -> Verdict {
    verdict(r.test_accuracy > LEARNED && positional_head(r), values(r))
}

fn learned_by_a_symbolic_head(r: &CanonicalReport) -> Verdict {
    verdict(r.test_accuracy > LEARNED && symbolic_head(r), values(r))
}

fn failed_u_shaped(r: &CanonicalReport) -> Verdict {
    verdict(
        r.test_accuracy < FAILED && r.edge_minus_middle > U_SHAPE,
        values(r),
    )
}

fn failed_inverse_u_shaped(r: &CanonicalReport) -> Verdict {
    verdict(
        r.test_accuracy > INVERSE_U_ACCURACY_MIN
            && r.test_accuracy < INVERSE_U_ACCURACY
            && r.edge_minus_middle < INVERSE_U,
        values(r),
    )
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn index_is_learned_with_a_high_frequency_by_a_positional_head() {
    tally(
        "Index, gate {1}: learned by a positional head",
        &runs(Task::Index, &[1]),
        learned_by_a_positional_head,
    )
    .assert_at_least(P_MIN);
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn index_fails_with_a_low_frequency_and_is_u_shaped() {
    tally(
        "Index, gate {3}: fails, U-shaped",
        &runs(Task::Index, &[3]),
        failed_u_shaped,
    )
    .assert_at_least(P_MIN);
}

/// Companion: with a high frequency the accuracy over answer positions is flat at 1, with a zero angle flat at
/// chance, so the U condition fails.
#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn index_is_not_u_shaped_with_a_high_or_a_zero_frequency() {
    for chunk in [1, 7] {
        tally(
            &format!("Index, gate {{{chunk}}}: fails, U-shaped"),
            &runs(Task::Index, &[chunk]),
            failed_u_shaped,
        )
        .assert_below(COMPANION_BELOW);
    }
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn index_fails_with_a_zero_angle() {
    tally("Index, gate {7}: fails", &runs(Task::Index, &[7]), failed).assert_at_least(P_MIN);
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn retrieval_is_learned_with_a_zero_angle_by_a_symbolic_head() {
    tally(
        "Retrieval, gate {7}: learned by a symbolic head",
        &runs(Task::Retrieval, &[7]),
        learned_by_a_symbolic_head,
    )
    .assert_at_least(P_MIN);
}

/// Companion: the heads of one task do not satisfy the other task's side of the plane.
#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn positional_and_symbolic_heads_do_not_swap_sides() {
    tally(
        "Retrieval, gate {7}: learned by a positional head",
        &runs(Task::Retrieval, &[7]),
        learned_by_a_positional_head,
    )
    .assert_below(COMPANION_BELOW);
    tally(
        "Index, gate {1}: learned by a symbolic head",
        &runs(Task::Index, &[1]),
        learned_by_a_symbolic_head,
    )
    .assert_below(COMPANION_BELOW);
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn retrieval_fails_with_a_high_frequency() {
    tally(
        "Retrieval, gate {1}: fails",
        &runs(Task::Retrieval, &[1]),
        failed,
    )
    .assert_at_least(P_MIN);
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn retrieval_with_a_too_high_frequency_is_inverse_u_shaped() {
    tally(
        "Retrieval, gate {2}: fails, inverse-U-shaped",
        &runs(Task::Retrieval, &[2]),
        failed_inverse_u_shaped,
    )
    .assert_at_least(P_MIN);
}

/// Companion: with a zero angle Retrieval is learned at every answer position, with a still higher frequency it
/// stays at chance at every position, so the inverse-U condition fails.
#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn retrieval_is_not_inverse_u_shaped_with_a_zero_or_a_higher_frequency() {
    for chunk in [7, 1] {
        tally(
            &format!("Retrieval, gate {{{chunk}}}: fails, inverse-U-shaped"),
            &runs(Task::Retrieval, &[chunk]),
            failed_inverse_u_shaped,
        )
        .assert_below(COMPANION_BELOW);
    }
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn induction_is_learned_with_a_zero_and_a_small_angle() {
    tally(
        "Induction, gate {3, 7}: learned",
        &runs(Task::Induction, &[3, 7]),
        learned,
    )
    .assert_at_least(P_MIN);
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn induction_fails_with_a_zero_angle_only() {
    tally(
        "Induction, gate {7}: fails",
        &runs(Task::Induction, &[7]),
        failed,
    )
    .assert_at_least(P_MIN);
}

#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn induction_fails_with_a_zero_and_a_too_large_angle() {
    tally(
        "Induction, gate {0, 7}: fails",
        &runs(Task::Induction, &[0, 7]),
        failed,
    )
    .assert_at_least(P_MIN);
}

/// Not the paper's claim: in this model one small angle alone also solves partial induction (see
/// theory/train-gating.md). Kept as a test so that the finding is re-checked, not forgotten.
#[test]
#[ignore = "slow: trains gated heads over seeds"]
fn induction_is_also_learned_with_one_small_angle() {
    tally(
        "Induction, gate {3}: learned",
        &runs(Task::Induction, &[3]),
        learned,
    )
    .assert_at_least(P_MIN);
}
