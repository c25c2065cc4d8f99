//! The one-layer attention-only model of the canonical tasks: the query token attends over the context through
//! one gated RoPE head; the attended input features are read out linearly into class logits.

use super::tasks::{Example, Token};
use crate::train::optim::{mean_over_examples, Objective};
use crate::train::rotary::GatedRope;
use crate::analysis::softmax::softmax_in_place;
use crate::train::softmax::{cross_entropy, softmax_backward};

/// Shapes of the head. With `x_j` the 0/1 feature vector of token `j` and the query at position `L`:
/// `q = W_Q x_L`, `k_j = W_K x_j`, `a_j = ⟨G R_L q, G R_j k_j⟩` for `j < L`, `S = softmax(a)`,
/// `z = W_out Σ_j S_j x_j`. The flat parameters are `[W_Q, W_K, W_out]`, each stored feature-major (the column
/// of feature `f` is contiguous).
#[derive(Clone, Copy, Debug)]
pub struct GatedHead {
    /// Number of input features.
    pub n_features: usize,
    /// Query/key dimension.
    pub head_dim: usize,
    /// Number of output classes.
    pub n_classes: usize,
}

/// The full-batch cross-entropy of a [`GatedHead`] on fixed examples.
pub struct TaskLoss<'a> {
    /// The head.
    pub head: GatedHead,
    /// RoPE and gate, tabulated up to the query position.
    pub rope: &'a GatedRope,
    /// The training examples.
    pub examples: &'a [Example],
}

impl GatedHead {
    /// Number of parameters.
    pub fn n_params(&self) -> usize {
        self.n_features * (2 * self.head_dim + self.n_classes)
    }

    fn wk(&self) -> usize {
        self.n_features * self.head_dim
    }

    fn wout(&self) -> usize {
        2 * self.n_features * self.head_dim
    }

    /// `Σ_{f ∈ token} column_f` of the matrix with `rows` rows starting at `offset`.
    fn project(&self, params: &[f64], offset: usize, rows: usize, token: &Token) -> Vec<f64> {
        let mut out = vec![0.0; rows];
        for &f in token {
            let col = &params[offset + f * rows..offset + (f + 1) * rows];
            out.iter_mut().zip(col).for_each(|(o, c)| *o += c);
        }
        out
    }

    /// The query's attention over `context` (the query sits at position `context.len()`).
    pub fn attention(
        &self,
        params: &[f64],
        rope: &GatedRope,
        context: &[Token],
        query: &Token,
    ) -> Vec<f64> {
        let q = rope.apply(
            &self.project(params, 0, self.head_dim, query),
            context.len(),
        );
        let mut a: Vec<f64> = context
            .iter()
            .enumerate()
            .map(|(j, t)| {
                dot(
                    &q,
                    &rope.apply(&self.project(params, self.wk(), self.head_dim, t), j),
                )
            })
            .collect();
        softmax_in_place(&mut a);
        a
    }

    /// Class logits for an example.
    pub fn logits(&self, params: &[f64], rope: &GatedRope, ex: &Example) -> Vec<f64> {
        let s = self.attention(params, rope, &ex.context, &ex.query);
        let mut z = vec![0.0; self.n_classes];
        for (sj, t) in s.iter().zip(&ex.context) {
            let col = self.project(params, self.wout(), self.n_classes, t);
            z.iter_mut().zip(&col).for_each(|(z, c)| *z += sj * c);
        }
        z
    }

    /// Cross-entropy of one example; adds its gradient into `grad`.
    fn example_loss(
        &self,
        params: &[f64],
        rope: &GatedRope,
        ex: &Example,
        grad: &mut [f64],
    ) -> f64 {
        let n = ex.context.len();
        let h = self.head_dim;
        let q = rope.apply(&self.project(params, 0, h, &ex.query), n);
        let k: Vec<Vec<f64>> = ex
            .context
            .iter()
            .enumerate()
            .map(|(j, t)| rope.apply(&self.project(params, self.wk(), h, t), j))
            .collect();
        let mut s: Vec<f64> = k.iter().map(|kj| dot(&q, kj)).collect();
        softmax_in_place(&mut s);
        let cols: Vec<Vec<f64>> = ex
            .context
            .iter()
            .map(|t| self.project(params, self.wout(), self.n_classes, t))
            .collect();
        let mut z = vec![0.0; self.n_classes];
        for (sj, col) in s.iter().zip(&cols) {
            z.iter_mut().zip(col).for_each(|(z, c)| *z += sj * c);
        }
        let (loss, dz) = cross_entropy(&z, ex.answer);
        let ds: Vec<f64> = cols.iter().map(|col| dot(&dz, col)).collect();
        for (sj, t) in s.iter().zip(&ex.context) {
            for &f in t {
                let g = &mut grad
                    [self.wout() + f * self.n_classes..self.wout() + (f + 1) * self.n_classes];
                g.iter_mut().zip(&dz).for_each(|(g, d)| *g += sj * d);
            }
        }
        let da = softmax_backward(&s, &ds);
        let mut dq = vec![0.0; h];
        for (j, t) in ex.context.iter().enumerate() {
            dq.iter_mut()
                .zip(&k[j])
                .for_each(|(d, kj)| *d += da[j] * kj);
            let dk: Vec<f64> = q.iter().map(|qi| da[j] * qi).collect();
            let dk = rope.apply_transpose(&dk, j);
            for &f in t {
                let g = &mut grad[self.wk() + f * h..self.wk() + (f + 1) * h];
                g.iter_mut().zip(&dk).for_each(|(g, d)| *g += d);
            }
        }
        let dq = rope.apply_transpose(&dq, n);
        for &f in &ex.query {
            grad[f * h..(f + 1) * h]
                .iter_mut()
                .zip(&dq)
                .for_each(|(g, d)| *g += d);
        }
        loss
    }
}

impl Objective for TaskLoss<'_> {
    fn n_params(&self) -> usize {
        self.head.n_params()
    }

    fn loss_and_grad(&self, params: &[f64]) -> (f64, Vec<f64>) {
        mean_over_examples(self.examples.len(), self.n_params(), |i, grad| {
            self.head
                .example_loss(params, self.rope, &self.examples[i], grad)
        })
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::{Pairing, RopeSpec};
    use crate::train::gate::ChunkGate;

    #[test]
    fn parameters_are_query_key_and_output_matrices_feature_by_feature() {
        // 2 features, head dimension 4, 2 classes: W_Q = params[0..8], W_K = [8..16], W_out = [16..20], the
        // column of feature f at offset 4f (2f for W_out) in its matrix.
        let head = GatedHead {
            n_features: 2,
            head_dim: 4,
            n_classes: 2,
        };
        assert_eq!(head.n_params(), 20);
        let params: Vec<f64> = (0..20).map(|i| (0.7 * i as f64).sin()).collect();
        let rope = GatedRope::new(
            RopeSpec::new(4, 10.0, Pairing::Adjacent),
            ChunkGate::all(2),
            3,
        );
        let example = Example {
            context: vec![vec![0], vec![0, 1]],
            query: vec![1],
            answer: 0,
            answer_pos: 0,
        };
        let add = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x + y).collect::<Vec<_>>();
        let q = rope.apply(&params[4..8], 2);
        let keys = [params[8..12].to_vec(), add(&params[8..12], &params[12..16])];
        let logits: Vec<f64> = keys
            .iter()
            .enumerate()
            .map(|(j, k)| dot(&q, &rope.apply(k, j)))
            .collect();
        let total: f64 = logits.iter().map(|a| a.exp()).sum();
        let s: Vec<f64> = logits.iter().map(|a| a.exp() / total).collect();
        let got = head.attention(&params, &rope, &example.context, &example.query);
        for (g, w) in got.iter().zip(&s) {
            assert!((g - w).abs() < 1e-15, "attention {g} against {w}");
        }
        // z = S_0 · W_out[:, 0] + S_1 · (W_out[:, 0] + W_out[:, 1]).
        let outputs = [params[16..18].to_vec(), add(&params[16..18], &params[18..20])];
        let z = head.logits(&params, &rope, &example);
        for (c, zc) in z.iter().enumerate() {
            let want = s[0] * outputs[0][c] + s[1] * outputs[1][c];
            assert!((zc - want).abs() < 1e-15, "class {c}: {zc} against {want}");
        }
    }

    /// The task's loss is the mean over examples of `−log softmax(z)[answer]`, with `z` the class logits that
    /// [`GatedHead::logits`] gives (held to their definition above).
    #[test]
    fn loss_is_the_mean_cross_entropy_of_the_logits() {
        let head = GatedHead {
            n_features: 3,
            head_dim: 2,
            n_classes: 3,
        };
        let params: Vec<f64> = (0..head.n_params()).map(|i| (1.3 * i as f64).cos()).collect();
        let rope = GatedRope::new(RopeSpec::new(2, 10.0, Pairing::Adjacent), ChunkGate::all(1), 4);
        let examples = [
            Example { context: vec![vec![0], vec![1, 2], vec![2]], query: vec![1], answer: 2, answer_pos: 1 },
            Example { context: vec![vec![2], vec![0, 1]], query: vec![0, 2], answer: 0, answer_pos: 0 },
        ];
        let want = examples
            .iter()
            .map(|ex| {
                let z = head.logits(&params, &rope, ex);
                z.iter().map(|zc| zc.exp()).sum::<f64>().ln() - z[ex.answer]
            })
            .sum::<f64>()
            / 2.0;
        let task = TaskLoss { head, rope: &rope, examples: &examples };
        let (loss, grad) = task.loss_and_grad(&params);
        assert!((loss - want).abs() < 1e-14, "{loss} against {want}");
        assert_eq!(grad.len(), head.n_params());
    }
}
