//! Emergence of slash-dominant heads (Demystifying the Slash Pattern): train the shallow RoPE transformer of
//! [`model`] on "predict the token `Δ` back" and measure its slash scores, rank-one statistics and
//! out-of-distribution behaviour. Every open choice is a field of [`SdhConfig`]; see
//! `theory/train-reconstructed.md`.

pub mod data;
pub mod model;

use super::gate::ChunkGate;
use super::metrics::{cone_spread, rank_one_stats, slash_scores, CausalAttention, RankOneStats};
use super::optim::{train, Objective, Optimizer};
use super::rotary::GatedRope;
use super::{initial_params, rng_for, ConfigError, Stream};
use crate::rope::{Pairing, RopeSpec};
use data::{embeddings, uniform_prompt, EmbeddingGeometry, MarkovSource};
use model::{OffsetTask, SlashHead};
use serde::Serialize;

/// Default `κ`: a head is `(κ, Δ)`-slash-dominant when `SlashScore(Δ) >= κ` (the paper leaves κ open).
pub const DEFAULT_KAPPA: f64 = 0.5;

/// Every choice of the slash-pattern experiment, with the documented defaults of `theory/train-reconstructed.md`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SdhConfig {
    /// Seed of every random draw (embeddings, data, initialisation).
    pub seed: u64,
    /// Vocabulary size `V`; larger than `d_model`, so isotropic embeddings cannot all be mapped to one query.
    pub vocab: usize,
    /// Embedding dimension.
    pub d_model: usize,
    /// Query/key dimension (even; `head_dim / 2` RoPE chunks).
    pub head_dim: usize,
    /// RoPE base.
    pub rope_base: f64,
    /// RoPE chunks the head may use (`None`: all).
    pub gate: Option<ChunkGate>,
    /// Placement of the fixed token embeddings.
    pub embeddings: EmbeddingGeometry,
    /// The offset `Δ` the task needs.
    pub offset: usize,
    /// Length of training prompts.
    pub train_len: usize,
    /// Number of training prompts (one full batch).
    pub n_train: usize,
    /// Successors per token of the in-distribution Markov chain.
    pub markov_branching: usize,
    /// `γ` in the readout `z_v = γ ⟨e_v, o_i⟩`.
    pub readout_scale: f64,
    /// Standard deviation of the Gaussian initialisation of `W_Q`, `W_K`.
    pub init_scale: f64,
    /// Update rule (full-batch).
    pub optimizer: Optimizer,
    /// Number of full-batch steps.
    pub steps: usize,
    /// Record the learning curve every this many steps.
    pub record_every: usize,
    /// Number of evaluation prompts per distribution.
    pub n_eval: usize,
    /// Length of the out-of-distribution (uniform random) prompts.
    pub ood_len: usize,
    /// `κ` of the slash-dominance test.
    pub kappa: f64,
}

impl Default for SdhConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            vocab: 64,
            d_model: 16,
            head_dim: 16,
            rope_base: 10000.0,
            gate: None,
            embeddings: EmbeddingGeometry::Cone { half_angle: 0.5 },
            offset: 3,
            train_len: 32,
            n_train: 64,
            markov_branching: 4,
            readout_scale: 30.0,
            init_scale: 0.01,
            optimizer: Optimizer::GradientDescent { lr: 0.5 },
            steps: 1000,
            record_every: 10,
            n_eval: 64,
            ood_len: 128,
            kappa: DEFAULT_KAPPA,
        }
    }
}

/// One point of the learning curve.
#[derive(Clone, Debug, Serialize)]
pub struct SdhCurvePoint {
    /// Steps done.
    pub step: usize,
    /// Training loss before the last step.
    pub loss: f64,
    /// `SlashScore(Δ)` on held-out in-distribution prompts.
    pub slash_at_offset: f64,
    /// The largest `SlashScore(Δ')`, `Δ' != Δ`, on the same prompts.
    pub max_other_slash: f64,
    /// `σ1²/Σσ²` of the pre-RoPE queries.
    pub q_sigma1_share: f64,
    /// `σ1²/Σσ²` of the pre-RoPE keys.
    pub k_sigma1_share: f64,
}

/// Slash statistics of the trained head on one prompt distribution.
#[derive(Clone, Debug, Serialize)]
pub struct SlashProfile {
    /// `SlashScore(Δ')` for every offset `Δ'` the prompts have (`0..len`).
    pub scores: Vec<f64>,
    /// `SlashScore(Δ)`.
    pub at_offset: f64,
    /// `max_{Δ' != Δ} SlashScore(Δ')`.
    pub max_other: f64,
    /// Whether the head is `(κ, Δ)`-slash-dominant.
    pub slash_dominant: bool,
}

/// Final measurements of a slash-pattern run.
#[derive(Clone, Debug, Serialize)]
pub struct SdhReport {
    /// The configuration that produced this report.
    pub config: SdhConfig,
    /// RoPE frequency `g_l` of every chunk.
    pub frequencies: Vec<f64>,
    /// Mean angle (radians) between the embeddings and their mean direction.
    pub embedding_cone_spread: f64,
    /// Learning curve.
    pub curve: Vec<SdhCurvePoint>,
    /// Held-out prompts from the training distribution (length `train_len`).
    pub in_distribution: SlashProfile,
    /// i.i.d. uniform random tokens of the training length (a shift of content only).
    pub uniform_tokens: SlashProfile,
    /// i.i.d. uniform random tokens of length `ood_len` (content and length shifted).
    pub uniform_tokens_longer: SlashProfile,
    /// Rank-one statistics of the pre-RoPE queries (rows: every position of the in-distribution prompts).
    pub q_rank_one: RankOneStats,
    /// Rank-one statistics of the pre-RoPE keys.
    pub k_rank_one: RankOneStats,
    /// Share of `Σ_l A_l` per chunk, `A_l = mean_t |q_t^(l)| · mean_t |k_t^(l)|`.
    pub chunk_amplitude_share: Vec<f64>,
}

/// A finished run: the report and the mean attention maps (row-major, square, zero above the diagonal).
#[derive(Clone, Debug)]
pub struct SdhOutcome {
    /// The measurements.
    pub report: SdhReport,
    /// Mean attention over the in-distribution evaluation prompts, `train_len × train_len`.
    pub map_in_distribution: Vec<f64>,
    /// Mean attention over the uniform-token prompts of the training length, `train_len × train_len`.
    pub map_uniform_tokens: Vec<f64>,
    /// Mean attention over the longer uniform-token prompts, `ood_len × ood_len`.
    pub map_uniform_tokens_longer: Vec<f64>,
}

impl SdhConfig {
    fn validate(&self) -> Result<(RopeSpec, ChunkGate), ConfigError> {
        let check = |ok: bool, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::Invalid(what.to_string()))
            }
        };
        check(
            self.head_dim >= 2 && self.head_dim.is_multiple_of(2),
            "head_dim must be even and >= 2",
        )?;
        check(self.d_model >= 2, "d_model must be >= 2")?;
        check(self.vocab >= 2, "vocab must be >= 2")?;
        check(
            self.offset >= 1 && self.offset < self.train_len,
            "offset must be in 1..train_len",
        )?;
        check(self.ood_len > self.offset, "ood_len must exceed the offset")?;
        check(
            self.n_train >= 1 && self.n_eval >= 1 && self.steps >= 1,
            "n_train, n_eval and steps must be >= 1",
        )?;
        let spec = RopeSpec::new(self.head_dim, self.rope_base, Pairing::HalfSplit);
        let gate = match &self.gate {
            None => ChunkGate::all(spec.n_chunks()),
            Some(g) if g.n_chunks() == spec.n_chunks() => g.clone(),
            Some(g) => {
                return Err(ConfigError::Invalid(format!(
                    "the gate has {} chunks, the head {}",
                    g.n_chunks(),
                    spec.n_chunks()
                )))
            }
        };
        Ok((spec, gate))
    }
}

/// Trains the head as `config` says and measures it; `progress(steps_done)` is called after every step.
pub fn run(config: &SdhConfig, progress: &mut dyn FnMut(usize)) -> Result<SdhOutcome, ConfigError> {
    let (spec, gate) = config.validate()?;
    let mut rng = rng_for(config.seed, Stream::Embeddings);
    let emb = embeddings(config.embeddings, config.vocab, config.d_model, &mut rng);
    let head = SlashHead::new(emb, config.head_dim, config.readout_scale);
    let mut rng = rng_for(config.seed, Stream::Data);
    let source = MarkovSource::new(config.vocab, config.markov_branching, &mut rng);
    let train_prompts: Vec<Vec<usize>> = (0..config.n_train)
        .map(|_| source.sample(config.train_len, &mut rng))
        .collect();
    let eval_prompts: Vec<Vec<usize>> = (0..config.n_eval)
        .map(|_| source.sample(config.train_len, &mut rng))
        .collect();
    let uniform_prompts: Vec<Vec<usize>> = (0..config.n_eval)
        .map(|_| uniform_prompt(config.vocab, config.train_len, &mut rng))
        .collect();
    let longer_prompts: Vec<Vec<usize>> = (0..config.n_eval)
        .map(|_| uniform_prompt(config.vocab, config.ood_len, &mut rng))
        .collect();

    let rope = GatedRope::new(spec.clone(), gate.clone(), config.train_len);
    let rope_ood = GatedRope::new(spec.clone(), gate, config.ood_len);
    let mut params = initial_params(head.n_params(), config.init_scale, config.seed)?;

    let task = OffsetTask {
        head: &head,
        rope: &rope,
        prompts: &train_prompts,
        offset: config.offset,
    };
    let measure = |step: usize, p: &[f64], loss: f64| {
        let maps = maps_of(&head, p, &rope, &eval_prompts);
        let profile = profile(&maps, config.offset, config.kappa);
        let (q, k) = stacked_queries_keys(&head, p, &rope, &eval_prompts);
        SdhCurvePoint {
            step,
            loss,
            slash_at_offset: profile.at_offset,
            max_other_slash: profile.max_other,
            q_sigma1_share: rank_one_stats(&q).sigma1_share,
            k_sigma1_share: rank_one_stats(&k).sigma1_share,
        }
    };
    let mut curve = vec![measure(0, &params, task.loss_and_grad(&params).0)];
    train(
        &task,
        &mut params,
        config.optimizer,
        config.steps,
        config.record_every,
        progress,
        |step, p, loss| curve.push(measure(step, p, loss)),
    );

    let maps = maps_of(&head, &params, &rope, &eval_prompts);
    let maps_uniform = maps_of(&head, &params, &rope, &uniform_prompts);
    let maps_ood = maps_of(&head, &params, &rope_ood, &longer_prompts);
    let (q, k) = stacked_queries_keys(&head, &params, &rope, &eval_prompts);
    let report = SdhReport {
        config: config.clone(),
        frequencies: (0..spec.n_chunks())
            .map(|l| spec.frequency::<f64>(l))
            .collect(),
        embedding_cone_spread: cone_spread(head.embeddings()),
        curve,
        in_distribution: profile(&maps, config.offset, config.kappa),
        uniform_tokens: profile(&maps_uniform, config.offset, config.kappa),
        uniform_tokens_longer: profile(&maps_ood, config.offset, config.kappa),
        q_rank_one: rank_one_stats(&q),
        k_rank_one: rank_one_stats(&k),
        chunk_amplitude_share: chunk_amplitude_share(&spec, &q, &k),
    };
    Ok(SdhOutcome {
        report,
        map_in_distribution: mean_map(&maps, config.train_len),
        map_uniform_tokens: mean_map(&maps_uniform, config.train_len),
        map_uniform_tokens_longer: mean_map(&maps_ood, config.ood_len),
    })
}

fn maps_of(
    head: &SlashHead,
    params: &[f64],
    rope: &GatedRope,
    prompts: &[Vec<usize>],
) -> Vec<CausalAttention> {
    prompts
        .iter()
        .map(|p| head.attention(params, rope, p))
        .collect()
}

fn stacked_queries_keys(
    head: &SlashHead,
    params: &[f64],
    rope: &GatedRope,
    prompts: &[Vec<usize>],
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let mut qs = Vec::new();
    let mut ks = Vec::new();
    for p in prompts {
        let (q, k) = head.queries_keys(params, rope, p);
        qs.extend(q);
        ks.extend(k);
    }
    (qs, ks)
}

/// The slash profile of `maps` over every offset their longest prompt has; `offset` must be one of them.
fn profile(maps: &[CausalAttention], offset: usize, kappa: f64) -> SlashProfile {
    let longest = maps.iter().map(Vec::len).max().unwrap_or(0);
    let scores = slash_scores(maps, longest.saturating_sub(1));
    let max_other = scores
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != offset)
        .map(|(_, &s)| s)
        .fold(0.0, f64::max);
    SlashProfile {
        at_offset: scores[offset],
        max_other,
        slash_dominant: scores[offset] >= kappa,
        scores,
    }
}

/// The element-wise mean of `maps`, as a row-major `n × n` matrix (zero above the diagonal).
fn mean_map(maps: &[CausalAttention], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for m in maps {
        for (i, row) in m.iter().enumerate() {
            for (j, &s) in row.iter().enumerate() {
                out[i * n + j] += s / maps.len() as f64;
            }
        }
    }
    out
}

fn chunk_amplitude_share(spec: &RopeSpec, q: &[Vec<f64>], k: &[Vec<f64>]) -> Vec<f64> {
    let mean_norm = |rows: &[Vec<f64>], l: usize| {
        let (a, b) = spec.chunk_dims(l);
        rows.iter().map(|r| r[a].hypot(r[b])).sum::<f64>() / rows.len().max(1) as f64
    };
    let amp: Vec<f64> = (0..spec.n_chunks())
        .map(|l| mean_norm(q, l) * mean_norm(k, l))
        .collect();
    let total: f64 = amp.iter().sum();
    amp.iter().map(|a| a / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_covers_every_offset_of_the_longest_prompt() {
        let short = vec![vec![1.0], vec![0.25, 0.75]];
        let long = vec![vec![1.0], vec![0.5, 0.5], vec![0.1, 0.6, 0.3]];
        let p = profile(&[short, long], 1, 0.4);
        // Δ = 0: (0.875 + 0.6) / 2; Δ = 1: (0.25 + 0.55) / 2; Δ = 2: 0.1.
        let want = [0.7375, 0.4, 0.1];
        assert_eq!(p.scores.len(), 3);
        for (s, w) in p.scores.iter().zip(want) {
            assert!((s - w).abs() < 1e-15, "{s} against {w}");
        }
        assert_eq!((p.at_offset, p.max_other), (p.scores[1], p.scores[0]));
        assert!(p.slash_dominant, "a score equal to κ is dominant");
        assert!(!profile(&[vec![vec![1.0], vec![0.7, 0.3]]], 1, 0.71).slash_dominant);
    }

    /// The default κ is half of every row's attention: a map whose offset diagonal holds exactly half of each row
    /// is slash-dominant, one holding `STEP` less is not.
    #[test]
    fn default_kappa_is_half_of_every_rows_attention() {
        /// How far below one half the second map's diagonal is: far above rounding.
        const STEP: f64 = 1e-9;
        let kappa = SdhConfig::default().kappa;
        let half = vec![vec![1.0], vec![0.5, 0.5], vec![0.0, 0.5, 0.5]];
        assert!(profile(&[half], 1, kappa).slash_dominant);
        let (a, b) = (0.5 - STEP, 0.5 + STEP);
        let below = vec![vec![1.0], vec![a, b], vec![0.0, a, b]];
        assert!(!profile(&[below], 1, kappa).slash_dominant);
    }

    #[test]
    fn mean_map_averages_the_prompts() {
        let maps = [
            vec![vec![1.0], vec![0.25, 0.75]],
            vec![vec![1.0], vec![0.75, 0.25]],
        ];
        assert_eq!(mean_map(&maps, 2), vec![1.0, 0.0, 0.5, 0.5]);
    }

    #[test]
    fn chunk_amplitude_share_is_the_normalised_product_of_mean_chunk_norms() {
        let spec = RopeSpec::new(4, 100.0, Pairing::Adjacent);
        // Chunk 0: mean |q| (5 + 0) / 2, |k| 1; chunk 1: mean |q| 1, |k| 2.
        let q = [vec![3.0, 4.0, 0.0, 1.0], vec![0.0, 0.0, 1.0, 0.0]];
        let k = [vec![1.0, 0.0, 0.0, 2.0]];
        let share = chunk_amplitude_share(&spec, &q, &k);
        for (s, w) in share.iter().zip([2.5 / 4.5, 2.0 / 4.5]) {
            assert!((s - w).abs() < 1e-15, "{s} against {w}");
        }
    }
}
