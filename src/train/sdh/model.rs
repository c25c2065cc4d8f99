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
