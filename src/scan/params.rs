//! Which analyses a scan runs and with which measurement parameters (documented defaults).

use crate::analysis::fourier::{DEFAULT_HIGH_BAND_MIN_FREQUENCY, DEFAULT_LOW_BAND_MAX_FREQUENCY};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Default largest slash offset `Δmax`: covers the diagonal, previous-token and short-offset slash heads.
pub const DEFAULT_DELTA_MAX: usize = 16;

/// Default κ of (κ, Δ)-slash dominance on real models: a sub-diagonal that receives on average 10% of every
/// row's attention, about eight times the mean diagonal mass of uniform causal attention over 512 tokens
/// (`ln N / N ≈ 0.012`). The same value as the theory checks' [`crate::analysis::slash::DEFAULT_SLASH_KAPPA`].
pub const DEFAULT_KAPPA: f64 = crate::analysis::slash::DEFAULT_SLASH_KAPPA;

/// Mean attention on the first token from which a head is labelled `sink`: half of every row.
pub const DEFAULT_SINK_THRESHOLD: f64 = 0.5;

/// Largest side of the downsampled attention maps.
pub const DEFAULT_MAP_SIZE: usize = 256;

/// Vocabulary rows sampled for the cone analysis.
pub const DEFAULT_CONE_TOKENS: usize = 2048;

/// Default prompt length in tokens.
pub const DEFAULT_PROMPT_LENGTH: usize = 512;

/// Default seed of the random prompts and of the cone sample.
pub const DEFAULT_SEED: u64 = 0;

/// One analysis of issue 6, by its CLI name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Analysis {
    /// 1. Slash and sink scores on natural prompts, slash-dominant heads.
    Slash,
    /// 2. The same on random-token prompts; overlap and correlation with natural prompts.
    Intrinsic,
    /// 3. Rank-one structure of pre-RoPE q and k.
    Rank,
    /// 4. Logit Fourier decomposition.
    Fourier,
    /// 5. Frequency usage: mean chunk norms of q, k, v.
    Frequency,
    /// 6. Positional and symbolic scores.
    Posym,
    /// 7. Head detectors (previous-token, duplicate-token, induction, diagonal, sink).
    Detectors,
    /// 8. Cauchy–Schwarz alignment tables.
    CauchySchwarz,
    /// 9. Cone condition of token embeddings.
    Cone,
    /// 10. Frequency ablation at inference.
    Ablation,
}

impl Analysis {
    /// All analyses in issue order.
    pub const ALL: [Analysis; 10] = [
        Analysis::Slash,
        Analysis::Intrinsic,
        Analysis::Rank,
        Analysis::Fourier,
        Analysis::Frequency,
        Analysis::Posym,
        Analysis::Detectors,
        Analysis::CauchySchwarz,
        Analysis::Cone,
        Analysis::Ablation,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Analysis::Slash => "slash",
            Analysis::Intrinsic => "intrinsic",
            Analysis::Rank => "rank",
            Analysis::Fourier => "fourier",
            Analysis::Frequency => "frequency",
            Analysis::Posym => "posym",
            Analysis::Detectors => "detectors",
            Analysis::CauchySchwarz => "cauchy-schwarz",
            Analysis::Cone => "cone",
            Analysis::Ablation => "ablation",
        }
    }

    /// Whether this build contains the analysis.
    pub fn available(self) -> bool {
        !super::external::is_external(self) || super::external::is_built(self)
    }

    /// The available analyses, the default set of a scan.
    pub fn defaults() -> Vec<Analysis> {
        Analysis::ALL
            .into_iter()
            .filter(|a| a.available())
            .collect()
    }

    /// Parses a comma-separated list of names (or `all`); an unknown or unavailable name is an error.
    pub fn parse_list(spec: &str) -> Result<Vec<Analysis>> {
        if spec.trim() == "all" {
            return Ok(Self::defaults());
        }
        let mut out = Vec::new();
        for name in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let a = Analysis::ALL
                .into_iter()
                .find(|a| a.name() == name)
                .ok_or_else(|| {
                    let names: Vec<&str> = Analysis::ALL.iter().map(|a| a.name()).collect();
                    Error::Argument(format!(
                        "unknown analysis '{name}' (known: {})",
                        names.join(", ")
                    ))
                })?;
            if !a.available() {
                return Err(Error::Unsupported(format!(
                    "analysis {name} is not available in this build"
                )));
            }
            if !out.contains(&a) {
                out.push(a);
            }
        }
        if out.is_empty() {
            return Err(Error::Argument("no analysis selected".into()));
        }
        // Cauchy–Schwarz tables the heads the slash scores label diagonal or previous-token.
        if out.contains(&Analysis::CauchySchwarz) && !out.contains(&Analysis::Slash) {
            out.push(Analysis::Slash);
        }
        out.sort();
        Ok(out)
    }
}

impl fmt::Display for Analysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything a scan measures with, besides the model and the prompts: the analyses it runs, and the
/// measurement parameters `meta.json` records as `parameters` (its field order is the file's; the analyses are
/// recorded beside them, as `analyses`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanParams {
    /// Analyses to run (sorted, available ones only).
    #[serde(skip, default = "Analysis::defaults")]
    pub analyses: Vec<Analysis>,
    /// Largest offset `Δ` of the slash scores.
    pub delta_max: usize,
    /// κ of (κ, Δ)-slash dominance.
    pub kappa: f64,
    /// A chunk is low-frequency when `g_l` is below this (radians per token).
    pub low_band_max_frequency: f64,
    /// A chunk is high-frequency when `g_l` is at or above this; medium between the edges.
    pub high_band_min_frequency: f64,
    /// Mean attention on key 0 from which a head is labelled `sink`.
    pub sink_threshold: f64,
    /// Side of the downsampled attention maps (at most).
    pub map_size: usize,
    /// Number of vocabulary rows sampled for the cone analysis.
    pub cone_tokens: usize,
    /// Seed of the random prompts, the cone sample and the claims' bootstrap.
    pub seed: u64,
    /// Target length of each natural prompt, tokens (text prompts are continued cyclically up to it).
    pub prompt_length: usize,
}

impl Default for ScanParams {
    fn default() -> Self {
        Self {
            analyses: Analysis::defaults(),
            delta_max: DEFAULT_DELTA_MAX,
            kappa: DEFAULT_KAPPA,
            low_band_max_frequency: DEFAULT_LOW_BAND_MAX_FREQUENCY,
            high_band_min_frequency: DEFAULT_HIGH_BAND_MIN_FREQUENCY,
            sink_threshold: DEFAULT_SINK_THRESHOLD,
            map_size: DEFAULT_MAP_SIZE,
            cone_tokens: DEFAULT_CONE_TOKENS,
            seed: DEFAULT_SEED,
            prompt_length: DEFAULT_PROMPT_LENGTH,
        }
    }
}

impl ScanParams {
    /// Whether `a` is selected.
    pub fn runs(&self, a: Analysis) -> bool {
        self.analyses.contains(&a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cauchy_schwarz_brings_the_slash_scores_that_choose_its_heads() {
        assert_eq!(
            Analysis::parse_list("cauchy-schwarz").unwrap(),
            vec![Analysis::Slash, Analysis::CauchySchwarz]
        );
        assert_eq!(Analysis::parse_list("rank").unwrap(), vec![Analysis::Rank]);
    }
}
