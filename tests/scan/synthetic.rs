//! The scan's analyses on synthetic models whose answers are known by construction.
//!
//! The known-answer model (`slash_model`): one llama layer whose token embeddings are `e_0 + ε s_t e_{a(t)}` —
//! every embedding at the same angle `atan ε` from `e_0`, the off-axis parts cancelling in pairs — and whose
//! attention norm is 1, so the normed input's first coordinate is the same for every token. Heads 0, 2 and 3
//! (and kv heads 0, 1) read only that coordinate, so their pre-RoPE q and k are constant and exactly rank one,
//! with chunk amplitudes `A_l` and phases `φ_l = −Δ* g_l` placing the logit's maximum at `Δ* = 3` (head 0), 1
//! (head 2) and 0 (head 3), on any tokens. Head 1 keeps random weights.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ropescope::analysis::attention_map::AttentionMapCapture;
use ropescope::analysis::slash::slash_profile;
use ropescope::analysis::slash_stream::SlashCapture;
use ropescope::capture::CollectSink;
use ropescope::gguf::GgufFile;
use ropescope::model::{ForwardOptions, Model};
use ropescope::rope::{Pairing, RopeSpec};
use ropescope::scan::{self, NoProgress, ScanParams};
use ropescope::synth::SyntheticModel;

const D: usize = 32;
const HEAD_DIM: usize = 8;
const BASE: f32 = 1000.0;
/// Off-axis size of the embeddings: each is at angle `atan(EPS)` from `e_0`.
const EPS: f64 = 0.05;
/// Logit amplitudes per chunk (after the `1/√d` scale): chunks 0, 1 are high-frequency (`g = 1, 0.178`), chunk
/// 2 medium (`0.032`), chunk 3 low (`0.0056`) for the default band edges.
const AMPLITUDES: [f64; 4] = [12.0, 12.0, 2.0, 1.0];
const PROMPT_LEN: usize = 48;
/// Tolerance of quantities the construction fixes exactly, up to f64 rounding and the f32 GGUF weights.
const EXACT: f64 = 1e-6;
/// Relative tolerance of absolute vector norms: RMSNorm's ε = 1e-6 against the input's mean square of about
/// 1/32 shifts them by 1.6e-5 relative (ratios such as band shares do not see it).
const NORM_REL: f64 = 1e-4;
/// Tolerance of streaming against full-matrix scores (same f64 numbers summed in another order).
const STREAM: f64 = 1e-12;

/// Query and key (pre-RoPE, adjacent pairs) with amplitudes [`AMPLITUDES`] and peak offset `delta`.
fn qk_for_offset(delta: f64) -> (Vec<f64>, Vec<f64>) {
    let spec = RopeSpec::new(HEAD_DIM, BASE as f64, Pairing::Adjacent);
    let (mut q, mut k) = (vec![0.0; HEAD_DIM], vec![0.0; HEAD_DIM]);
    for (l, a) in AMPLITUDES.iter().enumerate() {
        let r = (a * (HEAD_DIM as f64).sqrt()).sqrt();
        let phase = -delta * spec.frequency::<f64>(l);
        q[2 * l] = r * phase.cos();
        q[2 * l + 1] = r * phase.sin();
        k[2 * l] = r;
    }
    (q, k)
}

/// The known-answer model (see the module documentation).
fn slash_model() -> SyntheticModel {
    let mut m = SyntheticModel::new("llama");
    m.n_layers = 1;
    m.rope_base = BASE;
    let first = (D as f64 / (1.0 + EPS * EPS)).sqrt(); // the normed input's first coordinate
    let mut embd = vec![0f32; m.vocab * D];
    for t in 0..m.vocab {
        embd[t * D] = 1.0;
        let sign = if t % 2 == 0 { 1.0 } else { -1.0 };
        embd[t * D + 1 + (t / 2) % (D - 1)] = (sign * EPS) as f32;
    }
    let mut wq: Vec<f32> = random(m.n_heads * HEAD_DIM * D, 1);
    let mut wk = vec![0f32; m.n_kv_heads * HEAD_DIM * D];
    let reads_first = |w: &mut [f32], head: usize, v: &[f64]| {
        for (r, x) in v.iter().enumerate() {
            let row = &mut w[(head * HEAD_DIM + r) * D..][..D];
            row.fill(0.0);
            row[0] = (x / first) as f32;
        }
    };
    let (q3, k) = qk_for_offset(3.0);
    let (q1, _) = qk_for_offset(1.0);
    let (q0, _) = qk_for_offset(0.0);
    reads_first(&mut wq, 0, &q3);
    reads_first(&mut wq, 2, &q1);
    reads_first(&mut wq, 3, &q0);
    reads_first(&mut wk, 0, &k);
    reads_first(&mut wk, 1, &k);
    m.overrides.insert("token_embd.weight".into(), embd);
    m.overrides
        .insert("blk.0.attn_norm.weight".into(), vec![1.0; D]);
    m.overrides.insert("blk.0.attn_q.weight".into(), wq);
    m.overrides.insert("blk.0.attn_k.weight".into(), wk);
    m
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-0.3..0.3)).collect()
}

fn prompts(n: usize, len: usize, vocab: u32, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..len).map(|_| rng.random_range(0..vocab)).collect())
        .collect()
}

fn load(m: &SyntheticModel) -> Model<f64> {
    Model::<f64>::load(&GgufFile::from_bytes(m.to_bytes()).unwrap()).unwrap()
}

fn scan_slash_model() -> (Model<f64>, scan::ScanOutcome) {
    let model = load(&slash_model());
    let natural = prompts(3, PROMPT_LEN, 64, 1);
    let random = prompts(3, PROMPT_LEN, 64, 2);
    let params = ScanParams {
        delta_max: 8,
        cone_tokens: 64,
        ..ScanParams::default()
    };
    let outcome = scan::analyse(&model, &natural, &random, &params, &NoProgress).unwrap();
    (model, outcome)
}

#[test]
fn constructed_heads_are_found_with_their_offsets_and_labels() {
    let (_, outcome) = scan_slash_model();
    let heads = &outcome.summary.heads;
    for (head, delta, label) in [
        (0, 3, "slash(3)"),
        (2, 1, "previous-token"),
        (3, 0, "diagonal"),
    ] {
        let s = heads[head].slash.as_ref().unwrap();
        assert_eq!(s.best_delta, delta, "head {head}");
        assert!(s.best_score >= 0.9, "head {head}: score {}", s.best_score);
        assert_eq!(
            s.random_best_delta,
            Some(delta),
            "head {head} on random tokens"
        );
        assert!(s.random_score_at_best_delta.unwrap() >= 0.9);
        assert_eq!(heads[head].label, label);
    }
    let sets = outcome.summary.slash_dominant.as_ref().unwrap();
    assert!(sets
        .natural
        .iter()
        .any(|h| (h.layer, h.head, h.delta) == (0, 0, 3)));
    let intrinsic = outcome.summary.intrinsic.as_ref().unwrap();
    assert!(intrinsic.pearson_all > 0.99, "{intrinsic:?}");
}

#[test]
fn constant_queries_and_keys_are_rank_one_and_decompose_as_built() {
    let (model, outcome) = scan_slash_model();
    for head in [0, 2, 3] {
        let h = &outcome.summary.heads[head];
        let r = h.rank.as_ref().unwrap();
        assert!((r.q_rank_one_share - 1.0).abs() < EXACT, "{r:?}");
        assert!((r.k_rank_one_share - 1.0).abs() < EXACT, "{r:?}");
        assert!((r.q_effective_rank - 1.0).abs() < 1e-3, "{r:?}");
        assert!(
            (r.q_cos_mean - 1.0).abs() < EXACT && r.q_cos_std < 1e-3,
            "{r:?}"
        );
        let f = h.fourier.as_ref().unwrap();
        let total: f64 = AMPLITUDES.iter().sum();
        assert!(
            (f.amplitude_shares.high - 24.0 / total).abs() < EXACT,
            "{f:?}"
        );
        assert!((f.amplitude_shares.medium - 2.0 / total).abs() < EXACT);
        assert!((f.amplitude_shares.low - 1.0 / total).abs() < EXACT);
        assert_eq!(Some(f.predicted_delta), f.measured_delta);
    }
    // Frequency usage: the mean chunk norms of head 0's query are the constructed |q^(l)|.
    let sums = outcome
        .natural
        .vectors
        .as_ref()
        .unwrap()
        .head(0, 0)
        .unwrap();
    let (q3, k) = qk_for_offset(3.0);
    for (l, norm) in sums.q.mean_chunk_norms().iter().enumerate() {
        let built = q3[2 * l].hypot(q3[2 * l + 1]);
        assert!(
            (norm - built).abs() < NORM_REL * built,
            "chunk {l}: {norm} vs {built}"
        );
        let k_norm = sums.k.mean_chunk_norms()[l];
        assert!((k_norm - k[2 * l]).abs() < NORM_REL * k[2 * l], "chunk {l}");
    }
    assert_eq!(model.config.n_heads, outcome.summary.heads.len());
}

#[test]
fn cone_of_constructed_embeddings_is_their_common_angle() {
    let (_, outcome) = scan_slash_model();
    let cone = outcome.summary.cone.as_ref().unwrap();
    assert!((cone.mean_angle - EPS.atan()).abs() < EXACT, "{cone:?}");
    assert!((cone.max_angle - EPS.atan()).abs() < EXACT);
    let head0 = outcome.summary.heads[0].cone.as_ref().unwrap();
    assert!(
        head0.q_max_angle < EXACT && head0.k_max_angle < EXACT,
        "{head0:?}"
    );
}

#[test]
fn streaming_scores_equal_full_matrix_scores() {
    // A gemma3 model with a 5-token window: local layers' blocks are narrower than the rows, and the
    // CollectSink in the same pass widens every block to all T columns.
    let mut m = SyntheticModel::new("gemma3");
    m.n_layers = 6;
    m.sliding_window = Some(5);
    let model = load(&m);
    let (t, delta_max) = (70, 9);
    let ids = &prompts(1, t, 64, 3)[0];
    let c = &model.config;
    for composed in [false, true] {
        let slash = SlashCapture::new(c.n_layers, c.n_heads, delta_max);
        let map = AttentionMapCapture::new(c.n_layers, c.n_heads, 16);
        let sink = CollectSink::new(
            if composed {
                (0..c.n_layers).collect()
            } else {
                vec![]
            },
            0..t,
        );
        let mut pass = (sink, (slash, map));
        model
            .forward(ids, &ForwardOptions::default(), &mut pass)
            .unwrap();
        let (_, (slash, map)) = pass;
        let full = CollectSink::new((0..c.n_layers).collect(), 0..t);
        let mut full_pass = full;
        model
            .forward(ids, &ForwardOptions::default(), &mut full_pass)
            .unwrap();
        let (scores, sinks, side) = (slash.scores(), slash.sinks(), map.side());
        assert_eq!(side, 16);
        for rec in &full_pass.records {
            let info = rec.info.as_ref().unwrap();
            let cell = info.layer * c.n_heads + info.head;
            let profile = slash_profile(&rec.probs, t);
            for delta in 0..=delta_max {
                let s = scores[cell * (delta_max + 1) + delta];
                assert!((s - profile[delta]).abs() < STREAM, "{info:?} Δ={delta}");
            }
            let first: f64 = (1..t).map(|i| rec.probs[i * t]).sum::<f64>() / (t - 1) as f64;
            assert!((sinks[cell] - first).abs() < STREAM);
            // Block average of the full matrix: bins of 70·k/16 positions.
            let bin = |p: usize| p * side / t;
            let mut cells = vec![(0.0, 0usize); side * side];
            for i in 0..t {
                for j in 0..t {
                    let e = &mut cells[bin(i) * side + bin(j)];
                    e.0 += rec.probs[i * t + j];
                    e.1 += 1;
                }
            }
            let maps = &map.maps()[cell * side * side..(cell + 1) * side * side];
            for (m, (s, n)) in maps.iter().zip(&cells) {
                assert!((*m as f64 - s / *n as f64).abs() < 1e-6);
            }
        }
    }
}
