//! The canonical tasks under frequency gating (Decoupling Positional and Symbolic Attention): train the
//! one-layer attention-only model of [`model`] on a task of [`tasks`] with the head restricted to chosen RoPE
//! chunks, and measure accuracy (overall and per answer position) and the head's positional/symbolic scores.
//! Every open choice is a field of [`CanonicalConfig`]; see `theory/train-reconstructed.md`.

pub mod model;
pub mod tasks;

use super::gate::ChunkGate;
use super::metrics::{positional_symbolic_scores, PosSymScores};
use super::optim::{train, Objective, Optimizer};
use super::rotary::GatedRope;
use super::softmax::argmax;
use super::{initial_params, rng_for, ConfigError, Stream};
use crate::rope::{Pairing, RopeSpec};
use model::{GatedHead, TaskLoss};
use serde::Serialize;
use tasks::{Example, Task, TaskSizes};

/// Default number of blocks `m` of the positional/symbolic scores (DEFINITIONS.md leaves `m` open).
pub const DEFAULT_SCORE_BLOCKS: usize = 4;
/// Default temperature `τ` of the swap weights of the positional/symbolic scores (left open by the paper).
pub const DEFAULT_SCORE_TAU: f64 = 0.05;

/// Every choice of a canonical-task run, with the documented defaults of `theory/train-reconstructed.md`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CanonicalConfig {
    /// The task.
    pub task: Task,
    /// Seed of every random draw (data, initialisation).
    pub seed: u64,
    /// Input sizes.
    pub sizes: TaskSizes,
    /// Query/key dimension (`head_dim / 2` RoPE chunks).
    pub head_dim: usize,
    /// RoPE base.
    pub rope_base: f64,
    /// RoPE chunks the head may use.
    pub gate: ChunkGate,
    /// Standard deviation of the Gaussian initialisation.
    pub init_scale: f64,
    /// Update rule (full-batch).
    pub optimizer: Optimizer,
    /// Number of full-batch steps.
    pub steps: usize,
    /// Record the learning curve every this many steps.
    pub record_every: usize,
    /// Number of training examples (one full batch).
    pub n_train: usize,
    /// Number of held-out test examples.
    pub n_test: usize,
    /// Test examples on which the positional/symbolic scores are averaged.
    pub n_score: usize,
    /// Blocks `m` of the positional/symbolic scores.
    pub score_blocks: usize,
    /// Temperature `τ` of the positional/symbolic scores.
    pub score_tau: f64,
}

/// Default gate of each task: the chunks with which the paper says it is learned (chunk 0 is the fastest). With
/// `head_dim = 16`, chunk `l` turns by `base^(−l/8)` rad per position: `10^(−l/2)` for Index and Retrieval
/// (base 10⁴), `10^(−3l/4)` for Induction (base 10⁶), so Induction's default keeps 5.6e-3 and 5.6e-6 rad.
pub fn default_gate(task: Task) -> Vec<usize> {
    match task {
        Task::Index => vec![1],
        Task::Retrieval => vec![7],
        Task::Induction => vec![3, 7],
    }
}

impl CanonicalConfig {
    /// The documented defaults for `task`.
    pub fn for_task(task: Task) -> Self {
        let head_dim = 16;
        let sizes = match task {
            Task::Index => TaskSizes {
                context_len: 12,
                n_symbols: 8,
                n_keys: 0,
            },
            Task::Retrieval => TaskSizes {
                context_len: 12,
                n_symbols: 8,
                n_keys: 12,
            },
            Task::Induction => TaskSizes {
                context_len: 16,
                n_symbols: 8,
                n_keys: 8,
            },
        };
        // Induction needs an angle close to zero: with base 10⁶ the slowest chunk turns 5.6e-6 rad per position.
        let rope_base = match task {
            Task::Induction => 1e6,
            Task::Index | Task::Retrieval => 1e4,
        };
        Self {
            task,
            seed: 0,
            sizes,
            head_dim,
            rope_base,
            gate: ChunkGate::from_chunks(head_dim / 2, &default_gate(task))
                .expect("default gate fits"),
            init_scale: 0.1,
            optimizer: Optimizer::adam(0.05),
            steps: 600,
            record_every: 20,
            n_train: 512,
            n_test: 1024,
            n_score: 64,
            score_blocks: DEFAULT_SCORE_BLOCKS,
            score_tau: DEFAULT_SCORE_TAU,
        }
    }

    fn validate(&self) -> Result<RopeSpec, ConfigError> {
        self.task.check(&self.sizes).map_err(ConfigError::Invalid)?;
        let invalid = |what: &str| Err(ConfigError::Invalid(what.to_string()));
        if self.head_dim < 2 || !self.head_dim.is_multiple_of(2) {
            return invalid("head_dim must be even and >= 2");
        }
        if self.gate.n_chunks() != self.head_dim / 2 {
            return invalid("the gate must have head_dim / 2 chunks");
        }
        if self.steps == 0 || self.n_train == 0 || self.n_test == 0 {
            return invalid("steps, n_train and n_test must be >= 1");
        }
        Ok(RopeSpec::new(
            self.head_dim,
            self.rope_base,
            Pairing::HalfSplit,
        ))
    }
}

/// One point of the learning curve.
#[derive(Clone, Debug, Serialize)]
pub struct CanonicalCurvePoint {
    /// Steps done.
    pub step: usize,
    /// Training loss before the last step.
    pub loss: f64,
    /// Accuracy on the test examples.
    pub test_accuracy: f64,
}

/// Final measurements of a canonical-task run.
#[derive(Clone, Debug, Serialize)]
pub struct CanonicalReport {
    /// The configuration that produced this report.
    pub config: CanonicalConfig,
    /// RoPE frequency `g_l` (radians per position) of every kept chunk, in the gate's order.
    pub gate_frequencies: Vec<f64>,
    /// Learning curve.
    pub curve: Vec<CanonicalCurvePoint>,
    /// Accuracy on the training examples.
    pub train_accuracy: f64,
    /// Accuracy on the test examples.
    pub test_accuracy: f64,
    /// Test accuracy by the context position holding the answer (`NaN` where no example has it).
    pub accuracy_by_answer_position: Vec<f64>,
    /// Mean test accuracy at the first and last answer positions minus that over the middle third of positions:
    /// positive for a U shape, negative for an inverse U.
    pub edge_minus_middle: f64,
    /// Mean positional and symbolic scores of the trained head.
    pub scores: PosSymScores,
}

/// A finished run: the report and the mean attention of the query by answer position (`L × L`, row `p` is the
/// mean attention over test examples whose answer sits at `p`).
#[derive(Clone, Debug)]
pub struct CanonicalOutcome {
    /// The measurements.
    pub report: CanonicalReport,
    /// Row-major `L × L` mean attention by answer position.
    pub attention_by_answer_position: Vec<f64>,
}

/// Trains as `config` says and measures; `progress(steps_done)` is called after every step.
pub fn run(
    config: &CanonicalConfig,
    progress: &mut dyn FnMut(usize),
) -> Result<CanonicalOutcome, ConfigError> {
    let spec = config.validate()?;
    let sizes = &config.sizes;
    let head = GatedHead {
        n_features: config.task.n_features(sizes),
        head_dim: config.head_dim,
        n_classes: sizes.n_symbols,
    };
    let mut rng = rng_for(config.seed, Stream::Data);
    let train_set: Vec<Example> = (0..config.n_train)
        .map(|_| config.task.sample(sizes, &mut rng))
        .collect();
    let test_set: Vec<Example> = (0..config.n_test)
        .map(|_| config.task.sample(sizes, &mut rng))
        .collect();
    let rope = GatedRope::new(spec.clone(), config.gate.clone(), sizes.context_len + 1);
    let mut params = initial_params(head.n_params(), config.init_scale, config.seed)?;

    let objective = TaskLoss {
        head,
        rope: &rope,
        examples: &train_set,
    };
    let accuracy = |p: &[f64], set: &[Example]| {
        set.iter()
            .filter(|e| argmax(&head.logits(p, &rope, e)) == e.answer)
            .count() as f64
            / set.len() as f64
    };
    let mut curve = vec![CanonicalCurvePoint {
        step: 0,
        loss: objective.loss_and_grad(&params).0,
        test_accuracy: accuracy(&params, &test_set),
    }];
    train(
        &objective,
        &mut params,
        config.optimizer,
        config.steps,
        config.record_every,
        progress,
        |step, p, loss| {
            curve.push(CanonicalCurvePoint {
                step,
                loss,
                test_accuracy: accuracy(p, &test_set),
            })
        },
    );

    let len = sizes.context_len;
    let mut hits = vec![0usize; len];
    let mut counts = vec![0usize; len];
    let mut attention = vec![0.0; len * len];
    for e in &test_set {
        counts[e.answer_pos] += 1;
        if argmax(&head.logits(&params, &rope, e)) == e.answer {
            hits[e.answer_pos] += 1;
        }
        let s = head.attention(&params, &rope, &e.context, &e.query);
        attention[e.answer_pos * len..(e.answer_pos + 1) * len]
            .iter_mut()
            .zip(&s)
            .for_each(|(a, s)| *a += s);
    }
    for p in 0..len {
        attention[p * len..(p + 1) * len]
            .iter_mut()
            .for_each(|a| *a /= counts[p].max(1) as f64);
    }
    let by_position: Vec<f64> = hits
        .iter()
        .zip(&counts)
        .map(|(&h, &c)| if c > 0 { h as f64 / c as f64 } else { f64::NAN })
        .collect();

    let n_score = config.n_score.min(test_set.len());
    let mut scores = PosSymScores::default();
    for e in &test_set[..n_score] {
        let s =
            positional_symbolic_scores(&e.context, config.score_blocks, config.score_tau, |c| {
                head.attention(&params, &rope, c, &e.query)
            });
        scores.positional += s.positional / n_score.max(1) as f64;
        scores.symbolic += s.symbolic / n_score.max(1) as f64;
    }

    let report = CanonicalReport {
        config: config.clone(),
        gate_frequencies: config
            .gate
            .chunks()
            .iter()
            .map(|&l| spec.frequency::<f64>(l))
            .collect(),
        curve,
        train_accuracy: accuracy(&params, &train_set),
        test_accuracy: accuracy(&params, &test_set),
        edge_minus_middle: edge_minus_middle(&by_position),
        accuracy_by_answer_position: by_position,
        scores,
    };
    Ok(CanonicalOutcome {
        report,
        attention_by_answer_position: attention,
    })
}

/// Mean accuracy at the first and last answer positions minus the mean over the middle third of positions
/// (positions without examples skipped).
fn edge_minus_middle(acc: &[f64]) -> f64 {
    let mean = |v: &[f64]| {
        let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let third = acc.len() / 3;
    mean(&[acc[0], acc[acc.len() - 1]]) - mean(&acc[third..acc.len() - third])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default scores (the same for every task) weigh `m = 4` blocks at `τ = 0.05` on block means. A head
    /// whose attention stays with the positions (block masses `d = (0.1, 0.2, 0.3, 0.4)` over two positions each,
    /// whatever the contents) has `s_pos = 1` and `s_sym = Σ_{a<b} w_ab · 2 d_a d_b / (d_a² + d_b²)`, the weights
    /// `w` the softmax of the gaps between block means over τ, computed here from that definition.
    #[test]
    fn default_scores_use_four_blocks_at_temperature_one_twentieth() {
        /// Rounding of the sums.
        const TOL: f64 = 1e-12;
        let config = CanonicalConfig::for_task(Task::Index);
        let row = [0.05, 0.05, 0.1, 0.1, 0.15, 0.15, 0.2, 0.2];
        let context: Vec<usize> = (0..row.len()).collect();
        let s = positional_symbolic_scores(&context, config.score_blocks, config.score_tau, |_| {
            row.to_vec()
        });
        let d = [0.1, 0.2, 0.3, 0.4];
        let pairs: Vec<(usize, usize)> = (0..4)
            .flat_map(|a| (a + 1..4).map(move |b| (a, b)))
            .collect();
        let exp: Vec<f64> = pairs
            .iter()
            .map(|&(a, b)| ((d[a] - d[b]) / 2.0_f64).abs() / 0.05)
            .map(f64::exp)
            .collect();
        let total: f64 = exp.iter().sum();
        let s_sym: f64 = pairs
            .iter()
            .zip(&exp)
            .map(|(&(a, b), e)| e / total * 2.0 * d[a] * d[b] / (d[a] * d[a] + d[b] * d[b]))
            .sum();
        assert!((s.positional - 1.0).abs() < TOL, "{}", s.positional);
        assert!((s.symbolic - s_sym).abs() < TOL, "{} against {s_sym}", s.symbolic);
    }

    /// The edges' mean accuracy (first and last answer positions) minus the middle third's, positions without
    /// examples (NaN) skipped, a mean of none 0.
    #[test]
    fn edge_minus_middle_compares_the_edges_with_the_middle_third() {
        /// Rounding of the means.
        const TOL: f64 = 1e-12;
        let nan = f64::NAN;
        // Seven positions: the middle third is positions 2, 3 and 4.
        let cases = [
            ([1.0, 0.5, 0.2, 0.3, 0.4, 0.0, 0.9], 0.95 - 0.3),
            ([nan, 0.5, nan, 0.2, 0.4, 0.0, 0.8], 0.8 - 0.3),
            ([0.6, 1.0, nan, nan, nan, 1.0, 0.4], 0.5),
        ];
        for (acc, want) in cases {
            let got = edge_minus_middle(&acc);
            assert!((got - want).abs() < TOL, "{acc:?}: {got} against {want}");
        }
    }

    /// Each condition on a configuration refuses it alone; every task's defaults pass.
    #[test]
    fn configurations_are_refused_one_condition_at_a_time() {
        for task in [Task::Index, Task::Retrieval, Task::Induction] {
            let defaults = CanonicalConfig::for_task(task);
            assert!(defaults.validate().is_ok(), "{task:?}");
            let refused = |change: &dyn Fn(&mut CanonicalConfig)| {
                let mut c = defaults.clone();
                change(&mut c);
                matches!(c.validate(), Err(ConfigError::Invalid(_)))
            };
            // Each change keeps the gate at head_dim / 2 chunks, so only the condition named fails.
            assert!(refused(&|c| {
                c.head_dim = 13;
                c.gate = ChunkGate::all(6);
            }));
            assert!(refused(&|c| {
                c.head_dim = 0;
                c.gate = ChunkGate::all(0);
            }));
            assert!(refused(&|c| c.gate = ChunkGate::all(7)));
            assert!(refused(&|c| c.steps = 0));
            assert!(refused(&|c| c.n_train = 0));
            assert!(refused(&|c| c.n_test = 0));
            assert!(refused(&|c| c.sizes.n_symbols = 1));
            assert!(!refused(&|c| {
                c.head_dim = 14;
                c.gate = ChunkGate::all(7);
            }));
        }
    }
}
