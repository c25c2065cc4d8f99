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

fn check<O: Objective>(objective: &O, params: &[f64]) {
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
    assert!(
        worst < FD_TOLERANCE,
        "worst relative gradient error {worst:e}"
    );
}

fn random_params(n: usize, scale: f64, rng: &mut ChaCha8Rng) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

#[test]
fn slash_head_gradient_matches_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let emb = embeddings(EmbeddingGeometry::Cone { half_angle: 0.6 }, 10, 6, &mut rng);
    let head = SlashHead::new(emb, 8, 3.0);
    let source = MarkovSource::new(10, 3, &mut rng);
    let prompts: Vec<Vec<usize>> = (0..3).map(|_| source.sample(7, &mut rng)).collect();
    let gate = ChunkGate::from_chunks(4, &[0, 1, 3]).unwrap();
    for pairing in [Pairing::HalfSplit, Pairing::Adjacent] {
        let rope = GatedRope::new(RopeSpec::new(8, 100.0, pairing), gate.clone(), 7);
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
