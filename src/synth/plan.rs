//! Random-weight GGUF files with the exact header of a real model (or of a named shape of the papers' models),
//! for running ropescope, and other implementations, at sizes whose real weights are not at hand.
//!
//! A [`Plan`] is everything but the weights: metadata, tensor directory and storage types, and how each tensor is
//! filled (`fill.rs`). [`Plan::write`] streams the file: the header first, then each tensor in chunks of rows that
//! are generated and quantized in parallel and written in order, so memory stays at a few chunks whatever the
//! file's size; the file appears under its name only when complete. The values are a function of the seed, the
//! tensor's index and the chunk's index alone, so the bytes do not depend on the thread count.

use super::fill::{fill_for, is_rope_factors, Fill, ModelScale};
use super::mix::{Mix, MixChooser};
use super::shapes::NamedShape;

use crate::error::{Error, Result};
use crate::gguf::{encode_header, DirectoryEntry, GgufFile, Hparams, Value};
use crate::io::atomic::write_atomic;
use crate::quant::{can_quantize, quantize_into, GgmlType};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use rayon::prelude::*;
use std::io::{self, Read, Write};
use std::path::Path;

/// Values generated per work item (rounded to whole rows): large enough to amortise scheduling, small enough
/// that a batch of them stays in tens of megabytes.
const CHUNK_VALUES: usize = 1 << 20;
/// Work items generated in parallel before being written in order.
const BATCH_CHUNKS: usize = 8;

/// Which storage types a synthetic file uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quant {
    /// Each tensor keeps the type of the source file's tensor.
    Keep,
    /// Every tensor of two or more dimensions takes this type, as `llama-quantize` would write it: vectors, RoPE
    /// factors and every tensor whose name does not end in `weight` (biases, also the experts' 2-D ones) stay F32,
    /// and a tensor whose rows do not fill whole blocks falls back as llama.cpp's does.
    All(GgmlType),
    /// Each tensor takes the type `llama-quantize` gives it in this mix (and the same fallbacks).
    Mix(Mix),
}

/// One tensor of a plan.
#[derive(Clone, Debug)]
pub struct SynthTensor {
    /// Tensor name.
    pub name: String,
    /// Shape in ggml order.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ty: GgmlType,
    /// Contents before quantization.
    pub fill: Fill,
}

impl SynthTensor {
    fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }
    fn n_bytes(&self) -> u64 {
        // Checked when the plan was made.
        self.ty.byte_size(self.n_elements()).unwrap_or(0)
    }
}

/// A synthetic GGUF file before its weights: header, directory, types and fills.
#[derive(Clone, Debug)]
pub struct Plan {
    /// GGUF version.
    pub version: u32,
    /// Metadata, in order.
    pub metadata: Vec<(String, Value)>,
    /// Alignment of the data section.
    pub alignment: u64,
    /// Tensors, in order.
    pub tensors: Vec<SynthTensor>,
    /// What differs from a plain copy of the source's types (fallbacks), one line each.
    pub notes: Vec<String>,
}

/// The type llama.cpp's `llama-quantize` falls back to for a tensor whose rows do not fill whole blocks of `ty`.
fn fallback(ty: GgmlType) -> GgmlType {
    use GgmlType::*;
    match ty {
        IQ1_S | IQ1_M | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ4_XS => IQ4_NL,
        TQ1_0 | TQ2_0 => Q4_0,
        Q4_K => Q5_0,
        Q5_K => Q5_1,
        Q6_K => Q8_0,
        _ => F16,
    }
}

/// llama.cpp's `general.file_type` (`LLAMA_FTYPE_MOSTLY_*`) of a file whose matrices are all `ty` (for Q4_K,
/// `Q4_K_S`, the mix closest to all-Q4_K).
fn file_type(ty: GgmlType) -> Option<u32> {
    use GgmlType::*;
    Some(match ty {
        F32 => 0,
        F16 => 1,
        Q4_0 => 2,
        Q4_1 => 3,
        Q8_0 => 7,
        Q5_0 => 8,
        Q5_1 => 9,
        Q4_K => 14,
        Q6_K => 18,
        IQ2_XXS => 19,
        IQ2_XS => 20,
        IQ3_XXS => 23,
        IQ1_S => 24,
        IQ4_NL => 25,
        IQ3_S => 26,
        IQ2_S => 28,
        IQ4_XS => 30,
        IQ1_M => 31,
        BF16 => 32,
        TQ1_0 => 36,
        TQ2_0 => 37,
        NVFP4 => 39,
        _ => return None,
    })
}

impl Plan {
    /// The plan of a file with `file`'s metadata and tensor directory (which may come from a file cut inside its
    /// tensor data: only RoPE factors are read from the data, and must then be whole).
    pub fn like(file: &GgufFile, quant: Quant) -> Result<Plan> {
        let h = Hparams::from_gguf(file)?;
        let arch = &h.architecture;
        if !(1..=100_000).contains(&h.n_layers) || !(1..=1 << 20).contains(&h.n_embd) {
            return Err(Error::BadValue {
                key: format!("{arch}.block_count, {arch}.embedding_length"),
                problem: format!(
                    "{} layers of width {}: not 1 to 100000 layers of width 1 to 2^20",
                    h.n_layers, h.n_embd
                ),
            });
        }
        let scale = ModelScale {
            writers_per_layer: 2 + h.per_layer_input.is_some_and(|p| p > 0) as usize,
            ..ModelScale::new(arch, h.n_layers, h.n_embd)
        };
        let mut plan = Plan {
            version: file.version(),
            metadata: file
                .metadata()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            alignment: file.alignment(),
            tensors: Vec::with_capacity(file.tensors().len()),
            notes: Vec::new(),
        };
        let names: Vec<&str> = file.tensors().iter().map(|t| t.name.as_str()).collect();
        let mut types = Types::new(quant, &names, h.n_layers, h.n_experts.unwrap_or(0));
        for info in file.tensors() {
            let fill = if is_rope_factors(&info.name) {
                if !file.is_complete(info) {
                    return Err(Error::Unsupported(format!(
                        "tensor '{}': its data is not in the (truncated) source file, and RoPE factors cannot \
                         be made up",
                        info.name
                    )));
                }
                Fill::Values(file.dequantize_f32(&info.name)?)
            } else {
                fill_for(&info.name, &info.dims, scale)?
            };
            let quant = types.of(&info.name, &info.dims);
            plan.push(&info.name, &info.dims, Some(info.ty), fill, quant)?;
        }
        plan.set_file_type(quant);
        Ok(plan)
    }

    /// The plan of the built-in shape `shape`, its matrices typed by `quant` (a type or a mix; not `Keep`).
    pub fn named(shape: &NamedShape, quant: Quant) -> Result<Plan> {
        let (metadata, tensors) = shape.header()?;
        let mut plan = Plan {
            version: 3,
            metadata,
            alignment: crate::gguf::DEFAULT_ALIGNMENT,
            tensors: Vec::with_capacity(tensors.len()),
            notes: Vec::new(),
        };
        let names: Vec<&str> = tensors.iter().map(|(n, _, _)| n.as_str()).collect();
        let n_experts = shape.experts.map_or(0, |e| e.count);
        let mut types = Types::new(quant, &names, shape.n_layers, n_experts);
        let typed: Vec<Quant> = tensors.iter().map(|(n, d, _)| types.of(n, d)).collect();
        for ((name, dims, fill), quant) in tensors.into_iter().zip(typed) {
            plan.push(&name, &dims, None, fill, quant)?;
        }
        plan.set_file_type(quant);
        Ok(plan)
    }

    /// Adds a tensor, choosing its storage type (`source` is the source file's type, if any).
    fn push(
        &mut self,
        name: &str,
        dims: &[u64],
        source: Option<GgmlType>,
        fill: Fill,
        quant: Quant,
    ) -> Result<()> {
        let ty = match (quant, source) {
            (Quant::Keep, Some(ty)) => ty,
            (Quant::Mix(_), _) => unreachable!("a mix is resolved to a type per tensor first"),
            (Quant::Keep, None) => {
                return Err(Error::parameter(
                    "quant",
                    "is needed: a named shape has no types to keep",
                ))
            }
            (Quant::All(_), _)
                if dims.len() < 2 || is_rope_factors(name) || !name.ends_with("weight") =>
            {
                GgmlType::F32
            }
            (Quant::All(ty), _) => {
                let row = dims[0];
                if row.is_multiple_of(ty.block_size() as u64) {
                    ty
                } else {
                    let to = [fallback(ty), GgmlType::F16]
                        .into_iter()
                        .find(|t| row.is_multiple_of(t.block_size() as u64))
                        .unwrap_or(GgmlType::F32);
                    self.notes.push(format!(
                        "{name}: rows of {row} do not fill {} blocks; written as {} (as llama-quantize does)",
                        ty.name(),
                        to.name()
                    ));
                    to
                }
            }
        };
        if !can_quantize(ty) {
            let writable: Vec<&str> = (0..=u8::MAX as u32)
                .filter_map(GgmlType::from_id)
                .filter(|&t| can_quantize(t))
                .map(GgmlType::name)
                .collect();
            return Err(Error::Unsupported(format!(
                "tensor '{name}': synth cannot write type {} (it writes {}); give --quant TYPE",
                ty.name(),
                writable.join(", ")
            )));
        }
        let n: u64 = dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| {
                Error::Unsupported(format!("tensor '{name}': element count overflows"))
            })?;
        if !dims.is_empty() && !dims[0].is_multiple_of(ty.block_size() as u64) {
            return Err(Error::Unsupported(format!(
                "tensor '{name}': rows of {} do not fill whole {} blocks",
                dims[0],
                ty.name()
            )));
        }
        ty.byte_size(n)
            .ok_or_else(|| Error::Unsupported(format!("tensor '{name}': byte size overflows")))?;
        if let Fill::Values(v) = &fill {
            if v.len() as u64 != n {
                return Err(Error::Unsupported(format!(
                    "tensor '{name}': {} values for {n} elements",
                    v.len()
                )));
            }
        }
        self.tensors.push(SynthTensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            ty,
            fill,
        });
        Ok(())
    }

    /// Sets `general.file_type`, when the metadata has it, to the type or mix the matrices now have.
    fn set_file_type(&mut self, quant: Quant) {
        let code = match quant {
            Quant::Keep => None,
            Quant::All(ty) => file_type(ty),
            Quant::Mix(mix) => Some(mix.file_type()),
        };
        if let (Some(code), Some(entry)) = (
            code,
            self.metadata
                .iter_mut()
                .find(|(k, _)| k == "general.file_type"),
        ) {
            entry.1 = Value::U32(code);
        }
    }

    fn header(&self) -> (Vec<u8>, Vec<u64>) {
        let entries: Vec<DirectoryEntry> = self
            .tensors
            .iter()
            .map(|t| DirectoryEntry::new(&t.name, &t.dims, t.ty, t.n_bytes()))
            .collect();
        encode_header(self.version, &self.metadata, &entries, self.alignment)
    }

    /// The bytes [`Plan::write`] writes before the tensor data: header, metadata, directory and padding.
    #[cfg(feature = "internals")]
    pub fn header_bytes(&self) -> Vec<u8> {
        self.header().0
    }

    /// Size of the file [`Plan::write`] writes, in bytes.
    pub fn file_size(&self) -> u64 {
        let (header, offsets) = self.header();
        header.len() as u64
            + self
                .tensors
                .last()
                .zip(offsets.last())
                .map_or(0, |(t, off)| off + t.n_bytes())
    }

    /// Writes the file to `out` with weights drawn from `seed`; `progress` is told the bytes written so far.
    pub fn write(&self, seed: u64, out: &Path, progress: &(dyn Fn(u64) + Sync)) -> Result<()> {
        write_atomic(out, |w| {
            let (header, offsets) = self.header();
            w.write_all(&header)?;
            let mut written = 0u64;
            for (index, (t, &offset)) in self.tensors.iter().zip(&offsets).enumerate() {
                pad(w, offset - written)?;
                written = offset;
                for batch in self.chunks(t).collect::<Vec<_>>().chunks(BATCH_CHUNKS) {
                    let parts: Vec<Vec<u8>> = batch
                        .par_iter()
                        .map(|&(chunk, range)| self.chunk_bytes(seed, index, t, chunk, range))
                        .collect::<io::Result<_>>()?;
                    for part in parts {
                        w.write_all(&part)?;
                        written += part.len() as u64;
                    }
                    progress(header.len() as u64 + written);
                }
            }
            Ok(())
        })
    }

    /// The work items of tensor `t`: (chunk index, element range), whole rows each.
    fn chunks(&self, t: &SynthTensor) -> impl Iterator<Item = (usize, (usize, usize))> {
        let n = t.n_elements() as usize;
        let row = (t.dims.first().copied().unwrap_or(1) as usize).max(1);
        let step = (CHUNK_VALUES / row).max(1) * row;
        (0..n.div_ceil(step)).map(move |c| (c, (c * step, ((c + 1) * step).min(n))))
    }

    /// The bytes of chunk `chunk` (elements `range`) of tensor number `index`.
    fn chunk_bytes(
        &self,
        seed: u64,
        index: usize,
        t: &SynthTensor,
        chunk: usize,
        (start, end): (usize, usize),
    ) -> io::Result<Vec<u8>> {
        let len = end - start;
        let values: Vec<f32> = match &t.fill {
            Fill::Gaussian { std } => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(index as u64);
                // Each chunk draws from its own stretch of the stream, far beyond what any chunk consumes.
                rng.set_word_pos((chunk as u128) << 40);
                (0..len)
                    .map(|_| std * rng.sample::<f32, _>(StandardNormal))
                    .collect()
            }
            Fill::Constant(v) => vec![*v; len],
            Fill::Values(v) => v[start..end].to_vec(),
        };
        let mut bytes = vec![0u8; t.ty.byte_size(len as u64).unwrap_or(0) as usize];
        quantize_into(t.ty, &values, &mut bytes, &t.name).map_err(io::Error::other)?;
        Ok(bytes)
    }
}

/// The storage choice of each tensor of a plan, in file order: a mix resolved to one type per tensor, anything
/// else passed through.
enum Types {
    Same(Quant),
    Mix(MixChooser),
}

impl Types {
    fn new(quant: Quant, names: &[&str], n_layers: usize, n_experts: usize) -> Types {
        match quant {
            Quant::Mix(mix) => Types::Mix(MixChooser::new(mix, names, n_layers, n_experts)),
            q => Types::Same(q),
        }
    }

    /// The choice for the next tensor, `name` of shape `dims`.
    fn of(&mut self, name: &str, dims: &[u64]) -> Quant {
        match self {
            Types::Same(q) => *q,
            Types::Mix(m) => Quant::All(m.type_of(name, dims)),
        }
    }
}

fn pad(w: &mut dyn Write, n: u64) -> io::Result<()> {
    io::copy(&mut io::repeat(0).take(n), w).map(|_| ())
}
