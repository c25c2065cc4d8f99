//! What each architecture understands: the `{arch}.*` metadata keys it reads and the tensors its forward pass
//! uses. Anything else in a file may change the computation in a way ropescope does not implement (a scaling
//! variant, a mixture of experts, a different attention scale, a layer beyond `block_count`), so
//! [`check`] refuses it by name and `inspect` lists it ([`not_understood`]). Keys outside `{arch}.` (`general.*`,
//! `tokenizer.*`, `quantize.*`) describe the file, not the forward pass, and are not checked here.

use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// Keys every supported architecture reads (after the `{arch}.` prefix).
const COMMON_KEYS: &[&str] = &[
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "vocab_size",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "rope.freq_base",
    "rope.dimension_count",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.original_context_length",
    "rope.scaling.attn_factor",
    "rope.scaling.finetuned",
    "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow",
    "rope.scaling.yarn_ext_factor",
    "rope.scaling.yarn_attn_factor",
];

/// Keys every architecture accepts only at the value 0, where they say the model is dense (some converters
/// write `expert_count = 0` for models without experts); any other value is a mixture of experts.
const ZERO_ONLY_KEYS: &[&str] = &["expert_count", "expert_used_count"];

/// Tensors outside the blocks every architecture may have (`output.weight` is absent when tied).
const COMMON_TENSORS: &[&str] = &["token_embd.weight", "output_norm.weight", "output.weight"];

/// Per-block tensors every architecture may have (`blk.{i}.` prefix). Fused Q/K/V and gate/up are split at load
/// time; biases are added wherever present.
const COMMON_BLOCK_TENSORS: &[&str] = &[
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_qkv.weight",
    "attn_q.bias",
    "attn_k.bias",
    "attn_v.bias",
    "attn_output.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
];

/// What one architecture understands beyond the common sets, and what of the common block tensors it does not use.
/// A mixture-of-experts architecture (`experts`) also understands [`EXPERT_KEYS`] and [`EXPERT_TENSORS`].
struct Extra {
    keys: &'static [&'static str],
    tensors: &'static [&'static str],
    block_tensors: &'static [&'static str],
    unused_block_tensors: &'static [&'static str],
    experts: bool,
}

/// The keys every mixture-of-experts architecture reads (`moe::experts`).
const EXPERT_KEYS: &[&str] = &["expert_count", "expert_used_count", "expert_feed_forward_length"];

/// The router and the experts' 3-D projections, per block, of every mixture-of-experts architecture.
const EXPERT_TENSORS: &[&str] = &[
    "ffn_gate_inp.weight",
    "ffn_gate_exps.weight",
    "ffn_up_exps.weight",
    "ffn_down_exps.weight",
];

const QK_NORM: &[&str] = &["attn_q_norm.weight", "attn_k_norm.weight"];
const GEMMA_POST_NORMS: &[&str] = &["post_attention_norm.weight", "post_ffw_norm.weight"];
/// QK-norm and post-norms (gemma3, olmo2).
const QK_AND_POST_NORMS: &[&str] = &[
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    "post_attention_norm.weight",
    "post_ffw_norm.weight",
];

fn extra(arch: &str) -> Option<Extra> {
    let none: &'static [&'static str] = &[];
    Some(match arch {
        "llama" | "mistral" => Extra {
            keys: &["attention.sliding_window"],
            tensors: &["rope_freqs.weight"],
            block_tensors: none,
            unused_block_tensors: none,
            experts: false,
        },
        "qwen2" => Extra {
            keys: none,
            tensors: none,
            block_tensors: none,
            unused_block_tensors: none,
            experts: false,
        },
        "qwen3" => Extra {
            keys: none,
            tensors: none,
            block_tensors: QK_NORM,
            unused_block_tensors: none,
            experts: false,
        },
        "phi3" => Extra {
            keys: &["attention.sliding_window"],
            tensors: &["rope_factors_long.weight", "rope_factors_short.weight"],
            block_tensors: none,
            unused_block_tensors: none,
            experts: false,
        },
        "gemma" => Extra {
            keys: none,
            tensors: none,
            block_tensors: none,
            unused_block_tensors: none,
            experts: false,
        },
        "gemma2" => Extra {
            keys: &[
                "attention.sliding_window",
                "attn_logit_softcapping",
                "final_logit_softcapping",
            ],
            tensors: none,
            block_tensors: GEMMA_POST_NORMS,
            unused_block_tensors: none,
            experts: false,
        },
        "gemma3" => Extra {
            keys: &[
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.freq_base_swa",
                "final_logit_softcapping",
            ],
            tensors: none,
            block_tensors: QK_AND_POST_NORMS,
            unused_block_tensors: none,
            experts: false,
        },
        // llama.cpp's SmolLM3 graph reads neither a window nor per-chunk RoPE factors.
        "smollm3" => Extra {
            keys: none,
            tensors: none,
            block_tensors: none,
            unused_block_tensors: none,
            experts: false,
        },
        "olmo2" => Extra {
            keys: &[
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.freq_base_swa",
            ],
            tensors: none,
            block_tensors: QK_AND_POST_NORMS,
            unused_block_tensors: &["attn_norm.weight", "ffn_norm.weight"],
            experts: false,
        },
        "exaone4" => Extra {
            keys: &[
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.freq_base_swa",
            ],
            tensors: &["rope_freqs.weight"],
            block_tensors: QK_AND_POST_NORMS,
            unused_block_tensors: &["attn_norm.weight", "ffn_norm.weight"],
            experts: false,
        },
        "qwen3moe" => Extra {
            keys: none,
            tensors: none,
            block_tensors: QK_NORM,
            unused_block_tensors: &["ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"],
            experts: true,
        },
        "deepseek2" => Extra {
            keys: &[
                "expert_shared_count",
                "expert_weights_scale",
                "expert_weights_norm",
                "expert_gating_func",
                "expert_group_count",
                "expert_group_used_count",
                "leading_dense_block_count",
                "attention.kv_lora_rank",
                "attention.q_lora_rank",
                "attention.key_length_mla",
                "attention.value_length_mla",
                "rope.scaling.yarn_log_multiplier",
            ],
            tensors: none,
            block_tensors: &[
                "attn_kv_a_mqa.weight",
                "attn_kv_a_norm.weight",
                "attn_k_b.weight",
                "attn_v_b.weight",
                "ffn_gate_shexp.weight",
                "ffn_up_shexp.weight",
                "ffn_down_shexp.weight",
                "attn_q_a.weight",
                "attn_q_a_norm.weight",
                "attn_q_b.weight",
                "exp_probs_b.bias",
            ],
            unused_block_tensors: &["attn_k.weight", "attn_v.weight", "attn_qkv.weight"],
            experts: true,
        },
        "llama4" => Extra {
            keys: &[
                "attention.sliding_window",
                "interleave_moe_layer_step",
            ],
            tensors: &["rope_freqs.weight"],
            block_tensors: &[
                "ffn_gate_shexp.weight",
                "ffn_up_shexp.weight",
                "ffn_down_shexp.weight",
            ],
            unused_block_tensors: none,
            experts: true,
        },
        "gemma4" => Extra {
            keys: &[
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "attention.key_length_swa",
                "attention.value_length_swa",
                "attention.shared_kv_layers",
                "rope.freq_base_swa",
                "rope.dimension_count_swa",
                "final_logit_softcapping",
                "embedding_length_per_layer_input",
            ],
            tensors: &[
                "rope_freqs.weight",
                "per_layer_token_embd.weight",
                "per_layer_model_proj.weight",
                "per_layer_proj_norm.weight",
            ],
            block_tensors: &[
                "attn_q_norm.weight",
                "attn_k_norm.weight",
                "post_attention_norm.weight",
                "post_ffw_norm.weight",
                "layer_output_scale.weight",
                "inp_gate.weight",
                "proj.weight",
                "post_norm.weight",
                "ffn_gate_inp.scale",
                "ffn_gate_up_exps.weight",
                "ffn_down_exps.scale",
                "pre_ffw_norm_2.weight",
                "post_ffw_norm_1.weight",
                "post_ffw_norm_2.weight",
            ],
            unused_block_tensors: none,
            experts: true,
        },
        "gpt-oss" => Extra {
            keys: &[
                "attention.sliding_window",
                "attention.sliding_window_pattern",
            ],
            tensors: none,
            block_tensors: &[
                "attn_output.bias",
                "attn_sinks.weight",
                "post_attention_norm.weight",
                "ffn_gate_inp.bias",
                "ffn_gate_exps.bias",
                "ffn_up_exps.bias",
                "ffn_down_exps.bias",
            ],
            unused_block_tensors: &[
                "ffn_norm.weight",
                "ffn_gate.weight",
                "ffn_up.weight",
                "ffn_down.weight",
            ],
            experts: true,
        },
        "glm4" => Extra {
            keys: none,
            tensors: none,
            block_tensors: GEMMA_POST_NORMS,
            unused_block_tensors: none,
            experts: false,
        },
        "cohere2" => Extra {
            keys: &[
                "attention.layer_norm_epsilon",
                "attention.sliding_window",
                "attention.sliding_window_pattern",
                "rope.freq_base_swa",
                "logit_scale",
            ],
            tensors: none,
            block_tensors: none,
            unused_block_tensors: &["ffn_norm.weight"],
            experts: false,
        },
        "gptneox" => Extra {
            keys: &["attention.layer_norm_epsilon", "use_parallel_residual"],
            tensors: &["output_norm.bias"],
            block_tensors: &[
                "attn_norm.bias",
                "attn_qkv.bias",
                "attn_output.bias",
                "ffn_norm.bias",
                "ffn_up.bias",
                "ffn_down.bias",
            ],
            unused_block_tensors: &["ffn_gate.weight"],
            experts: false,
        },
        "phi2" => Extra {
            keys: &["attention.layer_norm_epsilon"],
            tensors: &["output_norm.bias", "output.bias"],
            block_tensors: &[
                "attn_norm.bias",
                "attn_qkv.bias",
                "attn_output.bias",
                "ffn_up.bias",
                "ffn_down.bias",
            ],
            unused_block_tensors: &["ffn_gate.weight", "ffn_norm.weight"],
            experts: false,
        },
        "granite" => Extra {
            keys: &["embedding_scale", "residual_scale", "logit_scale", "attention.scale"],
            tensors: none,
            block_tensors: none,
            unused_block_tensors: none,
            experts: false,
        },
        _ => return None,
    })
}

/// Whether `arch` understands the metadata key `key` (with its `{arch}.` prefix); `None` for an unsupported
/// architecture.
fn key_understood(arch: &str, key: &str) -> Option<bool> {
    let e = extra(arch)?;
    let suffix = match key.strip_prefix(arch).and_then(|k| k.strip_prefix('.')) {
        Some(s) => s,
        None => return Some(true), // not an architecture key
    };
    Some(
        COMMON_KEYS.contains(&suffix)
            || e.keys.contains(&suffix)
            || (e.experts && EXPERT_KEYS.contains(&suffix)),
    )
}

/// Whether `arch` with `n_layers` blocks uses the tensor `name`; `None` for an unsupported architecture.
fn tensor_understood(arch: &str, n_layers: usize, name: &str) -> Option<bool> {
    let e = extra(arch)?;
    if let Some(rest) = name.strip_prefix("blk.") {
        let Some((index, part)) = rest.split_once('.') else {
            return Some(false);
        };
        let in_range = index.parse::<usize>().is_ok_and(|i| i < n_layers)
            && !index.starts_with('+')
            && (index == "0" || !index.starts_with('0'));
        let common = COMMON_BLOCK_TENSORS.contains(&part) && !e.unused_block_tensors.contains(&part);
        let experts = e.experts && EXPERT_TENSORS.contains(&part);
        return Some(in_range && (common || experts || e.block_tensors.contains(&part)));
    }
    Some(COMMON_TENSORS.contains(&name) || e.tensors.contains(&name))
}

/// Everything in `file` that its architecture does not understand: `key NAME` and `tensor NAME` entries in file
/// order, keys first. Empty for an unsupported architecture (which is refused as a whole) or when
/// `block_count` cannot be read.
pub fn not_understood(file: &GgufFile) -> Vec<String> {
    let Ok(arch) = file.architecture() else {
        return Vec::new();
    };
    let Some(n_layers) = file
        .get_usize(&format!("{arch}.block_count"))
        .ok()
        .flatten()
    else {
        return Vec::new();
    };
    let dense = |k: &str, v: &crate::gguf::Value| {
        k.strip_prefix(arch)
            .and_then(|k| k.strip_prefix('.'))
            .is_some_and(|suffix| ZERO_ONLY_KEYS.contains(&suffix))
            && v.as_u64() == Some(0)
    };
    let mut out: Vec<String> = file
        .metadata()
        .filter(|(k, v)| key_understood(arch, k) == Some(false) && !dense(k, v))
        .map(|(k, _)| format!("key {k}"))
        .collect();
    out.extend(
        file.tensors()
            .iter()
            .filter(|t| tensor_understood(arch, n_layers, &t.name) == Some(false))
            .map(|t| format!("tensor {}", t.name)),
    );
    out
}

/// Refuses a file with any key or tensor its architecture does not understand, naming the first and counting
/// the rest.
pub fn check(file: &GgufFile) -> Result<()> {
    let unknown = not_understood(file);
    match unknown.first() {
        None => Ok(()),
        Some(first) => Err(Error::NotImplemented {
            what: first.clone(),
            hint: if unknown.len() > 1 {
                format!(
                    " ({} more not understood: `ropescope inspect` lists them)",
                    unknown.len() - 1
                )
            } else {
                String::new()
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architecture_keys_are_checked_and_others_pass() {
        assert_eq!(key_understood("llama", "llama.rope.freq_base"), Some(true));
        assert_eq!(
            key_understood("llama", "llama.rope.scaling.alpha"),
            Some(false)
        );
        assert_eq!(key_understood("llama", "llama.expert_count"), Some(false));
        assert_eq!(key_understood("llama", "general.name"), Some(true));
        assert_eq!(key_understood("llama", "llamax.foo"), Some(true));
        assert_eq!(
            key_understood("gemma3", "gemma3.rope.freq_base_swa"),
            Some(true)
        );
        assert_eq!(
            key_understood("gemma2", "gemma2.rope.freq_base_swa"),
            Some(false)
        );
        assert_eq!(key_understood("gpt2", "gpt2.context_length"), None);
    }

    #[test]
    fn block_tensors_must_belong_to_a_layer_that_exists() {
        assert_eq!(
            tensor_understood("llama", 2, "blk.1.attn_q.weight"),
            Some(true)
        );
        assert_eq!(
            tensor_understood("llama", 2, "blk.2.attn_q.weight"),
            Some(false)
        );
        assert_eq!(
            tensor_understood("llama", 2, "blk.01.attn_q.weight"),
            Some(false)
        );
        assert_eq!(
            tensor_understood("llama", 2, "blk.1.attn_q_norm.weight"),
            Some(false)
        );
        assert_eq!(
            tensor_understood("qwen3", 2, "blk.1.attn_q_norm.weight"),
            Some(true)
        );
        assert_eq!(
            tensor_understood("llama", 2, "rope_freqs.weight"),
            Some(true)
        );
        assert_eq!(
            tensor_understood("qwen2", 2, "rope_freqs.weight"),
            Some(false)
        );
        assert_eq!(
            tensor_understood("phi3", 2, "rope_factors_long.weight"),
            Some(true)
        );
    }
}
