//! Thm 6.1 of *Round and Round We Go*: with a single RoPE frequency (`d = 2`), no head can keep attending to a
//! target token robustly over long sequences, because some rearrangement of the tokens makes another token's
//! logit exceed the target's, and then (Lemma A.3) the target gets at most half the attention.
//!
//! The construction follows the proof's two cases. The query is the last token (position `i`), position 0 is
//! `bos`; both stay in place. If the target's logit is not positive (`a_{i,n} ≤ 0`, so every other logit is
//! negative), one swap suffices: move another token to the movable position where its logit is largest, which
//! for long sequences is positive. Otherwise, among the movable positions `1..i`, move the target to the position
//! where its logit `|q||k_t| cos(θ_t + g (p − i))` is smallest, then move one other token to the free position
//! where its logit is largest. For long enough sequences the angles `g p mod 2π` come close to every angle
//! (Lemma A.2), so the target's logit can be made negative and a distractor's positive.

use super::head::{dot, Rotation};

/// A rearrangement of the context that breaks a single-frequency head's attention to its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelBreak {
    /// Position `p` holds the token originally at `permutation[p]` (bos and the query stay fixed).
    pub permutation: Vec<usize>,
    /// Where the target token ends up.
    pub target_position: usize,
    /// Where the distractor token ends up.
    pub distractor_position: usize,
    /// The distractor's original position.
    pub distractor: usize,
}

/// Builds the swaps of Thm 6.1's proof for a head with single frequency `g`, pre-RoPE query `q` of the last
/// token and pre-RoPE keys `keys[p]` of the tokens at positions `0..=i` (`i = keys.len() − 1`), target at
/// `target ∈ 1..i`: one swap that leaves the target in place when its logit is not positive, two otherwise.
/// `None` when the sequence is too short for the rotation to reach a distractor logit above the target's (or the
/// arguments are out of range).
pub fn break_channel(
    g: f64,
    q: [f64; 2],
    keys: &[[f64; 2]],
    target: usize,
) -> Option<ChannelBreak> {
    let i = keys.len().checked_sub(1)?;
    if target == 0 || target >= i {
        return None;
    }
    let rotation = Rotation::single_frequency(g);
    let query = rotation.at(&q, i);
    let logit = |token: usize, pos: usize| dot(&query, &rotation.at(&keys[token], pos));
    let movable = 1..i;
    let target_position = if logit(target, target) <= 0.0 {
        target
    } else {
        movable
            .clone()
            .min_by(|&a, &b| logit(target, a).total_cmp(&logit(target, b)))?
    };
    let target_logit = logit(target, target_position);
    let (distractor, distractor_position, distractor_logit) = movable
        .clone()
        .filter(|&token| token != target)
        .flat_map(|token| {
            movable
                .clone()
                .filter(move |&pos| pos != target_position)
                .map(move |pos| (token, pos))
        })
        .map(|(token, pos)| (token, pos, logit(token, pos)))
        .max_by(|a, b| a.2.total_cmp(&b.2))?;
    if distractor_logit <= target_logit {
        return None;
    }
    let mut permutation: Vec<usize> = (0..=i).collect();
    permutation.swap(target, target_position);
    let current = permutation.iter().position(|&t| t == distractor)?;
    permutation.swap(current, distractor_position);
    Some(ChannelBreak {
        permutation,
        target_position,
        distractor_position,
        distractor,
    })
}

/// The first distance `Δ ∈ 1..=delta_max` at which one chunk's logit `(R^Δ q)·(R^0 k)` (frequency `g`, the query
/// `Δ` tokens after the key) has another sign than at `Δ = 0`; `None` when it keeps its sign up to `delta_max`
/// or is zero at `Δ = 0`. The apostrophe head of App. E.1 relies on the low-frequency channel keeping its sign
/// over the context it was trained on.
pub fn first_sign_change(g: f64, q: [f64; 2], k: [f64; 2], delta_max: usize) -> Option<usize> {
    let head = Rotation::single_frequency(g);
    let at = |delta: usize| head.logit(&q, delta, &k, 0);
    let start = at(0);
    if start == 0.0 {
        return None;
    }
    (1..=delta_max).find(|&delta| at(delta).signum() != start.signum())
}
