//! Detection patterns as sparse rows: for each query `i`, the keys `j` with `D[i, j] = 1`.

use serde::Serialize;
use std::collections::HashMap;

/// A detection pattern (see the parent module for each definition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// `D[i, i−1] = 1`.
    PreviousToken = 0,
    /// `D[i, j] = 1` for `j < i` with `x_j = x_i`.
    DuplicateToken = 1,
    /// `D[i, j] = 1` for `1 ≤ j ≤ i` with `x_{j−1} = x_i` and `j − 1 < i`.
    Induction = 2,
    /// `D[i, i] = 1`.
    Diagonal = 3,
    /// `D[i, 0] = 1` (attention to BOS, the usual sink).
    Sink = 4,
}

/// Every pattern, in the order of their discriminants (the index of a pattern's scores in reports).
pub const PATTERNS: [Pattern; 5] = [
    Pattern::PreviousToken,
    Pattern::DuplicateToken,
    Pattern::Induction,
    Pattern::Diagonal,
    Pattern::Sink,
];

/// The earlier occurrences of every token of one sequence, in `O(T)` memory.
#[derive(Clone, Debug)]
pub struct SequenceIndex {
    /// Positions of each distinct token, increasing.
    occurrences: Vec<Vec<usize>>,
    /// For position `i`: its token's group in `occurrences` and its rank there (how many earlier copies).
    place: Vec<(usize, usize)>,
}

impl SequenceIndex {
    /// Indexes `ids`.
    pub fn new(ids: &[u32]) -> Self {
        let mut group_of: HashMap<u32, usize> = HashMap::new();
        let mut occurrences: Vec<Vec<usize>> = Vec::new();
        let place = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let g = *group_of.entry(*id).or_insert_with(|| {
                    occurrences.push(Vec::new());
                    occurrences.len() - 1
                });
                occurrences[g].push(i);
                (g, occurrences[g].len() - 1)
            })
            .collect();
        Self { occurrences, place }
    }

    /// Calls `f(j)` for every `j` with `D[i, j] = 1` in `pattern`, increasing.
    pub fn for_each_target(&self, pattern: Pattern, i: usize, mut f: impl FnMut(usize)) {
        let (g, rank) = self.place[i];
        let earlier = &self.occurrences[g][..rank];
        match pattern {
            Pattern::PreviousToken if i > 0 => f(i - 1),
            Pattern::PreviousToken => {}
            Pattern::DuplicateToken => earlier.iter().for_each(|&j| f(j)),
            Pattern::Induction => earlier.iter().for_each(|&j| f(j + 1)),
            Pattern::Diagonal => f(i),
            Pattern::Sink => f(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(index: &SequenceIndex, pattern: Pattern, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        index.for_each_target(pattern, i, |j| out.push(j));
        out
    }

    #[test]
    fn patterns_follow_transformer_lens() {
        // x = a b a b a
        let index = SequenceIndex::new(&[1, 2, 1, 2, 1]);
        assert_eq!(targets(&index, Pattern::DuplicateToken, 4), vec![0, 2]);
        assert_eq!(targets(&index, Pattern::Induction, 4), vec![1, 3]);
        assert_eq!(targets(&index, Pattern::Induction, 0), Vec::<usize>::new());
        assert_eq!(
            targets(&index, Pattern::PreviousToken, 0),
            Vec::<usize>::new()
        );
        assert_eq!(targets(&index, Pattern::PreviousToken, 3), vec![2]);
        // x = a a: the induction target of row 1 is j = 1 (x_0 = x_1), on the diagonal, as in TransformerLens.
        let index = SequenceIndex::new(&[5, 5]);
        assert_eq!(targets(&index, Pattern::Induction, 1), vec![1]);
    }
}
