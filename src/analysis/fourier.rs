//! The logit of a RoPE head as a sum of cosines, one per chunk (the slash paper's Fourier-like decomposition).
//!
//! Write chunk `l` of the pre-RoPE query and key as complex numbers `q^(l) = |q^(l)| e^{iα_l}`,
//! `k^(l) = |k^(l)| e^{iβ_l}` (first coordinate of the chunk real, second imaginary). RoPE multiplies chunk `l` at
//! position `p` by `e^{i p g_l}`, so the logit between a query at position `i` and a key at position `j` is
//!
//! `a[i,j] = Σ_l A_l cos(g_l (i − j) + φ_l) + c`,  `A_l = |q^(l)| |k^(l)|`,  `φ_l = α_l − β_l`,
//!
//! where `c` is the plain dot product of the coordinates that do not rotate (partial rotary, `d_rot < d`).
//! Chunks are found through [`RopeSpec::chunk_dims`], so the decomposition holds for both pairings.
//!
//! The coordinates that never rotate ([`RopeSpec::unrotated_dims`]: those past `d_rot`, and the chunks of
//! frequency 0 that p-RoPE leaves still) form the logit's position-free part. Band shares count them apart, as
//! one "NoPE" share of amplitude `|q_u| |k_u|` (the norms of the query's and key's unrotated parts, the most
//! that part can add to the logit), so that the bands are shares over the chunks that really turn.

use crate::rope::RopeSpec;
use serde::Serialize;

/// Default upper edge of the low band: chunks with `g_l` below it rotate by less than one radian over
/// 100 tokens (wavelength above 628 tokens). The slash paper does not publish its band edges; this is ours.
pub const DEFAULT_LOW_BAND_MAX_FREQUENCY: f64 = 0.01;

/// Default lower edge of the high band: chunks with `g_l` at or above it complete a turn within 63 tokens.
/// Chunks between the two edges form the medium band. Our choice, as for the low edge.
pub const DEFAULT_HIGH_BAND_MIN_FREQUENCY: f64 = 0.1;

/// One chunk's term `A_l cos(g_l (i − j) + φ_l)` of the logit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChunkTerm {
    /// Angular frequency `g_l` of the chunk (radians per token).
    pub frequency: f64,
    /// Amplitude `A_l = |q^(l)| |k^(l)|`.
    pub amplitude: f64,
    /// Phase `φ_l = α_l − β_l` in `(−2π, 2π)`.
    pub phase: f64,
}

/// The decomposition of one query–key pair's logit over relative position.
#[derive(Clone, Debug, PartialEq)]
pub struct LogitSpectrum {
    /// One term per rotating chunk, indexed by chunk (0 = fastest).
    pub terms: Vec<ChunkTerm>,
    /// Dot product of the coordinates past `d_rot` (0 for full RoPE); chunks of frequency 0 are in `terms`.
    pub unrotated: f64,
    /// `|q_u| |k_u|` over every coordinate that never rotate ([`RopeSpec::unrotated_dims`]): the amplitude
    /// of the logit's position-free part (0 for full RoPE).
    pub unrotated_amplitude: f64,
}

/// Frequency bands for the frequency-dominance statistic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrequencyBands {
    /// A chunk is low-frequency when `g_l < low_max`.
    pub low_max: f64,
    /// A chunk is high-frequency when `g_l ≥ high_min`; medium otherwise.
    pub high_min: f64,
}

/// A frequency band of [`FrequencyBands`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Band {
    /// `g_l < low_max`.
    Low,
    /// `low_max ≤ g_l < high_min`.
    Medium,
    /// `g_l ≥ high_min`.
    High,
}

impl FrequencyBands {
    /// The band of angular frequency `g`.
    pub fn band(&self, g: f64) -> Band {
        if g < self.low_max {
            Band::Low
        } else if g < self.high_min {
            Band::Medium
        } else {
            Band::High
        }
    }
}

impl Default for FrequencyBands {
    fn default() -> Self {
        Self {
            low_max: DEFAULT_LOW_BAND_MAX_FREQUENCY,
            high_min: DEFAULT_HIGH_BAND_MIN_FREQUENCY,
        }
    }
}

/// Share of a total (amplitude `Σ_l A_l`, or chunk norms) in each band and in the part that does not rotate
/// (the four shares sum to 1 when any value is non-zero).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandShares {
    /// Share of chunks with `0 < g_l < low_max`.
    pub low: f64,
    /// Share of chunks with `low_max ≤ g_l < high_min`.
    pub medium: f64,
    /// Share of chunks with `g_l ≥ high_min`.
    pub high: f64,
    /// Share of the coordinates that never rotate (0 for full RoPE).
    pub nope: f64,
}

impl BandShares {
    /// Shares of the total over `(frequency g, value v)` chunk pairs and the value `unrotated` of the coordinates
    /// that never rotate: `0 < g < low_max` is low, `low_max ≤ g < high_min` medium, `g ≥ high_min` high; a
    /// chunk of `g = 0` is left out, its coordinates being part of `unrotated`. All zero when the total is zero.
    pub fn of(
        terms: impl IntoIterator<Item = (f64, f64)>,
        unrotated: f64,
        bands: &FrequencyBands,
    ) -> Self {
        let mut shares = BandShares {
            low: 0.0,
            medium: 0.0,
            high: 0.0,
            nope: unrotated,
        };
        for (g, v) in terms.into_iter().filter(|&(g, _)| g != 0.0) {
            let slot = match bands.band(g) {
                Band::Low => &mut shares.low,
                Band::Medium => &mut shares.medium,
                Band::High => &mut shares.high,
            };
            *slot += v;
        }
        let total = shares.low + shares.medium + shares.high + shares.nope;
        if total > 0.0 {
            shares.low /= total;
            shares.medium /= total;
            shares.high /= total;
            shares.nope /= total;
        }
        shares
    }
}

/// Decomposes the logit of pre-RoPE `q` and `k` (both of length `spec.head_dim`) into per-chunk cosines.
///
/// # Panics
/// If `q` or `k` does not have length `spec.head_dim`.
#[track_caller]
pub fn logit_spectrum(spec: &RopeSpec, q: &[f64], k: &[f64]) -> LogitSpectrum {
    assert_eq!(q.len(), spec.head_dim, "query length must be head_dim");
    assert_eq!(k.len(), spec.head_dim, "key length must be head_dim");
    let terms = (0..spec.n_chunks())
        .map(|l| {
            let (a, b) = spec.chunk_dims(l);
            ChunkTerm {
                frequency: spec.frequency::<f64>(l),
                amplitude: q[a].hypot(q[b]) * k[a].hypot(k[b]),
                phase: q[b].atan2(q[a]) - k[b].atan2(k[a]),
            }
        })
        .collect();
    let unrotated = (spec.rot_dim..spec.head_dim).map(|d| q[d] * k[d]).sum();
    let still = spec.unrotated_dims();
    let norm = |x: &[f64]| (still.iter()).map(|&d| x[d] * x[d]).sum::<f64>().sqrt();
    LogitSpectrum {
        terms,
        unrotated,
        unrotated_amplitude: norm(q) * norm(k),
    }
}

impl LogitSpectrum {
    /// The logit at relative position `offset = i − j`: `Σ_l A_l cos(g_l · offset + φ_l) + c`.
    pub fn logit(&self, offset: f64) -> f64 {
        let rotating: f64 = self
            .terms
            .iter()
            .map(|t| t.amplitude * (t.frequency * offset + t.phase).cos())
            .sum();
        rotating + self.unrotated
    }

    /// Share of the amplitude in the low, medium and high bands and in the unrotated part
    /// ([`LogitSpectrum::unrotated_amplitude`]); all zero when every amplitude is zero.
    pub fn band_shares(&self, bands: &FrequencyBands) -> BandShares {
        BandShares::of(
            self.terms.iter().map(|t| (t.frequency, t.amplitude)),
            self.unrotated_amplitude,
            bands,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::Pairing;

    #[test]
    fn single_chunk_phase_is_query_angle_minus_key_angle() {
        let spec = RopeSpec::new(2, 10000.0, Pairing::Adjacent);
        let s = logit_spectrum(&spec, &[0.0, 2.0], &[3.0, 0.0]);
        assert_eq!(s.terms[0].amplitude, 6.0);
        assert!((s.terms[0].phase - std::f64::consts::FRAC_PI_2).abs() < 1e-15);
        let shares = s.band_shares(&FrequencyBands::default());
        assert_eq!((shares.low, shares.medium, shares.high), (0.0, 0.0, 1.0));
    }

    #[test]
    fn band_shares_split_at_the_edges_and_are_zero_without_amplitude() {
        let bands = FrequencyBands::default();
        let (low, high) = (bands.low_max, bands.high_min);
        let shares = BandShares::of(
            [(low.next_down(), 1.0), (low, 2.0), (high, 5.0)],
            0.0,
            &bands,
        );
        assert_eq!(
            (shares.low, shares.medium, shares.high, shares.nope),
            (0.125, 0.25, 0.625, 0.0)
        );
        // A chunk of frequency 0 is the unrotated part's, not the low band's.
        let still = BandShares::of([(0.0, 4.0), (high, 2.0)], 6.0, &bands);
        assert_eq!((still.low, still.high, still.nope), (0.0, 0.25, 0.75));
        // No amplitude at all (a zero query or key): zeros, not 0/0.
        let none = BandShares::of([(low, 0.0), (high, 0.0)], 0.0, &bands);
        assert_eq!((none.low, none.medium, none.high), (0.0, 0.0, 0.0));
    }

    /// The default edges are the documented rotations: the low band ends at one radian per 100 tokens, the high
    /// band starts at one radian per 10 tokens (a turn in `20π ≈ 63` tokens). A frequency a relative
    /// `EDGE_STEP` below an edge is in the band below it, one as far above it in the band above.
    #[test]
    fn default_band_edges_are_one_radian_per_100_and_per_10_tokens() {
        /// Relative step to either side of an edge: far above rounding, far below any moved edge.
        const EDGE_STEP: f64 = 1e-9;
        let bands = FrequencyBands::default();
        let (low_edge, high_edge) = (1.0 / 100.0, 1.0 / 10.0);
        assert!((2.0 * std::f64::consts::PI / high_edge - 62.83).abs() < 0.01);
        for (edge, below, above) in [
            (low_edge, Band::Low, Band::Medium),
            (high_edge, Band::Medium, Band::High),
        ] {
            assert_eq!(bands.band(edge * (1.0 - EDGE_STEP)), below, "below {edge}");
            assert_eq!(bands.band(edge * (1.0 + EDGE_STEP)), above, "above {edge}");
        }
    }

    /// p-RoPE's still chunks and a partial rotation's tail form one unrotated part, of amplitude `|q_u| |k_u|`.
    #[test]
    fn the_unrotated_part_is_the_tail_and_the_still_chunks() {
        let mut spec = RopeSpec::partial(8, 6, 10000.0, Pairing::HalfSplit);
        spec.inv_freq[2] = 0.0;
        assert_eq!(spec.unrotated_dims(), [2, 5, 6, 7]);
        let q = [1.0, 1.0, 3.0, 1.0, 1.0, 4.0, 0.0, 0.0];
        let k = [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 2.0, 0.0];
        let s = logit_spectrum(&spec, &q, &k);
        assert_eq!(s.unrotated_amplitude, 5.0 * 2.0);
        assert_eq!(s.unrotated, 0.0);
        let shares = s.band_shares(&FrequencyBands::default());
        // Chunks 0 and 1 each have amplitude √2·√2 = 2: 14 in all.
        assert!((shares.nope - 10.0 / 14.0).abs() < 1e-15);
    }
}
