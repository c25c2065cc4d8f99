//! Training claims as statistics over seeds: a claim's per-seed condition is evaluated on `K` independently
//! seeded runs, and the test asserts the fraction of seeds that satisfy it.
//!
//! Seeds run in parallel on rayon's pool; each run is bit-identical at any thread count (`train::optim`), and the
//! runs are collected in seed order, so every tally is too. `ROPESCOPE_TRAIN_SEEDS=N` replaces every `K` by `N`
//! (the measurement of the per-seed rates in `theory/train-*.md`: run with `-- --nocapture` to see each seed's
//! values).

use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Environment variable that overrides the number of seeds of every claim.
pub const SEEDS_VARIABLE: &str = "ROPESCOPE_TRAIN_SEEDS";

/// `k`, or the value of [`SEEDS_VARIABLE`] when it is set.
pub fn seed_count(k: u64) -> u64 {
    match std::env::var(SEEDS_VARIABLE) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{SEEDS_VARIABLE}={v:?} is not a number")),
        Err(_) => k,
    }
}

/// `run(seed)` for the seeds `0..k`, in parallel, in seed order.
pub fn over_seeds<T: Send>(k: u64, run: impl Fn(u64) -> T + Sync) -> Vec<T> {
    (0..k).into_par_iter().map(&run).collect()
}

/// Runs shared by the tests of one binary: `runs(key, k, run)` trains `k` seeds once per key, however many tests
/// ask for them (a claim and its companion evaluate different conditions on the same runs).
pub struct SharedRuns<T> {
    cache: Mutex<HashMap<String, Arc<RunsCell<T>>>>,
}

impl<T: Send + Sync> Default for SharedRuns<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The runs of one key, filled by the first test that asks for them.
type RunsCell<T> = OnceLock<Arc<Vec<T>>>;

impl<T: Send + Sync> SharedRuns<T> {
    /// An empty cache.
    pub fn new() -> Self {
        Self {
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The runs of `key` for seeds `0..k`, trained by `run` on first use.
    pub fn get(&self, key: &str, k: u64, run: impl Fn(u64) -> T + Sync) -> Arc<Vec<T>> {
        let cell = Arc::clone(
            self.cache
                .lock()
                .unwrap()
                .entry(format!("{key} K={k}"))
                .or_default(),
        );
        Arc::clone(cell.get_or_init(|| Arc::new(over_seeds(k, run))))
    }
}

/// One seed's verdict on a condition and the values it was decided on.
pub struct Verdict {
    /// Whether the condition holds.
    pub pass: bool,
    /// The measured values, for the report.
    pub values: String,
}

/// The verdict `pass`, reporting `values`.
pub fn verdict(pass: bool, values: String) -> Verdict {
    Verdict { pass, values }
}

/// How many of the runs satisfy a condition.
pub struct Tally {
    /// The condition's name.
    pub name: String,
    /// Seeds that satisfy it.
    pub passed: usize,
    /// Seeds run.
    pub total: usize,
    /// One line per seed: seed, verdict, values.
    pub lines: Vec<String>,
}

impl Tally {
    /// Fraction of seeds that satisfy the condition.
    pub fn fraction(&self) -> f64 {
        self.passed as f64 / self.total.max(1) as f64
    }

    fn report(&self, requirement: &str) -> String {
        format!(
            "{}: {}/{} seeds pass ({requirement})\n{}",
            self.name,
            self.passed,
            self.total,
            self.lines.join("\n")
        )
    }

    /// Asserts that at least `p_min` of the seeds satisfy the condition (the claim holds statistically).
    #[track_caller]
    pub fn assert_at_least(&self, p_min: f64) {
        let report = self.report(&format!("at least {p_min} must"));
        println!("{report}");
        assert!(self.total > 0, "{}: no seeds", self.name);
        assert!(self.fraction() >= p_min, "{report}");
    }

    /// Asserts that fewer than `p_min` of the seeds satisfy the condition (with a hypothesis broken, the claim's
    /// assertion at `p_min` fails).
    #[track_caller]
    pub fn assert_below(&self, p_min: f64) {
        let report = self.report(&format!("must stay below {p_min}: a hypothesis is broken"));
        println!("{report}");
        assert!(self.total > 0, "{}: no seeds", self.name);
        assert!(self.fraction() < p_min, "{report}");
    }
}

/// Evaluates `condition` on every run (run `i` has seed `i`).
pub fn tally<T>(name: &str, runs: &[T], condition: impl Fn(&T) -> Verdict) -> Tally {
    let mut passed = 0;
    let lines = runs
        .iter()
        .enumerate()
        .map(|(seed, r)| {
            let v = condition(r);
            passed += usize::from(v.pass);
            format!(
                "  seed {seed:>3} {} {}",
                if v.pass { "pass" } else { "FAIL" },
                v.values
            )
        })
        .collect();
    Tally {
        name: name.to_string(),
        passed,
        total: runs.len(),
        lines,
    }
}
