//! Frequency gating: the RoPE chunks an attention head may use.

use serde::Serialize;
use std::fmt;

/// The set of RoPE chunks (0 = fastest) a head may use. The other chunks are masked to zero in its rotated queries
/// and keys, so they contribute nothing to the logits ("frequency gating" of Decoupling Positional and Symbolic
/// Attention; "RoPE restricted to low frequencies" of Demystifying the Slash Pattern).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "Vec<usize>")]
pub struct ChunkGate {
    keep: Vec<bool>,
}

/// Why a gate specification was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// A chunk index is not below the number of chunks.
    #[error("chunk {chunk} does not exist: the head has chunks 0..={last}")]
    OutOfRange {
        /// The offending chunk.
        chunk: usize,
        /// The last valid chunk.
        last: usize,
    },
    /// The specification keeps no chunk at all.
    #[error("the gate keeps no chunk")]
    Empty,
    /// A part of the specification is neither `N` nor `A-B`.
    #[error("cannot read {0:?} as a chunk or a range `A-B` (example: `0,3-5`)")]
    Syntax(String),
}

impl ChunkGate {
    /// Keeps every one of `n_chunks` chunks (plain RoPE).
    pub fn all(n_chunks: usize) -> Self {
        Self {
            keep: vec![true; n_chunks],
        }
    }

    /// Keeps exactly `chunks` out of `n_chunks`.
    pub fn from_chunks(n_chunks: usize, chunks: &[usize]) -> Result<Self, GateError> {
        let mut keep = vec![false; n_chunks];
        for &c in chunks {
            *keep.get_mut(c).ok_or(GateError::OutOfRange {
                chunk: c,
                last: n_chunks.saturating_sub(1),
            })? = true;
        }
        if !keep.contains(&true) {
            return Err(GateError::Empty);
        }
        Ok(Self { keep })
    }

    /// Reads a comma-separated list of chunks and inclusive ranges, such as `0,3-5`.
    pub fn parse(spec: &str, n_chunks: usize) -> Result<Self, GateError> {
        let mut chunks = Vec::new();
        for part in spec.split(',').map(str::trim) {
            let number = |s: &str| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|_| GateError::Syntax(part.to_string()))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        return Err(GateError::Syntax(part.to_string()));
                    }
                    if b >= n_chunks {
                        return Err(GateError::OutOfRange {
                            chunk: b,
                            last: n_chunks.saturating_sub(1),
                        });
                    }
                    chunks.extend(a..=b);
                }
                None => chunks.push(number(part)?),
            }
        }
        Self::from_chunks(n_chunks, &chunks)
    }

    /// Number of chunks of the head (kept or not).
    pub fn n_chunks(&self) -> usize {
        self.keep.len()
    }

    /// Whether chunk `l` is kept.
    pub fn keeps(&self, l: usize) -> bool {
        self.keep[l]
    }

    /// The kept chunks, in increasing order.
    pub fn chunks(&self) -> Vec<usize> {
        (0..self.keep.len()).filter(|&l| self.keep[l]).collect()
    }
}

impl From<ChunkGate> for Vec<usize> {
    fn from(gate: ChunkGate) -> Self {
        gate.chunks()
    }
}

impl fmt::Display for ChunkGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.chunks().iter().map(usize::to_string).collect();
        write!(f, "{}", list.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        let g = ChunkGate::parse("0, 3-5", 8).unwrap();
        assert_eq!(g.chunks(), vec![0, 3, 4, 5]);
        assert_eq!(g.to_string(), "0,3,4,5");
        assert_eq!(g.n_chunks(), 8);
        let kept: Vec<bool> = (0..8).map(|l| g.keeps(l)).collect();
        assert_eq!(kept, [true, false, false, true, true, true, false, false]);
        assert_eq!(Vec::<usize>::from(g), vec![0, 3, 4, 5]);
        assert_eq!(ChunkGate::all(3).chunks(), vec![0, 1, 2]);
    }

    #[test]
    fn rejects_bad_specifications() {
        assert!(matches!(
            ChunkGate::parse("8", 8),
            Err(GateError::OutOfRange { chunk: 8, last: 7 })
        ));
        // A range is checked before it is expanded.
        assert!(matches!(
            ChunkGate::parse("0-4000000000", 8),
            Err(GateError::OutOfRange {
                chunk: 4_000_000_000,
                last: 7
            })
        ));
        assert!(matches!(
            ChunkGate::parse("x", 8),
            Err(GateError::Syntax(_))
        ));
        assert!(matches!(
            ChunkGate::parse("5-3", 8),
            Err(GateError::Syntax(_))
        ));
        assert_eq!(ChunkGate::from_chunks(8, &[]), Err(GateError::Empty));
    }
}
