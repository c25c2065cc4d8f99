//! The mixture-of-experts feed-forward block: routing (the rules of [`Routing`]), each expert run once on the rows
//! routed to it, shared experts, and Gemma 4's experts beside the dense block.

use super::weights::{BesideDense, Experts};
use super::{add_into, ops, project, project_all, Model};
use crate::model::config::Routing;
use crate::numeric::Real;
use crate::profile::{time, Step};

impl<T: Real> Model<T> {
    /// Gemma 4's experts beside the dense block, from the block's normed input `h` and the residual stream `x`:
    /// `norm₁(dense(h)) + norm₂(experts(norm(x)))`, the router reading `x` normed without gains, times its
    /// per-channel scale and `n_embd^−½`.
    pub(super) fn experts_beside_dense(
        &self,
        e: &Experts<T>,
        b: &BesideDense<T>,
        h: &[T],
        x: &[f64],
        rows: usize,
    ) -> Vec<T> {
        let c = &self.config;
        let mut dense = self.dense_ffn(&b.dense, h, rows);
        time(Step::Norm, || {
            ops::rms_norm_segments(&mut dense, &b.dense_post_norm, c.eps())
        });
        let unit = vec![T::one(); c.n_embd];
        let mut router_in: Vec<T> = time(Step::Norm, || ops::rms_normed(x, &unit, c.eps()));
        let root = T::of_f64(1.0 / (c.n_embd as f64).sqrt());
        for row in router_in.chunks_mut(c.n_embd) {
            for (v, &s) in row.iter_mut().zip(&b.router_scale) {
                *v = *v * s * root;
            }
        }
        let input: Vec<T> = time(Step::Norm, || {
            ops::rms_normed(x, &b.experts_pre_norm, c.eps())
        });
        let mut routed = self.experts(e, &input, &router_in, Some(&b.expert_scale), rows);
        time(Step::Norm, || {
            ops::rms_norm_segments(&mut routed, &b.experts_post_norm, c.eps())
        });
        add_into(&mut dense, &routed);
        dense
    }

    /// A mixture of experts: the router's logits (f64) pick each token's experts and weights as the model's
    /// [`Routing`] says; each expert runs once on the rows routed to it, weighted after its down projection (or on
    /// its input: Llama 4), its outputs added in ascending expert order in f64, then the shared expert's, if any.
    ///
    /// The router reads `router_in` (the experts' input `h` but in Gemma 4), and each chosen weight is multiplied
    /// by `expert_scale` of its expert where given.
    pub(super) fn experts(
        &self,
        e: &Experts<T>,
        h: &[T],
        router_in: &[T],
        expert_scale: Option<&[f64]>,
        rows: usize,
    ) -> Vec<T> {
        let c = &self.config;
        let moe = c
            .moe
            .expect("a model with experts has a mixture-of-experts configuration");
        let d = c.n_embd;
        let logits = project(
            Step::ProjectGateUp,
            &e.router,
            router_in,
            rows,
            e.router_bias.as_deref(),
        );
        let routes: Vec<Vec<(usize, f64)>> = logits
            .chunks(moe.n_experts)
            .map(|row| {
                let mut chosen = route(row, moe.n_used, moe.routing, e.selection_bias.as_deref());
                if let Some(s) = expert_scale {
                    chosen.iter_mut().for_each(|(i, w)| *w *= s[*i]);
                }
                chosen
            })
            .collect();
        // Each expert's rows (ascending) and their weights, from one pass over the routes.
        let mut by_expert: Vec<Vec<(usize, f64)>> = vec![Vec::new(); moe.n_experts];
        for (r, chosen) in routes.iter().enumerate() {
            for &(expert, w) in chosen {
                by_expert[expert].push((r, w));
            }
        }
        let mut out = vec![0.0f64; rows * d];
        for (expert, picked) in by_expert.iter().enumerate() {
            if picked.is_empty() {
                continue;
            }
            let n = picked.len();
            // Llama 4 weights the expert's input instead of its output.
            let xs: Vec<T> = picked
                .iter()
                .flat_map(|&(r, w)| {
                    let w = T::of_f64(w);
                    h[r * d..(r + 1) * d]
                        .iter()
                        .map(move |&x| if moe.weights_input { x * w } else { x })
                })
                .collect();
            let [b_gate, b_up, b_down] = match &e.biases {
                Some(b) => b[expert].each_ref().map(|v| Some(v.as_slice())),
                None => [None; 3],
            };
            let products = [(&e.gate[expert], b_gate), (&e.up[expert], b_up)];
            let ys = project_all(Step::ProjectGateUp, &products, &xs, n);
            let [mut gate, up]: [Vec<T>; 2] = ys.try_into().expect("two products");
            time(Step::Activation, || {
                ops::gated(&mut gate, &up, c.activation)
            });
            let y = project(Step::ProjectDown, &e.down[expert], &gate, n, b_down);
            for (&(r, w), y) in picked.iter().zip(y.chunks(d)) {
                let w = if moe.weights_input {
                    1.0
                } else {
                    w * moe.scale
                };
                for (o, &v) in out[r * d..(r + 1) * d].iter_mut().zip(y) {
                    *o += v.to_f64_exact() * w;
                }
            }
        }
        // The shared expert's output joins the routed experts' sum last, as HF adds that sum to it.
        if let Some(shared) = &e.shared {
            let s = self.dense_ffn(shared, h, rows);
            out.iter_mut()
                .zip(&s)
                .for_each(|(o, &v)| *o += v.to_f64_exact());
        }
        out.into_iter().map(T::of_f64).collect()
    }
}

/// The experts a token is routed to and their weights, in f64, as `routing` says: the `k` largest logits (the
/// lower index first among equals; the softmax and the sigmoid keep their order), weighted by the softmax over
/// every expert (renormalised to sum 1 when asked), by the softmax over the chosen logits alone or by their
/// sigmoids; or DeepSeek V3's choice on the biased sigmoids within the best groups ([`Routing::SigmoidGrouped`],
/// `bias` the router's selection bias).
fn route<T: Real>(
    logits: &[T],
    k: usize,
    routing: Routing,
    bias: Option<&[f64]>,
) -> Vec<(usize, f64)> {
    let logits: Vec<f64> = logits.iter().map(|v| v.to_f64_exact()).collect();
    let best_first = |score: &[f64], allowed: &dyn Fn(usize) -> bool| {
        let mut order: Vec<usize> = (0..score.len()).filter(|&i| allowed(i)).collect();
        order.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
        order
    };
    let order = best_first(&logits, &|_| true);
    let chosen = &order[..k];
    let softmax_over = |ids: &[usize]| -> Vec<f64> {
        let max = ids
            .iter()
            .map(|&i| logits[i])
            .fold(f64::NEG_INFINITY, f64::max);
        let exps: Vec<f64> = ids.iter().map(|&i| (logits[i] - max).exp()).collect();
        let sum: f64 = exps.iter().sum();
        exps.iter().map(|e| e / sum).collect()
    };
    match routing {
        Routing::SoftmaxTopK { normalize } => {
            let all: Vec<usize> = (0..logits.len()).collect();
            let probs = softmax_over(&all);
            let mut picked: Vec<(usize, f64)> = chosen.iter().map(|&i| (i, probs[i])).collect();
            if normalize {
                let total: f64 = picked.iter().map(|(_, p)| p).sum();
                picked.iter_mut().for_each(|(_, p)| *p /= total);
            }
            picked
        }
        Routing::TopKSoftmax => chosen.iter().copied().zip(softmax_over(chosen)).collect(),
        Routing::TopKSigmoid => chosen
            .iter()
            .map(|&i| (i, 1.0 / (1.0 + (-logits[i]).exp())))
            .collect(),
        Routing::SigmoidGrouped {
            groups,
            groups_used,
            normalize,
        } => {
            let s: Vec<f64> = logits.iter().map(|&z| 1.0 / (1.0 + (-z).exp())).collect();
            let choice: Vec<f64> = match bias {
                Some(b) => s.iter().zip(b).map(|(v, b)| v + b).collect(),
                None => s.clone(),
            };
            let per = logits.len() / groups.max(1);
            let group_score: Vec<f64> = choice
                .chunks(per.max(1))
                .map(|g| {
                    let best = best_first(g, &|_| true);
                    best.iter().take(2).map(|&i| g[i]).sum()
                })
                .collect();
            let kept = &best_first(&group_score, &|_| true)[..groups_used.min(group_score.len())];
            let order = best_first(&choice, &|e| groups <= 1 || kept.contains(&(e / per)));
            let mut picked: Vec<(usize, f64)> = order.iter().take(k).map(|&i| (i, s[i])).collect();
            if normalize {
                let total: f64 = picked.iter().map(|(_, w)| w).sum::<f64>() + 1e-20;
                picked.iter_mut().for_each(|(_, w)| *w /= total);
            }
            picked
        }
    }
}
