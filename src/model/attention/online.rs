//! One head's attention without materialising its probabilities: the fused kernel of an f32 pass whose
//! capture takes no attention of the layer ([`Real::ONLINE_SOFTMAX`]).
//!
//! Each block of query rows whose keys span more than one tile of [`KEY_TILE`] walks them a tile at a time: the
//! tile's scores, soft-capped, a running maximum and f64 sum per row updated as the keys arrive (the online
//! softmax of Milakov and Gimelshein, 2018), the exponentials times the tile's values added into an f64 output
//! that is rescaled (by an f64 factor) whenever a row's maximum grows, and each row divided by its sum once, at
//! the end. A block's scores and exponentials are then one tile (`ROW_BLOCK × KEY_TILE`, 256 KiB in f32) that
//! stays in the core's cache, where the materialising path writes and reads back the whole `ROW_BLOCK × T`
//! scores and probabilities (4 MiB each at 8,192 tokens). The order of operations differs from that path, so
//! those rows differ from a captured pass's by rounding; the engine's f32 bars hold for both
//! (`docs/correctness.md#online-softmax`).
//!
//! A block whose keys fit one tile whatever the prompt's length (every row before position `KEY_TILE`, and
//! every row of a layer whose window is at most `KEY_TILE − ROW_BLOCK + 1`) is computed as the materialising
//! path computes it, to the same bits: a prompt of up to `KEY_TILE` tokens gives the same results captured or
//! not.

use super::layer::{HeadView, LayerQkv, LayerShape, ROW_BLOCK};
use super::materialised::{self, Buffers};
use super::super::ops::online_softmax_tile;
use crate::capture::HeadInfo;
use crate::numeric::Real;
use crate::profile::{time, Step};

/// Keys per tile: a block's scores and exponentials over one tile (`ROW_BLOCK × KEY_TILE`, 256 KiB in f32) stay
/// in a core's L2 cache, and rows before position `KEY_TILE` compute as a captured pass does.
pub const KEY_TILE: usize = 512;

/// One head's output of rows `first_row..T`, `[T − first_row, value_dim]`, as `materialised::head_attention`
/// computes it, by the online softmax. Blocks of rows and tiles of keys start where they would in a pass from
/// row 0, so that a resumed pass computes every row with the same operations.
pub fn head_attention<T: Real>(
    qkv: &LayerQkv<'_, T>,
    keys_t: (&[T], usize),
    shape: &LayerShape<'_>,
    info: &HeadInfo,
) -> Vec<T> {
    tiled(qkv, keys_t, shape, info, KEY_TILE)
}

/// [`head_attention`] with tiles of `key_tile` keys (the tests take narrow tiles to rescale often).
fn tiled<T: Real>(
    qkv: &LayerQkv<'_, T>,
    keys_t: (&[T], usize),
    shape: &LayerShape<'_>,
    info: &HeadInfo,
    key_tile: usize,
) -> Vec<T> {
    let view = HeadView::new(qkv, keys_t, shape, info);
    let (t, dv, first) = (shape.n_tokens, info.value_dim, shape.first_row);
    let sink = info.sink.map(T::of_f64);
    let mut out = vec![T::zero(); (t - first) * dv];
    let mut buffers = Buffers::default();
    let (mut tile_out, mut acc, mut max, mut sum) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for block in (first / ROW_BLOCK * ROW_BLOCK..t).step_by(ROW_BLOCK) {
        let (r0, r1) = (block.max(first), (block + ROW_BLOCK).min(t));
        let nr = r1 - r0;
        let start = info.first_visible(block);
        let rows_out = &mut out[(r0 - first) * dv..(r1 - first) * dv];
        if block + ROW_BLOCK - start <= key_tile {
            materialised::block(&view, info, (r0..r1, start..r1), &mut buffers, rows_out);
            continue;
        }
        // A row starts from its sink (one more term of the softmax, attached to no value), or from nothing.
        max.clear();
        max.resize(nr, sink.unwrap_or(T::neg_infinity()));
        sum.clear();
        sum.resize(nr, if sink.is_some() { 1.0 } else { 0.0 });
        acc.clear();
        acc.resize(nr * dv, 0.0f64);
        tile_out.resize(nr * dv, T::zero());
        for c0 in (start..r1).step_by(key_tile) {
            let nc = key_tile.min(r1 - c0);
            let scores = buffers.scratch(nr * nc);
            view.scores(r0..r1, c0..c0 + nc, scores);
            let mut any = false;
            time(Step::Softmax, || {
                for (r, i) in (r0..r1).enumerate() {
                    let lo = info.first_visible(i).clamp(c0, c0 + nc) - c0;
                    let hi = (i + 1).clamp(c0, c0 + nc) - c0;
                    let row = &mut scores[r * nc..(r + 1) * nc];
                    let rescale = online_softmax_tile(row, lo..hi, &mut max[r], &mut sum[r]);
                    if rescale != 1.0 {
                        acc[r * dv..(r + 1) * dv]
                            .iter_mut()
                            .for_each(|a| *a *= rescale);
                    }
                    any |= lo < hi;
                }
            });
            if !any {
                continue;
            }
            let tile_out = &mut tile_out[..nr * dv];
            view.values(buffers.scratch(nr * nc), nc, c0..c0 + nc, tile_out);
            time(Step::Values, || {
                for (a, &x) in acc.iter_mut().zip(tile_out.iter()) {
                    *a += x.to_f64_exact();
                }
            });
        }
        for ((o, a), &s) in rows_out.chunks_exact_mut(dv).zip(acc.chunks_exact(dv)).zip(&sum) {
            let reciprocal = 1.0 / s;
            for (o, &a) in o.iter_mut().zip(a) {
                *o = T::of_f64(a * reciprocal);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::materialised::head_attention as materialising;
    use super::super::transposed_keys;
    use super::*;
    use crate::capture::{LayerPlan, NoCapture};
    use crate::rope::{Pairing, RopeSpec};

    const T: usize = 300;
    const HEADS: usize = 4;
    const KV_HEADS: usize = 2;
    const D: usize = 8;
    const DV: usize = 6;

    /// Deterministic values in [−1.5, 1.5).
    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 53) as f64 * 3.0 - 1.5
            })
            .collect()
    }

    /// Head 3 (reading key/value head 1) of a layer with the given masks, scale 0.9 so that scores reach ±18.
    fn head(window: Option<usize>, chunk: Option<usize>, sink: Option<f64>) -> HeadInfo {
        HeadInfo {
            layer: 0,
            head: 3,
            kv_head: 1,
            head_dim: D,
            value_dim: DV,
            n_tokens: T,
            rope: RopeSpec::new(D, 1e4, Pairing::HalfSplit),
            window,
            chunk,
            sink,
            scale: 0.9,
        }
    }

    /// The head's output rows `first..T` by the definition, in f64: each row's softmax over its visible keys
    /// (and the sink), soft-capped scores, times the values.
    fn exact(
        q: &[f64],
        k: &[f64],
        v: &[f64],
        info: &HeadInfo,
        cap: Option<f64>,
        first: usize,
    ) -> Vec<f64> {
        let mut out = Vec::new();
        for i in first..T {
            let keys = info.first_visible(i)..i + 1;
            let scores: Vec<f64> = keys
                .clone()
                .map(|j| {
                    let dot: f64 = (0..D)
                        .map(|c| {
                            q[i * HEADS * D + info.head * D + c]
                                * k[j * KV_HEADS * D + info.kv_head * D + c]
                        })
                        .sum();
                    let s = dot * info.scale;
                    cap.map_or(s, |c| (s / c).tanh() * c)
                })
                .collect();
            let max = scores
                .iter()
                .copied()
                .chain(info.sink)
                .fold(f64::MIN, f64::max);
            let total: f64 = scores
                .iter()
                .chain(&info.sink)
                .map(|s| (s - max).exp())
                .sum();
            for c in 0..DV {
                let weighted: f64 = keys
                    .clone()
                    .zip(&scores)
                    .map(|(j, s)| (s - max).exp() * v[j * KV_HEADS * DV + info.kv_head * DV + c])
                    .sum();
                out.push(weighted / total);
            }
        }
        out
    }

    /// Every mask, soft-cap and sink, in passes from row 0 and resumed at row 131. With tiles of 8 and 48 keys
    /// (a row's maximum then grows across tiles, so its sum and values are rescaled) every f32 output is within
    /// 2e-6 of the exact f64 one (outputs are of order 1; measured 3.8e-7); with [`KEY_TILE`] (300 tokens:
    /// every block fits one tile) every output has the bits of the materialising path; and a resumed pass's
    /// rows have the bits of the same rows of the pass from row 0.
    #[test]
    fn online_softmax_is_the_exact_attention_to_f32_rounding() {
        let (q, k, v) = (
            values(T * HEADS * D, 1),
            values(T * KV_HEADS * D, 2),
            values(T * KV_HEADS * DV, 3),
        );
        let narrow = |x: &[f64]| x.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let (q32, k32, v32) = (narrow(&q), narrow(&k), narrow(&v));
        let (keys_t, ldk) = transposed_keys(&k32, T, KV_HEADS, D);
        let qkv = LayerQkv {
            q: &q32,
            k: &k32,
            v: &v32,
            q_pre: &[],
            k_pre: &[],
        };
        let sinks = [0.0, 0.0, 0.0, 2.5];
        let cases = [
            (head(None, None, None), None),
            (head(Some(37), None, None), None),
            (head(None, Some(64), None), Some(5.0)),
            (head(None, None, Some(sinks[3])), None),
            (head(Some(200), None, Some(sinks[3])), Some(5.0)),
        ];
        let mut worst = 0.0f64;
        for (info, cap) in &cases {
            let shape = |first_row| LayerShape {
                n_tokens: T,
                first_row,
                n_heads: HEADS,
                n_kv_heads: KV_HEADS,
                softcap: *cap,
                sinks: info.sink.map(|_| &sinks[..]),
            };
            let want = exact(&q, &k, &v, info, *cap, 0);
            let plan = LayerPlan::default();
            let keys = (keys_t.as_slice(), ldk);
            let materialised =
                materialising::<f32, NoCapture>(&qkv, keys, &shape(0), info, plan, None);
            for tile in [8, 48, KEY_TILE] {
                let whole = tiled(&qkv, keys, &shape(0), info, tile);
                let resumed = tiled(&qkv, keys, &shape(131), info, tile);
                assert_eq!(whole.len(), T * DV);
                if tile == KEY_TILE {
                    assert!(
                        whole
                            .iter()
                            .zip(&materialised)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{info:?}: a block within one tile differs from the materialising path"
                    );
                } else {
                    for (&got, &want) in whole.iter().zip(&want) {
                        worst = worst.max((f64::from(got) - want).abs());
                    }
                }
                assert!(
                    resumed
                        .iter()
                        .zip(&whole[131 * DV..])
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{info:?} tile {tile}: the resumed rows differ"
                );
            }
        }
        println!("online softmax against the exact f64 attention: max-abs {worst:.1e}");
        assert!(worst <= 2e-6, "max-abs {worst:e}");
        assert!(
            worst > 0.0,
            "f32 outputs equal to the f64 ones: the comparison compares nothing"
        );
    }
}
