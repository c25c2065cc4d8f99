//! Training experiments on the CPU: small RoPE attention models trained from scratch to reproduce the training
//! claims of the papers, with analytic gradients (checked against finite differences in `tests/`).
//!
//! - [`sdh`]: slash-dominant heads emerge under a cone and medium/high RoPE frequencies (Demystifying the Slash
//!   Pattern), and stay slash-dominant out of distribution.
//! - [`canonical`]: Index, Retrieval and partial induction under frequency gating (Decoupling Positional and
//!   Symbolic Attention).
//!
//! Everything is f64 and deterministic given a seed, at any rayon thread count.

pub mod canonical;
pub mod gate;
pub mod metrics;
pub mod optim;
pub mod rotary;
pub mod sdh;
pub mod softmax;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A configuration the experiments cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A frequency gate that does not fit the head.
    #[error(transparent)]
    Gate(#[from] gate::GateError),
    /// Any other inconsistent setting.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// The independent random streams drawn from one seed, so that changing one draw never shifts another.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stream {
    Embeddings = 1,
    Data = 2,
    Init = 3,
}

/// A ChaCha8 generator for `stream` of `seed`.
pub(crate) fn rng_for(seed: u64, stream: Stream) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream as u64);
    rng
}

/// `n` initial parameters drawn i.i.d. from N(0, `scale`²) on the [`Stream::Init`] stream of `seed`.
pub(crate) fn initial_params(n: usize, scale: f64, seed: u64) -> Result<Vec<f64>, ConfigError> {
    use rand_distr::{Distribution, Normal};
    let normal =
        Normal::new(0.0, scale).map_err(|e| ConfigError::Invalid(format!("init_scale: {e}")))?;
    let mut rng = rng_for(seed, Stream::Init);
    Ok((0..n).map(|_| normal.sample(&mut rng)).collect())
}
