//! The analytic gradients of both trained models agree with central finite differences.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use ropescope::rope::{Pairing, RopeSpec};
use ropescope::train::canonical::model::{GatedHead, TaskLoss};
use ropescope::train::canonical::tasks::{Task, TaskSizes};
use ropescope::train::gate::ChunkGate;
use ropescope::train::optim::Objective;
use ropescope::train::rotary::GatedRope;
use ropescope::train::sdh::data::{embeddings, EmbeddingGeometry, MarkovSource};
use ropescope::train::sdh::model::{OffsetTask, SlashHead};

/// Step of the central differences.
const FD_STEP: f64 = 1e-5;
/// Largest accepted `|analytic − numeric| / max(1, |numeric|)`.
const FD_TOLERANCE: f64 = 1e-6;

/// The worst `|analytic − numeric| / max(1, |numeric|)` over every parameter.
fn worst_gradient_error<O: Objective>(objective: &O, params: &[f64]) -> f64 {
    let (_, grad) = objective.loss_and_grad(params);
    let mut worst = 0.0f64;
    for i in 0..params.len() {
        let mut p = params.to_vec();
        p[i] += FD_STEP;
        let up = objective.loss_and_grad(&p).0;
        p[i] -= 2.0 * FD_STEP;
        let down = objective.loss_and_grad(&p).0;
        let numeric = (up - down) / (2.0 * FD_STEP);
        worst = worst.max((grad[i] - numeric).abs() / numeric.abs().max(1.0));
    }
    worst
}

fn check<O: Objective>(objective: &O, params: &[f64]) {
    let worst = worst_gradient_error(objective, params);
    assert!(
        worst < FD_TOLERANCE,
        "worst relative gradient error {worst:e}"
    );
}

/// An objective whose gradient is off by `error` in one component: what a back-propagation bug looks like.
struct Corrupted<'a, O> {
    inner: &'a O,
    component: usize,
    error: f64,
}

impl<O: Objective> Objective for Corrupted<'_, O> {
    fn n_params(&self) -> usize {
        self.inner.n_params()
    }
    fn loss_and_grad(&self, params: &[f64]) -> (f64, Vec<f64>) {
        let (loss, mut grad) = self.inner.loss_and_grad(params);
        grad[self.component] += self.error;
        (loss, grad)
    }
}

fn random_params(n: usize, scale: f64, rng: &mut ChaCha8Rng) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

/// A small slash head (cone embeddings of 10 tokens in 6 dimensions, head dimension 8) and three 7-token
/// prompts from a Markov source.
fn slash_head_instance(rng: &mut ChaCha8Rng) -> (SlashHead, Vec<Vec<usize>>) {
    let emb = embeddings(EmbeddingGeometry::Cone { half_angle: 0.6 }, 10, 6, rng);
    let head = SlashHead::new(emb, 8, 3.0);
    let source = MarkovSource::new(10, 3, rng);
    let prompts = (0..3).map(|_| source.sample(7, rng)).collect();
    (head, prompts)
}

/// The gated RoPE of [`slash_head_instance`]: its head dimension 8, base 100, its prompts' 7 positions, and the
/// chunks `chunks` of 4 open.
fn slash_head_rope(pairing: Pairing, chunks: &[usize]) -> GatedRope {
    let gate = ChunkGate::from_chunks(4, chunks).unwrap();
    GatedRope::new(RopeSpec::new(8, 100.0, pairing), gate, 7)
}

#[test]
fn slash_head_gradient_matches_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (head, prompts) = slash_head_instance(&mut rng);
    for pairing in [Pairing::HalfSplit, Pairing::Adjacent] {
        let rope = slash_head_rope(pairing, &[0, 1, 3]);
        let task = OffsetTask {
            head: &head,
            rope: &rope,
            prompts: &prompts,
            offset: 2,
        };
        let params = random_params(head.n_params(), 0.8, &mut rng);
        check(&task, &params);
    }
}

#[test]
fn gated_head_gradient_matches_finite_differences() {
    let sizes = TaskSizes {
        context_len: 6,
        n_symbols: 4,
        n_keys: 3,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    for task in [Task::Index, Task::Induction] {
        let examples: Vec<_> = (0..3).map(|_| task.sample(&sizes, &mut rng)).collect();
        let head = GatedHead {
            n_features: task.n_features(&sizes),
            head_dim: 8,
            n_classes: sizes.n_symbols,
        };
        let gate = ChunkGate::from_chunks(4, &[0, 2]).unwrap();
        let rope = GatedRope::new(RopeSpec::new(8, 100.0, Pairing::HalfSplit), gate, 7);
        let loss = TaskLoss {
            head,
            rope: &rope,
            examples: &examples,
        };
        let params = random_params(head.n_params(), 0.8, &mut rng);
        check(&loss, &params);
    }
}

/// Negative control: the finite-difference check fails on a gradient corrupted by 10 × its tolerance in a single
/// component (the last one), so it cannot pass vacuously; the uncorrupted gradient passes at the same point.
#[test]
fn gradient_check_fails_on_a_corrupted_gradient() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let (head, prompts) = slash_head_instance(&mut rng);
    let rope = slash_head_rope(Pairing::HalfSplit, &[0, 1, 2, 3]);
    let task = OffsetTask {
        head: &head,
        rope: &rope,
        prompts: &prompts,
        offset: 2,
    };
    let params = random_params(head.n_params(), 0.8, &mut rng);
    assert!(worst_gradient_error(&task, &params) < FD_TOLERANCE);
    let corrupted = Corrupted {
        inner: &task,
        component: head.n_params() - 1,
        error: 10.0 * FD_TOLERANCE,
    };
    let worst = worst_gradient_error(&corrupted, &params);
    assert!(worst >= FD_TOLERANCE, "corruption not detected: {worst:e}");
}
