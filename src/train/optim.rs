//! Full-batch optimisation over a flat parameter vector, deterministic at any thread count.

use rayon::prelude::*;
use serde::Serialize;

/// A training loss over a flat parameter vector, with its analytic gradient.
pub trait Objective: Sync {
    /// Number of parameters.
    fn n_params(&self) -> usize;
    /// The loss and its gradient at `params`.
    fn loss_and_grad(&self, params: &[f64]) -> (f64, Vec<f64>);
}

/// Examples per work unit of [`mean_over_examples`]: fixed, so the summation order never depends on the threads.
const EXAMPLES_PER_UNIT: usize = 8;

/// Mean over `n` examples of `(loss_i, grad_i)` computed by `example(i, grad_accumulator)`, which returns the
/// loss of example `i` and adds its gradient into the accumulator. Examples are split into fixed units that run
/// in parallel; units are summed in index order, so the result is bit-identical at every rayon thread count.
pub fn mean_over_examples<F>(n: usize, n_params: usize, example: F) -> (f64, Vec<f64>)
where
    F: Fn(usize, &mut [f64]) -> f64 + Sync,
{
    let units: Vec<(f64, Vec<f64>)> = (0..n.div_ceil(EXAMPLES_PER_UNIT))
        .into_par_iter()
        .map(|u| {
            let mut grad = vec![0.0; n_params];
            let end = ((u + 1) * EXAMPLES_PER_UNIT).min(n);
            let loss = (u * EXAMPLES_PER_UNIT..end)
                .map(|i| example(i, &mut grad))
                .sum();
            (loss, grad)
        })
        .collect();
    let mut loss = 0.0;
    let mut grad = vec![0.0; n_params];
    for (l, g) in units {
        loss += l;
        grad.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
    }
    let scale = 1.0 / n.max(1) as f64;
    grad.iter_mut().for_each(|g| *g *= scale);
    (loss * scale, grad)
}

/// The update rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Optimizer {
    /// Plain gradient descent `θ ← θ − lr ∇L`.
    GradientDescent {
        /// Learning rate.
        lr: f64,
    },
    /// Adam (Kingma & Ba) with bias correction.
    Adam {
        /// Learning rate.
        lr: f64,
        /// First-moment decay.
        beta1: f64,
        /// Second-moment decay.
        beta2: f64,
        /// Denominator guard.
        eps: f64,
    },
}

impl Optimizer {
    /// Adam with the usual `β1 = 0.9`, `β2 = 0.999`, `ε = 1e-8`.
    pub fn adam(lr: f64) -> Self {
        Self::Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

/// An optimizer with its running state.
#[derive(Clone, Debug)]
pub struct OptimizerState {
    rule: Optimizer,
    step: i32,
    m: Vec<f64>,
    v: Vec<f64>,
}

impl OptimizerState {
    /// Fresh state for `n_params` parameters.
    pub fn new(rule: Optimizer, n_params: usize) -> Self {
        Self {
            rule,
            step: 0,
            m: vec![0.0; n_params],
            v: vec![0.0; n_params],
        }
    }

    /// Applies one update to `params` given the gradient.
    pub fn update(&mut self, params: &mut [f64], grad: &[f64]) {
        self.step += 1;
        match self.rule {
            Optimizer::GradientDescent { lr } => {
                params.iter_mut().zip(grad).for_each(|(p, g)| *p -= lr * g);
            }
            Optimizer::Adam {
                lr,
                beta1,
                beta2,
                eps,
            } => {
                let c1 = 1.0 - beta1.powi(self.step);
                let c2 = 1.0 - beta2.powi(self.step);
                for (i, p) in params.iter_mut().enumerate() {
                    self.m[i] = beta1 * self.m[i] + (1.0 - beta1) * grad[i];
                    self.v[i] = beta2 * self.v[i] + (1.0 - beta2) * grad[i] * grad[i];
                    *p -= lr * (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + eps);
                }
            }
        }
    }
}

/// Runs `steps` full-batch updates from `params`. After every step whose index is a multiple of `record_every`,
/// and after the last one, `on_record(step, params, loss)` is called with the loss *before* that step's update
/// and the parameters after it; then, after every step, `progress(steps_done)`.
pub fn train<O, R>(
    objective: &O,
    params: &mut [f64],
    rule: Optimizer,
    steps: usize,
    record_every: usize,
    progress: &mut dyn FnMut(usize),
    mut on_record: R,
) where
    O: Objective,
    R: FnMut(usize, &[f64], f64),
{
    let mut state = OptimizerState::new(rule, params.len());
    for step in 0..steps {
        let (loss, grad) = objective.loss_and_grad(params);
        state.update(params, &grad);
        if (step + 1) % record_every.max(1) == 0 || step + 1 == steps {
            on_record(step + 1, params, loss);
        }
        progress(step + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_over_examples_is_thread_count_independent() {
        let f = |i: usize, g: &mut [f64]| {
            g[0] += (i as f64).sin() * 1e-3;
            g[1] += 1.0 / (i as f64 + 1.0);
            (i as f64).cos()
        };
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let three = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let a = one.install(|| mean_over_examples(101, 2, f));
        let b = three.install(|| mean_over_examples(101, 2, f));
        assert_eq!(a.0.to_bits(), b.0.to_bits());
        assert_eq!(a.1, b.1);
    }

    #[test]
    fn mean_over_examples_is_the_mean_of_losses_and_gradients() {
        // 10 examples: one full unit of 8 and a partial one of 2.
        let (loss, grad) = mean_over_examples(10, 2, |i, g| {
            g[0] += i as f64;
            g[1] += 1.0;
            2.0 * i as f64
        });
        assert_eq!(loss, 9.0);
        assert_eq!(grad, vec![4.5, 1.0]);
    }

    #[test]
    fn updates_follow_their_rules() {
        // Adam with non-default constants, so that each of them changes the result; expected values computed
        // by hand from Kingma & Ba's algorithm (bias-corrected moments, ε added to the root).
        let rule = Optimizer::Adam {
            lr: 0.1,
            beta1: 0.5,
            beta2: 0.75,
            eps: 0.25,
        };
        let mut state = OptimizerState::new(rule, 2);
        let mut params = [0.0, 1.0];
        let expected = [
            [-0.066_666_666_666_666_67, 1.088_888_888_888_888_8],
            [-0.106_488_571_374_248_55, 1.164_566_577_728_585_6],
        ];
        for (grad, want) in [[0.5, -2.0], [0.1, -1.0]].iter().zip(expected) {
            state.update(&mut params, grad);
            for (p, w) in params.iter().zip(want) {
                assert!((p - w).abs() < 1e-15, "{p} against {w}");
            }
        }
        let mut params = [1.0, -1.0];
        OptimizerState::new(Optimizer::GradientDescent { lr: 0.5 }, 2).update(&mut params, &[2.0, -4.0]);
        assert_eq!(params, [0.0, 1.0]);
        assert_eq!(
            Optimizer::adam(0.01),
            Optimizer::Adam {
                lr: 0.01,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8
            }
        );
    }

    /// `L(θ) = θ²` on one parameter.
    struct Square;

    impl Objective for Square {
        fn n_params(&self) -> usize {
            1
        }
        fn loss_and_grad(&self, params: &[f64]) -> (f64, Vec<f64>) {
            (params[0] * params[0], vec![2.0 * params[0]])
        }
    }

    #[test]
    fn training_records_every_few_steps_and_the_last() {
        let mut params = [1.0];
        let (mut records, mut progress) = (Vec::new(), Vec::new());
        // Gradient descent with rate 1/4 halves θ at every step.
        let rule = Optimizer::GradientDescent { lr: 0.25 };
        train(&Square, &mut params, rule, 7, 3, &mut |s| progress.push(s), |step, p, loss| {
            records.push((step, p[0], loss))
        });
        assert_eq!(progress, (1..=7).collect::<Vec<_>>());
        // The loss before the step's update, the parameters after it.
        let at = |step: i32| (step as usize, 0.5f64.powi(step), 0.25f64.powi(step - 1));
        assert_eq!(records, vec![at(3), at(6), at(7)]);
        assert_eq!(params, [0.5f64.powi(7)]);
    }
}
