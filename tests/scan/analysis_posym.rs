//! The block-swap scan on heads built to be positional (a Δ = 3 slash head) and symbolic (content matching
//! in unrotated chunks), per head and per chunk.
//!
//! The prompt is BOS, a context of 8 blocks of 8 tokens, and a last query whose class appears in block 2
//! only. Known answers: the positional head's logits ignore contents, so its attention is unchanged by every
//! swap and `s_pos = 1` to rounding (`1e−12`); its attention sits in block 7, so the swaps that count (block 7
//! with another, weight `≈ e^{1/τ}`) have `s_sym ≈ 0`. The symbolic head's attention follows block 2's
//! contents: `s_sym ≈ 1`, `s_pos ≈ 0` up to the weight `≈ 21/(7e^{10})` of the swaps not involving block 2
//! and the `e^−16` attention off the matching keys (`BUILT_TOL`).

use ropescope::analysis::correlation::pearson;
use ropescope::analysis::posym_scan::{self, PosymParams};
use ropescope_test_support::analysis::*;

const ROUNDING_TOL: f64 = 1e-12;
const BUILT_TOL: f64 = 1e-3;

/// Query token of class 5; block 2 holds tokens of class 5, the other blocks tokens of classes 1–4, 6, 7.
fn prompt(extra: usize) -> Vec<u32> {
    prompt_of_class(5, extra)
}

/// As [`prompt`] with class `c` (5 or 13) in block 2 and the query.
fn prompt_of_class(c: u32, extra: usize) -> Vec<u32> {
    let others = [1u32, 2, 3, 4, 6, 7, 17, 18, 19, 20, 22, 23];
    let mut ids = vec![BOS];
    for p in 0..64 {
        ids.push(if p / 8 == 2 {
            c + 16 * (p as u32 % 3)
        } else {
            others[p * 7 % others.len()]
        });
    }
    ids.push(c + 48);
    ids.extend((0..extra).map(|_| 9));
    ids
}

#[test]
fn positional_and_symbolic_heads_land_on_their_axes() {
    let model = known_heads_model();
    let params = PosymParams::default();
    // Two extra tokens are cut: the context must be a multiple of m = 8.
    let r = posym_scan::run(&model, &[prompt(0)], &params, &quiet).unwrap();
    let s = |v: &Vec<Vec<Option<f64>>>, h: usize| v[0][h].unwrap();
    assert!((s(&r.s_pos, HEAD_SLASH3) - 1.0).abs() < ROUNDING_TOL);
    assert!(s(&r.s_sym, HEAD_SLASH3) < BUILT_TOL);
    assert!(s(&r.s_pos, HEAD_SYMBOLIC) < BUILT_TOL);
    assert!((s(&r.s_sym, HEAD_SYMBOLIC) - 1.0).abs() < BUILT_TOL);

    // Per chunk: the positional head is positional in each of its chunks; the symbolic head is symbolic in
    // the chunk holding the query's class (8 + 5) and attends uniformly (s_pos = s_sym = 1) in a chunk where
    // its query is zero.
    let c = |v: &Vec<Vec<Vec<Option<f64>>>>, h: usize, l: usize| v[0][h][l].unwrap();
    for l in 0..4 {
        assert!((c(&r.chunk_s_pos, HEAD_SLASH3, l) - 1.0).abs() < ROUNDING_TOL);
    }
    assert!(c(&r.chunk_s_sym, HEAD_SYMBOLIC, 13) > 1.0 - BUILT_TOL);
    assert!(c(&r.chunk_s_pos, HEAD_SYMBOLIC, 13) < BUILT_TOL);
    assert!((c(&r.chunk_s_pos, HEAD_SYMBOLIC, 0) - 1.0).abs() < ROUNDING_TOL);
    assert!((c(&r.chunk_s_sym, HEAD_SYMBOLIC, 0) - 1.0).abs() < ROUNDING_TOL);
    assert_eq!(r.chunk_s_pos[0][0].len(), HEAD_DIM / 2);
    assert_eq!(r.context_lengths, vec![64]);
}

#[test]
fn prompts_are_cut_to_whole_blocks_and_passes_are_counted() {
    let model = known_heads_model();
    let params = PosymParams {
        m: 4,
        ..PosymParams::default()
    };
    let count = std::cell::Cell::new(0);
    let r = posym_scan::run(&model, &[prompt(3), prompt(0)], &params, &|n| count.set(n)).unwrap();
    assert_eq!(r.context_lengths, vec![64, 64]);
    assert_eq!(count.get(), posym_scan::passes(2, &params));
    assert_eq!(posym_scan::passes(2, &params), 2 * 7);
    assert_argument_error(
        posym_scan::run(&model, &[vec![BOS, 3, 4]], &params, &quiet),
        "has no context of m =",
    );
    let bad = PosymParams {
        tau: 0.0,
        ..PosymParams::default()
    };
    assert_argument_error(
        posym_scan::run(&model, &[prompt(0)], &bad, &quiet),
        "the block-swap scan needs prompts, m ≥ 2 and τ > 0",
    );
}

/// The fewest blocks, m = 2 (one swap), is a scan; m = 1 is not. Scores are means over prompts: two copies of
/// a prompt score as the prompt alone.
#[test]
fn two_blocks_are_enough_and_scores_are_means_over_prompts() {
    let model = known_heads_model();
    let two = PosymParams {
        m: 2,
        ..PosymParams::default()
    };
    let r = posym_scan::run(&model, &[prompt(0)], &two, &quiet).unwrap();
    assert_eq!(posym_scan::passes(1, &two), 2);
    assert!(r.s_pos[0][HEAD_SLASH3].is_some());
    let one = PosymParams {
        m: 1,
        ..PosymParams::default()
    };
    assert_argument_error(posym_scan::run(&model, &[prompt(0)], &one, &quiet), "m ≥ 2");
    let params = PosymParams::default();
    let single = posym_scan::run(&model, &[prompt(0)], &params, &quiet).unwrap();
    let twice = posym_scan::run(&model, &[prompt(0), prompt(0)], &params, &quiet).unwrap();
    for h in [HEAD_SLASH3, HEAD_SYMBOLIC] {
        for (a, b) in [(&single.s_pos, &twice.s_pos), (&single.s_sym, &twice.s_sym)] {
            let (a, b) = (a[0][h].unwrap(), b[0][h].unwrap());
            assert!(
                (a - b).abs() <= ROUNDING_TOL * a.abs().max(1.0),
                "head {h}: {a} against {b}"
            );
        }
    }
}

#[test]
fn pearson_of_anti_correlated_scores_is_minus_one() {
    let r = pearson(&[0.0, 0.5, 1.0], &[1.0, 0.5, 0.0]).unwrap();
    assert!((r + 1.0).abs() < ROUNDING_TOL);
    assert_eq!(pearson(&[1.0], &[2.0]), None);
    assert_eq!(pearson(&[1.0, 1.0], &[2.0, 3.0]), None);
}

/// A chunk's logit is the dot product of the query's and the key's two coordinates in it, both of them: the
/// symbolic head's classes 8–15 sit in the second coordinate of their chunk (class 13 in chunk 13's), and a
/// query of class 13 is as symbolic there as one of class 5 is in the first.
#[test]
fn a_chunk_scores_both_of_its_coordinates() {
    let ids = prompt_of_class(13, 0);
    assert_eq!(class_dim(13), spec().chunk_dims(13).1);
    let r = posym_scan::run(
        &known_heads_model(),
        &[ids],
        &PosymParams::default(),
        &quiet,
    )
    .unwrap();
    let c = |v: &Vec<Vec<Vec<Option<f64>>>>, l: usize| v[0][HEAD_SYMBOLIC][l].unwrap();
    assert!(
        c(&r.chunk_s_sym, 13) > 1.0 - BUILT_TOL,
        "{}",
        c(&r.chunk_s_sym, 13)
    );
    assert!(
        c(&r.chunk_s_pos, 13) < BUILT_TOL,
        "{}",
        c(&r.chunk_s_pos, 13)
    );
}

/// Every layer's heads get their own scores: on the two-layer induction model, layer 0's previous-token head
/// (biases only, its logits blind to content) is positional to rounding, and layer 1's heads are scored too.
#[test]
fn each_layer_scores_its_own_heads() {
    let mut ids = vec![BOS];
    ids.extend((0..64u32).map(|p| 1 + p * 7 % 15));
    ids.push(5);
    let r = posym_scan::run(&induction_model(), &[ids], &PosymParams::default(), &quiet).unwrap();
    assert_eq!((r.s_pos.len(), r.s_pos[1].len()), (2, 2));
    assert!(
        (r.s_pos[0][0].unwrap() - 1.0).abs() < ROUNDING_TOL,
        "{:?}",
        r.s_pos
    );
    assert!(
        r.s_pos[1].iter().chain(&r.s_sym[1]).all(|s| s.is_some()),
        "{:?}",
        r.s_pos
    );
}
