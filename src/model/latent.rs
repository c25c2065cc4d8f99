//! Multi-head latent attention (DeepSeek): each head's keys and values decompressed from one normed latent per
//! token, beside one rotated key part shared by the heads, laid out rotated part first.

use super::config::LayerConfig;
use super::weights::MlaWeights;
use super::{ops, project, Model};
use crate::linalg::gather_columns;
use crate::numeric::Real;
use crate::profile::{time, Step};

impl<T: Real> Model<T> {
    /// Multi-head latent attention's keys (before RoPE), values and normed latent (`[rows, kv_lora_rank]`) of
    /// `rows` normed rows `h`, every head's: the latent (normed) and the shared key part from `kv_a`, each head's
    /// unrotated key part and values decompressed from the latent, in f64 sums rounded once; keys laid out
    /// `[shared rope part | head's nope]`.
    pub(super) fn latent_keys_and_values(
        &self,
        m: &MlaWeights<T>,
        lc: &LayerConfig,
        h: &[T],
        rows: usize,
    ) -> (Vec<T>, Vec<T>, Vec<T>) {
        let c = &self.config;
        let (hd, vd, r) = (lc.head_dim(), lc.value_dim, lc.rope.rot_dim);
        let (nope, rank) = (hd - r, m.kv_a_norm.len());
        let a = project(Step::ProjectQkv, &m.kv_a, h, rows, None);
        let mut latent = gather_columns(&a, rank + r, 0..rank);
        time(Step::Norm, || {
            ops::rms_norm_segments(&mut latent, &m.kv_a_norm, c.eps())
        });
        let mut k = vec![T::zero(); rows * c.n_heads * hd];
        for (i, (row, lat)) in a.chunks(rank + r).zip(latent.chunks(rank)).enumerate() {
            for (head, k_b) in m.k_b.iter().enumerate() {
                let out = &mut k[(i * c.n_heads + head) * hd..][..hd];
                out[..r].copy_from_slice(&row[rank..]);
                for (n, o) in out[r..].iter_mut().enumerate() {
                    let dot: f64 = lat
                        .iter()
                        .enumerate()
                        .map(|(j, &x)| x.to_f64_exact() * k_b[j * nope + n].to_f64_exact())
                        .sum();
                    *o = T::of_f64(dot);
                }
            }
        }
        let mut v = vec![T::zero(); rows * c.n_heads * vd];
        for (head, v_b) in m.v_b.iter().enumerate() {
            let vh = project(Step::ProjectQkv, v_b, &latent, rows, None);
            for (i, x) in vh.chunks(vd).enumerate() {
                v[(i * c.n_heads + head) * vd..][..vd].copy_from_slice(x);
            }
        }
        (k, v, latent)
    }
}

/// Moves each head's rotated part (its last `rot_dim` dimensions, as DeepSeek's projections lay it out) to the
/// front, where the layer's RoPE rotates: `[nope | rope]` → `[rope | nope]` per head of `head_dim`.
pub(super) fn rope_part_first<T: Real>(m: &mut [T], head_dim: usize, rot_dim: usize) {
    for head in m.chunks_mut(head_dim) {
        head.rotate_right(rot_dim);
    }
}
