//! Positional and symbolic block-swap scores (Decoupling Positional and Symbolic Attention).
//!
//! The context keys of the last query are cut into `m` contiguous blocks of equal length. With `d_1..d_m` the
//! blocks' attention before a swap, swap the *contents* of blocks `a` and `b` (positions stay) and read `d'`
//! after it. With `v = (d_a, d_b)` and `v' = (d'_a, d'_b)`:
//!
//! `s_pos = cos(v', v)` (attention stayed with the positions), `s_sym = cos(v', (d_b, d_a))` (it followed the
//! contents). The head's scores are the averages over all block pairs with weights `softmax(|d_a − d_b| / τ)`,
//! so the swaps that could tell the two behaviours apart (unequal blocks) count most.
//!
//! `d_b` here is the block's total attention (block mean × block length). Blocks have equal length, so the
//! cosines are those of the block means; only the scale on which τ acts differs (attention mass, in `[0, 1]`).
//! The paper leaves `m` and `τ` open: [`DEFAULT_BLOCK_COUNT`] and [`DEFAULT_SWAP_TEMPERATURE`] are our defaults.

use super::softmax::softmax;

/// Default number of blocks `m`: eight blocks give 28 swaps, enough to average over while keeping blocks of a
/// few hundred-token context long enough to carry content.
pub const DEFAULT_BLOCK_COUNT: usize = 8;

/// Default temperature `τ` of the swap weights, on the scale of attention mass: a swap whose blocks differ by 0.1
/// of the attention weighs `e` times one between equal blocks.
pub const DEFAULT_SWAP_TEMPERATURE: f64 = 0.1;

/// Positional and symbolic scores of one swap or of a whole head.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwapScores {
    /// `cos(v', v)`: 1 when attention stays with positions.
    pub s_pos: f64,
    /// `cos(v', (d_b, d_a))`: 1 when attention follows contents.
    pub s_sym: f64,
}

/// Attention mass of each of `m` contiguous equal blocks of `attention` (the last query's weights over its
/// context keys). `None` when `m < 2` or the context length is not a multiple of `m`.
pub fn block_masses(attention: &[f64], m: usize) -> Option<Vec<f64>> {
    if m < 2 || attention.is_empty() || !attention.len().is_multiple_of(m) {
        return None;
    }
    let len = attention.len() / m;
    Some(attention.chunks(len).map(|b| b.iter().sum()).collect())
}

/// The content order after swapping blocks `a` and `b` of an `n_ctx`-key context cut into `m` blocks:
/// position `p` then holds original content `perm[p]`. `None` when the blocks are not well defined or
/// `a`, `b` are not distinct blocks (so also when `m < 2`).
pub fn block_swap_permutation(n_ctx: usize, m: usize, a: usize, b: usize) -> Option<Vec<usize>> {
    if n_ctx == 0 || !n_ctx.is_multiple_of(m) || a >= m || b >= m || a == b {
        return None;
    }
    let len = n_ctx / m;
    let mut perm: Vec<usize> = (0..n_ctx).collect();
    for t in 0..len {
        perm.swap(a * len + t, b * len + t);
    }
    Some(perm)
}

/// `s_pos` and `s_sym` of the swap of blocks `a` and `b`, from the block attentions before and after it.
/// `None` when `v` or `v'` is the zero vector (the cosines are undefined).
pub fn pair_scores(before: &[f64], after: &[f64], a: usize, b: usize) -> Option<SwapScores> {
    let v = (before[a], before[b]);
    let v_after = (after[a], after[b]);
    let cos = |x: (f64, f64), y: (f64, f64)| {
        let norms = x.0.hypot(x.1) * y.0.hypot(y.1);
        (norms > 0.0).then(|| (x.0 * y.0 + x.1 * y.1) / norms)
    };
    Some(SwapScores {
        s_pos: cos(v_after, v)?,
        s_sym: cos(v_after, (v.1, v.0))?,
    })
}

/// The head's block-swap scores: every pair of the `m` blocks is swapped, and the pair scores are averaged
/// with weights `softmax(|d_a − d_b| / τ)`.
///
/// `attend(perm)` must return the last query's attention over the `n_ctx` context keys when context position
/// `p` holds original content `perm[p]` (the identity gives the unswapped context). `None` when the blocks are
/// not well defined, `tau` is not positive, `attend` returns a row of the wrong length, or no swap has defined
/// cosines.
pub fn block_swap_scores(
    n_ctx: usize,
    m: usize,
    tau: f64,
    mut attend: impl FnMut(&[usize]) -> Vec<f64>,
) -> Option<SwapScores> {
    if tau.is_nan() || tau <= 0.0 || n_ctx == 0 {
        return None;
    }
    let identity: Vec<usize> = (0..n_ctx).collect();
    let before = block_masses(&attend(&identity), m)?;
    let mut gaps = Vec::new();
    let mut scores = Vec::new();
    for a in 0..m {
        for b in a + 1..m {
            let perm = block_swap_permutation(n_ctx, m, a, b)?;
            let row = attend(&perm);
            if row.len() != n_ctx {
                return None;
            }
            let after = block_masses(&row, m)?;
            if let Some(s) = pair_scores(&before, &after, a, b) {
                gaps.push((before[a] - before[b]).abs() / tau);
                scores.push(s);
            }
        }
    }
    if scores.is_empty() {
        return None;
    }
    let weights = softmax(&gaps);
    Some(SwapScores {
        s_pos: weights.iter().zip(&scores).map(|(w, s)| w * s.s_pos).sum(),
        s_sym: weights.iter().zip(&scores).map(|(w, s)| w * s.s_sym).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_permutation_exchanges_whole_blocks() {
        assert_eq!(
            block_swap_permutation(6, 3, 0, 2),
            Some(vec![4, 5, 2, 3, 0, 1])
        );
        assert_eq!(block_swap_permutation(4, 2, 1, 0), Some(vec![2, 3, 0, 1]));
        assert_eq!(block_swap_permutation(7, 3, 0, 2), None);
        assert_eq!(block_masses(&[0.25; 4], 2), Some(vec![0.5, 0.5]));
    }

    #[test]
    fn ill_defined_blocks_or_swaps_are_refused() {
        // Each condition alone: a block swapped with itself, a block out of range, one block, no context.
        assert_eq!(block_swap_permutation(6, 3, 1, 1), None);
        assert_eq!(block_swap_permutation(6, 3, 0, 3), None);
        assert_eq!(block_swap_permutation(6, 3, 3, 0), None);
        assert_eq!(block_swap_permutation(6, 1, 0, 0), None);
        assert_eq!(block_swap_permutation(0, 3, 0, 1), None);
        assert_eq!(block_masses(&[0.2; 5], 2), None);
        assert_eq!(block_masses(&[0.5; 2], 1), None);
        assert_eq!(block_masses(&[], 2), None);
    }

    #[test]
    fn pair_scores_follow_positions_or_contents_and_need_attention_on_both_sides() {
        let stayed = pair_scores(&[0.6, 0.2, 0.2], &[0.6, 0.2, 0.2], 0, 1).unwrap();
        assert!((stayed.s_pos - 1.0).abs() < 1e-15 && stayed.s_sym < 0.7);
        let followed = pair_scores(&[0.6, 0.2, 0.2], &[0.2, 0.6, 0.2], 0, 1).unwrap();
        assert!((followed.s_sym - 1.0).abs() < 1e-15 && followed.s_pos < 0.7);
        // No attention on the pair before, or after, the swap: the cosines are undefined, not NaN.
        assert_eq!(pair_scores(&[0.0, 0.0, 1.0], &[0.5, 0.5, 0.0], 0, 1), None);
        assert_eq!(pair_scores(&[0.5, 0.5, 0.0], &[0.0, 0.0, 1.0], 0, 1), None);
    }

    #[test]
    fn block_swap_scores_refuse_a_temperature_that_is_not_positive_and_an_empty_context() {
        // Attention that stays with positions; each refusal below breaks one condition alone.
        let stays = |p: &[usize]| (0..p.len()).map(|i| (i + 1) as f64 / 21.0).collect();
        let good = block_swap_scores(6, 3, 0.1, stays).unwrap();
        assert!((good.s_pos - 1.0).abs() < 1e-12);
        for tau in [0.0, -0.1, f64::NAN] {
            assert_eq!(block_swap_scores(6, 3, tau, stays), None, "τ = {tau}");
        }
        let never = |_: &[usize]| -> Vec<f64> { panic!("no context: nothing to attend over") };
        assert_eq!(block_swap_scores(0, 3, 0.1, never), None);
    }

    #[test]
    fn default_temperature_weighs_blocks_a_tenth_apart_e_times_equal_ones() {
        // Three one-key blocks with masses 0.4, 0.3, 0.3: the swaps (0, 1) and (0, 2) exchange blocks 0.1 of the
        // attention apart, and attention stays with the positions (both scores 1); the swap (1, 2) exchanges
        // equal blocks, after which attention moves to (0.4, 0.6, 0), whose cosines are 1/√2. With the
        // documented meaning of τ, the head's `s_pos` is (e + e + 1/√2) / (e + e + 1).
        let attend = |p: &[usize]| match p {
            [0, 2, 1] => vec![0.4, 0.6, 0.0],
            _ => vec![0.4, 0.3, 0.3],
        };
        let s = block_swap_scores(3, 3, DEFAULT_SWAP_TEMPERATURE, attend).unwrap();
        let e = std::f64::consts::E;
        let want = (2.0 * e + std::f64::consts::FRAC_1_SQRT_2) / (2.0 * e + 1.0);
        assert!(
            (s.s_pos - want).abs() < 1e-12,
            "s_pos {} against {want}",
            s.s_pos
        );
    }
}
