//! The arithmetic of a pass: exact products, or llama.cpp's CPU arithmetic.

use super::config::Activation;
use crate::error::{Error, Result};
use crate::numeric::Real;
use serde::{Deserialize, Serialize};

/// How a pass multiplies activations by weights: `--arithmetic exact|ggml` on the command line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arithmetic {
    /// The dequantized weights times the activations as they are, in the pass's precision.
    #[default]
    Exact,
    /// llama.cpp's CPU arithmetic, float32 only: before each product with a quantized weight the activations
    /// are quantized to the weight type's `vec_dot_type` as this machine's llama.cpp quantizes them
    /// (`quant::q8`), and the product is ggml's integer block dot products
    /// (`quant::int_blocks`); F16 and BF16 weights meet activations rounded to their type; GELU is
    /// ggml's table over float16 inputs. Everything else (norms, RoPE, attention, the KV cache in float32,
    /// no flash attention) is the float32 pass, which matches llama.cpp's to float32 rounding.
    Ggml,
}

impl Arithmetic {
    /// Both, exact first.
    pub const ALL: [Arithmetic; 2] = [Arithmetic::Exact, Arithmetic::Ggml];

    /// The name on the command line and in outputs' metadata: `"exact"` or `"ggml"`.
    pub fn name(self) -> &'static str {
        match self {
            Arithmetic::Exact => "exact",
            Arithmetic::Ggml => "ggml",
        }
    }

    /// Refuses a precision this arithmetic does not exist in: ggml's is float32.
    pub fn check_precision<T: Real>(self) -> Result<()> {
        match (self, T::NAME) {
            (Arithmetic::Ggml, "f64") => Err(Error::Unsupported(
                "the ggml arithmetic is llama.cpp's float32 arithmetic: run it at precision f32"
                    .into(),
            )),
            _ => Ok(()),
        }
    }

    /// The feed-forward activation this arithmetic computes for the model's `act`.
    pub fn activation(self, act: Activation) -> Activation {
        match (self, act) {
            (Arithmetic::Ggml, Activation::GeluTanh) => Activation::GeluTanhF16Table,
            _ => act,
        }
    }
}
