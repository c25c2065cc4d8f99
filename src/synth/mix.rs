//! llama.cpp's quantization mixes: the file types of `llama-quantize` that give each tensor its own type
//! (`Q4_K_M`: K-quants with more bits for value projections and some down projections; `MXFP4_MOE`: MXFP4
//! experts, Q8_0 elsewhere), chosen as its `llama_tensor_get_type` chooses them for these two mixes.
//! `fixtures/quant/mix_types.json` holds the types llama.cpp's own quantizer wrote for a 16-layer mixture of
//! experts; the tests compare every tensor.

use crate::quant::GgmlType;

/// A quantization mix of `llama-quantize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// `Q4_K_M`: Q4_K, with Q6_K for the value projections and down projections of the first and last eighth of
    /// the layers and every third layer between, and for the output matrix.
    Q4KM,
    /// `MXFP4_MOE`: MXFP4 for the experts' stacked matrices, Q8_0 for every other matrix.
    Mxfp4Moe,
}

impl Mix {
    /// Every mix, for listings.
    pub const ALL: [Mix; 2] = [Mix::Q4KM, Mix::Mxfp4Moe];

    /// The mix named `name` (`Q4_K_M`, `MXFP4_MOE`; any case).
    pub fn from_name(name: &str) -> Option<Mix> {
        Mix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// llama.cpp's name of the mix.
    pub fn name(self) -> &'static str {
        match self {
            Mix::Q4KM => "Q4_K_M",
            Mix::Mxfp4Moe => "MXFP4_MOE",
        }
    }

    /// llama.cpp's `general.file_type` of the mix (`LLAMA_FTYPE_MOSTLY_*`).
    pub fn file_type(self) -> u32 {
        match self {
            Mix::Q4KM => 15,
            Mix::Mxfp4Moe => 38,
        }
    }
}

/// Chooses each tensor's type of a mix, in file order (llama.cpp counts the value projections as it meets them).
pub struct MixChooser {
    mix: Mix,
    n_layers: usize,
    n_experts: usize,
    tied: bool,
    n_value: usize,
    i_value: usize,
    i_down: usize,
}

/// llama.cpp's `use_more_bits`: the first and last eighth of `n` and every third index between.
fn use_more_bits(i: usize, n: usize) -> bool {
    let (i, n) = (i as i64, n as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// Value-like projections (`attn_v`, fused `attn_qkv`, MLA's `attn_kv_b`), which the mixes treat alike.
fn is_value_like(name: &str) -> bool {
    ["attn_v.weight", "attn_qkv.weight", "attn_kv_b.weight"]
        .iter()
        .any(|s| name.contains(s))
}

/// The layer of a `blk.N.` tensor name.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

impl MixChooser {
    /// A chooser for a file with tensors `names` (in file order), `n_layers` layers and `n_experts` experts (0
    /// without).
    pub fn new(mix: Mix, names: &[&str], n_layers: usize, n_experts: usize) -> MixChooser {
        MixChooser {
            mix,
            n_layers,
            n_experts,
            tied: !names.contains(&"output.weight"),
            n_value: names.iter().filter(|n| is_value_like(n)).count(),
            i_value: 0,
            i_down: 0,
        }
    }

    /// Whether llama.cpp quantizes the tensor at all: matrices named `…weight`, but norms and routers.
    fn quantized(name: &str, dims: &[u64]) -> bool {
        dims.len() >= 2
            && name.ends_with("weight")
            && !name.contains("_norm.weight")
            && !name.contains("ffn_gate_inp.weight")
    }

    /// The type of the next tensor, `name` of shape `dims` (ggml order), before the fallback for rows that fill no
    /// block (the plan applies it, as llama.cpp does after choosing).
    pub fn type_of(&mut self, name: &str, dims: &[u64]) -> GgmlType {
        use GgmlType::*;
        if !Self::quantized(name, dims) {
            return F32;
        }
        let output = name == "output.weight" || (self.tied && name == "token_embd.weight");
        if output {
            return match self.mix {
                Mix::Mxfp4Moe => Q8_0,
                Mix::Q4KM if !dims[0].is_multiple_of(256) => Q8_0,
                Mix::Q4KM => Q6_K,
            };
        }
        if self.mix == Mix::Mxfp4Moe {
            return if dims.get(2).is_some_and(|&e| e > 1) {
                MXFP4
            } else {
                Q8_0
            };
        }
        let eight_experts = self.n_experts == 8;
        if is_value_like(name) {
            let more = use_more_bits(self.i_value, self.n_value);
            self.i_value += 1;
            return if eight_experts {
                Q8_0
            } else if more {
                Q6_K
            } else {
                Q4_K
            };
        }
        if name.contains("attn_k.weight") && eight_experts {
            return Q8_0;
        }
        if name.contains("ffn_down") {
            // With experts llama.cpp reads the layer from the name; without, it counts the down projections.
            let layer = match (self.n_experts > 1, layer_of(name)) {
                (true, Some(l)) => l,
                _ => self.i_down,
            };
            self.i_down += 1;
            return if use_more_bits(layer, self.n_layers) {
                Q6_K
            } else {
                Q4_K
            };
        }
        if name.contains("attn_output.weight") && eight_experts {
            return Q5_K;
        }
        Q4_K
    }
}
