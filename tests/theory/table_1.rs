//! Executable check of Table 1 of *Round and Round We Go! What makes Rotary Positional Encodings useful?*
//! (Barbero et al.): NoPE has a semantic but no positional channel, RoPE a positional but no robust semantic
//! channel, p-RoPE both. One head (`HEAD_DIM`, `BASE`, `PAIRING`) and one pair of constructions, a previous-token
//! head (Thm 5.3) in the chunks p-RoPE keeps rotating and a semantic head in the slowest chunk, each run under the
//! three encodings through the engine's masked rotation `RopeTable::rotate_masked`. Attention weights are taken
//! by a softmax written out here, not by the library's.

use std::f64::consts::PI;

use ropescope::analysis::softmax::causal_attention;
use ropescope::rope::{Pairing, RopeSpec, RopeTable};
use ropescope::theory::head::{dot, Rotation};
use ropescope::theory::positional::{construction, required_norm_squared, PositionalPattern};
use ropescope::theory::prope::{p_rope_mask, reversed_p_rope_mask, rotating_chunks};
use ropescope::theory::semantic_channel::break_channel;
use ropescope_test_support::theory::{rotated, scaled, unit};

/// Head dimension `d` of every construction: 16 chunks.
const HEAD_DIM: usize = 32;
/// RoPE base θ.
const BASE: f64 = 10_000.0;
/// Chunk pairing (either would do; the checks of `theory_prope.rs` cover both).
const PAIRING: Pairing = Pairing::HalfSplit;
/// p-RoPE's fraction: 0.75, the variant of the paper's Table 2 with the best perplexities, so the cell is checked
/// for the p-RoPE the paper recommends. 12 of the 16 chunks rotate (the fastest), the 4 slowest do not.
const P: f64 = 0.75;
/// The precision of Definition 5.1 (positional) and of the semantic channel: the target gets more than `1 − ε`.
const EPS: f64 = 1e-3;

/// Number of tokens of the positional check (every row `1..n` is checked, a full `n × n` causal softmax).
const POSITIONAL_LEN: usize = 4096;
/// `‖ψ‖²` of the previous-token construction: a round number 20% above the exact threshold of Thm 5.3
/// (`required_norm_squared`, 132.9 at `POSITIONAL_LEN` and `EPS`), so that halving it loses the head.
const POSITIONAL_NORM_SQ: f64 = 160.0;

/// The semantic channel's chunk: the slowest (0-based 15, the paper's chunk 16), which p-RoPE leaves unrotated
/// and RoPE turns by `g = θ^{−30/32} ≈ 1.78·10⁻⁴` per position.
const SEMANTIC_CHUNK: usize = HEAD_DIM / 2 - 1;
/// The semantic check covers every distance `1..=SEMANTIC_DISTANCES` between the query and the matching key.
const SEMANTIC_DISTANCES: usize = 100_000;
/// `s`: the query and the matching key are `√s e_a` (the chunk's first coordinate), the distractors' key
/// `−√s e_a`, so that without rotation the match has logit `s` and each distractor `−s`. Enough for
/// `1/(1 + K e^{−2s}) > 1 − ε` with `K ≈ 10⁵` distractors (needs `s > 9.2`, so halving it loses the channel), and
/// for RoPE to keep the channel precise in the original order until the rotation has turned it by about π/2.
const SEMANTIC_SCALE: f64 = 16.0;
/// Rounding allowed between a measured weight and its closed form `1/(1 + K e^{−2s})` (both near 1, from a sum of
/// `10⁵` equal terms).
const CLOSED_FORM_TOL: f64 = 1e-12;

/// One column of Table 1: an encoding, its p-RoPE mask (`p = 0` is NoPE, `p = 1` RoPE, `rr-p-rope.md`), and the
/// table's two cells for it. The checks assert what the cells say; they never read the cells off the mask.
struct Column {
    name: &'static str,
    mask: Vec<bool>,
    positional: bool,
    semantic: bool,
}

/// Table 1: NoPE positional ✗ semantic ✓, RoPE ✓ ✗, p-RoPE ✓ ✓.
fn table_1() -> [Column; 3] {
    let n_chunks = HEAD_DIM / 2;
    let column = |name, p, positional, semantic| Column {
        name,
        mask: p_rope_mask(n_chunks, p),
        positional,
        semantic,
    };
    [
        column("NoPE", 0.0, false, true),
        column("RoPE", 1.0, true, false),
        column("p-RoPE", P, true, true),
    ]
}

fn spec() -> RopeSpec {
    RopeSpec::new(HEAD_DIM, BASE, PAIRING)
}

/// Softmax written out: `exp(a_j − max a) / Σ_k exp(a_k − max a)`.
fn direct_softmax(logits: &[f64]) -> Vec<f64> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|a| (a - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

// ---------------------------------------------------------------- the positional construction

/// Unit direction of `ψ`: equal weight on the first coordinate of each chunk p-RoPE keeps rotating, zero elsewhere.
fn positional_direction(spec: &RopeSpec) -> Vec<f64> {
    let mut psi = vec![0.0; HEAD_DIM];
    for l in 0..rotating_chunks(spec.n_chunks(), P) {
        psi[spec.chunk_dims(l).0] = 1.0;
    }
    unit(&psi)
}

/// Thm 5.3's previous-token construction on `n` tokens at `‖ψ‖² = norm_sq`: every query `ψ`, every key `R ψ`
/// (`theory::positional::construction`, built with RoPE's rotation; `ψ` has no component in the chunks only RoPE
/// rotates, so p-RoPE's rotation would give the same keys).
fn positional_construction(
    spec: &RopeSpec,
    norm_sq: f64,
    n: usize,
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let psi = scaled(&positional_direction(spec), norm_sq.sqrt());
    construction(
        &Rotation::rope(spec.clone()),
        &psi,
        PositionalPattern::PreviousToken,
        n,
    )
}

/// `α_{i,i−1}` for every row `i = 1..n` under `mask` (token `t` at position `t`), each row by a direct softmax.
fn previous_token_weights(
    table: &RopeTable<f64>,
    mask: &[bool],
    queries: &[Vec<f64>],
    keys: &[Vec<f64>],
) -> Vec<f64> {
    let q: Vec<Vec<f64>> = (0..queries.len())
        .map(|i| rotated(table, mask, &queries[i], i))
        .collect();
    let k: Vec<Vec<f64>> = (0..keys.len())
        .map(|j| rotated(table, mask, &keys[j], j))
        .collect();
    (1..q.len())
        .map(|i| {
            let logits: Vec<f64> = (0..=i).map(|j| dot(&q[i], &k[j])).collect();
            direct_softmax(&logits)[i - 1]
        })
        .collect()
}

fn minimum(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn maximum(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// Table 1, "positional ✓" for RoPE and p-RoPE: Thm 5.3's previous-token head, built in the 12 fastest chunks (the
/// ones p-RoPE keeps rotating) at `‖ψ‖² = POSITIONAL_NORM_SQ`, gives `α_{i,i−1} > 1 − ε` in every row of a
/// `POSITIONAL_LEN`-token sequence under both; the two give the same weights bit for bit (`ψ` is zero where they
/// differ). The norm is above the exact threshold of Thm 5.3 (`required_norm_squared`).
#[test]
fn table_1_previous_token_head_under_rope_and_p_rope() {
    let spec = spec();
    let needed = required_norm_squared(
        &Rotation::rope(spec.clone()),
        &positional_direction(&spec),
        PositionalPattern::PreviousToken,
        POSITIONAL_LEN,
        EPS,
    )
    .unwrap();
    println!("exact threshold ‖ψ‖²* = {needed:.3}, used {POSITIONAL_NORM_SQ}");
    assert!(needed < POSITIONAL_NORM_SQ);
    let table = RopeTable::new(spec.clone(), POSITIONAL_LEN);
    let (queries, keys) = positional_construction(&spec, POSITIONAL_NORM_SQ, POSITIONAL_LEN);
    let checked: Vec<Vec<f64>> = table_1()
        .into_iter()
        .filter(|column| column.positional)
        .map(|column| {
            let weights = previous_token_weights(&table, &column.mask, &queries, &keys);
            println!(
                "{}: min α_(i,i−1) = 1 − {:.3e}",
                column.name,
                1.0 - minimum(&weights)
            );
            assert!(weights.iter().all(|&a| a > 1.0 - EPS));
            weights
        })
        .collect();
    assert_eq!(checked.len(), 2);
    assert_eq!(checked[0], checked[1]);
}

/// Table 1, "positional ✗" for NoPE, for the reason of Prop 5.2 (`rr-prop-5-2.md`): on `[bos, x, x]` a NoPE head
/// gives `α_33 ≤ 1/2` and `α_32 ≤ 1/2`. Here the first three tokens of the same previous-token construction (`x`
/// repeated, an instance with `bos = x`) run through Prop 5.2's check's code (`Rotation::nope`, `causal_attention`),
/// which agrees bit for bit with the `p = 0` mask; on the whole sequence every NoPE row is uniform, so
/// `α_{i,i−1} = 1/(i + 1) ≤ 1/2` in every row.
#[test]
fn table_1_nope_has_no_previous_token_head() {
    let spec = spec();
    let (queries, keys) = positional_construction(&spec, POSITIONAL_NORM_SQ, POSITIONAL_LEN);
    let nope = Rotation::nope(HEAD_DIM);
    let first = |v: &[Vec<f64>]| v[..3].to_vec();
    let logits = nope.logit_matrix(&first(&queries), &first(&keys));
    let s = causal_attention(&logits, 3);
    println!("[bos, x, x] under NoPE: α_33 = {}, α_32 = {}", s[8], s[7]);
    assert!(s[2 * 3 + 2] <= 0.5 && s[2 * 3 + 1] <= 0.5);

    let [nope_column, _, _] = table_1();
    assert!(!nope_column.positional);
    let nope_mask = nope_column.mask;
    let table = RopeTable::new(spec, POSITIONAL_LEN);
    for i in 0..3 {
        for j in 0..3 {
            let masked = dot(
                &rotated(&table, &nope_mask, &queries[i], i),
                &rotated(&table, &nope_mask, &keys[j], j),
            );
            assert_eq!(masked, logits[i * 3 + j]);
        }
    }
    let weights = previous_token_weights(&table, &nope_mask, &queries, &keys);
    for (row, &alpha) in (1..).zip(&weights) {
        assert!(alpha == 1.0 / (row + 1) as f64 && alpha <= 0.5);
    }
    println!("max α_(i,i−1) under NoPE: {}", maximum(&weights));
}

/// Companion ("Can fail"): reversed p-RoPE (`reversed_p_rope_mask`, the 12 slowest chunks rotate) takes the
/// rotation away from the four fastest chunks the construction uses, and at the same norm the previous-token head
/// is lost: some row gives the previous token at most `1 − ε` (in fact at most 1/2).
#[test]
fn table_1_reversed_p_rope_loses_the_previous_token_head() {
    let spec = spec();
    let table = RopeTable::new(spec.clone(), POSITIONAL_LEN);
    let (queries, keys) = positional_construction(&spec, POSITIONAL_NORM_SQ, POSITIONAL_LEN);
    let reversed = reversed_p_rope_mask(spec.n_chunks(), P);
    let weights = previous_token_weights(&table, &reversed, &queries, &keys);
    println!("reversed p-RoPE: min α_(i,i−1) = {:.4}", minimum(&weights));
    assert!(minimum(&weights) <= 0.5);
}

// ---------------------------------------------------------------- the semantic construction

/// The semantic head: the query and the matching key `√s e_a`, the distractors' key `−√s e_a`, with `e_a` the
/// first coordinate of `chunk` and `s = scale`.
struct SemanticHead {
    query: Vec<f64>,
    matching: Vec<f64>,
    distractor: Vec<f64>,
}

fn semantic_head(spec: &RopeSpec, chunk: usize, scale: f64) -> SemanticHead {
    let mut query = vec![0.0; HEAD_DIM];
    query[spec.chunk_dims(chunk).0] = scale.sqrt();
    SemanticHead {
        matching: query.clone(),
        distractor: scaled(&query, -1.0),
        query,
    }
}

/// The query's logits, the query at position `last`, against the matching key and against the distractor key at
/// every position `0..=last`.
fn last_row_logits(
    table: &RopeTable<f64>,
    mask: &[bool],
    head: &SemanticHead,
    last: usize,
) -> (Vec<f64>, Vec<f64>) {
    let q = rotated(table, mask, &head.query, last);
    let at = |k: &[f64]| -> Vec<f64> {
        (0..=last)
            .map(|p| dot(&q, &rotated(table, mask, k, p)))
            .collect()
    };
    (at(&head.matching), at(&head.distractor))
}

/// The matching key's weight at every distance `Δ = 1..last` from the query at `last`: the match at `last − Δ`, a
/// distractor at every other position (bos and the query token included). Direct softmax, the competitors' sum
/// from prefix and suffix sums.
fn match_weight_by_distance(matching: &[f64], distractor: &[f64]) -> Vec<f64> {
    let last = matching.len() - 1;
    let shift = maximum(matching).max(maximum(distractor));
    let e: Vec<f64> = distractor.iter().map(|d| (d - shift).exp()).collect();
    let mut prefix = vec![0.0; last + 2];
    for p in 0..=last {
        prefix[p + 1] = prefix[p] + e[p];
    }
    let mut suffix = vec![0.0; last + 2];
    for p in (0..=last).rev() {
        suffix[p] = suffix[p + 1] + e[p];
    }
    (1..last)
        .map(|delta| {
            let j = last - delta;
            let m = (matching[j] - shift).exp();
            m / (m + prefix[j] + suffix[j + 1])
        })
        .collect()
}

/// Table 1, "semantic ✓" for NoPE and p-RoPE, "✗" for RoPE, on one long sequence: the query at position
/// `SEMANTIC_DISTANCES + 1`, the matching key at every distance `1..=SEMANTIC_DISTANCES` in turn, the distractor
/// key everywhere else. Under NoPE and p-RoPE every logit equals its unrotated value bit for bit (the channel's
/// chunk does not rotate), so the match gets exactly `1/(1 + K e^{−2s})` at every distance (`K` distractors),
/// above `1 − ε`. Under RoPE the same channel in the slowest chunk turns by π over about 17,700 positions; on this
/// sequence distractors about that far back outscore the match, which stays at most 1/2 at every distance.
#[test]
fn table_1_semantic_channel_holds_at_every_distance_under_nope_and_p_rope_only() {
    let spec = spec();
    let last = SEMANTIC_DISTANCES + 1;
    let table = RopeTable::new(spec.clone(), last + 1);
    let head = semantic_head(&spec, SEMANTIC_CHUNK, SEMANTIC_SCALE);
    let (plain_match, plain_distractor) = (
        dot(&head.query, &head.matching),
        dot(&head.query, &head.distractor),
    );
    let closed_form = 1.0 / (1.0 + last as f64 * (-2.0 * SEMANTIC_SCALE).exp());
    for Column {
        name,
        mask,
        semantic,
        ..
    } in table_1()
    {
        let (matching, distractor) = last_row_logits(&table, &mask, &head, last);
        let weights = match_weight_by_distance(&matching, &distractor);
        assert_eq!(weights.len(), SEMANTIC_DISTANCES);
        let (lo, hi) = (minimum(&weights), maximum(&weights));
        println!(
            "{name}: match weight over distances 1..={SEMANTIC_DISTANCES} from {lo:.3e} to {hi:.3e} \
             (1 − {:.3e} to 1 − {:.3e})",
            1.0 - lo,
            1.0 - hi
        );
        if !semantic {
            assert!(hi <= 0.5);
        } else {
            assert!(matching.iter().all(|&a| a == plain_match));
            assert!(distractor.iter().all(|&a| a == plain_distractor));
            assert!(lo > 1.0 - EPS);
            assert!(weights
                .iter()
                .all(|w| (w - closed_form).abs() <= CLOSED_FORM_TOL));
        }
    }
}

/// The smallest query position at which Thm 6.1's construction breaks RoPE's semantic channel (the first `i` with
/// `(2i − 3) g_16 > π`), quoted in `rr-table-1.md`.
const ROPE_BREAK_POSITION: usize = 8835;

/// Keys of the two-dimensional restriction of the semantic head to its chunk, for a query at `last`: the match
/// at `last − 1` (distance 1), the distractor everywhere else.
fn keys_in_chunk(spec: &RopeSpec, head: &SemanticHead, last: usize) -> Vec<[f64; 2]> {
    let (a, b) = spec.chunk_dims(SEMANTIC_CHUNK);
    (0..=last)
        .map(|p| {
            let k = if p == last - 1 {
                &head.matching
            } else {
                &head.distractor
            };
            [k[a], k[b]]
        })
        .collect()
}

/// The match's weight in the last row of the whole head under `mask` when position `p` holds the token originally
/// at `permutation[p]` (the match is the token originally at `last − 1`), by a direct softmax.
fn permuted_match_weight(
    table: &RopeTable<f64>,
    mask: &[bool],
    head: &SemanticHead,
    permutation: &[usize],
) -> f64 {
    let last = permutation.len() - 1;
    let q = rotated(table, mask, &head.query, last);
    let logits: Vec<f64> = (0..=last)
        .map(|p| {
            let k = if permutation[p] == last - 1 {
                &head.matching
            } else {
                &head.distractor
            };
            dot(&q, &rotated(table, mask, k, p))
        })
        .collect();
    let position = permutation.iter().position(|&t| t == last - 1).unwrap();
    direct_softmax(&logits)[position]
}

/// Table 1, "semantic ✗" for RoPE through Thm 6.1's construction (`theory::semantic_channel::break_channel`) on
/// the semantic head restricted to its chunk (a `d = 2` head of frequency `g = g_16`). With the match at distance 1
/// the construction moves it to distance `i − 1` and a distractor to `i − 2`; the distractor outscores it exactly
/// when `cos(g(i − 1)) + cos(g(i − 2)) < 0`, i.e. `(2i − 3) g > π`, first at `i* = 8835`. Checked: the
/// construction finds no swap at `i* − 1` and finds one at `i*`; there, in the original order, all three encodings
/// give the match more than `1 − ε`; after the swaps RoPE gives it at most 1/2 (Lemma A.3) while NoPE and p-RoPE
/// still give it more than `1 − ε`.
#[test]
fn table_1_rope_semantic_channel_breaks_at_the_computed_length() {
    let spec = spec();
    let head = semantic_head(&spec, SEMANTIC_CHUNK, SEMANTIC_SCALE);
    let g = Rotation::rope(spec.clone()).frequencies()[SEMANTIC_CHUNK];
    let (a, b) = spec.chunk_dims(SEMANTIC_CHUNK);
    let q = [head.query[a], head.query[b]];
    let breaks_at = |i: usize| (2 * i - 3) as f64 * g > PI;
    let first = (2..).find(|&i| breaks_at(i)).unwrap();
    println!("g = {g:.6e}: first break at query position {first}");
    assert_eq!(first, ROPE_BREAK_POSITION);
    assert_eq!(
        break_channel(g, q, &keys_in_chunk(&spec, &head, first - 1), first - 2),
        None
    );
    let broken = break_channel(g, q, &keys_in_chunk(&spec, &head, first), first - 1).unwrap();
    println!(
        "match moved to distance {}, distractor to distance {}",
        first - broken.target_position,
        first - broken.distractor_position
    );
    assert_eq!(broken.target_position, 1);
    assert_eq!(broken.distractor_position, 2);
    let rotation = Rotation::single_frequency(g);
    let keys = keys_in_chunk(&spec, &head, first);
    println!(
        "logits after the swaps: match {:.4e}, distractor {:.4e}",
        rotation.logit(&q, first, &keys[first - 1], 1),
        rotation.logit(&q, first, &keys[broken.distractor], 2)
    );

    let table = RopeTable::new(spec, first + 1);
    let identity: Vec<usize> = (0..=first).collect();
    for Column {
        name,
        mask,
        semantic,
        ..
    } in table_1()
    {
        let before = permuted_match_weight(&table, &mask, &head, &identity);
        let after = permuted_match_weight(&table, &mask, &head, &broken.permutation);
        println!(
            "{name}: match weight 1 − {:.3e} in order, {after:.3e} after the swaps",
            1.0 - before
        );
        assert!(before > 1.0 - EPS);
        if semantic {
            assert!(after > 1.0 - EPS);
        } else {
            assert!(after <= 0.5);
        }
    }
}

/// Companion ("Can fail"): the same semantic channel placed in the fastest chunk, which p-RoPE keeps rotating
/// (`g = 1`), is no longer distance-independent under p-RoPE, and on the long sequence the match falls to at most
/// `1 − ε` at some distance (in fact at most 1/2 at every distance).
#[test]
fn table_1_semantic_channel_in_a_rotating_chunk_of_p_rope_breaks() {
    let spec = spec();
    let last = SEMANTIC_DISTANCES + 1;
    let table = RopeTable::new(spec.clone(), last + 1);
    let head = semantic_head(&spec, 0, SEMANTIC_SCALE);
    let [_, _, Column { mask: p_rope, .. }] = table_1();
    assert!(p_rope[0]);
    let (matching, distractor) = last_row_logits(&table, &p_rope, &head, last);
    assert!(matching.iter().any(|&a| a != matching[0]));
    let weights = match_weight_by_distance(&matching, &distractor);
    println!(
        "channel in chunk 0 under p-RoPE: match weight in [{:.3e}, {:.3e}]",
        minimum(&weights),
        maximum(&weights)
    );
    assert!(minimum(&weights) <= 1.0 - EPS);
}
