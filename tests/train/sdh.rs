//! Slash-dominant heads emerge in the shallow RoPE transformer trained on "predict the token Δ back", under the
//! paper's conditions, generalise out of distribution, and fail to emerge when a condition is broken.
//! Sizes are smaller than the CLI defaults.
//!
//! Every claim is a statistic: its per-seed condition is evaluated on [`SEEDS`] independently seeded runs and the
//! test asserts that at least `p_min` of them satisfy it (theory/train-slash-emergence.md, "Statistics").

use ropescope::train::gate::ChunkGate;
use ropescope::train::sdh::data::EmbeddingGeometry;
use ropescope::train::sdh::{run, SdhConfig, SdhReport};
use ropescope_test_support::train::{over_seeds, seed_count, tally, verdict, SharedRuns};
use std::sync::{Arc, OnceLock};

/// Seeds `K` of every claim of this file.
const SEEDS: u64 = 8;
/// Least fraction of seeds on which a claim must hold (7 of 8): a regression to a per-seed rate of 70% passes
/// with probability 0.26 (at 5 of 8 it was 0.81); theory/train-slash-emergence.md, "Statistics".
const P_MIN: f64 = 0.875;
/// Margin above κ of `SlashScore(Δ)` at the training length.
const KAPPA_MARGIN: f64 = 0.3;
/// Largest slash score tolerated at offsets other than Δ for a slash-dominant head.
const OTHER_OFFSETS_MAX: f64 = 0.15;
/// Smallest `σ1²/Σσ²` of the trained pre-RoPE queries and keys.
const SIGMA1_SHARE_MIN: f64 = 0.99;
/// Largest entropy effective rank (Roy & Vetterli) accepted as "near rank one" for the trained 16-dim head.
const EFFECTIVE_RANK_MAX: f64 = 1.3;
/// Smallest share of `Σ A_l` in chunks 0-2 (medium and high frequencies).
const FAST_CHUNKS_SHARE_MIN: f64 = 0.95;
/// Largest `SlashScore(Δ)` of a head without a slash.
const NO_SLASH_MAX: f64 = 0.3;
/// Largest `σ1²/Σσ²` of the queries without a cone.
const NO_CONE_SIGMA1_SHARE_MAX: f64 = 0.6;

fn small(seed: u64) -> SdhConfig {
    SdhConfig {
        seed,
        train_len: 16,
        ood_len: 32,
        n_train: 32,
        n_eval: 32,
        steps: 300,
        ..SdhConfig::default()
    }
}

fn train(config: SdhConfig) -> SdhReport {
    run(&config, &mut |_| {})
        .expect("valid configuration")
        .report
}

/// Runs of `configure(seed)` for seeds `0..K`, shared by every test that asks for the same `key`.
fn runs(key: &str, configure: impl Fn(u64) -> SdhConfig + Sync) -> Arc<Vec<SdhReport>> {
    static RUNS: OnceLock<SharedRuns<SdhReport>> = OnceLock::new();
    RUNS.get_or_init(SharedRuns::new)
        .get(key, seed_count(SEEDS), |seed| train(configure(seed)))
}

fn values(r: &SdhReport) -> String {
    let (first, last) = (&r.curve[0], r.curve.last().unwrap());
    format!(
        "slash(Δ) {:.3} -> {:.3} other {:.3} | uniform {:.3} other {:.3} | longer {:.3} other {:.3} | \
         σ1² share Q {:.3} -> {:.4} K {:.3} -> {:.4} | eff. rank Q {:.3} K {:.3} | chunks 0-2 {:.3}",
        first.slash_at_offset,
        r.in_distribution.at_offset,
        r.in_distribution.max_other,
        r.uniform_tokens.at_offset,
        r.uniform_tokens.max_other,
        r.uniform_tokens_longer.at_offset,
        r.uniform_tokens_longer.max_other,
        first.q_sigma1_share,
        last.q_sigma1_share,
        first.k_sigma1_share,
        last.k_sigma1_share,
        r.q_rank_one.effective_rank,
        r.k_rank_one.effective_rank,
        r.chunk_amplitude_share[..3].iter().sum::<f64>(),
    )
}

#[test]
fn slash_head_emerges_and_becomes_rank_one() {
    let runs = runs("cone, all chunks", small);
    tally("slash head emerges, rank one", &runs, |r| {
        let kappa = r.config.kappa;
        let first = &r.curve[0];
        let last = r.curve.last().unwrap();
        let slash = r.in_distribution.at_offset >= kappa + KAPPA_MARGIN
            && r.in_distribution.max_other < OTHER_OFFSETS_MAX
            && first.slash_at_offset < kappa
            && last.slash_at_offset > first.slash_at_offset + 0.5;
        let rank_one = last.q_sigma1_share > SIGMA1_SHARE_MIN
            && last.q_sigma1_share > first.q_sigma1_share
            && last.k_sigma1_share > SIGMA1_SHARE_MIN
            && last.k_sigma1_share > first.k_sigma1_share
            // Roy & Vetterli's effective rank (p = σ/Σσ) weighs the residual directions linearly: with σ1²
            // carrying 99.99% of the energy, the 15 residual directions still give about 1.23 (seed 0).
            && r.q_rank_one.effective_rank < EFFECTIVE_RANK_MAX
            && r.k_rank_one.effective_rank < EFFECTIVE_RANK_MAX;
        // The head relies on medium and high frequencies (chunks 0-2 carry almost all of Σ A_l).
        let fast = r.chunk_amplitude_share[..3].iter().sum::<f64>() > FAST_CHUNKS_SHARE_MIN;
        verdict(slash && rank_one && fast, values(r))
    })
    .assert_at_least(P_MIN);
}

#[test]
fn slash_head_stays_dominant_out_of_distribution() {
    let runs = runs("cone, all chunks", small);
    tally(
        "slash head stays dominant out of distribution",
        &runs,
        |r| {
            let kappa = r.config.kappa;
            verdict(
                r.uniform_tokens.at_offset >= kappa + KAPPA_MARGIN
                    && r.uniform_tokens.max_other < OTHER_OFFSETS_MAX
                    && r.uniform_tokens_longer.at_offset >= kappa,
                values(r),
            )
        },
    )
    .assert_at_least(P_MIN);
}

#[test]
fn no_slash_head_without_a_cone() {
    let runs = runs("isotropic, all chunks", |seed| SdhConfig {
        embeddings: EmbeddingGeometry::Isotropic,
        ..small(seed)
    });
    tally("no slash head without a cone", &runs, |r| {
        verdict(
            r.in_distribution.at_offset < NO_SLASH_MAX
                && r.uniform_tokens.at_offset < NO_SLASH_MAX
                && r.q_rank_one.sigma1_share < NO_CONE_SIGMA1_SHARE_MAX,
            values(r),
        )
    })
    .assert_at_least(P_MIN);
}

#[test]
fn no_slash_head_with_low_frequencies_only() {
    let runs = runs("cone, chunks 4-7", |seed| SdhConfig {
        gate: Some(ChunkGate::parse("4-7", 8).unwrap()),
        ..small(seed)
    });
    tally("no slash head with low frequencies only", &runs, |r| {
        verdict(
            r.in_distribution.at_offset < NO_SLASH_MAX
                && r.uniform_tokens_longer.at_offset < NO_SLASH_MAX,
            values(r),
        )
    })
    .assert_at_least(P_MIN);
}

/// Seeds trained in parallel give the same reports at 1 and 3 threads.
#[test]
fn results_do_not_depend_on_the_thread_count() {
    let json = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let reports = pool.install(|| {
            over_seeds(2, |seed| {
                train(SdhConfig {
                    steps: 20,
                    ..small(seed)
                })
            })
        });
        serde_json::to_string(&reports).unwrap()
    };
    assert_eq!(json(1), json(3));
}
