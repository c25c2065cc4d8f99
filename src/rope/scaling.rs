//! The ways real checkpoints rescale RoPE's frequencies, each computed as HF transformers'
//! `modeling_rope_utils` computes it (`ROPE_INIT_FUNCTIONS`), but in f64 throughout.
//!
//! With `d` the rotated dimension, plain RoPE's frequency of chunk `l` is `p_l⁻¹` with `p_l = base^(2l/d)`.
//!
//! | variant | frequency `g_l` | magnitude |
//! |---|---|---|
//! | none | `1 / p_l` | 1 |
//! | linear (factor `s`) | `(1 / p_l) / s` | 1 |
//! | per-chunk factors `f_l` (llama.cpp's `rope_freqs.weight`) | `(1 / p_l) / f_l` | 1 |
//! | Llama 3 (factor `s`, band factors `a < b`, original context `L`) | `1/p_l` where `λ_l = 2π p_l < L/b`; `(1/p_l)/s` where `λ_l > L/a`; else `(1 − t)(1/p_l)/s + t/p_l` with `t = (L/λ_l − a)/(b − a)` | 1 |
//! | YaRN (factor `s`, original context `L`, `β_fast`, `β_slow`) | `(1/(s p_l))·r_l + (1/p_l)·(1 − r_l)`, `r_l` the ramp below | `0.1 ln s + 1` (1 when `s ≤ 1`), or the file's explicit factor |
//! | LongRoPE (short `a_l`, long `b_l`, original context `L`) | `1 / (a_l p_l)` for `T ≤ L`, `1 / (b_l p_l)` for `T > L` | `sqrt(1 + ln(C/L) / ln L)` for context `C > L`, or the file's |
//!
//! YaRN's ramp: with `c(β) = d · ln(L / (2π β)) / (2 ln base)`, `lo = max(⌊c(β_fast)⌋, 0)` and
//! `hi = min(⌈c(β_slow)⌉, d − 1)` (`hi += 0.001` when equal), `r_l = clamp((l − lo) / (hi − lo), 0, 1)`: chunks
//! below `lo` keep their frequency (extrapolation), chunks above `hi` are divided by `s` (interpolation).
//! LongRoPE chooses its factors by the length `T` of the sequence being run, as HF does (llama.cpp chooses them
//! by its allocated context instead).

use serde::Serialize;

/// YaRN parameters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Yarn {
    /// Context extension factor `s`.
    pub factor: f64,
    /// Context length the model was pre-trained for, `L`.
    pub original_context: usize,
    /// Rotations above which a chunk keeps its frequency (HF default 32).
    pub beta_fast: f64,
    /// Rotations below which a chunk is fully interpolated (HF default 1).
    pub beta_slow: f64,
    /// Explicit magnitude; `None` computes `0.1 ln s + 1`.
    pub attention_factor: Option<f64>,
    /// Whether the ramp's ends are rounded outwards to whole chunks (HF's default `truncate: true`; GPT-OSS
    /// keeps them fractional).
    pub truncate: bool,
}

/// Llama 3.1's RoPE scaling parameters (HF `rope_type = "llama3"`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Llama3 {
    /// Divisor of the low-frequency band, `s`.
    pub factor: f64,
    /// `low_freq_factor`, `a`: wavelengths above `L / a` are divided by `s`.
    pub low_freq_factor: f64,
    /// `high_freq_factor`, `b`: wavelengths below `L / b` are kept.
    pub high_freq_factor: f64,
    /// Context length the model was pre-trained for, `L`.
    pub original_context: usize,
}

impl Llama3 {
    /// The frequencies, in the order of operations of HF's `_compute_llama3_parameters`.
    pub fn frequencies(&self, base: f64, rot_dim: usize) -> Vec<f64> {
        let old = self.original_context as f64;
        let (a, b, s) = (self.low_freq_factor, self.high_freq_factor, self.factor);
        let (low_wavelen, high_wavelen) = (old / a, old / b);
        plain_frequencies(base, rot_dim)
            .into_iter()
            .map(|g| {
                // PyTorch evaluates `scalar / tensor` as `reciprocal(tensor) * scalar`; so does this, to the bit.
                let wavelen = (1.0 / g) * (2.0 * std::f64::consts::PI);
                if wavelen > low_wavelen {
                    g / s
                } else if wavelen < high_wavelen {
                    g
                } else {
                    let t = ((1.0 / wavelen) * old - a) / (b - a);
                    (1.0 - t) * g / s + t * g
                }
            })
            .collect()
    }

    /// The per-chunk divisors `g_plain / g` these parameters give (what llama.cpp's `rope_freqs.weight` holds).
    pub fn divisors(&self, base: f64, rot_dim: usize) -> Vec<f64> {
        plain_frequencies(base, rot_dim)
            .iter()
            .zip(self.frequencies(base, rot_dim))
            .map(|(p, g)| p / g)
            .collect()
    }
}

/// Phi-3's LongRoPE parameters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LongRope {
    /// Per-chunk divisors for sequences of at most `original_context` tokens.
    pub short: Vec<f64>,
    /// Per-chunk divisors for longer sequences.
    pub long: Vec<f64>,
    /// Context length the model was pre-trained for, `L`.
    pub original_context: usize,
    /// Magnitude of the rotation, for short and long sequences alike.
    pub attention_factor: f64,
}

/// How a layer rescales plain RoPE.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Scaling {
    /// Plain RoPE.
    None,
    /// Every frequency divided by `factor` (position interpolation).
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// Chunk `l`'s frequency divided by `factors[l]` (llama.cpp's `rope_freqs.weight`; Llama 3.1's scaling).
    Factors {
        /// One divisor per chunk.
        factors: Vec<f64>,
    },
    /// Llama 3.1's smoothed per-band scaling.
    Llama3(Llama3),
    /// YaRN.
    Yarn(Yarn),
    /// LongRoPE.
    #[serde(rename = "longrope")]
    LongRope(LongRope),
    /// Proportional RoPE (Gemma 4's global layers; the p-RoPE of *Round and Round We Go!*): the first `rotated`
    /// chunks keep their plain frequencies `base^(−2l/d)`, the exponent over the whole head, and every later
    /// chunk has frequency 0, so it passes through unrotated.
    Proportional {
        /// Chunks that rotate.
        rotated: usize,
    },
}

/// Plain RoPE frequencies `1 / base^(2l/d)` for `l < d/2`, in HF's order of operations.
pub fn plain_frequencies(base: f64, rot_dim: usize) -> Vec<f64> {
    (0..rot_dim / 2)
        .map(|l| 1.0 / base.powf((2 * l) as f64 / rot_dim as f64))
        .collect()
}

impl Scaling {
    /// The name of the variant (`none`, `linear`, `factors`, `yarn`, `longrope`).
    pub fn name(&self) -> &'static str {
        match self {
            Scaling::None => "none",
            Scaling::Linear { .. } => "linear",
            Scaling::Factors { .. } => "factors",
            Scaling::Llama3(_) => "llama3",
            Scaling::Yarn(_) => "yarn",
            Scaling::LongRope(_) => "longrope",
            Scaling::Proportional { .. } => "proportional",
        }
    }

    /// The per-chunk frequencies and the magnitude for RoPE of `base` over `rot_dim` dimensions, for a sequence
    /// of `n_tokens` positions.
    pub fn frequencies(&self, base: f64, rot_dim: usize, n_tokens: usize) -> (Vec<f64>, f64) {
        let plain = plain_frequencies(base, rot_dim);
        match self {
            Scaling::None => (plain, 1.0),
            Scaling::Linear { factor } => (plain.iter().map(|g| g / factor).collect(), 1.0),
            Scaling::Factors { factors } => {
                (plain.iter().zip(factors).map(|(g, f)| g / f).collect(), 1.0)
            }
            Scaling::Llama3(l) => (l.frequencies(base, rot_dim), 1.0),
            Scaling::Yarn(y) => (y.frequencies(base, rot_dim), y.magnitude()),
            Scaling::LongRope(r) => {
                let factors = if n_tokens > r.original_context {
                    &r.long
                } else {
                    &r.short
                };
                let d = rot_dim as f64;
                let g = factors
                    .iter()
                    .enumerate()
                    .map(|(l, a)| 1.0 / (a * base.powf((2 * l) as f64 / d)))
                    .collect();
                (g, r.attention_factor)
            }
            Scaling::Proportional { rotated } => {
                let g = plain.iter().enumerate();
                (
                    g.map(|(l, &g)| if l < *rotated { g } else { 0.0 })
                        .collect(),
                    1.0,
                )
            }
        }
    }

    /// Whether the frequencies depend on the sequence length (LongRoPE), and above which length they change.
    pub fn switches_above(&self) -> Option<usize> {
        match self {
            Scaling::LongRope(r) => Some(r.original_context),
            _ => None,
        }
    }
}

impl Yarn {
    /// The magnitude: the explicit attention factor, else `0.1 ln s + 1` (1 for `s ≤ 1`).
    pub fn magnitude(&self) -> f64 {
        match self.attention_factor {
            Some(m) => m,
            None if self.factor <= 1.0 => 1.0,
            None => 0.1 * self.factor.ln() + 1.0,
        }
    }

    /// The ramp's chunk range `(lo, hi)`, rounded outwards to whole chunks when [`Yarn::truncate`].
    pub fn correction_range(&self, base: f64, rot_dim: usize) -> (f64, f64) {
        let d = rot_dim as f64;
        let dim_of = |rotations: f64| {
            d * (self.original_context as f64 / (rotations * 2.0 * std::f64::consts::PI)).ln()
                / (2.0 * base.ln())
        };
        let (lo, hi) = (dim_of(self.beta_fast), dim_of(self.beta_slow));
        let (lo, hi) = match self.truncate {
            true => (lo.floor(), hi.ceil()),
            false => (lo, hi),
        };
        (lo.max(0.0), hi.min(d - 1.0))
    }

    fn frequencies(&self, base: f64, rot_dim: usize) -> Vec<f64> {
        let (lo, mut hi) = self.correction_range(base, rot_dim);
        if lo == hi {
            hi += 0.001;
        }
        let d = rot_dim as f64;
        (0..rot_dim / 2)
            .map(|l| {
                let p = base.powf((2 * l) as f64 / d);
                let extrapolation = 1.0 / p;
                let interpolation = 1.0 / (self.factor * p);
                let ramp = ((l as f64 - lo) / (hi - lo)).clamp(0.0, 1.0);
                let keep = 1.0 - ramp;
                interpolation * (1.0 - keep) + extrapolation * keep
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yarn(factor: f64) -> Yarn {
        Yarn {
            factor,
            original_context: 2048,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attention_factor: None,
            truncate: true,
        }
    }

    #[test]
    fn yarn_keeps_fast_chunks_and_interpolates_slow_ones() {
        let y = yarn(4.0);
        let (g, m) = Scaling::Yarn(y.clone()).frequencies(10_000.0, 32, 0);
        let plain = plain_frequencies(10_000.0, 32);
        let (lo, hi) = y.correction_range(10_000.0, 32);
        // c(32) = 32 ln(2048 / 64π) / (2 ln 1e4) = 4.03, c(1) = 10.06.
        assert_eq!((lo, hi), (4.0, 11.0));
        assert_eq!(&g[..5], &plain[..5]);
        for l in 11..16 {
            assert!((g[l] * 4.0 / plain[l] - 1.0).abs() < 1e-15);
        }
        assert!((m - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-15);
        assert!(g.windows(2).all(|w| w[0] > w[1]));
    }

    /// Without truncation (GPT-OSS) the ramp runs between the fractional ends 4.03 and 10.06, where the
    /// truncated ramp runs from 4 to 11: chunk 4 keeps its frequency either way, chunks 5 to 10 are interpolated
    /// by other amounts (chunk 10 nearly wholly), chunk 11 wholly in both.
    #[test]
    fn yarn_without_truncation_keeps_the_fractional_ends() {
        let y = Yarn {
            truncate: false,
            ..yarn(4.0)
        };
        let (lo, hi) = y.correction_range(10_000.0, 32);
        let at =
            |r: f64| 32.0 * (2048.0 / (r * 2.0 * std::f64::consts::PI)).ln() / (2.0 * 1e4f64.ln());
        assert_eq!((lo, hi), (at(32.0), at(1.0)));
        assert!((4.02..4.04).contains(&lo) && (10.05..10.07).contains(&hi));
        let (g, _) = Scaling::Yarn(y).frequencies(10_000.0, 32, 0);
        let (truncated, _) = Scaling::Yarn(yarn(4.0)).frequencies(10_000.0, 32, 0);
        let plain = plain_frequencies(10_000.0, 32);
        assert_eq!(g[4], plain[4]);
        assert!(g[5] < plain[5] && g[5] > plain[5] / 4.0 && g[5] != truncated[5]);
        assert!(g[10] > plain[10] / 4.0 && g[10] < truncated[10]);
        assert_eq!(g[11], truncated[11]);
    }

    #[test]
    fn longrope_switches_factors_above_the_original_context() {
        let r = Scaling::LongRope(LongRope {
            short: vec![1.0, 2.0],
            long: vec![3.0, 4.0],
            original_context: 16,
            attention_factor: 1.2,
        });
        let (short, m) = r.frequencies(100.0, 4, 16);
        let (long, _) = r.frequencies(100.0, 4, 17);
        assert_eq!(short, vec![1.0, 1.0 / (2.0 * 10.0)]);
        assert_eq!(long, vec![1.0 / 3.0, 1.0 / (4.0 * 10.0)]);
        assert_eq!(m, 1.2);
        assert_eq!(r.switches_above(), Some(16));
    }
}
