//! Cauchy–Schwarz tables of the built previous-token and diagonal heads.
//!
//! Known answers: the heads' pre-RoPE q and k are constant, `k = R(Δ g) q` with amplitudes `A_l` on chunks
//! 0–3. After RoPE `q_i` and `k_{i−Δ}` are parallel, so the targeted activation equals its bound
//! `scale · Σ_l A_l` (ratio 1); the other of the two pairs has ratio `Σ_l A_l cos(g_l) / Σ_l A_l`. Before
//! RoPE the cosine is that of `q` and `k`: 1 for the diagonal head, `Σ A_l cos(g_l)/Σ A_l` for the
//! previous-token head. The weights are stored in f32, so the construction holds to `1e−6`.

use ropescope::analysis::cauchy_schwarz::{self, CauchySchwarzParams, HeadKind, TargetHead};
use ropescope::analysis::detectors::Pattern;
use ropescope_test_support::analysis::*;

const F32_WEIGHTS_TOL: f64 = 1e-6;

fn one_step_cosine() -> f64 {
    let s = spec();
    let total: f64 = AMPLITUDES.iter().sum();
    AMPLITUDES
        .iter()
        .enumerate()
        .map(|(l, a)| a * s.frequency::<f64>(l).cos())
        .sum::<f64>()
        / total
}

#[test]
fn built_heads_are_aligned_on_their_target_pairs() {
    let model = known_heads_model();
    let params = CauchySchwarzParams {
        heads: vec![
            TargetHead {
                layer: 0,
                head: HEAD_PREV,
                kind: HeadKind::PreviousToken,
            },
            TargetHead {
                layer: 0,
                head: HEAD_DIAG,
                kind: HeadKind::Diagonal,
            },
            TargetHead {
                layer: 0,
                head: HEAD_DIAG,
                kind: HeadKind::PreviousToken,
            },
        ],
        ..CauchySchwarzParams::default()
    };
    let texts = prompts(2, 30);
    let r = cauchy_schwarz::run(&model, &texts, &params, &quiet).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < F32_WEIGHTS_TOL;
    let cos1 = one_step_cosine();
    let bound = AMPLITUDES.iter().sum::<f64>() / (HEAD_DIM as f64).sqrt();

    let prev = &r.heads[0];
    assert!(close(prev.previous.mean_ratio, 1.0));
    assert!(close(prev.diagonal.mean_ratio, cos1));
    assert!(close(prev.previous.mean_pre_rope_ratio, cos1));
    assert!(close(prev.previous.mean_bound, bound));
    // Aligned pairs reach their bound; one step off, the bound times the one-step cosine.
    assert!(close(prev.previous.mean_activation, bound));
    assert!(close(prev.diagonal.mean_activation, bound * cos1));
    assert!(prev.baseline.mean_ratio < cos1);
    assert_eq!(prev.previous.n_pairs, 2 * 28); // rows 2..29 of each prompt (BOS left out as key)
    assert_eq!(prev.baseline.n_pairs, 2 * (27 * 28 / 2));

    let diag = &r.heads[1];
    assert!(close(diag.diagonal.mean_ratio, 1.0));
    assert!(close(diag.diagonal.mean_activation, bound));
    assert!(close(diag.previous.mean_ratio, cos1));
    assert!(close(diag.diagonal.mean_pre_rope_ratio, 1.0));
    assert!(close(diag.previous.mean_pre_rope_ratio, 1.0));
    assert!(diag.baseline.mean_ratio < cos1);
    // The same head listed twice gets the same tables.
    assert_eq!(r.heads[2].diagonal, diag.diagonal);

    // The per-token table of the first prompt, as the paper prints it.
    assert_eq!(diag.table.len(), 8);
    assert_eq!(diag.table[0].previous, None);
    assert_eq!(diag.table[3].token, texts[0][3]);
    for col in &diag.table {
        assert!(close(col.diagonal / col.diagonal_bound, 1.0));
        assert!(close(col.diagonal_bound, bound));
    }
    for col in &prev.table[1..] {
        assert!(close(
            col.previous.unwrap() / col.previous_bound.unwrap(),
            1.0
        ));
    }
}

#[test]
fn heads_outside_the_model_are_an_error_and_no_heads_is_no_pass() {
    let model = known_heads_model();
    let bad = CauchySchwarzParams {
        heads: vec![TargetHead {
            layer: 1,
            head: 0,
            kind: HeadKind::Diagonal,
        }],
        ..CauchySchwarzParams::default()
    };
    assert_argument_error(
        cauchy_schwarz::run(&model, &prompts(1, 10), &bad, &quiet),
        "is not in a model of",
    );
    let none = CauchySchwarzParams::default();
    assert_eq!(cauchy_schwarz::passes(3, &none), 0);
    assert!(cauchy_schwarz::run(&model, &prompts(1, 10), &none, &quiet)
        .unwrap()
        .heads
        .is_empty());
    assert_eq!(
        HeadKind::try_from(Pattern::Diagonal),
        Ok(HeadKind::Diagonal)
    );
    assert!(HeadKind::try_from(Pattern::Sink).is_err());
}
