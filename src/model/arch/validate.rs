//! The rules every resolved hyper-parameter must satisfy, in one table ([`RULES`]), checked before anything is
//! allocated for the model. Values read from a file are never trusted: a count must match the tensors present,
//! a size must be positive and agree with the tensor shapes, a real number finite and in range, and RoPE's
//! scaling parameters must give the frequencies their formulas intend. (Rules on single keys as they are read,
//! such as a positive RoPE base or scaling factor, live in `gguf::hparams`; rules on the tensor directory itself,
//! such as disjoint tensor data, in `gguf::file`; rules between keys and tensors live here.)
//!
//! The rules run in table order, each relying on the ones before it: counts and sizes first, then the shapes of
//! the tensors against them, then RoPE, then the vocabulary.

use super::rope as file_rope;
use crate::error::{Error, Result};
use crate::gguf::{GgufFile, Hparams, Value};
use crate::rope::{Scaling, Yarn};

/// One rule: the key it concerns (after `{arch}.`), and the check, which returns the problem when it fails.
pub struct Rule {
    /// The metadata key (after the `{arch}.` prefix) the rule is about.
    pub key: &'static str,
    /// What the rule requires, for documentation and error messages.
    pub requires: &'static str,
    check: fn(&Hparams, &GgufFile) -> Option<String>,
}

/// Architectures that may rotate part of the head (Phi-3's, Phi-2's and GLM-4's `partial_rotary_factor`,
/// GPT-NeoX's `rotary_pct`): the families here whose HF attention splits each head into rotated and passed-through
/// dimensions. Every other family rotates whole
/// heads (llama.cpp requires it of `llama` as `invalid n_rot`; HF's Llama, Mistral, Qwen and Gemma attention
/// multiplies the whole head by the cosines), so a file stating fewer rotated dimensions describes no model of
/// that family.
pub const PARTIAL_ROTATION: &[&str] = &["phi3", "gptneox", "phi2", "glm4", "deepseek2"];

/// Distinct block indices among the file's `blk.{i}.*` tensors.
fn block_indices(file: &GgufFile) -> Vec<usize> {
    let mut ids: Vec<usize> = file
        .tensors()
        .iter()
        .filter_map(|t| t.name.strip_prefix("blk.")?.split_once('.')?.0.parse().ok())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn positive(x: usize, what: &str) -> Option<String> {
    (x == 0).then(|| format!("{what} is 0"))
}

/// `v` as a message shows it: in scientific notation when plain digits would run long (1e300, 1e-30).
fn real(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e16).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

fn positive_real(x: Option<f64>) -> Option<String> {
    x.filter(|v| !(v.is_finite() && *v > 0.0))
        .map(|v| format!("{} is not a finite positive number", real(v)))
}

/// [`positive_real`], and also finite and positive when rounded to f32, the precision GGUF stores it in and
/// the f32 engine computes with: a soft-cap `c` of 1e300 is `inf` there and `tanh(x / c) · c` NaN, one of
/// 1e-320 is 0 and `0 / 0` NaN.
fn positive_f32(x: Option<f64>) -> Option<String> {
    positive_real(x).or_else(|| {
        x.filter(|v| {
            let r = *v as f32;
            !(r.is_finite() && r > 0.0)
        })
        .map(|v| format!("{} is {} in f32", real(v), v as f32))
    })
}

/// `x` when it is not above 1, as a problem: a RoPE base of at most 1 gives frequencies that do not decrease from
/// chunk 0, and divides by `ln base = 0` in YaRN's correction range.
fn base_above_one(x: Option<f64>) -> Option<String> {
    x.filter(|b| *b <= 1.0)
        .map(|b| format!("{} is not above 1", real(b)))
}

/// Layer `i`'s head dimension, value dimension, key/value heads and feed-forward width as the file states them:
/// the `_swa` dimensions on a layer `attention.sliding_window_pattern` marks sliding (where the file has them),
/// the per-layer counts where it gives one per layer, an MLA head's (`_mla`) where the file has them.
struct LayerShape {
    head_dim: usize,
    value_dim: usize,
    n_kv_heads: usize,
    n_ff: Option<usize>,
}

fn layer_shape(h: &Hparams, i: usize) -> LayerShape {
    let slides = h
        .sliding_window_pattern
        .as_ref()
        .is_some_and(|p| p.get(i) == Some(&true));
    let head_dim = h.head_dim_swa.filter(|_| slides).or(h.head_dim_mla).unwrap_or(h.head_dim);
    LayerShape {
        head_dim,
        value_dim: match slides {
            true => h.value_dim_swa.or(h.head_dim_swa).unwrap_or(h.value_dim),
            false => h.value_dim_mla.unwrap_or(h.value_dim),
        },
        n_kv_heads: h.kv_heads_of(i),
        n_ff: h.n_ff_of(i),
    }
}

/// The first tensor among `blk.{i}.{part}` of every block whose size along ggml dimension `axis` (0: inputs,
/// 1: outputs) is not `want(i)` (`None` when it overflowed), as a problem saying what `want` is `from`.
fn block_size_mismatch(
    file: &GgufFile,
    n_layers: usize,
    part: &str,
    axis: usize,
    want: &dyn Fn(usize) -> Option<usize>,
    from: &str,
) -> Option<String> {
    (0..n_layers).find_map(|i| {
        let name = format!("blk.{i}.{part}");
        let t = file.tensor(&name).ok()?;
        let found = t.dims.get(axis).copied().unwrap_or(1);
        let want = want(i);
        (want.map(|w| w as u64) != Some(found)).then(|| {
            let want = want.map_or("more than this machine can count".into(), |w| w.to_string());
            let side = if axis == 0 { "columns" } else { "rows" };
            format!("{from} is {want}, but tensor '{name}' has {found} {side}")
        })
    })
}

/// The YaRN scaling the file states, if it states YaRN (with HF's defaults for absent betas).
fn yarn(h: &Hparams, file: &GgufFile) -> Option<Yarn> {
    match file_rope::scaling(file, h) {
        Ok(Scaling::Yarn(y)) => Some(y),
        _ => None,
    }
}

/// The vocabulary sizes the file states (the key, the tokenizer's tokens, the rows of the embedding and the output
/// head), and the first that differs from the first of them, as a problem.
fn vocabulary_mismatch(h: &Hparams, f: &GgufFile) -> Option<String> {
    let key = f
        .get_usize(&format!("{}.vocab_size", h.architecture))
        .ok()?;
    if key == Some(0) {
        return positive(0, "the vocabulary");
    }
    let tokens = f.get("tokenizer.ggml.tokens").and_then(Value::as_array);
    let rows = |name: &str| {
        let t = f.tensor(name).ok()?;
        Some((
            format!("tensor '{name}'"),
            t.dims.get(1).copied().unwrap_or(1),
        ))
    };
    let sizes: Vec<(String, u64)> = [
        key.map(|n| ("the key".to_string(), n as u64)),
        tokens.map(|a| ("tokenizer.ggml.tokens".to_string(), a.len() as u64)),
        rows("token_embd.weight"),
        rows("output.weight"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let (first, n) = sizes.first()?;
    let (other, m) = sizes.iter().find(|(_, m)| m != n)?;
    Some(format!("{first} says {n} tokens, {other} {m}"))
}

/// Every rule, in the order they are checked.
pub const RULES: &[Rule] = &[
    Rule {
        key: "block_count",
        requires:
            "at least 1, and equal to the number of blocks `blk.0` .. `blk.{n-1}` among the tensors",
        check: |h, f| {
            let found = block_indices(f);
            let contiguous = found.iter().enumerate().all(|(i, &b)| i == b);
            if h.n_layers == 0 {
                Some("is 0".into())
            } else if found.len() != h.n_layers || !contiguous {
                Some(format!(
                    "says {} blocks, the tensors hold {}{}",
                    h.n_layers,
                    found.len(),
                    if contiguous {
                        ""
                    } else {
                        ", not numbered from 0 without gaps"
                    }
                ))
            } else {
                None
            }
        },
    },
    Rule {
        key: "embedding_length",
        requires: "at least 1, and the width (columns) of `token_embd.weight`",
        check: |h, f| {
            positive(h.n_embd, "the width").or_else(|| {
                let t = f.tensor("token_embd.weight").ok()?;
                (t.dims[0] != h.n_embd as u64).then(|| {
                    format!(
                        "says a width of {}, tensor 'token_embd.weight' has {} columns",
                        h.n_embd, t.dims[0]
                    )
                })
            })
        },
    },
    Rule {
        key: "feed_forward_length",
        requires: "at least 1, the rows of every block's `ffn_gate.weight` and `ffn_up.weight` (twice it for a \
                   fused `ffn_up.weight` without `ffn_gate.weight` in a gated block) and the columns of every \
                   `ffn_down.weight`",
        check: |h, f| {
            let n = h.n_ff?;
            let width = |i: usize| layer_shape(h, i).n_ff;
            let in_blocks = |part, axis, from| block_size_mismatch(f, h.n_layers, part, axis, &width, from);
            // A gated block without `ffn_gate.weight` holds gate and up in one `ffn_up.weight` (Phi-3).
            let plain = super::PLAIN_FEED_FORWARD.contains(&h.architecture.as_str());
            let up_rows = |i: usize| {
                let n = width(i)?;
                let name = format!("blk.{i}.ffn_up.weight");
                let rows = f.tensor(&name).ok()?.dims.get(1).copied().unwrap_or(1);
                let fused = !plain && f.tensor(&format!("blk.{i}.ffn_gate.weight")).is_err();
                let want = if fused { n.checked_mul(2) } else { Some(n) };
                (want.map(|w| w as u64) != Some(rows)).then(|| {
                    let twice = if fused { "2 × " } else { "" };
                    let want = want.map_or("more than this machine can count".into(), |w| w.to_string());
                    format!("{twice}feed_forward_length is {want}, but tensor '{name}' has {rows} rows")
                })
            };
            let widths = h.n_ff_per_layer.clone().unwrap_or_default();
            positive(widths.into_iter().min().unwrap_or(n), "the feed-forward width")
                .or_else(|| in_blocks("ffn_gate.weight", 1, "feed_forward_length"))
                .or_else(|| (0..h.n_layers).find_map(up_rows))
                .or_else(|| in_blocks("ffn_down.weight", 0, "feed_forward_length"))
        },
    },
    Rule {
        key: "attention.head_count_kv",
        requires: "at least 1, and a divisor of `attention.head_count`",
        check: |h, _| {
            (h.n_kv_heads == 0 || !h.n_heads.is_multiple_of(h.n_kv_heads)).then(|| {
                format!(
                    "{} does not divide the {} query heads",
                    h.n_kv_heads, h.n_heads
                )
            })
        },
    },
    Rule {
        key: "attention.key_length",
        requires: "at least 2",
        check: |h, _| (h.head_dim < 2).then(|| format!("{} is below 2", h.head_dim)),
    },
    Rule {
        key: "attention.value_length",
        requires: "at least 1",
        check: |h, _| positive(h.value_dim, "the value head dimension"),
    },
    Rule {
        key: "attention.head_count",
        requires: "such that head_count × key_length is the rows of every block's `attn_q.weight`, head_count × \
                   value_length the columns of every `attn_output.weight`, and (head_count + head_count_kv) × \
                   key_length + head_count_kv × value_length the rows of every fused `attn_qkv.weight`",
        check: |h, f| {
            let n = h.n_heads;
            let q = |i| h.n_heads.checked_mul(layer_shape(h, i).head_dim);
            let o = |i| h.n_heads.checked_mul(layer_shape(h, i).value_dim);
            // Written without `?`, which would end the check as passed when a sum overflows.
            let fused = |i| {
                let s = layer_shape(h, i);
                s.head_dim
                    .checked_add(s.value_dim)
                    .and_then(|kv_dims| s.n_kv_heads.checked_mul(kv_dims))
                    .and_then(|x| n.checked_mul(s.head_dim).and_then(|q| x.checked_add(q)))
            };
            let in_blocks = |part, axis, want: &dyn Fn(usize) -> Option<usize>, from| {
                block_size_mismatch(f, h.n_layers, part, axis, want, from)
            };
            in_blocks("attn_q.weight", 1, &q, "head_count × key_length")
                .or_else(|| in_blocks("attn_output.weight", 0, &o, "head_count × value_length"))
                .or_else(|| {
                    in_blocks(
                        "attn_qkv.weight",
                        1,
                        &fused,
                        "(head_count + head_count_kv) × key_length + head_count_kv × value_length",
                    )
                })
        },
    },
    Rule {
        key: "attention.head_count_kv",
        requires: "such that head_count_kv × key_length is the rows of every block's `attn_k.weight` and \
                   head_count_kv × value_length those of every `attn_v.weight`",
        check: |h, f| {
            let k = |i| {
                let s = layer_shape(h, i);
                s.n_kv_heads.checked_mul(s.head_dim)
            };
            let v = |i| {
                let s = layer_shape(h, i);
                s.n_kv_heads.checked_mul(s.value_dim)
            };
            block_size_mismatch(f, h.n_layers, "attn_k.weight", 1, &k, "head_count_kv × key_length")
                .or_else(|| {
                    block_size_mismatch(
                        f,
                        h.n_layers,
                        "attn_v.weight",
                        1,
                        &v,
                        "head_count_kv × value_length",
                    )
                })
        },
    },
    Rule {
        key: "rope.dimension_count",
        requires: "even, at least 2 and at most the head dimension `attention.key_length`; equal to it but for \
                   `phi3` (only Phi-3 rotates part of the head)",
        check: |h, _| {
            let (r, d) = (h.rope_dim, h.head_dim);
            if r < 2 || !r.is_multiple_of(2) || r > d {
                Some(format!("{r} rotated dimensions for a head dimension of {d}"))
            } else if r != d && !PARTIAL_ROTATION.contains(&h.architecture.as_str()) {
                Some(format!(
                    "{r} rotated dimensions for a head dimension of {d}; {} rotates whole heads",
                    h.architecture
                ))
            } else {
                None
            }
        },
    },
    Rule {
        key: "context_length",
        requires: "at least 1",
        check: |h, _| positive(h.context_length, "the context"),
    },
    Rule {
        key: "attention.layer_norm_rms_epsilon",
        requires: "finite and positive",
        check: |h, _| positive_real(h.rms_eps),
    },
    Rule {
        key: "attention.layer_norm_epsilon",
        requires: "finite and positive",
        check: |h, _| positive_real(h.norm_eps),
    },
    Rule {
        key: "attn_logit_softcapping",
        requires: "finite and positive when rounded to f32 (GGUF stores it in f32)",
        check: |h, _| positive_f32(h.attn_softcap),
    },
    Rule {
        key: "final_logit_softcapping",
        requires: "finite and positive when rounded to f32 (GGUF stores it in f32)",
        check: |h, _| positive_f32(h.final_softcap),
    },
    Rule {
        key: "attention.sliding_window",
        requires: "at least 1 (`phi3` files write 0 for no window)",
        check: |h, _| {
            (h.sliding_window == Some(0) && h.architecture != "phi3")
                .then(|| "a window of 0 keys would hide every token".into())
        },
    },
    Rule {
        key: "rope.freq_base",
        requires: "above 1",
        check: |h, _| base_above_one(Some(h.rope_base)),
    },
    Rule {
        key: "rope.freq_base_swa",
        requires: "above 1",
        check: |h, _| base_above_one(h.rope_base_swa),
    },
    Rule {
        key: "rope.scaling.original_context_length",
        requires: "at least 1",
        check: |h, _| {
            h.rope_scaling
                .original_context
                .and_then(|n| positive(n, "the original context"))
        },
    },
    Rule {
        key: "rope.scaling.factor",
        requires: "at least 1 for linear and YaRN scaling (HF's bound: a context extension)",
        check: |h, f| {
            let factor = match file_rope::scaling(f, h).ok()? {
                Scaling::Linear { factor } => factor,
                Scaling::Yarn(y) => y.factor,
                _ => return None,
            };
            (factor < 1.0).then(|| format!("{factor} is below 1"))
        },
    },
    Rule {
        key: "rope.scaling.yarn_beta_fast",
        requires: "above `yarn_beta_slow` (defaults 32 and 1), or YaRN's ramp is inverted",
        check: |h, f| {
            let y = yarn(h, f)?;
            (y.beta_fast <= y.beta_slow).then(|| {
                format!(
                    "beta_fast {} is not above beta_slow {}",
                    y.beta_fast, y.beta_slow
                )
            })
        },
    },
    Rule {
        key: "rope.scaling.original_context_length",
        requires: "with YaRN, a correction range `lo ≤ hi` (finite) for the file's base, rotated dimensions and \
                   betas, as HF's `find_correction_range` computes it",
        check: |h, f| {
            let y = yarn(h, f)?;
            let (lo, hi) = y.correction_range(h.rope_base, h.rope_dim);
            (!(lo.is_finite() && hi.is_finite() && lo <= hi)).then(|| {
                format!(
                    "{} with base {}, {} rotated dimensions, beta_fast {} and beta_slow {} puts YaRN's ramp \
                     from dimension {lo} to {hi}",
                    y.original_context, h.rope_base, h.rope_dim, y.beta_fast, y.beta_slow
                )
            })
        },
    },
    Rule {
        key: "vocab_size",
        requires: "at least 1 when present, and equal to the number of `tokenizer.ggml.tokens` and the rows of \
                   `token_embd.weight` and `output.weight`",
        check: vocabulary_mismatch,
    },
];

/// Checks every rule of [`RULES`]; the first that fails is an error naming its key.
pub fn check(h: &Hparams, file: &GgufFile) -> Result<()> {
    for rule in RULES {
        if let Some(problem) = (rule.check)(h, file) {
            return Err(Error::BadValue {
                key: format!("{}.{}", h.architecture, rule.key),
                problem: format!("{problem} (must be {})", rule.requires),
            });
        }
    }
    Ok(())
}
