//! Frequency ablation at inference (Round and Round We Go, Section 6.1 and Appendix D): run the trained model
//! with some chunks left unrotated in every layer and measure each head's slash profile and the next-token
//! loss.
//!
//! Variants, in each layer over the `n` chunks that rotate in the model as trained (chunk 0 = fastest; a chunk
//! of frequency 0, which p-RoPE and Gemma 4's proportional RoPE leave still, stays still and is not counted):
//! - p-RoPE: the `⌊p·n⌋` fastest chunks rotate, the others do not (the paper's `apply_p_rope`:
//!   `rope_angles = int(p · head_dim // 2)` rotating angles from the highest frequency down). `p = 1` is the
//!   model as trained, `p = 0` NoPE. On a model trained with p-RoPE, `p` is a fraction of the chunks it rotates.
//! - reversed p-RoPE: the `⌊p·n⌋` slowest chunks rotate, the fastest `n − ⌊p·n⌋` do not (the paper's
//!   `p-RoPE_reversed`, which removes the highest frequencies).
//! - band masking: no rotation in the chunks of one band (low `g_l < low_max`, medium, high `g_l ≥ high_min`,
//!   [`FrequencyBands`], the same edges as the frequency-dominance statistic), each layer by its own
//!   frequencies (Gemma's local and global layers differ in base, head dimension and scaling).
//!
//! Per variant: each head's slash profile `SlashScore(Δ)` for `Δ = 0..=delta_max` ([`super::slash`]: the mean
//! of `S[i, i−Δ]` over rows `i ≥ Δ`, then over prompts), reduced block by block as attention streams out, and
//! the mean next-token cross-entropy `−log softmax(z_i)[x_{i+1}]` over every predicted token of every prompt.
//! The unablated model is run first; each variant reports its change against it. A variant that rotates the
//! same chunks as one measured before it (`p = 1` is the baseline; a band with no chunk masks nothing) takes
//! that measurement instead of running the same passes again (the forward pass is deterministic, so the
//! figures are the bits a second run would give) and names it in [`VariantResult::same_rotation_as`].

use super::fourier::{
    Band, FrequencyBands, DEFAULT_HIGH_BAND_MIN_FREQUENCY, DEFAULT_LOW_BAND_MAX_FREQUENCY,
};
use super::slash_stream::SlashCapture;
use crate::error::{Error, Result};
use crate::model::{ForwardOptions, Model};
use crate::numeric::Real;
use rayon::prelude::*;
use serde::Serialize;

/// Default kept fractions of p-RoPE: RoPE, the paper's 0.75 and 0.25, the half-way 0.5, and NoPE.
pub const DEFAULT_P_VALUES: [f64; 5] = [1.0, 0.75, 0.5, 0.25, 0.0];
/// Default kept fractions of reversed p-RoPE (the paper reports 0.75).
pub const DEFAULT_REVERSED_P_VALUES: [f64; 2] = [0.75, 0.25];
/// Default largest offset `Δ` of the slash profiles.
pub const DEFAULT_DELTA_MAX: usize = 16;

/// Parameters of the ablation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AblationParams {
    /// Kept fractions `p ∈ [0, 1]` of p-RoPE.
    pub p_values: Vec<f64>,
    /// Kept fractions of reversed p-RoPE.
    pub reversed_p_values: Vec<f64>,
    /// Bands to mask, one variant each.
    pub masked_bands: Vec<Band>,
    /// Upper edge of the low band ([`super::fourier::DEFAULT_LOW_BAND_MAX_FREQUENCY`], radians per token).
    pub low_band_max: f64,
    /// Lower edge of the high band ([`super::fourier::DEFAULT_HIGH_BAND_MIN_FREQUENCY`]).
    pub high_band_min: f64,
    /// Largest `Δ` of the slash profiles; every prompt must be longer.
    pub delta_max: usize,
}

impl Default for AblationParams {
    fn default() -> Self {
        Self {
            p_values: DEFAULT_P_VALUES.to_vec(),
            reversed_p_values: DEFAULT_REVERSED_P_VALUES.to_vec(),
            masked_bands: vec![Band::High, Band::Medium, Band::Low],
            low_band_max: DEFAULT_LOW_BAND_MAX_FREQUENCY,
            high_band_min: DEFAULT_HIGH_BAND_MIN_FREQUENCY,
            delta_max: DEFAULT_DELTA_MAX,
        }
    }
}

/// One ablation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Variant {
    /// The model as trained.
    Baseline,
    /// p-RoPE: the fastest `⌊p·n⌋` chunks rotate.
    PRope {
        /// Kept fraction.
        p: f64,
    },
    /// Reversed p-RoPE: the slowest `⌊p·n⌋` chunks rotate.
    Reversed {
        /// Kept fraction.
        p: f64,
    },
    /// No rotation in one band.
    BandMasked {
        /// The unrotated band.
        band: Band,
    },
}

impl Variant {
    /// Which chunks of a layer rotate under this variant, given each chunk's angular frequency (fastest first;
    /// 0 for a chunk the model leaves still, which stays still).
    pub fn rotated_chunks(&self, frequencies: &[f64], bands: &FrequencyBands) -> Vec<bool> {
        // Each chunk's rank among the chunks that turn, fastest first.
        let mut n = 0;
        let rank: Vec<Option<usize>> = frequencies
            .iter()
            .map(|&g| {
                (g != 0.0).then(|| {
                    n += 1;
                    n - 1
                })
            })
            .collect();
        let kept = |p: f64| ((p * n as f64).floor() as usize).min(n);
        let rotates = |r: usize, g: f64| match *self {
            Variant::Baseline => true,
            Variant::PRope { p } => r < kept(p),
            Variant::Reversed { p } => r >= n - kept(p),
            Variant::BandMasked { band } => bands.band(g) != band,
        };
        rank.iter()
            .zip(frequencies)
            .map(|(r, &g)| r.is_some_and(|r| rotates(r, g)))
            .collect()
    }
}

/// Results of one variant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantResult {
    /// The ablation.
    pub variant: Variant,
    /// Which chunks rotate (chunk 0 = fastest) in the reference layer, the first with the most chunks.
    pub rotated_chunks: Vec<bool>,
    /// Which chunks rotate in each layer, `[layer][chunk]` (no chunk on a NoPE layer).
    pub layer_rotated_chunks: Vec<Vec<bool>>,
    /// The first variant measured before this one (the baseline first) that rotates the same chunks, whose
    /// measurement this one shares; `None` if no earlier variant does.
    pub same_rotation_as: Option<Variant>,
    /// Mean next-token cross-entropy (nats per token).
    pub loss: f64,
    /// `loss − baseline loss`.
    pub loss_change: f64,
    /// `SlashScore(Δ)` for `Δ = 0..=delta_max`, `[layer][head][Δ]`.
    pub slash_profile: Vec<Vec<Vec<f64>>>,
    /// The `Δ` of the profile's maximum, `[layer][head]`.
    pub peak_delta: Vec<Vec<usize>>,
    /// The profile's maximum, `[layer][head]`.
    pub peak_score: Vec<Vec<f64>>,
    /// `SlashScore` at the baseline's peak `Δ` minus the baseline's peak score, `[layer][head]`: how much of
    /// the head's slash the ablation removed (negative) or added.
    pub baseline_peak_change: Vec<Vec<f64>>,
}

/// Result of the ablation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AblationReport {
    /// Number of predicted tokens the loss averages over.
    pub n_predicted: usize,
    /// The band of each chunk (chunk 0 = fastest) of the reference layer under the parameters' edges (`null`
    /// for a chunk that does not rotate).
    pub chunk_bands: Vec<Option<Band>>,
    /// The band of each chunk of each layer, `[layer][chunk]`.
    pub layer_chunk_bands: Vec<Vec<Option<Band>>>,
    /// The unablated model (its changes are zero).
    pub baseline: VariantResult,
    /// One entry per variant: p-RoPE values, reversed values, then masked bands, in parameter order.
    pub variants: Vec<VariantResult>,
}

/// Progress steps of [`run`]: one per prompt for the baseline and for every variant. Each is a forward pass,
/// except for a variant that shares an earlier one's rotation, whose steps pass at once.
pub fn passes(n_prompts: usize, params: &AblationParams) -> u64 {
    let variants =
        params.p_values.len() + params.reversed_p_values.len() + params.masked_bands.len();
    (n_prompts * (1 + variants)) as u64
}

/// Runs the baseline and every variant of `params` on `prompts`.
pub fn run<T: Real>(
    model: &Model<T>,
    prompts: &[Vec<u32>],
    params: &AblationParams,
    progress: &dyn Fn(u64),
) -> Result<AblationReport> {
    if prompts.is_empty() || prompts.iter().any(|p| p.len() <= params.delta_max.max(1)) {
        return Err(Error::Argument(format!(
            "the ablation needs prompts, each longer than delta_max = {} and than one token",
            params.delta_max
        )));
    }
    if let Some(p) = params
        .p_values
        .iter()
        .chain(&params.reversed_p_values)
        .find(|p| !(0.0..=1.0).contains(*p))
    {
        return Err(Error::Argument(format!("p = {p} is not in [0, 1]")));
    }
    let c = &model.config;
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    // Each layer's chunk frequencies, and the reference layer: the first with the most chunks.
    let frequencies = c.chunk_frequencies(longest);
    let reference = (0..frequencies.len())
        .rev() // `max_by_key` keeps the last maximum: reversed, the first layer with the most chunks
        .max_by_key(|&l| frequencies[l].len())
        .ok_or_else(|| Error::Malformed("the model has no layers".into()))?;
    let bands = FrequencyBands {
        low_max: params.low_band_max,
        high_min: params.high_band_min,
    };
    let masks = |v: Variant| -> Vec<Vec<bool>> {
        (frequencies.iter())
            .map(|f| v.rotated_chunks(f, &bands))
            .collect()
    };
    let variants: Vec<Variant> = (params.p_values.iter())
        .map(|&p| Variant::PRope { p })
        .chain(
            params
                .reversed_p_values
                .iter()
                .map(|&p| Variant::Reversed { p }),
        )
        .chain(
            params
                .masked_bands
                .iter()
                .map(|&band| Variant::BandMasked { band }),
        )
        .collect();
    let rotations: Vec<Vec<Vec<bool>>> = variants.iter().map(|&v| masks(v)).collect();
    let baseline_rotation = masks(Variant::Baseline);
    // Each variant's measurement: the first with its rotation measures it (the baseline first, `None`), and a
    // later one shares it.
    let measured_by: Vec<Option<usize>> = (0..variants.len())
        .map(|i| {
            (rotations[i] != baseline_rotation)
                .then(|| (0..=i).find(|&j| rotations[j] == rotations[i]))
                .flatten()
        })
        .collect();
    let own: Vec<Option<usize>> = std::iter::once(None)
        .chain(
            (0..variants.len())
                .filter(|&i| measured_by[i] == Some(i))
                .map(Some),
        )
        .collect();
    // The baseline first and alone: every matrix the passes use is then packed, or found not to fit, before
    // passes run side by side (a matrix packs itself once, under a lock, on the worker threads; a thread
    // waiting there for its packing work could take up the other pass, reach the same lock and wait on
    // itself). Then the other distinct rotations, [`super::PASSES_AT_ONCE`] at a time, each variant's prompts
    // in order into its own capture.
    let mut measured = vec![measure(model, prompts, None, params.delta_max)?];
    let mut done = prompts.len() as u64;
    progress(done);
    for group in own[1..].chunks(super::PASSES_AT_ONCE) {
        let results: Vec<Result<Measured>> = group
            .par_iter()
            .map(|&v| {
                let keep = v.map(|i| rotations[i].clone());
                measure(model, prompts, keep, params.delta_max)
            })
            .collect();
        for r in results {
            measured.push(r?);
        }
        done += (group.len() * prompts.len()) as u64;
        progress(done);
    }
    let base = measured[0].clone();
    let baseline = base.clone().result(
        Variant::Baseline,
        (baseline_rotation, reference),
        None,
        &base,
    );
    let mut results: Vec<VariantResult> = Vec::with_capacity(variants.len());
    for (i, (&variant, rotated)) in variants.iter().zip(rotations).enumerate() {
        let result = match measured_by[i] {
            Some(j) if j == i => {
                let slot = own.iter().position(|&o| o == Some(i)).expect("measured");
                (measured[slot].clone()).result(variant, (rotated, reference), None, &base)
            }
            // A rotation measured before: that result's figures, naming it.
            first => {
                let e = first.map_or(&baseline, |j| &results[j]);
                VariantResult {
                    variant,
                    same_rotation_as: Some(e.variant),
                    ..e.clone()
                }
            }
        };
        results.push(result);
    }
    // The variants that shared a measurement count as done too.
    progress(passes(prompts.len(), params));
    let band_of = |f: &Vec<f64>| -> Vec<Option<Band>> {
        f.iter()
            .map(|&g| (g != 0.0).then(|| bands.band(g)))
            .collect()
    };
    Ok(AblationReport {
        n_predicted: base.n_predicted,
        chunk_bands: band_of(&frequencies[reference]),
        layer_chunk_bands: frequencies.iter().map(band_of).collect(),
        baseline,
        variants: results,
    })
}

/// Loss and mean slash profiles of one variant.
#[derive(Clone, Debug)]
struct Measured {
    loss: f64,
    n_predicted: usize,
    /// `[layer][head][Δ]`.
    profile: Vec<Vec<Vec<f64>>>,
}

impl Measured {
    /// The result of `variant`, whose per-layer masks are `layers` (`reference` the reference layer).
    fn result(
        self,
        variant: Variant,
        (layers, reference): (Vec<Vec<bool>>, usize),
        same_rotation_as: Option<Variant>,
        base: &Measured,
    ) -> VariantResult {
        let peak = |p: &[f64]| {
            p.iter()
                .enumerate()
                .fold((0, f64::NEG_INFINITY), |best, (d, &s)| {
                    if s > best.1 {
                        (d, s)
                    } else {
                        best
                    }
                })
        };
        let per_head = |f: &dyn Fn(&[f64], &[f64]) -> f64| -> Vec<Vec<f64>> {
            self.profile
                .iter()
                .zip(&base.profile)
                .map(|(l, bl)| l.iter().zip(bl).map(|(h, bh)| f(h, bh)).collect())
                .collect()
        };
        VariantResult {
            variant,
            rotated_chunks: layers[reference].clone(),
            layer_rotated_chunks: layers,
            same_rotation_as,
            loss: self.loss,
            loss_change: self.loss - base.loss,
            peak_delta: self
                .profile
                .iter()
                .map(|l| l.iter().map(|h| peak(h).0).collect())
                .collect(),
            peak_score: per_head(&|h, _| peak(h).1),
            baseline_peak_change: per_head(&|h, bh| {
                let (d, s) = peak(bh);
                h[d] - s
            }),
            slash_profile: self.profile,
        }
    }
}

/// Runs every prompt, in order, with the rotation mask `rope_keep` (`None`: the plain model).
fn measure<T: Real>(
    model: &Model<T>,
    prompts: &[Vec<u32>],
    rope_keep: Option<Vec<Vec<bool>>>,
    delta_max: usize,
) -> Result<Measured> {
    let c = &model.config;
    let mut cap = SlashCapture::new(c.n_layers, c.n_heads, delta_max);
    let (mut nll, mut n_predicted) = (0.0, 0usize);
    for ids in prompts {
        let t = ids.len();
        let opts = ForwardOptions {
            logits_rows: 0..t - 1,
            rope_keep: rope_keep.clone(),
        };
        let out = model.forward(ids, &opts, &mut cap)?;
        // Each row's loss (a log-sum-exp over the vocabulary) on the worker threads, where the main thread kept
        // them waiting; added in row order, the same bits as a loop over the rows.
        let losses: Vec<f64> = out
            .logits
            .par_chunks(c.vocab_size)
            .zip(&ids[1..])
            .map(|(row, &target)| cross_entropy(row, target as usize))
            .collect();
        for loss in losses {
            nll += loss;
        }
        n_predicted += t - 1;
    }
    let scores = cap.scores();
    let profile = scores
        .chunks(delta_max + 1)
        .collect::<Vec<_>>()
        .chunks(c.n_heads)
        .map(|layer| layer.iter().map(|head| head.to_vec()).collect())
        .collect();
    Ok(Measured {
        loss: nll / n_predicted as f64,
        n_predicted,
        profile,
    })
}

/// `−log softmax(z)[target] = logsumexp(z) − z[target]`, in f64.
fn cross_entropy<T: Real>(logits: &[T], target: usize) -> f64 {
    let max = logits
        .iter()
        .map(|z| z.to_f64_exact())
        .fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = logits.iter().map(|z| (z.to_f64_exact() - max).exp()).sum();
    max + sum.ln() - logits[target].to_f64_exact()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_entropy_is_the_negative_log_probability_of_the_target() {
        // softmax(0, ln 2, ln 5) = (1, 2, 5) / 8; in f32 the logits are rounded, to 1e-7 relative.
        let z = [0.0, 2f64.ln(), 5f64.ln()];
        assert!((cross_entropy(&z, 1) - 4f64.ln()).abs() < 1e-15);
        let z32 = z.map(|x| x as f32);
        assert!((cross_entropy(&z32, 2) - (8.0f64 / 5.0).ln()).abs() < 1e-6);
        // Far from zero, where an unshifted exponential would overflow.
        assert!((cross_entropy(&z.map(|x| x + 1000.0), 0) - 8f64.ln()).abs() < 1e-12);
    }
}
