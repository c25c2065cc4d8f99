//! Decoder-only RoPE transformers from GGUF: configuration per architecture, weights, and the forward pass
//! with full attention capture.
//!
//! One implementation serves both precisions (`Model<f64>` is the golden reference, `Model<f32>` the fast
//! path) and every architecture in [`SUPPORTED`].

pub mod config;
mod ops;
internal_mod! {
    arch;
    attention;
    matrix;
    weights;
}

pub use arch::SUPPORTED;
pub use config::{Activation, LayerConfig, ModelConfig};

use crate::capture::{Capture, HeadInfo, LayerPlan};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::numeric::Real;
use crate::profile::{count_flops, time, Step};
use crate::rope::{RopeSpec, RopeTable};
use attention::{attend, LayerQkv, LayerShape};
use matrix::WeightMatrix;
use rayon::prelude::*;
use std::ops::Range;
use weights::{LayerWeights, Weights};

/// A model ready to run in precision `T`.
pub struct Model<T> {
    /// The resolved configuration.
    pub config: ModelConfig,
    weights: Weights<T>,
}

/// Options of one forward pass.
#[derive(Clone, Debug, Default)]
pub struct ForwardOptions {
    /// Positions whose output logits to compute (empty: none). Clipped to the sequence.
    pub logits_rows: Range<usize>,
    /// Per-chunk rotation switch for every layer (`false` leaves that frequency unrotated: p-RoPE and band
    /// ablations); `None` rotates every chunk.
    pub rope_keep: Option<Vec<bool>>,
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
        file.require_whole_data()?;
        let config = arch::resolve(file)?;
        let weights = Weights::load(file, &config)?;
        Ok(Self { config, weights })
    }

    /// The weights (token embeddings, per-layer projections), for analyses of the weights themselves.
    pub(crate) fn weights(&self) -> &Weights<T> {
        &self.weights
    }

    /// Checks a prompt before any heavy work: non-empty, every id in the vocabulary, no longer than the
    /// context, and small enough for this machine's available memory.
    pub fn validate(&self, ids: &[u32]) -> Result<()> {
        self.validate_with_capture(ids, 0, "")
    }

    /// [`Model::validate`] for a run that also keeps `capture_bytes` of results in memory; `reduce` says which
    /// options reduce them (appended to the error).
    pub fn validate_with_capture(
        &self,
        ids: &[u32],
        capture_bytes: u64,
        reduce: &str,
    ) -> Result<()> {
        let c = &self.config;
        if ids.is_empty() {
            return Err(Error::Argument("the prompt has no tokens".into()));
        }
        if let Some((pos, &id)) = ids
            .iter()
            .enumerate()
            .find(|(_, &id)| id as usize >= c.vocab_size)
        {
            return Err(Error::Argument(format!(
                "token id {id} at position {pos} is outside the vocabulary of {} tokens",
                c.vocab_size
            )));
        }
        if ids.len() > c.context_length {
            return Err(Error::Argument(format!(
                "the prompt has {} tokens, more than the model's context of {}",
                ids.len(),
                c.context_length
            )));
        }
        let work = self.activation_bytes(ids.len());
        let need = work.saturating_add(capture_bytes);
        if let Some(avail) = available_memory()? {
            if need > avail {
                let kept = if capture_bytes > 0 {
                    format!(
                        " ({} for the forward pass, {} for the results it keeps)",
                        mib(work),
                        mib(capture_bytes)
                    )
                } else {
                    String::new()
                };
                return Err(Error::Resource(format!(
                    "a {}-token run needs about {} of memory{kept}; {} are available{reduce}",
                    ids.len(),
                    mib(need),
                    mib(avail)
                )));
            }
        }
        Ok(())
    }

    /// Working memory of a forward pass over `n` tokens (activations of one layer plus attention blocks).
    pub fn activation_bytes(&self, n: usize) -> u64 {
        let c = &self.config;
        let per_token = 3 * c.n_embd
            + 2 * (c.n_heads * c.head_dim + c.n_kv_heads * c.head_dim) // q, k and their pre-RoPE copies
            + c.n_kv_heads * c.head_dim // the keys transposed for the score products
            + c.n_kv_heads * c.value_dim
            + 2 * c.n_heads * c.value_dim
            + 3 * c.n_ff;
        let blocks = c.n_heads * 2 * attention::ROW_BLOCK * n; // logits and probabilities per head block
        ((per_token * n + blocks) * std::mem::size_of::<T>()) as u64
    }

    /// Runs the model on `ids`, handing attention to `capture`, and returns the logits of `opts.logits_rows`.
    pub fn forward<C: Capture<T>>(
        &self,
        ids: &[u32],
        opts: &ForwardOptions,
        capture: &mut C,
    ) -> Result<ForwardOutput<T>> {
        self.validate(ids)?;
        let c = &self.config;
        if let Some(keep) = &opts.rope_keep {
            let n_chunks = c.n_chunks();
            if keep.len() != n_chunks {
                return Err(Error::Argument(format!(
                    "rope mask has {} entries, the model has {n_chunks} chunks",
                    keep.len()
                )));
            }
        }
        let t = ids.len();
        let mut x = time(Step::Embed, || self.embed(ids));
        let mut tables: Vec<(RopeSpec, RopeTable<T>)> = Vec::new();
        for (l, (lc, lw)) in c.layers.iter().zip(&self.weights.layers).enumerate() {
            crate::interrupt::check()?;
            let spec = lc.rope.spec(t);
            let index = match tables.iter().position(|(s, _)| *s == spec) {
                Some(i) => i,
                None => {
                    tables.push((spec.clone(), RopeTable::new(spec, t)));
                    tables.len() - 1
                }
            };
            self.layer(l, lc, lw, &tables[index].1, opts, &mut x, capture);
        }
        crate::interrupt::check()?;
        let rows = opts.logits_rows.start.min(t)..opts.logits_rows.end.min(t);
        Ok(ForwardOutput {
            logits: time(Step::Logits, || {
                self.logits(&x[rows.start * c.n_embd..rows.end * c.n_embd], rows.len())
            }),
            rows,
        })
    }

    fn embed(&self, ids: &[u32]) -> Vec<T> {
        let d = self.config.n_embd;
        let mut x = vec![T::zero(); ids.len() * d];
        for (row, &id) in x.chunks_mut(d).zip(ids) {
            let id = id as usize;
            self.weights.token_embd.dequantize_rows(id..id + 1, row);
            // The scale (Gemma's sqrt(n_embd)) multiplies in f64, rounded once: an f32 scale would be off by the
            // same factor for every token.
            if let Some(s) = self.config.embed_scale {
                row.iter_mut()
                    .for_each(|v| *v = T::of_f64(v.to_f64_exact() * s));
            }
        }
        x
    }

    #[allow(clippy::too_many_arguments)]
    fn layer<C: Capture<T>>(
        &self,
        l: usize,
        lc: &LayerConfig,
        w: &LayerWeights<T>,
        table: &RopeTable<T>,
        opts: &ForwardOptions,
        x: &mut [T],
        capture: &mut C,
    ) {
        let c = &self.config;
        let (t, hd, vd) = (x.len() / c.n_embd, c.head_dim, c.value_dim);
        let plan: LayerPlan = capture.plan(l);

        let h = time(Step::Norm, || ops::rms_normed(x, &w.attn_norm, c.norm_eps));
        let mut q = project(Step::ProjectQ, &w.wq, &h, t, w.bq.as_deref());
        let mut k = project(Step::ProjectK, &w.wk, &h, t, w.bk.as_deref());
        let v = project(Step::ProjectV, &w.wv, &h, t, w.bv.as_deref());
        if let Some((qn, kn)) = &w.qk_norm {
            time(Step::Norm, || {
                ops::rms_norm_segments(&mut q, qn, c.norm_eps);
                ops::rms_norm_segments(&mut k, kn, c.norm_eps);
            });
        }
        let (q_pre, k_pre) = time(Step::Rope, || {
            let pre = if plan.vectors {
                (q.clone(), k.clone())
            } else {
                (Vec::new(), Vec::new())
            };
            let keep = opts.rope_keep.as_deref();
            rotate_all(&mut q, c.n_heads * hd, hd, table, keep);
            rotate_all(&mut k, c.n_kv_heads * hd, hd, table, keep);
            pre
        });

        let template = HeadInfo {
            layer: l,
            head: 0,
            kv_head: 0,
            head_dim: hd,
            value_dim: vd,
            n_tokens: t,
            rope: table.spec().clone(),
            window: lc.window,
            scale: c.attn_scale,
        };
        let shape = LayerShape {
            n_tokens: t,
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            softcap: c.attn_softcap,
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

        let mut o = project(Step::ProjectO, &w.wo, &heads, t, None);
        if let Some(pn) = &w.post_attn_norm {
            time(Step::Norm, || {
                ops::rms_norm_segments(&mut o, pn, c.norm_eps)
            });
        }
        time(Step::Activation, || add_into(x, &o));

        let h = time(Step::Norm, || ops::rms_normed(x, &w.ffn_norm, c.norm_eps));
        let mut gate = project(Step::ProjectGate, &w.w_gate, &h, t, None);
        let up = project(Step::ProjectUp, &w.w_up, &h, t, None);
        time(Step::Activation, || {
            ops::gated(&mut gate, &up, c.activation)
        });
        let mut f = project(Step::ProjectDown, &w.w_down, &gate, t, None);
        if let Some(pn) = &w.post_ffn_norm {
            time(Step::Norm, || {
                ops::rms_norm_segments(&mut f, pn, c.norm_eps)
            });
        }
        time(Step::Activation, || add_into(x, &f));
        if plan.residual {
            capture.residual(l, x);
        }
    }

    /// Final norm, output head and soft-capping for `n` rows of the residual stream.
    fn logits(&self, x: &[T], n: usize) -> Vec<T> {
        let c = &self.config;
        if n == 0 {
            return Vec::new();
        }
        let h = ops::rms_normed(x, &self.weights.output_norm, c.norm_eps);
        let head = self
            .weights
            .output
            .as_ref()
            .unwrap_or(&self.weights.token_embd);
        let mut logits = head.apply(&h, n, None);
        count_flops(Step::Logits, 2 * n * head.rows() * head.cols());
        if let Some(cap) = c.final_softcap {
            ops::softcap(&mut logits, cap);
        }
        logits
    }
}

/// `w · x` for the `t` rows of `x` (plus `bias`), timed and counted as `step`.
fn project<T: Real>(step: Step, w: &WeightMatrix, x: &[T], t: usize, bias: Option<&[T]>) -> Vec<T> {
    count_flops(step, 2 * t * w.rows() * w.cols());
    time(step, || w.apply(x, t, bias))
}

/// Rotates every head of every position (`[T, width]`, heads of `head_dim`) to its position.
fn rotate_all<T: Real>(
    m: &mut [T],
    width: usize,
    head_dim: usize,
    table: &RopeTable<T>,
    keep: Option<&[bool]>,
) {
    m.par_chunks_mut(width).enumerate().for_each(|(pos, row)| {
        for head in row.chunks_mut(head_dim) {
            match keep {
                Some(k) => table.rotate_masked(head, pos, k),
                None => table.rotate(head, pos),
            }
        }
    });
}

fn add_into<T: Real>(x: &mut [T], y: &[T]) {
    x.par_iter_mut()
        .zip(y.par_iter())
        .for_each(|(a, &b)| *a = *a + b);
}

/// `bytes` in MiB, whole from 10 MiB up, with two decimals below.
fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1u64 << 20) as f64;
    if m >= 10.0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{m:.2} MiB")
    }
}

/// Environment variable that caps the memory runs may plan to use, in bytes or with a binary suffix (`512M`,
/// `2G`): for shared machines, and to try the pre-flight refusals.
pub const MEMORY_LIMIT_VAR: &str = "ROPESCOPE_MAX_MEMORY";

/// Bytes of memory available to this process: Linux's `MemAvailable`, lowered by [`MEMORY_LIMIT_VAR`] when set;
/// `None` when neither is known. A malformed limit is an error.
fn available_memory() -> Result<Option<u64>> {
    let os = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib.saturating_mul(1024))
        });
    let limit = match std::env::var(MEMORY_LIMIT_VAR) {
        Ok(v) => Some(parse_size(&v).ok_or_else(|| {
            Error::Argument(format!(
                "{MEMORY_LIMIT_VAR}={v:?} is not a size (bytes, or a number with K, M, G or T)"
            ))
        })?),
        Err(_) => None,
    };
    Ok(match (os, limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}

/// `123`, `512K`, `64M`, `2G`, `1T` (binary multiples) as bytes.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'K' | 'k') => (&t[..i], 10),
        (i, 'M' | 'm') => (&t[..i], 20),
        (i, 'G' | 'g') => (&t[..i], 30),
        (i, 'T' | 't') => (&t[..i], 40),
        _ => (t, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}
