//! Decoder-only RoPE transformers from GGUF: configuration per architecture, weights, and the forward pass
//! with full attention capture.
//!
//! One implementation serves both precisions (`Model<f64>` is the golden reference, `Model<f32>` the fast
//! path) and every architecture in [`SUPPORTED`].

pub mod arithmetic;
pub mod config;
mod experts;
mod finite;
mod latent;
mod memory;
mod ops;
mod prefix;
internal_mod! {
    arch;
    attention;
    matrix;
    weights;
}

pub use arch::SUPPORTED;
pub use arithmetic::Arithmetic;
pub use config::{Activation, LayerConfig, ModelConfig};
use config::{LogitScale, QkNorm, Residual};
pub use memory::{packed_weight_bytes, MEMORY_LIMIT_VAR};
pub use ops::NormEps;
pub use prefix::PrefixKv;

use crate::capture::{Capture, HeadInfo, LayerPlan};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::linalg::gather_columns;
use crate::numeric::Real;
use crate::profile::{count_flops, time, Step};
use crate::rope::{RopeSpec, RopeTable};
use attention::{attend, LayerQkv, LayerShape};
use finite::{ensure_finite, Site};
use matrix::WeightMatrix;
use prefix::LayerKv;
use rayon::prelude::*;
use std::ops::Range;
use weights::{
    DenseFfn, FfnWeights, LayerWeights, MlaWeights, NormWeights, PerLayerInputs, Weights,
};

/// A model ready to run in precision `T`.
pub struct Model<T> {
    /// The resolved configuration.
    pub config: ModelConfig,
    weights: Weights<T>,
}

/// A layer's own keys after and before RoPE, values, and (under latent attention) normed latent.
struct OwnKv<T> {
    k: Vec<T>,
    k_pre: Vec<T>,
    v: Vec<T>,
    latent: Vec<T>,
}

/// Options of one forward pass.
#[derive(Clone, Debug, Default)]
pub struct ForwardOptions {
    /// Positions whose output logits to compute (empty: none). Clipped to the sequence.
    pub logits_rows: Range<usize>,
    /// Per-chunk rotation switch of each layer, one list per layer as long as its chunks (`false` leaves that
    /// frequency unrotated: p-RoPE and band ablations); `None` rotates every chunk.
    pub rope_keep: Option<Vec<Vec<bool>>>,
}

impl ForwardOptions {
    /// Layer `l`'s rotation switches, if any.
    fn keep_of(&self, l: usize) -> Option<&[bool]> {
        self.rope_keep.as_ref().map(|k| k[l].as_slice())
    }
}

/// Result of a forward pass.
#[derive(Clone, Debug)]
pub struct ForwardOutput<T> {
    /// Positions the logits belong to.
    pub rows: Range<usize>,
    /// `[rows.len(), vocab]` output logits, row-major.
    pub logits: Vec<T>,
}

impl<T: Real> Model<T> {
    /// Resolves the configuration of `file` and takes its weights, checking every tensor (the matrices stay
    /// quantized in the file's memory map, which the model keeps open). A file whose tensor data is incomplete
    /// is refused before anything else ([`crate::Error::TruncatedData`]).
    pub fn load(file: &GgufFile) -> Result<Self> {
        Self::load_with(file, Arithmetic::Exact)
    }

    /// [`Model::load`] computing with `arithmetic`. Errors when the arithmetic does not exist in precision
    /// `T` or for one of the file's weight types.
    pub fn load_with(file: &GgufFile, arithmetic: Arithmetic) -> Result<Self> {
        arithmetic.check_precision::<T>()?;
        file.require_whole_data()?;
        let mut config = arch::resolve(file)?;
        config.arithmetic = arithmetic;
        config.activation = arithmetic.activation(config.activation);
        let weights = Weights::load(file, &config)?;
        Ok(Self { config, weights })
    }

    /// Lets the model keep up to `bytes` more of its weight matrices dequantized and packed for the product
    /// kernel between passes, each from its first exact product on, in the order the passes first use them
    /// (the first layers' first; the output head after every layer). Every result is the same bits: what changes
    /// is that a kept matrix is not dequantized and packed again by each product (about a twentieth of a
    /// pass's time), at its size in `T` in memory (SmolLM2-135M's 30 layers: 425 MB in f32). For runs of many
    /// passes, such as a scan.
    pub fn keep_packed_weights(&self, bytes: usize) {
        self.weights.panel_budget.grant(bytes);
    }

    /// The weights (token embeddings, per-layer projections), for analyses of the weights themselves.
    pub(crate) fn weights(&self) -> &Weights<T> {
        &self.weights
    }

    /// Runs the model on `ids`, handing attention to `capture`, and returns the logits of `opts.logits_rows`.
    pub fn forward<C: Capture<T>>(
        &self,
        ids: &[u32],
        opts: &ForwardOptions,
        capture: &mut C,
    ) -> Result<ForwardOutput<T>> {
        self.run(ids, opts, capture, None, None)
    }

    /// [`Model::forward`], also returning every layer's keys and values, from which
    /// [`Model::forward_from_prefix`] can resume a pass over a sequence that starts with the same tokens.
    pub fn forward_keeping_prefix<C: Capture<T>>(
        &self,
        ids: &[u32],
        opts: &ForwardOptions,
        capture: &mut C,
    ) -> Result<(ForwardOutput<T>, PrefixKv<T>)> {
        let mut kept = Vec::new();
        let out = self.run(ids, opts, capture, None, Some(&mut kept))?;
        Ok((
            out,
            PrefixKv::new(ids.to_vec(), opts.rope_keep.clone(), kept),
        ))
    }

    /// [`Model::forward`] over `ids` (as long as the pass `prefix` was kept from, with the same RoPE mask),
    /// computing only the positions from the first token where `ids` differs from that pass's (at least the
    /// last): the earlier positions' keys and values are `prefix`'s. Every value it computes has the same bits
    /// as in [`Model::forward`]. The capture sees attention of the computed rows only, and its vectors with the
    /// queries of the rows before them zero; a capture that asks for head outputs or the residual stream, or
    /// logits of rows that are not computed, is refused.
    pub fn forward_from_prefix<C: Capture<T>>(
        &self,
        ids: &[u32],
        opts: &ForwardOptions,
        capture: &mut C,
        prefix: &PrefixKv<T>,
    ) -> Result<ForwardOutput<T>> {
        self.run(ids, opts, capture, Some(prefix), None)
    }

    /// The forward pass, from position 0 or resumed after `prefix`'s reusable rows, keeping every layer's keys
    /// and values in `keep` if given.
    fn run<C: Capture<T>>(
        &self,
        ids: &[u32],
        opts: &ForwardOptions,
        capture: &mut C,
        prefix: Option<&PrefixKv<T>>,
        mut keep: Option<&mut Vec<LayerKv<T>>>,
    ) -> Result<ForwardOutput<T>> {
        self.validate(ids)?;
        let c = &self.config;
        if let Some(keep) = &opts.rope_keep {
            let chunks: Vec<usize> = c.layers.iter().map(|l| l.rope.n_chunks()).collect();
            let given: Vec<usize> = keep.iter().map(Vec::len).collect();
            if given != chunks {
                return Err(Error::Argument(format!(
                    "the RoPE mask has {given:?} entries per layer, the model's layers have {chunks:?} chunks"
                )));
            }
        }
        let t = ids.len();
        let start = match prefix {
            Some(p) => {
                let start = p.reusable_rows(ids, opts)?;
                let fits = |(kv, lc): (&LayerKv<T>, &LayerConfig)| {
                    let (kw, vw) = (lc.n_kv_heads * lc.head_dim(), lc.n_kv_heads * lc.value_dim);
                    kv.k.len() == t * kw && kv.k_pre.len() == t * kw && kv.v.len() == t * vw
                };
                if p.layers.len() != c.layers.len() || !p.layers.iter().zip(&c.layers).all(fits) {
                    return Err(Error::Argument(
                        "the kept keys and values are not of this model".into(),
                    ));
                }
                start
            }
            None => 0,
        };
        let rows = opts.logits_rows.start.min(t)..opts.logits_rows.end.min(t);
        if !rows.is_empty() && rows.start < start {
            return Err(Error::Argument(format!(
                "logits of positions {rows:?} asked of a pass resumed at position {start}"
            )));
        }
        let whole = |l: usize| {
            let plan = capture.plan(l);
            plan.output || plan.residual
        };
        if start > 0 && (0..c.layers.len()).any(whole) {
            return Err(Error::Argument(
                "a resumed pass computes no head outputs or residual stream for the reused positions; \
                 the capture asks for them"
                    .into(),
            ));
        }
        let mut x = time(Step::Embed, || self.embed(&ids[start..]));
        ensure_finite(&x, c.n_embd, start, Site::Embeddings, "the embedding rows")?;
        let per_layer_inputs = match &self.weights.per_layer_inputs {
            Some(p) => {
                let inputs = time(Step::Embed, || self.per_layer_inputs(p, &ids[start..], &x));
                let width = inputs.len() / (t - start).max(1);
                ensure_finite(
                    &inputs,
                    width,
                    start,
                    Site::Embeddings,
                    "the per-layer inputs",
                )?;
                Some(inputs)
            }
            None => None,
        };
        // The keys and values of the layers that later layers attend over (Gemma 4's KV sharing).
        let mut shared: Vec<Option<LayerKv<T>>> = vec![None; c.layers.len()];
        let mut tables: Vec<(RopeSpec, RopeTable<T>)> = Vec::new();
        for (l, (lc, lw)) in c.layers.iter().zip(&self.weights.layers).enumerate() {
            crate::interrupt::check()?;
            let plan = capture.plan(l);
            let spec = lc.rope.spec(t);
            let index = match tables.iter().position(|(s, _)| *s == spec) {
                Some(i) => i,
                None => {
                    tables.push((spec.clone(), RopeTable::new(spec, t)));
                    tables.len() - 1
                }
            };
            let producer = c.layers.iter().any(|later| later.kv_from == Some(l));
            let resume = Resume {
                layer: l,
                start,
                prefix: prefix.map(|p| &p.layers[l]),
                shared: lc.kv_from.and_then(|src| shared[src].as_ref()),
                keep: keep.is_some() || producer,
                // The last layer's output feeds only the logits and a residual capture.
                finish: l + 1 < c.layers.len() || !rows.is_empty() || plan.residual,
            };
            let inputs = per_layer_inputs.as_deref();
            let kept = self.layer(
                l,
                lc,
                lw,
                &tables[index].1,
                opts,
                plan,
                resume,
                (&mut x, inputs),
                capture,
            )?;
            match (keep.as_deref_mut(), producer) {
                (Some(keep), true) => {
                    keep.push(kept.clone().expect("kept when asked"));
                    shared[l] = kept;
                }
                (Some(keep), false) => keep.push(kept.expect("kept when asked")),
                (None, true) => shared[l] = kept,
                (None, false) => {}
            }
        }
        crate::interrupt::check()?;
        let x_rows = (rows.start.max(start) - start)..(rows.end.max(start) - start);
        let logits = time(Step::Logits, || {
            self.logits(
                &x[x_rows.start * c.n_embd..x_rows.end * c.n_embd],
                rows.len(),
            )
        });
        ensure_finite(
            &logits,
            c.vocab_size,
            rows.start,
            Site::OutputHead,
            "the logits",
        )?;
        Ok(ForwardOutput { logits, rows })
    }

    /// Every query head of layer `layer` in a pass over `n_tokens` positions: its key/value head, geometry,
    /// rotary embedding, mask, sink and scale, as the forward pass attends with them.
    ///
    /// # Panics
    /// If `layer` is not a layer of the model.
    pub fn head_infos(&self, layer: usize, n_tokens: usize) -> Vec<HeadInfo> {
        let lc = &self.config.layers[layer];
        let template = self.head_template(layer, lc.rope.spec(n_tokens), n_tokens);
        let sinks = self.weights.layers[layer].sinks.as_deref();
        (0..self.config.n_heads)
            .map(|h| template.of_head(h, self.config.n_heads, lc.n_kv_heads, sinks))
            .collect()
    }

    /// Head 0 of layer `l` rotated by `rope` in a pass over `t` positions, the template of the layer's heads.
    fn head_template(&self, l: usize, rope: RopeSpec, t: usize) -> HeadInfo {
        let lc = &self.config.layers[l];
        HeadInfo {
            layer: l,
            head: 0,
            kv_head: 0,
            head_dim: lc.head_dim(),
            value_dim: lc.value_dim,
            n_tokens: t,
            rope,
            window: lc.window,
            chunk: lc.chunk,
            sink: None,
            scale: self.config.attn_scale,
        }
    }

    /// The embedding rows of `ids`, the start of the residual stream, in f64 (see [`Model::layer`]). The scale
    /// (Gemma's `sqrt(n_embd)`, Granite's multiplier) multiplies in f64; under ggml's arithmetic, as a float32
    /// scale in float32.
    fn embed(&self, ids: &[u32]) -> Vec<f64> {
        let d = self.config.n_embd;
        let mut row = vec![T::zero(); d];
        let mut x = Vec::with_capacity(ids.len() * d);
        for &id in ids {
            let id = id as usize;
            self.weights
                .token_embd
                .dequantize_rows(id..id + 1, &mut row);
            let s = self.config.embed_scale.unwrap_or(1.0);
            match self.config.arithmetic {
                Arithmetic::Exact => x.extend(row.iter().map(|v| v.to_f64_exact() * s)),
                Arithmetic::Ggml => x.extend(
                    row.iter()
                        .map(|v| (v.to_f64_exact() as f32 * s as f32) as f64),
                ),
            }
        }
        x
    }

    /// One block over the rows of the residual stream `x`, with the rows of the per-layer inputs where the model
    /// has them (`[rows, n_layers · P]`). The stream is kept in f64 whatever `T`: each block reads it through a
    /// norm rounded once to `T` and adds its output in f64, so the f32 engine's rounding does not accumulate along
    /// the stream over the layers (the f64 engine computes the same numbers either way).
    #[allow(clippy::too_many_arguments)]
    fn layer<C: Capture<T>>(
        &self,
        l: usize,
        lc: &LayerConfig,
        w: &LayerWeights<T>,
        table: &RopeTable<T>,
        opts: &ForwardOptions,
        plan: LayerPlan,
        resume: Resume<'_, T>,
        (x, per_layer_inputs): (&mut [f64], Option<&[T]>),
        capture: &mut C,
    ) -> Result<Option<LayerKv<T>>> {
        let c = &self.config;
        // `x` holds positions `start..t`, the ones this pass computes.
        let (rows, hd, vd, kvh) = (
            x.len() / c.n_embd,
            lc.head_dim(),
            lc.value_dim,
            lc.n_kv_heads,
        );
        let (start, t) = (resume.start, resume.start + rows);
        let qw = c.n_heads * hd;
        let keep = opts.keep_of(l);
        let site = Site::Layer(l);

        let h = pre_normed(x, w.attn_norm.as_ref(), c.eps());
        // A layer that projects its own keys and values from `h` (not latent, not an earlier layer's) projects
        // its queries with them, as one product.
        let (mut q, mut own_kv) = match (w.mla.as_ref(), resume.shared) {
            (None, None) => {
                let (q, k, v) = self.project_qkv(w, &h, rows);
                (q, Some((k, v)))
            }
            (
                Some(MlaWeights {
                    q_a: Some((q_a, norm)),
                    ..
                }),
                _,
            ) => {
                let mut a = project(Step::ProjectQkv, q_a, &h, rows, None);
                time(Step::Norm, || ops::rms_norm_segments(&mut a, norm, c.eps()));
                (
                    project(Step::ProjectQkv, &w.wq, &a, rows, w.bq.as_deref()),
                    None,
                )
            }
            _ => (
                project(Step::ProjectQkv, &w.wq, &h, rows, w.bq.as_deref()),
                None,
            ),
        };
        if c.mla.is_some() {
            latent::rope_part_first(&mut q, hd, lc.rope.rot_dim);
        }
        if let Some(qn) = &w.q_norm {
            time(Step::Norm, || ops::rms_norm_segments(&mut q, qn, c.eps()));
        }
        if c.qk_norm == QkNorm::Unit && lc.rope.rotates() {
            let unit = vec![T::one(); hd];
            time(Step::Norm, || {
                ops::rms_norm_segments(&mut q, &unit, c.eps())
            });
        }
        if let Some(temperature) = lc.temperature {
            q.par_chunks_mut(qw).enumerate().for_each(|(i, row)| {
                let s = T::of_f64(temperature.at(start + i));
                row.iter_mut().for_each(|v| *v = *v * s);
            });
        }
        let mut q_pre = match plan.vectors {
            true => q.clone(),
            false => Vec::new(),
        };
        time(Step::Rope, || {
            rotate_all(&mut q, qw, hd, table, start, keep)
        });
        ensure_finite(&q, qw, start, site, "the post-RoPE queries")?;
        if start > 0 {
            // Queries of the reused positions are not computed (zero).
            q = prefix::after(None, start * qw, &q);
            if plan.vectors {
                q_pre = prefix::after(None, start * qw, &q_pre);
            }
        }
        let (k, k_pre, v) = match resume.shared {
            // An earlier layer's keys and values, over the whole sequence.
            Some(kv) => (kv.k.clone(), kv.k_pre.clone(), kv.v.clone()),
            None => {
                let with_pre = plan.vectors || resume.keep;
                let span = (start, rows);
                let projected = own_kv.take();
                let own = self.own_keys_and_values(
                    w, lc, &h, projected, span, table, opts, resume, with_pre,
                )?;
                if plan.latent && !own.latent.is_empty() {
                    capture.latent(l, &own.latent);
                }
                (own.k, own.k_pre, own.v)
            }
        };
        let kept = resume.keep.then(|| LayerKv {
            k: k.clone(),
            k_pre: k_pre.clone(),
            v: v.clone(),
        });
        let k_pre = match plan.vectors {
            true => k_pre,
            false => Vec::new(),
        };

        let template = self.head_template(l, table.spec().clone(), t);
        let shape = LayerShape {
            n_tokens: t,
            first_row: start,
            n_heads: c.n_heads,
            n_kv_heads: kvh,
            softcap: c.attn_softcap,
            sinks: w.sinks.as_deref(),
        };
        let qkv = LayerQkv {
            q: &q,
            k: &k,
            v: &v,
            q_pre: &q_pre,
            k_pre: &k_pre,
        };
        let heads = time(Step::Attention, || {
            attend(&qkv, &shape, &template, plan, capture)
        });
        drop((q, k, v, q_pre, k_pre));
        ensure_finite(&heads, c.n_heads * vd, start, site, "the heads' outputs")?;
        if !resume.finish {
            return Ok(kept);
        }

        let mut o = project(Step::ProjectO, &w.wo, &heads, rows, w.bo.as_deref());
        if let Some(pn) = &w.post_attn_norm {
            time(Step::Norm, || ops::rms_norm_segments(&mut o, pn, c.eps()));
        }
        scale(&mut o, c.residual_scale);
        if c.residual == Residual::Sequential {
            time(Step::Activation, || add_to_stream(x, &o, c.arithmetic));
            ensure_finite(
                x,
                c.n_embd,
                start,
                site,
                "the residual stream after attention",
            )?;
            let h = pre_normed(x, w.ffn_norm.as_ref(), c.eps());
            let f = self.feed_forward(w, &h, x, rows);
            time(Step::Activation, || add_to_stream(x, &f, c.arithmetic));
        } else {
            // Both blocks read the block's input (the stream is not yet updated), the feed-forward block through
            // its own norm or the attention's; their sum joins the stream.
            let f = match &w.ffn_norm {
                Some(norm) => self.feed_forward(w, &pre_normed(x, Some(norm), c.eps()), x, rows),
                None => self.feed_forward(w, &h, x, rows),
            };
            time(Step::Activation, || {
                add_into(&mut o, &f);
                add_to_stream(x, &o, c.arithmetic)
            });
        }
        if let (Some(block), Some(inputs)) = (&w.per_layer, per_layer_inputs) {
            let p = block.gate.rows();
            let mine = gather_columns(inputs, c.n_layers * p, l * p..(l + 1) * p);
            let mut gate = project(
                Step::ProjectGateUp,
                &block.gate,
                &pre_normed(x, None, c.eps()),
                rows,
                None,
            );
            time(Step::Activation, || {
                ops::gated(&mut gate, &mine, c.activation)
            });
            let mut y = project(Step::ProjectDown, &block.proj, &gate, rows, None);
            time(Step::Norm, || {
                ops::rms_norm_segments(&mut y, &block.norm, c.eps())
            });
            time(Step::Activation, || add_to_stream(x, &y, c.arithmetic));
        }
        if let Some(s) = w.output_scale {
            x.par_iter_mut().for_each(|v| *v *= s);
        }
        ensure_finite(
            x,
            c.n_embd,
            start,
            site,
            "the residual stream after the feed-forward block",
        )?;
        if plan.residual {
            let stream: Vec<T> = x.iter().map(|&v| T::of_f64(v)).collect();
            capture.residual(l, &stream);
        }
        Ok(kept)
    }

    /// A layer's queries, keys and values of its normed input `h` (`rows` positions), as one product; the values
    /// are the keys where the layer has no value projection.
    fn project_qkv(&self, w: &LayerWeights<T>, h: &[T], rows: usize) -> (Vec<T>, Vec<T>, Vec<T>) {
        let wk =
            w.wk.as_ref()
                .expect("a layer that does not reuse keys has its key projection");
        let mut products = vec![(&w.wq, w.bq.as_deref()), (wk, w.bk.as_deref())];
        products.extend(w.wv.as_ref().map(|wv| (wv, w.bv.as_deref())));
        let mut ys = project_all(Step::ProjectQkv, &products, h, rows).into_iter();
        let (q, k) = (ys.next().expect("queries"), ys.next().expect("keys"));
        let v = ys.next().unwrap_or_else(|| k.clone());
        (q, k, v)
    }

    /// A layer's own keys (before and after RoPE) and values from its normed input `h` of `rows` positions from
    /// `start`, over the whole sequence (the reused positions' from the prefix in a resumed pass): `projected`
    /// ([`Model::project_qkv`]'s keys and values; under latent attention, `None`: decompressed from the latent),
    /// normed (QK-norm, the values' gainless norm) and the keys rotated. The keys before
    /// RoPE are kept only when `with_pre` (empty otherwise); the latent of the computed positions only under
    /// latent attention.
    #[allow(clippy::too_many_arguments)]
    fn own_keys_and_values(
        &self,
        w: &LayerWeights<T>,
        lc: &LayerConfig,
        h: &[T],
        projected: Option<(Vec<T>, Vec<T>)>,
        (start, rows): (usize, usize),
        table: &RopeTable<T>,
        opts: &ForwardOptions,
        resume: Resume<'_, T>,
        with_pre: bool,
    ) -> Result<OwnKv<T>> {
        let c = &self.config;
        let (hd, vd) = (lc.head_dim(), lc.value_dim);
        let (mut k, mut v, latent) = match (&w.mla, projected) {
            (Some(m), _) => self.latent_keys_and_values(m, lc, h, rows),
            (None, projected) => {
                let (mut k, mut v) = projected.expect("a layer's own keys and values projected");
                time(Step::Norm, || {
                    if let Some(kn) = &w.k_norm {
                        ops::rms_norm_segments(&mut k, kn, c.eps());
                    }
                    if c.qk_norm == QkNorm::Unit && lc.rope.rotates() {
                        ops::rms_norm_segments(&mut k, &vec![T::one(); hd], c.eps());
                    }
                    if c.v_norm {
                        ops::rms_norm_segments(&mut v, &vec![T::one(); vd], c.eps());
                    }
                });
                (k, v, Vec::new())
            }
        };
        let (kw, vw) = (k.len() / rows.max(1), v.len() / rows.max(1));
        let mut k_pre = match with_pre {
            true => k.clone(),
            false => Vec::new(),
        };
        let keep = opts.keep_of(resume.layer);
        time(Step::Rope, || {
            rotate_all(&mut k, kw, hd, table, start, keep)
        });
        let site = Site::Layer(resume.layer);
        ensure_finite(&k, kw, start, site, "the post-RoPE keys")?;
        ensure_finite(&v, vw, start, site, "the values")?;
        if let Some(p) = resume.prefix.filter(|_| start > 0) {
            // The whole sequence's keys and values: the reused positions' from the prefix.
            k = prefix::after(Some(&p.k), start * kw, &k);
            v = prefix::after(Some(&p.v), start * vw, &v);
            if with_pre {
                k_pre = prefix::after(Some(&p.k_pre), start * kw, &k_pre);
            }
        }
        Ok(OwnKv {
            k,
            k_pre,
            v,
            latent,
        })
    }

    /// The per-layer inputs of `ids` (Gemma 4's PLE), `[rows, n_layers · P]`: each layer's slice of the projected
    /// embeddings `x` (the stream's first rows), normed, plus its slice of the per-layer token embeddings scaled by
    /// `√P`, the sum divided by `√2`, in HF's order of operations.
    fn per_layer_inputs(&self, p: &PerLayerInputs<T>, ids: &[u32], x: &[f64]) -> Vec<T> {
        let c = &self.config;
        let (rows, width) = (ids.len(), p.model_proj.rows());
        let x: Vec<T> = x.iter().map(|&v| T::of_f64(v)).collect();
        let mut proj = project(Step::ProjectGateUp, &p.model_proj, &x, rows, None);
        let scale = T::of_f64(1.0 / (c.n_embd as f64).sqrt());
        proj.iter_mut().for_each(|v| *v = *v * scale);
        ops::rms_norm_segments(&mut proj, &p.norm, c.eps());
        let token_scale = T::of_f64((p.norm.len() as f64).sqrt());
        let half = T::of_f64(std::f64::consts::FRAC_1_SQRT_2);
        let mut row = vec![T::zero(); width];
        for (i, &id) in ids.iter().enumerate() {
            let id = id as usize;
            p.token_embd.dequantize_rows(id..id + 1, &mut row);
            for (o, &e) in proj[i * width..(i + 1) * width].iter_mut().zip(&row) {
                *o = (*o + e * token_scale) * half;
            }
        }
        proj
    }

    /// The feed-forward block on `rows` normed rows `h`, through its post-norm and residual scale.
    fn feed_forward(&self, w: &LayerWeights<T>, h: &[T], x: &[f64], rows: usize) -> Vec<T> {
        let c = &self.config;
        let mut f = match &w.ffn {
            FfnWeights::Dense(d) => self.dense_ffn(d, h, rows),
            FfnWeights::Experts(e) => match &e.beside {
                Some(b) => self.experts_beside_dense(e, b, h, x, rows),
                None => self.experts(e, h, h, None, rows),
            },
        };
        if let Some(pn) = &w.post_ffn_norm {
            time(Step::Norm, || ops::rms_norm_segments(&mut f, pn, c.eps()));
        }
        scale(&mut f, c.residual_scale);
        f
    }

    /// A dense feed-forward block: `down(act(gate(h)) · up(h))`, or `down(act(up(h)))` without a gate.
    fn dense_ffn(&self, d: &DenseFfn<T>, h: &[T], rows: usize) -> Vec<T> {
        let act = self.config.activation;
        let hidden = match &d.gate {
            Some(gate_w) => {
                let products = [(gate_w, None), (&d.up, d.b_up.as_deref())];
                let ys = project_all(Step::ProjectGateUp, &products, h, rows);
                let [mut gate, up]: [Vec<T>; 2] = ys.try_into().expect("two products");
                time(Step::Activation, || ops::gated(&mut gate, &up, act));
                gate
            }
            None => {
                let mut up = project(Step::ProjectGateUp, &d.up, h, rows, d.b_up.as_deref());
                time(Step::Activation, || ops::activate(&mut up, act));
                up
            }
        };
        project(
            Step::ProjectDown,
            &d.down,
            &hidden,
            rows,
            d.b_down.as_deref(),
        )
    }

    /// Final norm, output head and soft-capping for `n` rows of the residual stream.
    fn logits(&self, x: &[f64], n: usize) -> Vec<T> {
        let c = &self.config;
        if n == 0 {
            return Vec::new();
        }
        let h = self.weights.output_norm.normed(x, c.eps());
        let head = self
            .weights
            .output
            .as_ref()
            .unwrap_or(&self.weights.token_embd);
        let mut logits = head.apply(&h, n, self.weights.output_bias.as_deref());
        match c.logit_scale {
            Some(LogitScale::Divide(d)) => {
                let d = T::of_f64(d);
                logits.iter_mut().for_each(|v| *v = *v / d);
            }
            Some(LogitScale::Multiply(m)) => {
                let m = T::of_f64(m);
                logits.iter_mut().for_each(|v| *v = *v * m);
            }
            None => {}
        }
        count_flops(Step::Logits, 2 * n * head.rows() * head.cols());
        if let Some(cap) = c.final_softcap {
            ops::softcap(&mut logits, cap);
        }
        logits
    }
}

/// What of layer `layer` a pass computes: positions from 0, or after the first `start` positions, whose keys
/// and values are `prefix`'s; the keys and values of an earlier layer it attends over instead of its own
/// (`shared`, whole-sequence); `keep` asks the layer to return its keys and values; without `finish` it stops
/// after attention (nothing reads its output).
#[derive(Clone, Copy)]
struct Resume<'a, T> {
    layer: usize,
    start: usize,
    prefix: Option<&'a LayerKv<T>>,
    shared: Option<&'a LayerKv<T>>,
    keep: bool,
    finish: bool,
}

/// `w · x` for the `t` rows of `x` (plus `bias`), timed and counted as `step`.
fn project<T: Real>(step: Step, w: &WeightMatrix, x: &[T], t: usize, bias: Option<&[T]>) -> Vec<T> {
    let mut y = project_all(step, &[(w, bias)], x, t);
    y.pop().expect("one product")
}

/// `w · x (+ bias)` of each `(w, bias)` of `products` for the same `t` rows of `x`, as one product
/// ([`WeightMatrix::apply_all`]), timed and counted as `step`.
fn project_all<T: Real>(
    step: Step,
    products: &[(&WeightMatrix, Option<&[T]>)],
    x: &[T],
    t: usize,
) -> Vec<Vec<T>> {
    count_flops(
        step,
        products
            .iter()
            .map(|(w, _)| 2 * t * w.rows() * w.cols())
            .sum(),
    );
    time(step, || WeightMatrix::apply_all(products, x, t))
}

/// Rotates every head of every row (`[rows, width]`, heads of `head_dim`; row `i` is position `first + i`) to
/// its position.
fn rotate_all<T: Real>(
    m: &mut [T],
    width: usize,
    head_dim: usize,
    table: &RopeTable<T>,
    first: usize,
    keep: Option<&[bool]>,
) {
    m.par_chunks_mut(width).enumerate().for_each(|(i, row)| {
        let pos = first + i;
        for head in row.chunks_mut(head_dim) {
            match keep {
                Some(k) => table.rotate_masked(head, pos, k),
                None => table.rotate(head, pos),
            }
        }
    });
}

/// The input of a block: the residual stream normed by `norm`, or the stream itself where the model has no
/// pre-norm, rounded to `T`.
fn pre_normed<T: Real>(x: &[f64], norm: Option<&NormWeights<T>>, eps: ops::NormEps) -> Vec<T> {
    match norm {
        Some(n) => time(Step::Norm, || n.normed(x, eps)),
        None => x.iter().map(|&v| T::of_f64(v)).collect(),
    }
}

/// Multiplies a block's output by the residual scale, if the model has one (Granite).
fn scale<T: Real>(x: &mut [T], by: Option<f64>) {
    if let Some(m) = by {
        let m = T::of_f64(m);
        x.par_iter_mut().for_each(|v| *v = *v * m);
    }
}

/// `x += y`, element-wise.
fn add_into<T: Real>(x: &mut [T], y: &[T]) {
    x.par_iter_mut()
        .zip(y.par_iter())
        .for_each(|(a, &b)| *a = *a + b);
}

/// `x += y` into the f64 residual stream; under ggml's arithmetic the stream is float32, and each sum is
/// rounded to it (the f64 sum of two float32 values is exact, so this is ggml's float32 addition).
fn add_to_stream<T: Real>(x: &mut [f64], y: &[T], arithmetic: Arithmetic) {
    let f32_stream = arithmetic == Arithmetic::Ggml;
    x.par_iter_mut().zip(y.par_iter()).for_each(|(a, &b)| {
        *a += b.to_f64_exact();
        if f32_stream {
            *a = *a as f32 as f64;
        }
    });
}
