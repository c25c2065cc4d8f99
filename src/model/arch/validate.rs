//! The rules every resolved hyper-parameter must satisfy, in one table ([`RULES`]), checked before anything is
//! allocated for the model. Values read from a file are never trusted: a count must match the tensors present,
//! a size must be positive, a real number finite and in range. (Rules on single keys as they are read, such as
//! a positive RoPE base or scaling factor, live in `gguf::hparams`; rules between keys and tensors live here.)

use crate::error::{Error, Result};
use crate::gguf::{GgufFile, Hparams};

/// One rule: the key it concerns (after `{arch}.`), and the check, which returns the problem when it fails.
pub struct Rule {
    /// The metadata key (after the `{arch}.` prefix) the rule is about.
    pub key: &'static str,
    /// What the rule requires, for documentation and error messages.
    pub requires: &'static str,
    check: fn(&Hparams, &GgufFile) -> Option<String>,
}

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

fn positive_real(x: Option<f64>) -> Option<String> {
    x.filter(|v| !(v.is_finite() && *v > 0.0))
        .map(|v| format!("{v} is not a finite positive number"))
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
        requires: "at least 1",
        check: |h, _| positive(h.n_embd, "the width"),
    },
    Rule {
        key: "feed_forward_length",
        requires: "at least 1",
        check: |h, _| h.n_ff.and_then(|n| positive(n, "the feed-forward width")),
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
        key: "attn_logit_softcapping",
        requires: "finite and positive",
        check: |h, _| positive_real(h.attn_softcap),
    },
    Rule {
        key: "final_logit_softcapping",
        requires: "finite and positive",
        check: |h, _| positive_real(h.final_softcap),
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
        key: "vocab_size",
        requires: "at least 1 when present",
        check: |h, _| h.vocab_size.and_then(|n| positive(n, "the vocabulary")),
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
