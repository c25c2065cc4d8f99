//! The head detectors on heads built to be previous-token, diagonal and sink heads, and against a plain
//! full-matrix re-implementation of TransformerLens's `detect_head` on every layer, head and pattern (of the
//! built heads' model and of a random two-layer model).
//!
//! Tolerances: the built heads put all but `e^−12` of each row on their target, so their "mul" scores are the
//! pattern's ceiling to `1e−3`; the streamed scores equal the full-matrix ones up to summation order, `1e−12`.

use ropescope::analysis::detectors::{self, DetectorParams, Pattern, PATTERNS};
use ropescope::capture::CollectSink;
use ropescope::gguf::GgufFile;
use ropescope::model::{ForwardOptions, Model};
use ropescope::synth::SyntheticModel;
use ropescope_test_support::analysis::*;

const BUILT_TOL: f64 = 1e-3;
const STREAM_TOL: f64 = 1e-12;

fn params() -> DetectorParams {
    DetectorParams {
        bos_token: Some(BOS),
        n_random: 3,
        random_length: 20,
        ..DetectorParams::default()
    }
}

#[test]
fn built_heads_score_their_pattern_and_are_labelled() {
    let model = known_heads_model();
    let texts = prompts(3, 40);
    let r = detectors::run(&model, &texts, &params(), &quiet).unwrap();
    let mul = |p: Pattern, h: usize| r.text.get(p).mul[0][h];
    let abs = |p: Pattern, h: usize| r.text.get(p).abs[0][h];
    let t = 40.0;
    // Row 0 has no previous token: the ceiling of a perfect previous-token head is (T − 1)/T.
    assert!((mul(Pattern::PreviousToken, HEAD_PREV) - (t - 1.0) / t).abs() < BUILT_TOL);
    assert!((abs(Pattern::PreviousToken, HEAD_PREV) - (1.0 - 1.0 / t)).abs() < BUILT_TOL);
    assert!((mul(Pattern::Diagonal, HEAD_DIAG) - 1.0).abs() < BUILT_TOL);
    assert!((abs(Pattern::Diagonal, HEAD_DIAG) - 1.0).abs() < BUILT_TOL);
    assert!((mul(Pattern::Sink, HEAD_SINK) - 1.0).abs() < BUILT_TOL);
    // A Δ = 3 slash head is not a previous-token head: rows 1 and 2 fall back on their best other key.
    assert!(mul(Pattern::PreviousToken, HEAD_SLASH3) < 0.1);
    // Its only diagonal attention is row 0's, which can see nothing else.
    assert!((mul(Pattern::Diagonal, HEAD_PREV) - 1.0 / t).abs() < BUILT_TOL);

    let labelled = |kind, head| r.labels.iter().any(|l| l.kind == kind && l.head == head);
    assert!(labelled(Pattern::PreviousToken, HEAD_PREV));
    assert!(labelled(Pattern::Diagonal, HEAD_DIAG));
    assert!(labelled(Pattern::Sink, HEAD_SINK));
    assert!(!labelled(Pattern::PreviousToken, HEAD_SLASH3));
    assert!(!labelled(Pattern::Sink, HEAD_PREV));
    assert_eq!(r.repeated.n_sequences, 3);
}

/// TransformerLens's `compute_head_attention_similarity_score` on a full attention matrix `a` (`t × t`) and
/// a dense detection pattern.
fn transformer_lens_score(
    a: &[f64],
    d: &[f64],
    t: usize,
    bos: bool,
    current: bool,
    mul: bool,
) -> f64 {
    let kept = |i: usize, j: usize| !(bos && j == 0 || current && i == j);
    let (mut num, mut den, mut abs) = (0.0, 0.0, 0.0);
    for i in 0..t {
        for j in 0..t {
            if kept(i, j) {
                num += a[i * t + j] * d[i * t + j];
                den += a[i * t + j];
                abs += (a[i * t + j] - d[i * t + j]).abs();
            }
        }
    }
    if mul {
        num / den
    } else {
        1.0 - abs / t as f64
    }
}

fn dense_pattern(p: Pattern, x: &[u32]) -> Vec<f64> {
    let t = x.len();
    let mut d = vec![0.0; t * t];
    for i in 0..t {
        for j in 0..=i {
            let on = match p {
                Pattern::PreviousToken => j + 1 == i,
                Pattern::DuplicateToken => j < i && x[j] == x[i],
                Pattern::Induction => j >= 1 && j - 1 < i && x[j - 1] == x[i],
                Pattern::Diagonal => j == i,
                Pattern::Sink => j == 0,
            };
            d[i * t + j] = f64::from(u8::from(on));
        }
    }
    d
}

/// Every head's full attention matrix over `ids`, layer by layer, head by head.
fn full_attention(model: &Model<f64>, ids: &[u32]) -> Vec<Vec<f64>> {
    let mut sink = CollectSink::new((0..model.config.n_layers).collect(), 0..ids.len());
    model
        .forward(ids, &ForwardOptions::default(), &mut sink)
        .unwrap();
    sink.records.into_iter().map(|r| r.probs).collect()
}

/// Checks every layer's and head's streamed scores of `model` on `texts` and on the repeated random sequences
/// against the full-matrix re-implementation, for each way of leaving BOS and the current token out.
fn streamed_scores_equal_full_matrix_scores(model: &Model<f64>, texts: &[Vec<u32>]) {
    let (n_layers, n_heads) = (model.config.n_layers, model.config.n_heads);
    for (bos, current) in [(false, false), (true, true), (true, false)] {
        let p = DetectorParams {
            exclude_bos: bos,
            exclude_current_token: current,
            ..params()
        };
        let r = detectors::run(model, texts, &p, &quiet).unwrap();
        let random = detectors::random_sequences(64, &p).unwrap();
        assert_eq!(random[0].len(), 41);
        assert_eq!(random[0][1..21], random[0][21..]);
        assert!(random.iter().all(|s| s[0] == BOS && !s[1..].contains(&BOS)));
        for (set, seqs) in [(&r.text, texts), (&r.repeated, &random[..])] {
            let attention: Vec<_> = seqs.iter().map(|s| full_attention(model, s)).collect();
            for pattern in PATTERNS {
                for (layer, head) in (0..n_layers).flat_map(|l| (0..n_heads).map(move |h| (l, h))) {
                    for mul in [true, false] {
                        let expected: f64 = seqs
                            .iter()
                            .zip(&attention)
                            .map(|(s, a)| {
                                let d = dense_pattern(pattern, s);
                                let a = &a[layer * n_heads + head];
                                transformer_lens_score(a, &d, s.len(), bos, current, mul)
                            })
                            .sum::<f64>()
                            / seqs.len() as f64;
                        let scores = set.get(pattern);
                        let got = if mul {
                            scores.mul[layer][head]
                        } else {
                            scores.abs[layer][head]
                        };
                        assert!(
                            (got - expected).abs() < STREAM_TOL,
                            "{pattern:?} layer {layer} head {head} mul={mul} bos={bos} current={current}: \
                             {got} vs {expected}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn streamed_scores_equal_transformer_lens_on_full_matrices() {
    // Text with repeated tokens, so that duplicate and induction targets exist on text too.
    let texts: Vec<Vec<u32>> = prompts(2, 30)
        .into_iter()
        .map(|p| {
            p.iter()
                .map(|&x| if x > 8 { x % 8 + 1 } else { x })
                .collect()
        })
        .collect();
    // The built heads (one layer), and a random model of two layers of four heads.
    streamed_scores_equal_full_matrix_scores(&known_heads_model(), &texts);
    let random = SyntheticModel::new("qwen2").to_bytes();
    let random = Model::load(&GgufFile::from_bytes(random).unwrap()).unwrap();
    assert_eq!((random.config.n_layers, random.config.n_heads), (2, 4));
    streamed_scores_equal_full_matrix_scores(&random, &texts);
}

#[test]
fn scores_do_not_depend_on_the_thread_count() {
    let model = known_heads_model();
    let texts = prompts(2, 70);
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    let one = pool(1).install(|| detectors::run(&model, &texts, &params(), &quiet).unwrap());
    let two = pool(2).install(|| detectors::run(&model, &texts, &params(), &quiet).unwrap());
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&two).unwrap()
    );
}

/// The default random sequences are the batch of ARENA's induction exercise: ten sequences `[BOS] r r`, each half
/// `r` of 50 tokens, one forward pass each.
#[test]
fn default_random_sequences_are_ten_repeated_halves_of_fifty_tokens() {
    let p = DetectorParams {
        bos_token: Some(BOS),
        ..DetectorParams::default()
    };
    let random = detectors::random_sequences(64, &p).unwrap();
    assert_eq!(random.len(), 10);
    for s in &random {
        assert_eq!(s.len(), 1 + 2 * 50);
        assert_eq!(s[0], BOS);
        assert_eq!(s[1..51], s[51..]);
    }
    assert_eq!(detectors::passes(0, &p), 10);
}

#[test]
fn bad_input_is_an_error_and_progress_counts_passes() {
    let model = known_heads_model();
    assert_argument_error(
        detectors::run(&model, &[], &params(), &quiet),
        "the detectors need at least one prompt",
    );
    assert_argument_error(
        detectors::run(&model, &[vec![BOS]], &params(), &quiet),
        "the detectors need sequences of at least 2 tokens, got 1",
    );
    let p = DetectorParams {
        bos_token: Some(64),
        ..params()
    };
    assert_argument_error(
        detectors::run(&model, &prompts(1, 10), &p, &quiet),
        "BOS token Some(64) is outside the vocabulary",
    );
    let count = std::cell::Cell::new(0);
    detectors::run(&model, &prompts(2, 10), &params(), &|n| count.set(n)).unwrap();
    assert_eq!(count.get(), detectors::passes(2, &params()));
}

#[test]
fn built_induction_and_duplicate_heads_score_their_ceiling() {
    let model = induction_model();
    let p = DetectorParams {
        n_random: 4,
        ..params()
    };
    let r = detectors::run(&model, &[vec![BOS, 3, 5, 7, 3, 5]], &p, &quiet).unwrap();
    // A perfect induction head puts all of a row's attention on its targets when it has any: the score is
    // the share of rows with a target.
    let expected: f64 = detectors::random_sequences(INDUCTION_VOCAB, &p)
        .unwrap()
        .iter()
        .map(|s| {
            let rows = (1..s.len()).filter(|&i| s[..i].contains(&s[i])).count();
            rows as f64 / s.len() as f64
        })
        .sum::<f64>()
        / 4.0;
    let induction = r.repeated.get(Pattern::Induction).mul[1][0];
    assert!(
        (induction - expected).abs() < BUILT_TOL,
        "{induction} vs {expected}"
    );
    // Induction and duplicate-token heads are labelled by their scores on the repeated sequences.
    let label = r
        .labels
        .iter()
        .find(|l| (l.kind, l.layer, l.head) == (Pattern::Induction, 1, 0))
        .expect("the induction head is labelled");
    assert_eq!(label.score, induction);
    assert_ne!(label.score, r.text.get(Pattern::Induction).mul[1][0]);
    assert!(r.repeated.get(Pattern::Induction).mul[1][1] < 0.1);
    // The duplicate-token head also attends to itself: without the current token its score is 1.
    let p = DetectorParams {
        exclude_current_token: true,
        ..p
    };
    let r = detectors::run(&model, &[vec![BOS, 3, 5, 7, 3, 5]], &p, &quiet).unwrap();
    let duplicate = r.repeated.get(Pattern::DuplicateToken).mul[1][1];
    assert!((duplicate - 1.0).abs() < BUILT_TOL, "{duplicate}");
}
