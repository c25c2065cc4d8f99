//! Where the time of a forward pass goes, step by step: the breakdown the `breakdown` bench prints.
//!
//! Off by default, and then each instrumented step costs one relaxed atomic load. [`Profile::start`] switches it
//! on for the whole process (one profile at a time; a second waits) and [`Profile::finish`] returns what the
//! forward passes in between spent per [`Step`].
//!
//! Two kinds of time are kept, because parts of the pass run in parallel:
//! - *wall* time of the steps the forward pass runs one after another (norms, each projection, RoPE, attention,
//!   activations, logits); they add up to the pass;
//! - *thread* time of the parts inside a parallel step (dequantizing a weight tile and multiplying by it inside
//!   a projection; scores, softmax, `probs · v` and capture inside attention), summed over threads: their ratio
//!   says how the step's wall time divides, not how long each took alone.
//!
//! Each step also counts the floating-point operations of its products (two per multiply-add), so the bench
//! reports rates as a fraction of the machine's measured FMA peak.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;
// Reading the counters back ([`Profile`]) is for the `breakdown` bench and the tests only.
#[cfg(feature = "internals")]
use std::{
    sync::{Mutex, MutexGuard},
    time::Duration,
};

/// A step of the forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Token embedding lookup (and Gemma's scale).
    Embed,
    /// RMS norms: before attention and the FFN, of q and k, after attention and the FFN (wall).
    Norm,
    /// The query, key and value projections (wall): one product where they read the same input.
    ProjectQkv,
    /// Copies of the pre-RoPE q and k for capture, and the rotation (wall).
    Rope,
    /// Every head's attention, capture included (wall).
    Attention,
    /// The attention output projection (wall).
    ProjectO,
    /// The FFN gate and up projections (wall): one product where they read the same input; per-layer inputs'
    /// gate.
    ProjectGateUp,
    /// Gated activation and residual additions (wall).
    Activation,
    /// The FFN down projection (wall).
    ProjectDown,
    /// Final norm and output head of the requested logits rows (wall).
    Logits,
    /// The check that every tensor the pass computes is finite (wall).
    Check,
    /// Inside projections: producing weight tiles (dequantization) (thread time).
    Dequantize,
    /// Inside projections: multiplying activations by weight tiles (thread time).
    Multiply,
    /// Inside attention: `scale · q kᵀ` and soft-capping (thread time).
    Scores,
    /// Inside attention: masked softmax (thread time).
    Softmax,
    /// Inside attention: `probs · v` (thread time).
    Values,
    /// Inside attention: handing blocks and heads to the capture (thread time).
    Capture,
}

impl Step {
    /// Every step, in the order of the pass (wall steps first, then the parts of parallel steps), which is the
    /// order the variants are declared in.
    pub const ALL: [Step; 17] = [
        Step::Embed,
        Step::Norm,
        Step::ProjectQkv,
        Step::Rope,
        Step::Attention,
        Step::ProjectO,
        Step::ProjectGateUp,
        Step::Activation,
        Step::ProjectDown,
        Step::Logits,
        Step::Check,
        Step::Dequantize,
        Step::Multiply,
        Step::Scores,
        Step::Softmax,
        Step::Values,
        Step::Capture,
    ];

    /// Whether the step's time is summed over threads (a part of a parallel step) rather than wall time.
    #[cfg(feature = "internals")]
    pub fn is_thread_time(self) -> bool {
        matches!(
            self,
            Step::Dequantize
                | Step::Multiply
                | Step::Scores
                | Step::Softmax
                | Step::Values
                | Step::Capture
        )
    }

    /// The name the bench prints.
    #[cfg(feature = "internals")]
    pub fn name(self) -> &'static str {
        match self {
            Step::Embed => "embed",
            Step::Norm => "norms",
            Step::ProjectQkv => "project q, k, v",
            Step::ProjectO => "project o",
            Step::ProjectGateUp => "project gate, up",
            Step::ProjectDown => "project down",
            Step::Logits => "logits",
            Step::Check => "finiteness checks",
            Step::Rope => "rope (+ pre-RoPE copies)",
            Step::Attention => "attention",
            Step::Activation => "activation + residual",
            Step::Dequantize => "  dequantize tiles",
            Step::Multiply => "  multiply tiles",
            Step::Scores => "  scores q kᵀ",
            Step::Softmax => "  softmax",
            Step::Values => "  probs · v",
            Step::Capture => "  capture",
        }
    }

    /// The step's place in [`Step::ALL`] (the variants are declared in that order).
    pub fn index(self) -> usize {
        self as usize
    }
}

const STEPS: usize = Step::ALL.len();

static ENABLED: AtomicBool = AtomicBool::new(false);
static NANOS: [AtomicU64; STEPS] = [const { AtomicU64::new(0) }; STEPS];
static FLOPS: [AtomicU64; STEPS] = [const { AtomicU64::new(0) }; STEPS];
#[cfg(feature = "internals")]
static ACTIVE: Mutex<()> = Mutex::new(());

/// Runs `f`, adding its duration to `step` when profiling is on.
#[inline]
pub fn time<R>(step: Step, f: impl FnOnce() -> R) -> R {
    if !ENABLED.load(Ordering::Relaxed) {
        return f();
    }
    let start = Instant::now();
    let r = f();
    NANOS[step.index()].fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    r
}

/// Counts `flops` floating-point operations for `step` when profiling is on.
#[inline]
pub fn count_flops(step: Step, flops: usize) {
    if ENABLED.load(Ordering::Relaxed) {
        FLOPS[step.index()].fetch_add(flops as u64, Ordering::Relaxed);
    }
}

/// What one step took between [`Profile::start`] and [`Profile::finish`].
#[cfg(feature = "internals")]
#[derive(Clone, Copy, Debug)]
pub struct StepTotal {
    /// The step.
    pub step: Step,
    /// Its time (wall or summed over threads, see [`Step::is_thread_time`]).
    pub time: Duration,
    /// Floating-point operations of its products.
    pub flops: u64,
}

/// An active profile: the process's step counters run until [`Profile::finish`].
#[cfg(feature = "internals")]
pub struct Profile {
    _only: MutexGuard<'static, ()>,
}

#[cfg(feature = "internals")]
impl Profile {
    /// Zeroes the counters and switches profiling on (waiting for any other profile to finish).
    pub fn start() -> Self {
        let only = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        for (n, f) in NANOS.iter().zip(&FLOPS) {
            n.store(0, Ordering::Relaxed);
            f.store(0, Ordering::Relaxed);
        }
        ENABLED.store(true, Ordering::SeqCst);
        Self { _only: only }
    }

    /// Switches profiling off and returns every step's totals, in [`Step::ALL`]'s order.
    pub fn finish(self) -> Vec<StepTotal> {
        ENABLED.store(false, Ordering::SeqCst);
        Step::ALL
            .iter()
            .map(|&step| StepTotal {
                step,
                time: Duration::from_nanos(NANOS[step.index()].load(Ordering::Relaxed)),
                flops: FLOPS[step.index()].load(Ordering::Relaxed),
            })
            .collect()
    }
}

#[cfg(feature = "internals")]
impl Drop for Profile {
    fn drop(&mut self) {
        ENABLED.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_step_at_its_index() {
        assert!(Step::ALL.iter().enumerate().all(|(i, s)| s.index() == i));
    }

    /// Unit tests of the library run in parallel and some run forward passes, which may add to any step's time
    /// while this profile is active; no forward pass counts operations for `Embed`, so its count is exact.
    #[test]
    fn counts_only_while_a_profile_runs() {
        count_flops(Step::Embed, 10);
        let p = Profile::start();
        time(Step::Embed, || std::thread::sleep(Duration::from_millis(5)));
        count_flops(Step::Embed, 7);
        let totals = p.finish();
        count_flops(Step::Embed, 3);
        assert_eq!(totals.len(), STEPS);
        let embed = totals.iter().find(|t| t.step == Step::Embed).unwrap();
        assert!(embed.time >= Duration::from_millis(5));
        assert_eq!(embed.flops, 7);
        assert_eq!(Profile::start().finish()[0].flops, 0);
    }
}
