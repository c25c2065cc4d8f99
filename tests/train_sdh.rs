//! Slash-dominant heads emerge in the shallow RoPE transformer trained on "predict the token Δ back", under the
//! paper's conditions, generalise out of distribution, and fail to emerge when a condition is broken.
//! Sizes are smaller than the CLI defaults; assertions are qualitative with margins.

use ropescope::train::gate::ChunkGate;
use ropescope::train::sdh::data::EmbeddingGeometry;
use ropescope::train::sdh::{run, SdhConfig, SdhReport};

/// Largest slash score tolerated at offsets other than Δ for a slash-dominant head.
const OTHER_OFFSETS_MAX: f64 = 0.15;

fn small() -> SdhConfig {
    SdhConfig {
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

/// Largest entropy effective rank (Roy & Vetterli) accepted as "near rank one" for the trained 16-dim head.
const EFFECTIVE_RANK_MAX: f64 = 1.3;

#[test]
fn slash_head_emerges_and_becomes_rank_one() {
    let r = train(small());
    let kappa = r.config.kappa;
    assert!(
        r.in_distribution.at_offset >= kappa + 0.3,
        "{:?}",
        r.in_distribution
    );
    assert!(
        r.in_distribution.max_other < OTHER_OFFSETS_MAX,
        "{:?}",
        r.in_distribution
    );
    let first = &r.curve[0];
    let last = r.curve.last().unwrap();
    assert!(
        first.slash_at_offset < kappa,
        "already slash-dominant at initialisation"
    );
    assert!(last.slash_at_offset > first.slash_at_offset + 0.5);
    assert!(last.q_sigma1_share > 0.99 && last.q_sigma1_share > first.q_sigma1_share);
    assert!(last.k_sigma1_share > 0.99 && last.k_sigma1_share > first.k_sigma1_share);
    // Roy & Vetterli's effective rank (p = σ/Σσ) weighs the residual directions linearly: with σ1² carrying
    // 99.99% of the energy, the 15 residual directions still give about 1.23 (measured, seed 0).
    assert!(
        r.q_rank_one.effective_rank < EFFECTIVE_RANK_MAX
            && r.k_rank_one.effective_rank < EFFECTIVE_RANK_MAX
    );
    // The head relies on medium and high frequencies (chunks 0-2 carry almost all of Σ A_l).
    assert!(r.chunk_amplitude_share[..3].iter().sum::<f64>() > 0.95);
}

#[test]
fn slash_head_stays_dominant_out_of_distribution() {
    let r = train(small());
    let kappa = r.config.kappa;
    assert!(
        r.uniform_tokens.at_offset >= kappa + 0.3,
        "{:?}",
        r.uniform_tokens
    );
    assert!(r.uniform_tokens.max_other < OTHER_OFFSETS_MAX);
    assert!(
        r.uniform_tokens_longer.at_offset >= kappa,
        "{:?}",
        r.uniform_tokens_longer
    );
}

#[test]
fn no_slash_head_without_a_cone() {
    let r = train(SdhConfig {
        embeddings: EmbeddingGeometry::Isotropic,
        ..small()
    });
    assert!(r.in_distribution.at_offset < 0.3, "{:?}", r.in_distribution);
    assert!(r.uniform_tokens.at_offset < 0.3);
    assert!(r.q_rank_one.sigma1_share < 0.6);
}

#[test]
fn no_slash_head_with_low_frequencies_only() {
    let r = train(SdhConfig {
        gate: Some(ChunkGate::parse("4-7", 8).unwrap()),
        ..small()
    });
    assert!(r.in_distribution.at_offset < 0.3, "{:?}", r.in_distribution);
    assert!(r.uniform_tokens_longer.at_offset < 0.3);
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let config = SdhConfig {
        steps: 20,
        ..small()
    };
    let json = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let r = pool.install(|| train(config.clone()));
        serde_json::to_string(&r).unwrap()
    };
    assert_eq!(json(1), json(3));
}
