//! Executable checks of *Decoupling Positional and Symbolic Attention Behavior in Transformers* (Urrutia et al.):
//! Definition 2, Theorem 1 and its corollary, the block-swap scores, and the canonical-task theorems
//! (Theorems 2–5 and 7, reconstructed).

use ropescope_test_support::theory;
use std::f64::consts::{PI, TAU};

use proptest::prelude::*;
use ropescope::analysis::posym::{block_swap_scores, pair_scores, DEFAULT_SWAP_TEMPERATURE};
use ropescope::analysis::softmax::softmax;
use ropescope::rope::{Pairing, RopeSpec};
use ropescope::theory::canonical_tasks::{
    index_answer_profile, index_answer_weight, index_competitor_cosines, index_query, is_u_shaped,
    retrieval_required_amplitude, INDEX_KEY,
};
use ropescope::theory::exclusion::{all_permutations, conjugated_cycles, factorial, LogitTable};
use ropescope::theory::head::{dot, Rotation};
use ropescope::theory::positional::sharpness_threshold;
use ropescope_test_support::theory::{config, gaussian, rng, scaled};

/// Head dimension of the random heads.
const DIM: usize = 8;
/// Tolerance of the Definition 2 predicates: logits are O(10), their rounding O(1e-14).
const PREDICATE_TOL: f64 = 1e-9;
/// Relative slack for Theorem 1's inequality: both sides are sums of squares computed in f64.
const THM_1_REL_TOL: f64 = 1e-12;

/// The three kinds of head: logits following positions, contents, or both.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// RoPE, one key for every content.
    Positional,
    /// NoPE, a key per content.
    Symbolic,
    /// RoPE, a key per content.
    Mixed,
}

/// A single head seen from its last query (at position `m`) over `m` context keys.
struct Head {
    rotation: Rotation,
    query: Vec<f64>,
    /// Pre-RoPE key of each content.
    keys: Vec<Vec<f64>>,
}

impl Head {
    fn random(kind: Kind, m: usize, seed: u64) -> Self {
        let mut rng = rng(seed);
        let query = scaled(&gaussian(&mut rng, DIM), 1.5);
        let shared = gaussian(&mut rng, DIM);
        let keys = (0..m)
            .map(|_| match kind {
                Kind::Positional => shared.clone(),
                Kind::Symbolic | Kind::Mixed => gaussian(&mut rng, DIM),
            })
            .collect();
        let rotation = match kind {
            Kind::Symbolic => Rotation::nope(DIM),
            Kind::Positional | Kind::Mixed => {
                Rotation::rope(RopeSpec::new(DIM, 10.0, Pairing::HalfSplit))
            }
        };
        Self {
            rotation,
            query,
            keys,
        }
    }

    fn m(&self) -> usize {
        self.keys.len()
    }

    /// `T[c][p]`: the logit of content `c` at position `p`.
    fn table(&self) -> LogitTable {
        LogitTable::from_fn(self.m(), |c, p| {
            self.rotation.logit(&self.query, self.m(), &self.keys[c], p)
        })
    }

    /// Attention over the context when position `p` holds content `perm[p]`.
    fn attend(&self, perm: &[usize]) -> Vec<f64> {
        let logits: Vec<f64> = perm
            .iter()
            .enumerate()
            .map(|(p, &c)| self.rotation.logit(&self.query, self.m(), &self.keys[c], p))
            .collect();
        softmax(&logits)
    }
}

fn kind(pick: u8) -> Kind {
    match pick % 3 {
        0 => Kind::Positional,
        1 => Kind::Symbolic,
        _ => Kind::Mixed,
    }
}

// ---------------------------------------------------------------- Definition 2

proptest! {
    #![proptest_config(config(64))]

    /// Definition 2: the predicates recognise a positional head (one key for all contents) and a symbolic head
    /// (NoPE), and for small `m` agree with the definition read literally over every permutation in `S_m`.
    #[test]
    fn def_2_predicates_classify_positional_and_symbolic_heads(m in 2usize..7, seed in any::<u64>()) {
        for (kind, positional, symbolic) in [(Kind::Positional, true, false), (Kind::Symbolic, false, true)] {
            let table = Head::random(kind, m, seed).table();
            prop_assert_eq!(table.is_positional(PREDICATE_TOL), positional);
            prop_assert_eq!(table.is_symbolic(PREDICATE_TOL), symbolic);
            let perms = all_permutations(m);
            let literal_pos = perms.iter().all(|p| (0..m).all(|j| table.delta_pos(p, j).abs() <= PREDICATE_TOL));
            let literal_sym = perms.iter().all(|p| (0..m).all(|j| table.delta_sym(p, j).abs() <= PREDICATE_TOL));
            prop_assert_eq!((literal_pos, literal_sym), (positional, symbolic));
        }
    }
}

/// Companion: a RoPE head with content-dependent keys satisfies neither predicate.
#[test]
fn def_2_mixed_head_is_neither_positional_nor_symbolic() {
    let table = Head::random(Kind::Mixed, 6, theory::SEED).table();
    assert!(!table.is_positional(PREDICATE_TOL) && !table.is_symbolic(PREDICATE_TOL));
}

// ---------------------------------------------------------------- Theorem 1

/// A random table: a head of the given kind, or (kind 3) independent Gaussian logits.
fn random_table(pick: u8, m: usize, seed: u64) -> LogitTable {
    if pick % 4 == 3 {
        let values = gaussian(&mut rng(seed), m * m);
        LogitTable::from_fn(m, |c, p| values[c * m + p])
    } else {
        Head::random(kind(pick), m, seed).table()
    }
}

/// An additive table `T[c][p] = f(c) + f(p)`, on which Theorem 1 holds with equality.
fn additive_table(m: usize, seed: u64) -> LogitTable {
    let f = gaussian(&mut rng(seed), m);
    LogitTable::from_fn(m, |c, p| f[c] + f[p])
}

/// Theorem 1's right side over all of `S_m` with normaliser `m! · m · factor`.
fn exclusion_rhs(table: &LogitTable, factor: f64) -> f64 {
    let m = table.m();
    let perms = all_permutations(m);
    assert_eq!(perms.len() as f64, factorial(m));
    table.deviation_energy(&perms) / (factorial(m) * m as f64 * factor)
}

proptest! {
    #![proptest_config(config(64))]

    /// Theorem 1: `(1/m) Σ (λ_j − μ)² ≤ (‖δpos‖² + ‖δsym‖²) / (m! · m)`, summed over every permutation of `S_m`.
    #[test]
    fn thm_1_exclusion_principle_over_all_permutations(m in 2usize..7, pick in any::<u8>(), seed in any::<u64>()) {
        let table = random_table(pick, m, seed);
        prop_assert!(table.logit_variance() <= exclusion_rhs(&table, 1.0) * (1.0 + THM_1_REL_TOL));
    }

    /// Theorem 1 for larger `m`, on sampled permutation sets `σ C_m σ⁻¹` (closed under inverses, each `j` sent to
    /// each `k` once), on which the proof, and so the inequality with normaliser `m · m`, holds exactly.
    #[test]
    fn thm_1_exclusion_principle_on_sampled_permutations(m in 7usize..40, pick in any::<u8>(), seed in any::<u64>()) {
        let table = random_table(pick, m, seed);
        let mut sigma: Vec<usize> = (0..m).collect();
        let mut r = rng(seed ^ 0x5157);
        for _ in 0..4 {
            rand::seq::SliceRandom::shuffle(&mut sigma[..], &mut r);
            let perms = conjugated_cycles(&sigma);
            for j in 0..m {
                let mut images: Vec<usize> = perms.iter().map(|p| p[j]).collect();
                images.sort_unstable();
                prop_assert_eq!(images, (0..m).collect::<Vec<_>>());
            }
            let rhs = table.deviation_energy(&perms) / (m * m) as f64;
            prop_assert!(table.logit_variance() <= rhs * (1.0 + THM_1_REL_TOL));
        }
    }

    /// Theorem 1's normaliser `m! · m` is exact: additive tables `T[c][p] = f(c) + f(p)` attain equality.
    #[test]
    fn thm_1_normaliser_is_attained(m in 2usize..7, seed in any::<u64>()) {
        let table = additive_table(m, seed);
        let (lhs, rhs) = (table.logit_variance(), exclusion_rhs(&table, 1.0));
        prop_assert!((lhs - rhs).abs() <= THM_1_REL_TOL * rhs.max(1e-300), "{lhs} vs {rhs}");
    }
}

/// Companion: a normaliser one percent larger than `m! · m` makes the inequality fail on the tight tables.
#[test]
fn thm_1_larger_normaliser_fails() {
    for m in 2..7 {
        let table = additive_table(m, theory::SEED + m as u64);
        assert!(table.logit_variance() > exclusion_rhs(&table, 1.01));
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// Theorem 1's corollary: a head both positional and symbolic attends uniformly. Checked on heads and tables
    /// built to meet the hypothesis, in every case: (1) a real head whose query and single key live on the
    /// unrotated coordinates (logit `qᵀk ≠ 0` for every content at every position) passes both predicates and
    /// attends exactly uniformly; (2) tables `c + noise`, noise within `PREDICATE_TOL/2`, pass both predicates, and
    /// their logits are equal within `PREDICATE_TOL`, their attention uniform within `2·PREDICATE_TOL/m`. The
    /// contrapositive on tables that meet its hypothesis: the same tables with one `λ_j` raised by
    /// `3·PREDICATE_TOL` (logits not all equal) fail at least one predicate.
    #[test]
    fn thm_1_corollary_positional_and_symbolic_means_uniform(m in 2usize..7, level in -5.0f64..5.0, bumped in any::<prop::sample::Index>(), seed in any::<u64>()) {
        let mut head = Head::random(Kind::Positional, m, seed);
        head.rotation = Rotation::rope(RopeSpec::partial(DIM, 2, 10.0, Pairing::HalfSplit));
        for v in std::iter::once(&mut head.query).chain(head.keys.iter_mut()) {
            (v[0], v[1]) = (0.0, 0.0);
        }
        let table = head.table();
        prop_assert!(table.get(0, 0) != 0.0);
        prop_assert!(table.is_positional(PREDICATE_TOL) && table.is_symbolic(PREDICATE_TOL));
        let identity: Vec<usize> = (0..m).collect();
        prop_assert!(head.attend(&identity).iter().all(|&a| (a - 1.0 / m as f64).abs() < 1e-15));

        let mut r = rng(seed);
        let noise: Vec<f64> = (0..m * m).map(|_| rand::Rng::random_range(&mut r, -0.5..0.5) * PREDICATE_TOL).collect();
        let near = LogitTable::from_fn(m, |c, p| level + noise[c * m + p]);
        prop_assert!(near.is_positional(PREDICATE_TOL) && near.is_symbolic(PREDICATE_TOL));
        let lambda = near.logits();
        prop_assert!(lambda.iter().all(|&l| (l - lambda[0]).abs() <= PREDICATE_TOL));
        prop_assert!(softmax(&lambda).iter().all(|&a| (a - 1.0 / m as f64).abs() <= 2.0 * PREDICATE_TOL / m as f64));

        let j = bumped.index(m);
        let raised = LogitTable::from_fn(m, |c, p| near.get(c, p) + if c == j && p == j { 3.0 * PREDICATE_TOL } else { 0.0 });
        let lambda = raised.logits();
        prop_assert!(lambda.iter().any(|&l| (l - lambda[0]).abs() > 2.0 * PREDICATE_TOL));
        prop_assert!(!(raised.is_positional(PREDICATE_TOL) && raised.is_symbolic(PREDICATE_TOL)));
    }
}

/// Companion: one behaviour alone does not force uniform attention: a positional head concentrates its attention.
#[test]
fn thm_1_corollary_positional_alone_allows_sharp_attention() {
    let mut head = Head::random(Kind::Positional, 6, theory::SEED);
    head.query = scaled(&head.query, 10.0);
    assert!(head.table().is_positional(PREDICATE_TOL));
    let identity: Vec<usize> = (0..6).collect();
    assert!(head.attend(&identity).iter().copied().fold(0.0, f64::max) > 0.5);
}

// ---------------------------------------------------------------- block-swap scores

/// Context length and block count of the block-swap checks.
const SWAP_CONTEXT: usize = 16;
/// Blocks of the block-swap checks (`m`, a named parameter of the scores).
const SWAP_BLOCKS: usize = 4;
/// Tolerance on scores that must equal 1.
const SWAP_TOL: f64 = 1e-12;

proptest! {
    #![proptest_config(config(64))]

    /// Block-swap scores: a purely positional head has `s_pos = 1`, a purely symbolic one `s_sym = 1`; for one swap,
    /// `s_pos + s_sym ≤ 2 cos(θ/2)` with `θ` the angle between `(d_a, d_b)` and `(d_b, d_a)`, so both equal 1 only
    /// when the two blocks have equal attention, and then `v' = v` gives exactly 1 and 1. The bound `2 cos(θ/2)` is
    /// attained by `v'` along the bisector `(1, 1)` of `(d_a, d_b)` and `(d_b, d_a)`.
    #[test]
    fn block_swap_scores_algebra(seed in any::<u64>(), v in prop::array::uniform4(0.01f64..1.0)) {
        let positional = Head::random(Kind::Positional, SWAP_CONTEXT, seed);
        let s = block_swap_scores(SWAP_CONTEXT, SWAP_BLOCKS, DEFAULT_SWAP_TEMPERATURE, |p| positional.attend(p)).unwrap();
        prop_assert!((s.s_pos - 1.0).abs() < SWAP_TOL);
        let symbolic = Head::random(Kind::Symbolic, SWAP_CONTEXT, seed);
        let s = block_swap_scores(SWAP_CONTEXT, SWAP_BLOCKS, DEFAULT_SWAP_TEMPERATURE, |p| symbolic.attend(p)).unwrap();
        prop_assert!((s.s_sym - 1.0).abs() < SWAP_TOL);

        let (before, after) = ([v[0], v[1]], [v[2], v[3]]);
        let s = pair_scores(&before, &after, 0, 1).unwrap();
        let theta = ((2.0 * v[0] * v[1]) / (v[0] * v[0] + v[1] * v[1])).clamp(-1.0, 1.0).acos();
        prop_assert!(s.s_pos + s.s_sym <= 2.0 * (theta / 2.0).cos() + SWAP_TOL);
        let bisector = pair_scores(&before, &[1.0, 1.0], 0, 1).unwrap();
        prop_assert!((bisector.s_pos + bisector.s_sym - 2.0 * (theta / 2.0).cos()).abs() <= SWAP_TOL);
        let equal = pair_scores(&[v[0], v[0]], &[v[2], v[2]], 0, 1).unwrap();
        prop_assert!((equal.s_pos - 1.0).abs() < SWAP_TOL && (equal.s_sym - 1.0).abs() < SWAP_TOL);
    }
}

/// Companion: a head that mixes positions and contents (RoPE with content keys) scores below 1 on both axes.
#[test]
fn block_swap_mixed_head_scores_below_one() {
    let head = Head::random(Kind::Mixed, SWAP_CONTEXT, theory::SEED);
    let s = block_swap_scores(SWAP_CONTEXT, SWAP_BLOCKS, DEFAULT_SWAP_TEMPERATURE, |p| {
        head.attend(p)
    })
    .unwrap();
    assert!(s.s_pos < 0.999 && s.s_sym < 0.999, "{s:?}");
}

/// The definition sheet's scores use block *means* and weights `softmax(|mean_a − mean_b| / τ_means)`; the
/// analysis uses block *masses* (mean × block length `L`) so that `τ` means the same at every context length.
/// Both give the same head scores when `τ = τ_means · L`: checked here against the definition computed directly
/// from attention rows, on mixed heads (where neither score is 1) and two context lengths.
#[test]
fn block_swap_scores_on_masses_are_the_definitions_on_means_at_scaled_temperature() {
    for (n_ctx, seed) in [(SWAP_CONTEXT, 1), (4 * SWAP_CONTEXT, 2)] {
        let head = Head::random(Kind::Mixed, n_ctx, seed);
        let len = n_ctx / SWAP_BLOCKS;
        let means = |row: Vec<f64>| -> Vec<f64> {
            row.chunks(len)
                .map(|b| b.iter().sum::<f64>() / len as f64)
                .collect()
        };
        let identity: Vec<usize> = (0..n_ctx).collect();
        let before = means(head.attend(&identity));
        let tau_means = DEFAULT_SWAP_TEMPERATURE / len as f64;
        let (mut gaps, mut pos, mut sym) = (Vec::new(), Vec::new(), Vec::new());
        for a in 0..SWAP_BLOCKS {
            for b in a + 1..SWAP_BLOCKS {
                let mut perm = identity.clone();
                for t in 0..len {
                    perm.swap(a * len + t, b * len + t);
                }
                let after = means(head.attend(&perm));
                let (v, w) = ((before[a], before[b]), (after[a], after[b]));
                let norm = (v.0 * v.0 + v.1 * v.1).sqrt() * (w.0 * w.0 + w.1 * w.1).sqrt();
                pos.push((w.0 * v.0 + w.1 * v.1) / norm);
                sym.push((w.0 * v.1 + w.1 * v.0) / norm);
                gaps.push((before[a] - before[b]).abs() / tau_means);
            }
        }
        let max = gaps.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = gaps.iter().map(|g| (g - max).exp()).collect();
        let total: f64 = e.iter().sum();
        let want_pos: f64 = e.iter().zip(&pos).map(|(e, s)| e * s).sum::<f64>() / total;
        let want_sym: f64 = e.iter().zip(&sym).map(|(e, s)| e * s).sum::<f64>() / total;
        let got = block_swap_scores(n_ctx, SWAP_BLOCKS, DEFAULT_SWAP_TEMPERATURE, |p| {
            head.attend(p)
        })
        .unwrap();
        assert!(
            (got.s_pos - want_pos).abs() < SWAP_TOL && (got.s_sym - want_sym).abs() < SWAP_TOL,
            "{got:?} {want_pos} {want_sym}"
        );
        // The same τ applied to means instead weighs the swaps differently: the choice is visible.
        let unscaled = block_swap_scores(
            n_ctx,
            SWAP_BLOCKS,
            DEFAULT_SWAP_TEMPERATURE / len as f64,
            |p| head.attend(p),
        )
        .unwrap();
        assert!(
            (unscaled.s_pos - want_pos).abs() > 1e-6,
            "{unscaled:?} {want_pos}"
        );
    }
}

// ---------------------------------------------------------------- Theorems 2–5 (Index and Retrieval)

/// Relative step around computed amplitude thresholds (see Thm 5.3's check for the reasoning).
const AMPLITUDE_REL_STEP: f64 = 1e-5;
/// Amplitudes above this are ill-conditioned in f64 (near-commensurate angles); such instances are skipped.
const MAX_CHECKED_AMPLITUDE: f64 = 1e4;

/// `contents` with the entries at `a` and `b` exchanged.
fn swapped(contents: &[usize], a: usize, b: usize) -> Vec<usize> {
    let mut out = contents.to_vec();
    out.swap(a, b);
    out
}

/// The exact amplitude the single-angle Index head needs for precision `ε` on every answer position.
fn index_required_amplitude(g: f64, m: usize, eps: f64) -> Option<f64> {
    (0..m)
        .map(|t| sharpness_threshold(&index_competitor_cosines(g, m, t), eps))
        .try_fold(0.0f64, |acc, s| s.map(|s| acc.max(s)))
}

proptest! {
    #![proptest_config(config(64))]

    /// Theorem 2 (reconstructed): no symbolic head solves Index. For any symbolic head, index `t` and `t' ≠ t`,
    /// the input and its `t ↔ t'` swap give position `t` weights `α(t)` and `α(t')` of the same row, so one of the
    /// two instances gets at most 1/2. Companion in the same test: the single-angle positional head, on the same
    /// pair of instances, keeps its answer weight above `1 − ε` (the swap only fails symbolic heads).
    #[test]
    fn thm_2_symbolic_head_fails_index_on_a_swap(m in 2usize..16, t in any::<prop::sample::Index>(), shift in 1usize..16, seed in any::<u64>()) {
        let t = t.index(m);
        let other = (t + shift) % m;
        prop_assume!(other != t);
        let head = Head::random(Kind::Symbolic, m, seed); // the query encodes the index t; its vector is random
        let contents: Vec<usize> = (0..m).collect();
        let weight_a = head.attend(&contents)[t];
        let weight_b = head.attend(&swapped(&contents, t, other))[t];
        prop_assert!(weight_a.min(weight_b) <= 0.5 + 1e-12);

        let (g, eps) = (1.0, 0.01);
        let amplitude = index_required_amplitude(g, m, eps).unwrap() * (1.0 + AMPLITUDE_REL_STEP);
        prop_assert!(index_answer_weight(g, amplitude, m, t) > 1.0 - eps); // contents never enter its logits
    }

    /// Theorem 3 (reconstructed): a positional head with a single angle `g` (no multiple `g δ`, `0 < |δ| < m`, on
    /// `2πℤ`) solves Index at any precision `ε`; the exact amplitude is computed, reached just above and missed
    /// just below, by rotating the actual vectors.
    #[test]
    fn thm_3_single_angle_head_solves_index_at_computed_amplitude(m in 2usize..24, g in 0.3f64..2.5, log_eps in -3.0f64..-0.7) {
        let eps = 10f64.powf(log_eps);
        let needed = index_required_amplitude(g, m, eps).unwrap();
        prop_assume!(needed < MAX_CHECKED_AMPLITUDE);
        prop_assert!((0..m).all(|t| index_answer_weight(g, needed * (1.0 + AMPLITUDE_REL_STEP), m, t) > 1.0 - eps));
        prop_assert!((0..m).any(|t| index_answer_weight(g, needed * (1.0 - AMPLITUDE_REL_STEP), m, t) <= 1.0 - eps));
    }

    /// Theorem 4 (reconstructed): no positional head solves Retrieval. Swapping the answer's content with another
    /// moves the answer but not a positional head's attention, so one of the two instances gets at most 1/2.
    /// Companion in the same test: the NoPE Retrieval head passes the same pair of instances.
    #[test]
    fn thm_4_positional_head_fails_retrieval_on_a_swap(m in 2usize..16, t in any::<prop::sample::Index>(), shift in 1usize..16, seed in any::<u64>()) {
        let t = t.index(m);
        let other = (t + shift) % m;
        prop_assume!(other != t);
        let head = Head::random(Kind::Positional, m, seed); // the query encodes the query symbol; random vector
        let contents: Vec<usize> = (0..m).collect();
        let weight_a = head.attend(&contents)[t];
        let weight_b = head.attend(&swapped(&contents, t, other))[other];
        prop_assert!(weight_a.min(weight_b) <= 0.5 + 1e-12);

        let eps = 0.01;
        let amplitude = retrieval_required_amplitude(m, eps) * (1.0 + AMPLITUDE_REL_STEP);
        let symbol = contents[t];
        prop_assert!(retrieval_weights(m, amplitude, symbol, &contents)[t] > 1.0 - eps);
        prop_assert!(retrieval_weights(m, amplitude, symbol, &swapped(&contents, t, other))[other] > 1.0 - eps);
    }
}

/// A single head over a context of `m` symbols that adds Theorem 3's positional part (angle `g = 1` on the one
/// rotating chunk) and Theorem 5's symbolic part (one-hot contents on unrotated coordinates): query
/// `(index_query(1, P, m, t), S e_s)`, key of content `c` `(INDEX_KEY, e_c)`, so the key at `p` holding `c` gets the
/// logit `P cos(t − p) + S [c = s]`. With `S = 0` the head is positional, with `P = 0` symbolic, otherwise neither.
struct TaskHead {
    rotation: Rotation,
    query: Vec<f64>,
    m: usize,
}

impl TaskHead {
    /// The head that points at position `t` with amplitude `positional` and at symbol `s` with `symbolic`.
    fn new(m: usize, positional: f64, symbolic: f64, t: usize, s: usize) -> Self {
        let dim = 2 + m + m % 2;
        let rotation = Rotation::rope(RopeSpec::partial(dim, 2, 10_000.0, Pairing::HalfSplit));
        let mut query = vec![0.0; dim];
        query[..2].copy_from_slice(&index_query(1.0, positional, m, t));
        query[2 + s] = symbolic;
        Self { rotation, query, m }
    }

    /// Attention over the context when position `p` holds symbol `contents[p]`.
    fn attend(&self, contents: &[usize]) -> Vec<f64> {
        let logits: Vec<f64> = contents
            .iter()
            .enumerate()
            .map(|(p, &c)| {
                let mut key = vec![0.0; self.query.len()];
                key[..2].copy_from_slice(&INDEX_KEY);
                key[2 + c] = 1.0;
                self.rotation.logit(&self.query, self.m, &key, p)
            })
            .collect();
        softmax(&logits)
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// Theorem 2, sharpened with an adversarial head: the best symbolic head for Index instance A (it attends to
    /// the symbol at the answer `t`, amplitude just above Theorem 5's) solves A at precision `ε` and then gives the
    /// answer at most `ε` on the swapped instance B (`t ↔ t'`): `α_A(t) + α_B(t) ≤ 1`. Discrimination in the same
    /// test: adding to it a positional part strong enough to override the symbol
    /// (`P (1 − max_{j≠t} cos(t − j)) = S + ln((m − 1)(1 − ε)/ε) + 1`) gives a mixed head that solves both instances, so the same
    /// assertion fails for it in every case.
    #[test]
    fn thm_2_best_symbolic_head_for_one_instance_fails_its_swap(m in 2usize..16, t in any::<prop::sample::Index>(), shift in 1usize..16, log_eps in -3.0f64..-0.7) {
        let (t, eps) = (t.index(m), 10f64.powf(log_eps));
        let other = (t + shift) % m;
        prop_assume!(other != t);
        let contents: Vec<usize> = (0..m).collect();
        let (a, b) = (contents.clone(), swapped(&contents, t, other));
        let symbolic = retrieval_required_amplitude(m, eps) * (1.0 + AMPLITUDE_REL_STEP);
        let head = TaskHead::new(m, 0.0, symbolic, t, contents[t]);
        let (weight_a, weight_b) = (head.attend(&a)[t], head.attend(&b)[t]);
        prop_assert!(weight_a > 1.0 - eps && weight_b <= eps);
        prop_assert!(weight_a + weight_b <= 1.0 + 1e-12);

        let closest = index_competitor_cosines(1.0, m, t).into_iter().fold(f64::NEG_INFINITY, f64::max);
        let positional = (symbolic + retrieval_required_amplitude(m, eps) + 1.0) / (1.0 - closest);
        let mixed = TaskHead::new(m, positional, symbolic, t, contents[t]);
        let (mixed_a, mixed_b) = (mixed.attend(&a)[t], mixed.attend(&b)[t]);
        prop_assert!(mixed_a > 1.0 - eps && mixed_b > 1.0 - eps);
        prop_assert!(mixed_a + mixed_b > 1.0 + 1e-12);
    }

    /// Theorem 4, sharpened with an adversarial head: the best positional head for Retrieval instance A (Theorem 3's
    /// head pointing at the answer `t`, amplitude just above the computed one) solves A at `ε` and puts at most `ε`
    /// on the answer of the swapped instance B (its content moved to `t'`): `α_A(t) + α_B(t') ≤ 1`. Discrimination:
    /// adding a symbolic part strong enough to override the position (`S = 2P + ln((m − 1)(1 − ε)/ε) + 1`) solves both, so the
    /// same assertion fails for the mixed head in every case.
    #[test]
    fn thm_4_best_positional_head_for_one_instance_fails_its_swap(m in 2usize..16, t in any::<prop::sample::Index>(), shift in 1usize..16, log_eps in -3.0f64..-0.7) {
        let (t, eps) = (t.index(m), 10f64.powf(log_eps));
        let other = (t + shift) % m;
        prop_assume!(other != t);
        let contents: Vec<usize> = (0..m).collect();
        let (a, b) = (contents.clone(), swapped(&contents, t, other));
        let positional = sharpness_threshold(&index_competitor_cosines(1.0, m, t), eps).unwrap() * (1.0 + AMPLITUDE_REL_STEP);
        let head = TaskHead::new(m, positional, 0.0, t, contents[t]);
        let (weight_a, weight_b) = (head.attend(&a)[t], head.attend(&b)[other]);
        prop_assert!(weight_a > 1.0 - eps && weight_b <= eps);
        prop_assert!(weight_a + weight_b <= 1.0 + 1e-12);

        let symbolic = 2.0 * positional + retrieval_required_amplitude(m, eps) + 1.0;
        let mixed = TaskHead::new(m, positional, symbolic, t, contents[t]);
        let (mixed_a, mixed_b) = (mixed.attend(&a)[t], mixed.attend(&b)[other]);
        prop_assert!(mixed_a > 1.0 - eps && mixed_b > 1.0 - eps);
        prop_assert!(mixed_a + mixed_b > 1.0 + 1e-12);
    }
}

/// Amplitude of Theorem 2's tight instance: the two favoured keys leave the others `e^{−40}` each.
const TIGHT_SYMBOLIC_AMPLITUDE: f64 = 40.0;
/// Frequency and amplitude of Theorem 4's tight instance: `g (m − 1) < π` for every `m < 16`, so the two
/// positions nearest the query's angle are the only maxima, `1000 (cos 0.1 − cos 0.3) ≈ 40` above the others.
const TIGHT_POSITIONAL: (f64, f64) = (0.2, 1000.0);
/// How close to 1/2 a tight instance gets: rounding of logits of size 10³ and the `e^{−40}` left to the others.
const TIGHT_TOL: f64 = 1e-9;

/// Theorem 2's bound is tight: a symbolic head that favours the answer's symbol and the symbol swapped in for it
/// equally (amplitude `S` on both) gives the answer `e^S / (2 e^S + m − 2)` in both instances, so
/// `min(α_A(t), α_B(t))` reaches 1/2 to [`TIGHT_TOL`], for every `m = 2–15` and answer pairs at both ends.
#[test]
fn thm_2_bound_is_attained_by_a_head_split_between_two_symbols() {
    for m in 2usize..16 {
        for (t, other) in [(0, m - 1), (m - 1, m / 2)] {
            if t == other {
                continue;
            }
            let contents: Vec<usize> = (0..m).collect();
            let mut head = TaskHead::new(m, 0.0, TIGHT_SYMBOLIC_AMPLITUDE, t, contents[t]);
            head.query[2 + contents[other]] = TIGHT_SYMBOLIC_AMPLITUDE;
            let weight_a = head.attend(&contents)[t];
            let weight_b = head.attend(&swapped(&contents, t, other))[t];
            let least = weight_a.min(weight_b);
            assert!(
                (least - 0.5).abs() <= TIGHT_TOL,
                "m = {m}, t = {t}, t' = {other}: {least}"
            );
        }
    }
}

/// Theorem 4's bound is tight: a positional head whose query points between positions `t` and `t + 1` (the angle
/// of position `t + 1/2`) splits its attention between them, and the same row serves both instances (contents never
/// enter a positional head's logits), so the answer at `t` in A and, after the swap, at `t + 1` in B each get 1/2
/// to [`TIGHT_TOL`].
#[test]
fn thm_4_bound_is_attained_by_a_head_split_between_two_positions() {
    let (g, amplitude) = TIGHT_POSITIONAL;
    let rotation = Rotation::single_frequency(g);
    for m in 2usize..16 {
        for t in 0..m - 1 {
            let angle = g * (t as f64 + 0.5 - m as f64);
            let query = rotation.at(&[amplitude * angle.cos(), amplitude * angle.sin()], m);
            let logits: Vec<f64> = (0..m)
                .map(|j| dot(&query, &rotation.at(&INDEX_KEY, j)))
                .collect();
            let row = softmax(&logits);
            let least = row[t].min(row[t + 1]);
            assert!(
                (least - 0.5).abs() <= TIGHT_TOL,
                "m = {m}, t = {t}: {least}"
            );
        }
    }
}

/// The NoPE Retrieval head with one-hot symbol embeddings: `q = A e_s`, `k_j = e_{x_j}`; attention over the context.
fn retrieval_weights(vocab: usize, amplitude: f64, symbol: usize, contents: &[usize]) -> Vec<f64> {
    let dim = vocab + vocab % 2;
    let one_hot = |s: usize| {
        (0..dim)
            .map(|d| if d == s { 1.0 } else { 0.0 })
            .collect::<Vec<f64>>()
    };
    let rotation = Rotation::nope(dim);
    let query = scaled(&one_hot(symbol), amplitude);
    let m = contents.len();
    let logits: Vec<f64> = contents
        .iter()
        .enumerate()
        .map(|(p, &c)| rotation.logit(&query, m, &one_hot(c), p))
        .collect();
    softmax(&logits)
}

proptest! {
    #![proptest_config(config(64))]

    /// Theorem 5 (reconstructed): a NoPE head solves Retrieval at any precision: with one-hot embeddings the exact
    /// amplitude `ln((m − 1)(1 − ε)/ε)` is reached just above and missed just below, for every query symbol and
    /// any order of the context.
    #[test]
    fn thm_5_nope_head_solves_retrieval_at_computed_amplitude(m in 2usize..32, log_eps in -3.0f64..-0.7, seed in any::<u64>()) {
        let eps = 10f64.powf(log_eps);
        let needed = retrieval_required_amplitude(m, eps);
        let mut contents: Vec<usize> = (0..m).collect();
        rand::seq::SliceRandom::shuffle(&mut contents[..], &mut rng(seed));
        for (t, &symbol) in contents.iter().enumerate() {
            prop_assert!(retrieval_weights(m, needed * (1.0 + AMPLITUDE_REL_STEP), symbol, &contents)[t] > 1.0 - eps);
            prop_assert!(retrieval_weights(m, needed * (1.0 - AMPLITUDE_REL_STEP), symbol, &contents)[t] <= 1.0 - eps);
        }
    }
}

/// Companion of Theorems 3 and 5: break their hypotheses and no amplitude works. A rational multiple of 2π
/// (`g = 2π/4`) ties position `t` with `t + 4`; a query symbol that occurs twice ties its two positions.
#[test]
fn thm_3_and_5_fail_without_their_hypotheses() {
    assert_eq!(index_required_amplitude(TAU / 4.0, 8, 0.1), None);
    assert!(index_answer_weight(TAU / 4.0, 1000.0, 8, 0) < 0.5 + 1e-9);
    let repeated = [0, 1, 0, 2];
    assert!(retrieval_weights(4, 1000.0, 0, &repeated)[0] <= 0.5);
}

// ---------------------------------------------------------------- Theorem 7

/// Tolerance of the symmetry `α(t) = α(m − 1 − t)`.
const U_SHAPE_SYMMETRY_TOL: f64 = 1e-12;
/// Largest amplitude of the U-shape check. The shape is strict in exact arithmetic for every amplitude, but a
/// saturated head's interior weights differ by less than f64 resolves near 1 (at `A = 48`, `g ≈ π/4`, by
/// `e^{-34}` relatively); below this amplitude every step of the profile is resolved.
const U_SHAPE_MAX_AMPLITUDE: f64 = 8.0;

proptest! {
    #![proptest_config(config(64))]

    /// Theorem 7 (reconstructed): with a frequency so low that the context spans at most half a turn
    /// (`g (m − 1) ≤ π`), the single-angle Index head's answer weight over the answer position is U-shaped and
    /// symmetric: largest at the ends, smallest in the middle. Amplitudes stay below [`U_SHAPE_MAX_AMPLITUDE`].
    #[test]
    fn thm_7_index_weight_is_u_shaped_for_low_frequency(m in 3usize..40, fraction in 0.2f64..=1.0, amplitude in 0.5f64..U_SHAPE_MAX_AMPLITUDE) {
        let g = fraction * PI / (m - 1) as f64;
        let profile = index_answer_profile(g, amplitude, m);
        prop_assert!(is_u_shaped(&profile), "{profile:?}");
        prop_assert!((0..m).all(|t| (profile[t] - profile[m - 1 - t]).abs() <= U_SHAPE_SYMMETRY_TOL));
    }
}

/// Companion: with a high frequency (`g = 1`, far above `π/(m − 1)`) the context wraps around and the profile is
/// not U-shaped.
#[test]
fn thm_7_high_frequency_breaks_u_shape() {
    let profile = index_answer_profile(1.0, 5.0, 24);
    assert!(!is_u_shaped(&profile), "{profile:?}");
}

/// `is_u_shaped` on hand-made shapes: a descent, then an ascent, with at most one tie at the bottom. A profile
/// that never descends (rising, or flat and then rising) is not a U however it ends.
#[test]
fn is_u_shaped_accepts_exactly_the_documented_shapes() {
    let u: [&[f64]; 3] = [
        &[3.0, 1.0, 2.0],
        &[3.0, 1.0, 1.0, 2.0],
        &[5.0, 4.0, 1.0, 2.0, 6.0],
    ];
    for values in u {
        assert!(is_u_shaped(values), "{values:?}");
    }
    let not_u: [&[f64]; 8] = [
        &[1.0, 2.0, 3.0],
        &[1.0, 1.0, 2.0],
        &[3.0, 2.0, 1.0],
        &[3.0, 1.0, 1.0],
        &[3.0, 1.0, 1.0, 1.0, 2.0],
        &[3.0, 1.0, 2.0, 1.5],
        &[3.0, 1.0],
        &[],
    ];
    for values in not_u {
        assert!(!is_u_shaped(values), "{values:?}");
    }
}
