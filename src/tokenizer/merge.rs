//! The BPE merge loop shared by both tokenizer models.
//!
//! Written out rather than taken from a crate because its exact order of merges decides the ids: it follows HF
//! tokenizers' `Word::merge_all` step for step (lowest rank first, then leftmost; a queued merge is applied as
//! long as the pair now at its position still merges into the same token), which is what the reference ids
//! are produced by.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// No neighbour.
const NONE: usize = usize::MAX;

#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    prev: usize,
    next: usize,
    removed: bool,
}

/// Merges adjacent `symbols` (token ids) into longer tokens. `pair(left, right)` gives the rank of merging the
/// two (lower merges first) and the merged token's id, or `None` when they do not merge.
pub(super) fn merge<K: Ord + Copy>(
    symbols: &[u32],
    mut pair: impl FnMut(u32, u32) -> Option<(K, u32)>,
) -> Vec<u32> {
    let n = symbols.len();
    let mut word: Vec<Symbol> = symbols
        .iter()
        .enumerate()
        .map(|(i, &id)| Symbol {
            id,
            prev: if i == 0 { NONE } else { i - 1 },
            next: if i + 1 == n { NONE } else { i + 1 },
            removed: false,
        })
        .collect();
    let mut queue = BinaryHeap::with_capacity(n);
    for (pos, w) in symbols.windows(2).enumerate() {
        if let Some((rank, new_id)) = pair(w[0], w[1]) {
            queue.push(Reverse((rank, pos, new_id)));
        }
    }
    while let Some(Reverse((_, pos, new_id))) = queue.pop() {
        let current = word[pos];
        if current.removed || current.next == NONE {
            continue;
        }
        let right = word[current.next];
        if pair(current.id, right.id).map(|(_, id)| id) != Some(new_id) {
            continue; // an expired entry: the pair at `pos` has changed since it was queued
        }
        word[pos].id = new_id;
        word[pos].next = right.next;
        word[current.next].removed = true;
        if right.next != NONE {
            word[right.next].prev = pos;
        }
        if current.prev != NONE {
            if let Some((rank, id)) = pair(word[current.prev].id, new_id) {
                queue.push(Reverse((rank, current.prev, id)));
            }
        }
        if right.next != NONE {
            if let Some((rank, id)) = pair(new_id, word[right.next].id) {
                queue.push(Reverse((rank, pos, id)));
            }
        }
    }
    word.iter().filter(|s| !s.removed).map(|s| s.id).collect()
}

#[cfg(test)]
mod tests {
    use super::merge;

    /// Ids 0..=2 are `a`, `b`, `c`; `ab` = 3 (rank 0), `bc` = 4 (rank 1), `abc` = 5 (rank 2).
    fn ranks(l: u32, r: u32) -> Option<(u32, u32)> {
        match (l, r) {
            (0, 1) => Some((0, 3)),
            (1, 2) => Some((1, 4)),
            (3, 2) => Some((2, 5)),
            _ => None,
        }
    }

    #[test]
    fn lowest_rank_merges_first() {
        assert_eq!(merge(&[0, 1, 2], ranks), vec![5]);
        assert_eq!(merge(&[1, 2, 0, 1], ranks), vec![4, 3]);
    }

    #[test]
    fn equal_ranks_merge_leftmost_first() {
        // "a b a b": both `ab` pairs have rank 0; neither blocks the other.
        assert_eq!(merge(&[0, 1, 0, 1], ranks), vec![3, 3]);
        // "b b": 1+1 never merges.
        assert_eq!(merge(&[1, 1], ranks), vec![1, 1]);
    }

    #[test]
    fn empty_and_single_symbols_pass_through() {
        assert_eq!(merge(&[], ranks), Vec::<u32>::new());
        assert_eq!(merge(&[2], ranks), vec![2]);
    }
}
