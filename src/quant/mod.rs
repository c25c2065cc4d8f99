//! Dequantization of ggml tensor data to f32, bit-identical to ggml (and to gguf-py's reference).
//!
//! A quantized weight's value *is* the f32 that ggml's arithmetic produces from its block, so this module only
//! ever produces those f32 values; f64 computation widens them (the engine tile by tile, whole tensors with
//! [`dequantize_into_f64`]) rather than recomputing the block arithmetic in f64.
//!
//! The kernels are scalar Rust: plain loops over ggml's block layouts are what makes bit-identity with ggml
//! easy to audit. The engine runs them on small tiles of a weight matrix right before multiplying by it (see
//! `model::matrix`), and whole-tensor dequantization runs them on runs of blocks in parallel; neither can change
//! a value, because every block is dequantized on its own.

mod fp4;
mod grids;
pub mod int_blocks;
mod iquants;
mod kquants;
mod legacy;
pub mod q8;
mod quantize;
mod random_blocks;
mod ternary;
mod types;

pub use quantize::{can_quantize, quantize_into};
pub use types::{GgmlType, QK_K};

use crate::error::{Error, Result};
use rayon::prelude::*;

/// Elements per parallel work item of [`dequantize_into`] (rounded down to whole blocks).
const PARALLEL_RUN: usize = 1 << 16;

/// Reads a little-endian IEEE half at `offset` as f32 (exact).
#[inline]
fn f16_at(bytes: &[u8], offset: usize) -> f32 {
    half::f16::from_le_bytes([bytes[offset], bytes[offset + 1]]).to_f32()
}

/// A table of 16 small integer levels as f32 (exact), for kernels that look levels up and multiply.
const fn levels_f32(levels: &[i8; 16]) -> [f32; 16] {
    let mut t = [0f32; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = levels[i] as f32;
        i += 1;
    }
    t
}

/// A kernel that dequantizes one block of raw bytes into its `block_size` values.
type BlockKernel = fn(&[u8], &mut [f32]);

/// The per-block kernel of a type.
fn block_kernel(ty: GgmlType) -> Option<BlockKernel> {
    use GgmlType::*;
    Some(match ty {
        F32 => |b, o| o[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        F16 => |b, o| o[0] = f16_at(b, 0),
        BF16 => |b, o| o[0] = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16),
        Q4_0 => legacy::q4_0,
        Q4_1 => legacy::q4_1,
        Q5_0 => legacy::q5_0,
        Q5_1 => legacy::q5_1,
        Q8_0 => legacy::q8_0,
        Q2_K => kquants::q2_k,
        Q3_K => kquants::q3_k,
        Q4_K => kquants::q4_k,
        Q5_K => kquants::q5_k,
        Q6_K => kquants::q6_k,
        Q8_K => kquants::q8_k,
        IQ2_XXS => iquants::iq2_xxs,
        IQ2_XS => iquants::iq2_xs,
        IQ2_S => iquants::iq2_s,
        IQ3_XXS => iquants::iq3_xxs,
        IQ3_S => iquants::iq3_s,
        IQ1_S => iquants::iq1_s,
        IQ1_M => iquants::iq1_m,
        IQ4_NL => iquants::iq4_nl,
        IQ4_XS => iquants::iq4_xs,
        TQ1_0 => ternary::tq1_0,
        TQ2_0 => ternary::tq2_0,
        MXFP4 => fp4::mxfp4,
        NVFP4 => fp4::nvfp4,
        Q8_1 | I8 | I16 | I32 | I64 | F64 | Q1_0 | Q2_0 => return None,
    })
}

/// The dequantization kernel of one supported type, looked up (and the type checked) once, so that loops over
/// a tensor's blocks have no error path.
#[derive(Clone, Copy)]
pub struct Dequantizer {
    ty: GgmlType,
    kernel: BlockKernel,
}

impl std::fmt::Debug for Dequantizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dequantizer({})", self.ty)
    }
}

impl Dequantizer {
    /// The dequantizer of `ty`; an error naming `tensor` and the type when the type is not supported.
    pub fn new(ty: GgmlType, tensor: &str) -> Result<Self> {
        let kernel = block_kernel(ty).ok_or_else(|| Error::UnsupportedType {
            tensor: tensor.to_string(),
            type_name: ty.name().to_string(),
        })?;
        Ok(Self { ty, kernel })
    }

    /// The type it decodes.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Dequantizes whole blocks `data` into `out`, sequentially. Panics unless `out` is a whole number of blocks
    /// and `data` exactly their bytes (callers check sizes once, when they take the tensor).
    pub fn run(&self, data: &[u8], out: &mut [f32]) {
        let (bs, ts) = (self.ty.block_size(), self.ty.type_size());
        assert!(out.len().is_multiple_of(bs) && data.len() == out.len() / bs * ts);
        for (block, y) in data.chunks_exact(ts).zip(out.chunks_exact_mut(bs)) {
            (self.kernel)(block, y);
        }
    }
}

/// Dequantizes `data` (raw ggml blocks of type `ty`) into `out`, whose length is the number of elements.
///
/// `tensor` names the tensor in error messages. Errors: the type is not supported, `out.len()` is not a whole
/// number of blocks, or `data` does not hold exactly that many blocks.
pub fn dequantize_into(ty: GgmlType, data: &[u8], out: &mut [f32], tensor: &str) -> Result<()> {
    let deq = Dequantizer::new(ty, tensor)?;
    let (bs, ts) = (ty.block_size(), ty.type_size());
    if !out.len().is_multiple_of(bs) || data.len() != out.len() / bs * ts {
        return Err(Error::Malformed(format!(
            "tensor '{tensor}': {} bytes of {ty} cannot hold {} elements",
            data.len(),
            out.len()
        )));
    }
    // Blocks are independent, so a tensor is cut into runs of blocks dequantized in parallel; each value is
    // still produced by its block's kernel alone.
    let blocks_per_run = (PARALLEL_RUN / bs).max(1);
    out.par_chunks_mut(blocks_per_run * bs)
        .zip(data.par_chunks(blocks_per_run * ts))
        .for_each(|(ys, bytes)| deq.run(bytes, ys));
    Ok(())
}

/// Dequantizes as [`dequantize_into`] and widens every f32 value exactly to f64.
#[cfg(feature = "internals")]
pub fn dequantize_into_f64(ty: GgmlType, data: &[u8], out: &mut [f64], tensor: &str) -> Result<()> {
    let mut tmp = vec![0f32; out.len()];
    dequantize_into(ty, data, &mut tmp, tensor)?;
    for (o, t) in out.iter_mut().zip(tmp) {
        *o = t as f64;
    }
    Ok(())
}
