//! Definition 2 and Theorem 1 (the positional–symbolic exclusion principle) of *Decoupling Positional and
//! Symbolic Attention*.
//!
//! Fix a head's logit function `L`, an input `x_1..x_n` and the query at `n`; let `m = n − 1` and
//! `T[c][p] = L(x_n, n, x_c, p)`: the logit the query gives the content of key `c` placed at position `p`
//! (`c, p ∈ 0..m`, 0-based). Then `λ_j = T[j][j]`, and for a permutation `π` of the keys
//! `δpos(π, j) = T[π(j)][j] − λ_j` (contents permuted, positions kept) and `δsym(π, j) = T[j][π(j)] − λ_j`
//! (each content moved to another position).
//!
//! *Positional* means `δpos ≡ 0` and *symbolic* `δsym ≡ 0` over all of `S_m`. Theorem 1:
//! `(1/m) Σ_j (λ_j − μ)² ≤ (‖δpos‖² + ‖δsym‖²) / (m! · m)`, norms over all `π ∈ S_m` and all `j`, `μ` the mean of
//! `λ`. Its proof uses only two properties of `S_m`, so the inequality also holds, with `m!` replaced by `|P|`,
//! for every set `P` of permutations that is closed under inverses and sends each `j` to each `k` equally often,
//! such as a conjugate `σ C_m σ^{-1}` of the cyclic group ([`conjugated_cycles`]).

/// The logits `T[c][p]` of one query over the `m` keys, every content at every position.
#[derive(Clone, Debug, PartialEq)]
pub struct LogitTable {
    m: usize,
    values: Vec<f64>,
}

impl LogitTable {
    /// `T[c][p] = logit(c, p)` for `c, p ∈ 0..m`.
    pub fn from_fn(m: usize, mut logit: impl FnMut(usize, usize) -> f64) -> Self {
        let values = (0..m * m).map(|x| logit(x / m, x % m)).collect();
        Self { m, values }
    }

    /// Number of keys `m`.
    pub fn m(&self) -> usize {
        self.m
    }

    /// `T[c][p]`.
    pub fn get(&self, content: usize, position: usize) -> f64 {
        self.values[content * self.m + position]
    }

    /// The logits on the input as given, `λ_j = T[j][j]`.
    pub fn logits(&self) -> Vec<f64> {
        (0..self.m).map(|j| self.get(j, j)).collect()
    }

    /// `δpos(π, j) = T[π(j)][j] − T[j][j]`.
    pub fn delta_pos(&self, perm: &[usize], j: usize) -> f64 {
        self.get(perm[j], j) - self.get(j, j)
    }

    /// `δsym(π, j) = T[j][π(j)] − T[j][j]`.
    pub fn delta_sym(&self, perm: &[usize], j: usize) -> f64 {
        self.get(j, perm[j]) - self.get(j, j)
    }

    /// Definition 2, positional, within `tol`: `|δpos(π, j)| ≤ tol` for all `π ∈ S_m` and `j`. Since `π(j)` runs
    /// over every content as `π` runs over `S_m`, this is `|T[c][j] − T[j][j]| ≤ tol` for all `c, j`.
    pub fn is_positional(&self, tol: f64) -> bool {
        (0..self.m).all(|j| (0..self.m).all(|c| (self.get(c, j) - self.get(j, j)).abs() <= tol))
    }

    /// Definition 2, symbolic, within `tol`: `|δsym(π, j)| ≤ tol` for all `π` and `j`, that is
    /// `|T[j][p] − T[j][j]| ≤ tol` for all `j, p`.
    pub fn is_symbolic(&self, tol: f64) -> bool {
        (0..self.m).all(|j| (0..self.m).all(|p| (self.get(j, p) - self.get(j, j)).abs() <= tol))
    }

    /// Theorem 1's left side `(1/m) Σ_j (λ_j − μ)²`.
    pub fn logit_variance(&self) -> f64 {
        let lambda = self.logits();
        let mu = lambda.iter().sum::<f64>() / self.m as f64;
        lambda.iter().map(|l| (l - mu).powi(2)).sum::<f64>() / self.m as f64
    }

    /// `Σ_{π ∈ perms} Σ_j (δpos(π, j)² + δsym(π, j)²)`: over all of `S_m` it is `‖δpos‖² + ‖δsym‖²`.
    pub fn deviation_energy<'a>(&self, perms: impl IntoIterator<Item = &'a Vec<usize>>) -> f64 {
        perms
            .into_iter()
            .map(|perm| {
                (0..self.m)
                    .map(|j| self.delta_pos(perm, j).powi(2) + self.delta_sym(perm, j).powi(2))
                    .sum::<f64>()
            })
            .sum()
    }
}

/// All `m!` permutations of `0..m` (Heap's algorithm), the identity first.
pub fn all_permutations(m: usize) -> Vec<Vec<usize>> {
    let mut perm: Vec<usize> = (0..m).collect();
    let mut out = vec![perm.clone()];
    let mut counters = vec![0; m];
    let mut i = 1;
    while i < m {
        if counters[i] < i {
            let swap_with = if i % 2 == 0 { 0 } else { counters[i] };
            perm.swap(swap_with, i);
            out.push(perm.clone());
            counters[i] += 1;
            i = 1;
        } else {
            counters[i] = 0;
            i += 1;
        }
    }
    out
}

/// `m!` as a float (exact up to `m = 18`).
pub fn factorial(m: usize) -> f64 {
    (1..=m).map(|k| k as f64).product()
}

/// The `m` permutations `π_s = σ ∘ (j ↦ j + s mod m) ∘ σ^{-1}`, `s ∈ 0..m`, for a permutation `sigma` of `0..m`:
/// closed under inverses (`π_s^{-1} = π_{−s}`) and sending each `j` to each `k` exactly once, so Theorem 1 holds
/// on them exactly with normaliser `m · m`.
pub fn conjugated_cycles(sigma: &[usize]) -> Vec<Vec<usize>> {
    let m = sigma.len();
    let mut inverse = vec![0; m];
    sigma.iter().enumerate().for_each(|(i, &s)| inverse[s] = i);
    (0..m)
        .map(|s| (0..m).map(|j| sigma[(inverse[j] + s) % m]).collect())
        .collect()
}
