//! The shallow transformer of the slash-pattern experiment: fixed embeddings, one causal RoPE attention head with
//! trainable `W_Q`, `W_K`, and a fixed readout through the embeddings; loss and analytic gradient.

use crate::train::metrics::CausalAttention;
use crate::train::optim::{mean_over_examples, Objective};
use crate::train::rotary::GatedRope;
use crate::analysis::softmax::softmax_in_place;
use crate::train::softmax::{cross_entropy, softmax_backward};

/// The head: `q_t = W_Q e_{x_t}`, `k_t = W_K e_{x_t}`, logits `a[i,j] = ⟨G R_i q_i, G R_j k_j⟩` for `j <= i`,
/// `S = softmax`, output `o_i = Σ_j S[i,j] e_{x_j}`, class logits `z_v = γ ⟨e_v, o_i⟩`. Parameters are the flat
/// vector `[W_Q, W_K]`, each `head_dim × d_model` row-major.
#[derive(Clone, Debug)]
pub struct SlashHead {
    embeddings: Vec<Vec<f64>>,
    gram: Vec<Vec<f64>>,
    head_dim: usize,
    readout_scale: f64,
}

/// The training loss of a [`SlashHead`] on a fixed set of prompts: predict the token `offset` positions back.
pub struct OffsetTask<'a> {
    /// The head.
    pub head: &'a SlashHead,
    /// RoPE and gate, tabulated for the prompts' length.
    pub rope: &'a GatedRope,
    /// The training prompts.
    pub prompts: &'a [Vec<usize>],
    /// `Δ`: query `i >= Δ` must output token `x_{i−Δ}`.
    pub offset: usize,
}

impl SlashHead {
    /// A head over fixed `embeddings` (all of one dimension) with `head_dim`-dimensional queries and keys.
    pub fn new(embeddings: Vec<Vec<f64>>, head_dim: usize, readout_scale: f64) -> Self {
        let gram = embeddings
            .iter()
            .map(|a| embeddings.iter().map(|b| dot(a, b)).collect())
            .collect();
        Self {
            embeddings,
            gram,
            head_dim,
            readout_scale,
        }
    }

    /// Embedding dimension.
    pub fn d_model(&self) -> usize {
        self.embeddings[0].len()
    }

    /// The fixed embeddings.
    pub fn embeddings(&self) -> &[Vec<f64>] {
        &self.embeddings
    }

    /// Number of parameters, `2 · head_dim · d_model`.
    pub fn n_params(&self) -> usize {
        2 * self.head_dim * self.d_model()
    }

    /// `W e_token` for the matrix `W` starting at `offset` in `params`.
    fn project(&self, params: &[f64], offset: usize, token: usize) -> Vec<f64> {
        let d = self.d_model();
        let e = &self.embeddings[token];
        (0..self.head_dim)
            .map(|r| dot(&params[offset + r * d..offset + (r + 1) * d], e))
            .collect()
    }

    /// Pre-RoPE (gated) queries and keys of every position of `prompt`.
    pub fn queries_keys(
        &self,
        params: &[f64],
        rope: &GatedRope,
        prompt: &[usize],
    ) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        self.gated(params, rope, prompt, false)
    }

    /// Gated queries and keys of every position of `prompt`: rotated to their positions when `rotate` (`G R_t q_t`,
    /// `G R_t k_t`), otherwise at position 0, which leaves them unrotated.
    fn gated(
        &self,
        params: &[f64],
        rope: &GatedRope,
        prompt: &[usize],
        rotate: bool,
    ) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        let wk = self.head_dim * self.d_model();
        let at = |offset: usize| -> Vec<Vec<f64>> {
            prompt
                .iter()
                .enumerate()
                .map(|(t, &x)| {
                    rope.apply(&self.project(params, offset, x), if rotate { t } else { 0 })
                })
                .collect()
        };
        (at(0), at(wk))
    }

    /// The causal attention matrix of `prompt` (whose length must not exceed the table of `rope`).
    pub fn attention(&self, params: &[f64], rope: &GatedRope, prompt: &[usize]) -> CausalAttention {
        let (q, k) = self.gated(params, rope, prompt, true);
        (0..prompt.len())
            .map(|i| {
                let mut row: Vec<f64> = (0..=i).map(|j| dot(&q[i], &k[j])).collect();
                softmax_in_place(&mut row);
                row
            })
            .collect()
    }

    /// Loss of one prompt (mean cross-entropy over queries `i >= offset`); adds its gradient into `grad`.
    fn prompt_loss(
        &self,
        params: &[f64],
        rope: &GatedRope,
        prompt: &[usize],
        offset: usize,
        grad: &mut [f64],
    ) -> f64 {
        let n = prompt.len();
        if n <= offset {
            return 0.0;
        }
        let terms = (n - offset) as f64;
        let (q, k) = self.gated(params, rope, prompt, true);
        let attention = self.attention(params, rope, prompt);
        let mut dq = vec![vec![0.0; self.head_dim]; n];
        let mut dk = vec![vec![0.0; self.head_dim]; n];
        let mut loss = 0.0;
        for i in offset..n {
            let s = &attention[i];
            let z: Vec<f64> = (0..self.embeddings.len())
                .map(|v| {
                    self.readout_scale
                        * (0..=i).map(|j| s[j] * self.gram[v][prompt[j]]).sum::<f64>()
                })
                .collect();
            let (l, dz) = cross_entropy(&z, prompt[i - offset]);
            loss += l / terms;
            let ds: Vec<f64> = (0..=i)
                .map(|j| {
                    let g = &self.gram[prompt[j]];
                    self.readout_scale * dz.iter().zip(g).map(|(a, b)| a * b).sum::<f64>() / terms
                })
                .collect();
            let da = softmax_backward(s, &ds);
            for j in 0..=i {
                axpy(&mut dq[i], da[j], &k[j]);
                axpy(&mut dk[j], da[j], &q[i]);
            }
        }
        let d = self.d_model();
        let wk = self.head_dim * d;
        for (t, &x) in prompt.iter().enumerate() {
            let gq = rope.apply_transpose(&dq[t], t);
            let gk = rope.apply_transpose(&dk[t], t);
            let e = &self.embeddings[x];
            for r in 0..self.head_dim {
                axpy(&mut grad[r * d..(r + 1) * d], gq[r], e);
                axpy(&mut grad[wk + r * d..wk + (r + 1) * d], gk[r], e);
            }
        }
        loss
    }
}

impl Objective for OffsetTask<'_> {
    fn n_params(&self) -> usize {
        self.head.n_params()
    }

    fn loss_and_grad(&self, params: &[f64]) -> (f64, Vec<f64>) {
        mean_over_examples(self.prompts.len(), self.n_params(), |i, grad| {
            self.head
                .prompt_loss(params, self.rope, &self.prompts[i], self.offset, grad)
        })
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
    y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::{Pairing, RopeSpec};
    use crate::train::gate::ChunkGate;

    /// Three tokens in two dimensions, one RoPE chunk turning by one radian per position.
    fn head_and_rope() -> (SlashHead, GatedRope) {
        let embeddings = vec![vec![1.0, 0.0], vec![0.6, 0.8], vec![-0.5, 0.3]];
        let spec = RopeSpec::new(2, 10.0, Pairing::Adjacent);
        let rope = GatedRope::new(spec, ChunkGate::all(1), 6);
        (SlashHead::new(embeddings, 2, 2.5), rope)
    }

    /// `[W_Q, W_K]`, each 2 × 2 row-major.
    const PARAMS: [f64; 8] = [0.3, -0.7, 1.1, 0.4, 0.9, 0.2, -0.6, 0.5];

    /// The attention and loss computed here from the head's definition, with the rotation written out: `q_t =
    /// R_t W_Q e_{x_t}`, `k_t = R_t W_K e_{x_t}` (`R_t` turning by `t` radians), `S[i, ·] = softmax_{j ≤ i} ⟨q_i,
    /// k_j⟩`, class logits `z_v = γ ⟨e_v, Σ_j S[i,j] e_{x_j}⟩`, and the loss the mean over the prompts of each
    /// prompt's mean `−log softmax(z)[x_{i−Δ}]` over `i ≥ Δ`.
    fn by_definition(head: &SlashHead, prompts: &[Vec<usize>], offset: usize) -> (Vec<CausalAttention>, f64) {
        let e = head.embeddings();
        let turned = |w: &[f64], x: usize, t: usize| {
            let (a, b) = (w[0] * e[x][0] + w[1] * e[x][1], w[2] * e[x][0] + w[3] * e[x][1]);
            let (s, c) = (t as f64).sin_cos();
            [a * c - b * s, a * s + b * c]
        };
        let (mut maps, mut loss) = (Vec::new(), 0.0);
        for prompt in prompts {
            let q: Vec<[f64; 2]> = prompt.iter().enumerate().map(|(t, &x)| turned(&PARAMS[..4], x, t)).collect();
            let k: Vec<[f64; 2]> = prompt.iter().enumerate().map(|(t, &x)| turned(&PARAMS[4..], x, t)).collect();
            let map: CausalAttention = (0..prompt.len())
                .map(|i| {
                    let w: Vec<f64> = (0..=i).map(|j| (q[i][0] * k[j][0] + q[i][1] * k[j][1]).exp()).collect();
                    let total: f64 = w.iter().sum();
                    w.iter().map(|x| x / total).collect()
                })
                .collect();
            let mut prompt_loss = 0.0;
            for i in offset..prompt.len() {
                let o: Vec<f64> = (0..2).map(|d| (0..=i).map(|j| map[i][j] * e[prompt[j]][d]).sum()).collect();
                let z: Vec<f64> = e.iter().map(|ev| 2.5 * (ev[0] * o[0] + ev[1] * o[1])).collect();
                let log_total = z.iter().map(|zv| zv.exp()).sum::<f64>().ln();
                prompt_loss += log_total - z[prompt[i - offset]];
            }
            loss += prompt_loss / (prompt.len() - offset) as f64;
            maps.push(map);
        }
        (maps, loss / prompts.len() as f64)
    }

    #[test]
    fn attention_and_loss_are_the_definitions() {
        let (head, rope) = head_and_rope();
        let prompts = vec![vec![0, 1, 2, 1, 0], vec![2, 0, 1]];
        let (maps, want) = by_definition(&head, &prompts, 2);
        for (prompt, map) in prompts.iter().zip(&maps) {
            let got = head.attention(&PARAMS, &rope, prompt);
            for (g, w) in got.iter().flatten().zip(map.iter().flatten()) {
                assert!((g - w).abs() < 1e-14, "{g} against {w}");
            }
            assert_eq!(got.len(), map.len());
        }
        let task = OffsetTask { head: &head, rope: &rope, prompts: &prompts, offset: 2 };
        // Its gradient against central differences: tests/train/gradients.rs.
        let (loss, _) = task.loss_and_grad(&PARAMS);
        assert!((loss - want).abs() < 1e-14, "{loss} against {want}");
        // Pre-RoPE queries and keys: the projections at position 0, unrotated.
        let (q, k) = head.queries_keys(&PARAMS, &rope, &prompts[0]);
        assert_eq!(q[3], vec![0.3 * 0.6 - 0.7 * 0.8, 1.1 * 0.6 + 0.4 * 0.8]);
        assert_eq!(k[2], vec![0.9 * -0.5 + 0.2 * 0.3, -0.6 * -0.5 + 0.5 * 0.3]);
        assert_eq!(head.n_params(), 8);
    }
}
