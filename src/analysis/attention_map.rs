//! Block-averaged attention maps: a head's `N × N` attention reduced to at most `M × M` while it streams.
//!
//! Query `i` falls in row bin `⌊i·M/N⌋` and key `j` in column bin `⌊j·M/N⌋`; a cell is the mean of every
//! `S[i, j]` in its bin pair, masked entries counted as 0. With `M ≥ N` the map is the attention itself.

use crate::capture::{AttentionBlock, Capture, HeadCapture, HeadInfo, LayerPlan};
use crate::numeric::{sum_f64, Real};

/// Downsampled attention of every head for one forward pass.
#[derive(Clone, Debug)]
pub struct AttentionMapCapture {
    pub(crate) n_layers: usize,
    pub(crate) n_heads: usize,
    pub(crate) max_side: usize,
    pub(crate) side: usize,
    /// `[L·H, side, side]` maps, filled as heads end.
    pub(crate) maps: Vec<f32>,
}

impl AttentionMapCapture {
    /// Maps of at most `max_side × max_side` for a model of `n_layers × n_heads` heads.
    pub fn new(n_layers: usize, n_heads: usize, max_side: usize) -> Self {
        Self {
            n_layers,
            n_heads,
            max_side: max_side.max(1),
            side: 0,
            maps: Vec::new(),
        }
    }

    /// Side `M` of the maps (0 before a forward pass).
    pub fn side(&self) -> usize {
        self.side
    }

    /// `[L, H, M, M]` row-major maps.
    pub fn maps(&self) -> &[f32] {
        &self.maps
    }
}

/// Bin of position `p` among `n` positions cut into `side` bins.
fn bin(p: usize, n: usize, side: usize) -> usize {
    p * side / n
}

/// One head's bin sums.
pub struct MapHead {
    side: usize,
    sums: Vec<f64>,
}

impl<T: Real> HeadCapture<T> for MapHead {
    fn block(&mut self, info: &HeadInfo, block: &AttentionBlock<'_, T>) {
        let (n, side) = (info.n_tokens, self.side);
        let cols = &block.cols;
        for i in block.rows.clone() {
            let sums = &mut self.sums[bin(i, n, side) * side..][..side];
            let row = block.probs_row(i);
            // Each column bin is a run of consecutive keys: sum the run, then add it to its cell.
            let mut j = cols.start;
            while j < cols.end {
                let b = bin(j, n, side);
                let end = ((b + 1) * n).div_ceil(side).min(cols.end);
                sums[b] += sum_f64(&row[j - cols.start..end - cols.start]);
                j = end;
            }
        }
    }
}

impl<T: Real> Capture<T> for AttentionMapCapture {
    type Head = MapHead;

    fn plan(&self, _layer: usize) -> LayerPlan {
        LayerPlan {
            attention: true,
            ..LayerPlan::default()
        }
    }

    fn begin_head(&self, info: &HeadInfo) -> MapHead {
        let side = info.n_tokens.min(self.max_side);
        MapHead {
            side,
            sums: vec![0.0; side * side],
        }
    }

    fn end_head(&mut self, info: &HeadInfo, head: MapHead) {
        let (n, side) = (info.n_tokens, head.side);
        if self.side != side {
            self.side = side;
            self.maps = vec![0.0; self.n_layers * self.n_heads * side * side];
        }
        let mut per_bin = vec![0usize; side];
        (0..n).for_each(|p| per_bin[bin(p, n, side)] += 1);
        let cell = info.layer * self.n_heads + info.head;
        let map = &mut self.maps[cell * side * side..(cell + 1) * side * side];
        for (k, (m, s)) in map.iter_mut().zip(&head.sums).enumerate() {
            let count = per_bin[k / side] * per_bin[k % side];
            *m = (s / count as f64) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::window_example;

    /// On a sliding-window layer a row's block starts after key 0: each probability still lands in the bin of
    /// its own key (column `c` of the block is key `cols.start + c`), and the keys before the window get none.
    #[test]
    fn a_window_block_puts_each_probability_in_its_own_keys_bin() {
        let (info, block) = (window_example::head(), window_example::last_row());
        assert_eq!(info.first_visible(8), 4);
        // One bin per position.
        let mut head = MapHead {
            side: 9,
            sums: vec![0.0; 81],
        };
        HeadCapture::<f64>::block(&mut head, &info, &block);
        let want = [0.0, 0.0, 0.0, 0.0, 0.1, 0.2, 0.3, 0.15, 0.25];
        assert_eq!(&head.sums[8 * 9..], &want);
        assert!(head.sums[..8 * 9].iter().all(|&s| s == 0.0));
    }
}
