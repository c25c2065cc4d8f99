//! How a GGUF file states its RoPE scaling, read into a [`Scaling`] (whose mathematics lives in
//! [`crate::rope::scaling`]).
//!
//! llama.cpp's converter expresses the variants of HF transformers' `rope_type` this way:
//! - `linear`: `rope.scaling.type = linear`, `rope.scaling.factor`.
//! - `yarn`: `rope.scaling.type = yarn`, `rope.scaling.factor`, `rope.scaling.original_context_length`, and
//!   `rope.scaling.yarn_beta_fast`, `yarn_beta_slow`, `yarn_attn_factor` (HF's explicit `attention_factor`)
//!   when the HF config states them (HF's defaults 32, 1 and `0.1 ln s + 1` otherwise). `yarn_ext_factor`
//!   (HF's `extrapolation_factor`, which HF's YaRN does not use) is accepted only at its neutral value 1.
//! - `llama3`: no key at all, only the tensor `rope_freqs.weight` of per-chunk divisors, rounded to f32
//!   (the converter computes them from f32 frequencies). Divisors that are Llama 3's formula rounded to f32 are
//!   recognised and replaced by the formula's f64 values ([`llama3_of`]): with the f32 divisors a float64
//!   forward pass is off HF's by about 1e-7 relative in those frequencies, which moves attention by ~1e-6.
//! - `longrope` (Phi-3): the tensors `rope_factors_long.weight` and `rope_factors_short.weight`,
//!   `rope.scaling.original_context_length`, and `rope.scaling.attn_factor` rounded to f32.
//!
//! Anything else (`dynamic`, YaRN's `mscale`/`yarn_log_multiplier`, a type this list does not name, a key that
//! only another type reads) is refused.
//!
//! Where the file holds a value in f32 that HF computes in f64 from the file's other values, the f64 value is
//! used when it rounds to within f32 precision of the stored one (LongRoPE's attention factor from the context
//! lengths); otherwise the stored value is taken as it is.

use crate::error::{Error, Result};
use crate::gguf::{GgufFile, Hparams};
use crate::rope::scaling::plain_frequencies;
use crate::rope::{Llama3, LongRope, Scaling, Yarn};

/// YaRN's `beta_fast` when the file does not state it (HF's and llama.cpp's default).
pub const YARN_BETA_FAST: f64 = 32.0;
/// YaRN's `beta_slow` when the file does not state it (HF's and llama.cpp's default).
pub const YARN_BETA_SLOW: f64 = 1.0;

/// Llama 3's `(low_freq_factor, high_freq_factor)`: (1, 4) in every released Llama 3.x configuration
/// (3.1, 3.2, 3.3, 4), the only band factors [`llama3_of`] recognises.
pub const LLAMA3_BAND_FACTORS: (f64, f64) = (1.0, 4.0);

/// Relative difference within which a stored f32 value counts as the rounding of a computed f64 one.
const F32_AGREEMENT: f64 = 1e-6;

/// The scaling the file states for its (global) RoPE layers, over `rot_dim` rotated dimensions.
pub fn scaling(file: &GgufFile, h: &Hparams) -> Result<Scaling> {
    let arch = &h.architecture;
    let k = &h.rope_scaling;
    let key = |name: &str| format!("{arch}.rope.scaling.{name}");
    let n_chunks = h.rope_dim / 2;
    let freqs = chunk_tensor(file, "rope_freqs.weight", n_chunks)?;
    let long = chunk_tensor(file, "rope_factors_long.weight", n_chunks)?;
    let short = chunk_tensor(file, "rope_factors_short.weight", n_chunks)?;
    let kind = k.kind.as_deref().unwrap_or("none");
    let refuse_unless = |present: bool, name: &str, needs: &str| -> Result<()> {
        if present {
            Err(Error::NotImplemented {
                what: format!("key {} with rope.scaling.type '{kind}'", key(name)),
                hint: format!("; only {needs} reads it"),
            })
        } else {
            Ok(())
        }
    };
    if kind != "yarn" {
        for (present, name) in [
            (k.yarn_beta_fast.is_some(), "yarn_beta_fast"),
            (k.yarn_beta_slow.is_some(), "yarn_beta_slow"),
            (k.yarn_ext_factor.is_some(), "yarn_ext_factor"),
            (k.yarn_attn_factor.is_some(), "yarn_attn_factor"),
        ] {
            refuse_unless(present, name, "yarn")?;
        }
    }
    let is_longrope = long.is_some() || short.is_some() || kind == "longrope";
    if !is_longrope {
        refuse_unless(
            k.attn_factor.is_some_and(|a| a != 1.0),
            "attn_factor",
            "longrope",
        )?;
    }
    if freqs.is_some() && (kind != "none" || is_longrope) {
        return Err(Error::NotImplemented {
            what: format!("tensor rope_freqs.weight with rope.scaling.type '{kind}'"),
            hint: "; per-chunk factors are implemented on their own only".into(),
        });
    }
    let factor = |what: &str| {
        k.factor
            .ok_or_else(|| Error::MissingKey(format!("{} (needed by {what})", key("factor"))))
    };
    let original_context = |what: &str| {
        k.original_context.ok_or_else(|| {
            Error::MissingKey(format!(
                "{} (needed by {what})",
                key("original_context_length")
            ))
        })
    };
    if is_longrope {
        let (Some(long), Some(short)) = (long, short) else {
            return Err(Error::MissingTensor(
                "rope_factors_long.weight and rope_factors_short.weight (LongRoPE needs both)"
                    .into(),
            ));
        };
        if !matches!(kind, "none" | "longrope") {
            return Err(Error::NotImplemented {
                what: format!("LongRoPE factors with rope.scaling.type '{kind}'"),
                hint: String::new(),
            });
        }
        let original = original_context("LongRoPE")?;
        if original < 2 {
            return Err(Error::BadValue {
                key: key("original_context_length"),
                problem: format!("{original} is below 2"),
            });
        }
        // LongRoPE's factor is the context over the original context (HF computes it so when the original is
        // stated); a stated factor that is not that would be ignored, so it is refused.
        let implied = h.context_length as f64 / original as f64;
        if let Some(f) = k.factor.filter(|f| (f - implied).abs() > F32_AGREEMENT * implied) {
            return Err(Error::BadValue {
                key: key("factor"),
                problem: format!(
                    "{f} with LongRoPE, whose factor is context_length / original_context_length = {implied} \
                     (must be that, or absent)"
                ),
            });
        }
        let computed = longrope_attention_factor(h.context_length, original);
        let attention_factor = match k.attn_factor {
            Some(stored) if (stored - computed).abs() > F32_AGREEMENT * computed => stored,
            _ => computed,
        };
        return Ok(Scaling::LongRope(LongRope {
            short,
            long,
            original_context: original,
            attention_factor,
        }));
    }
    match kind {
        "none" => {
            if k.factor.is_some_and(|f| f != 1.0) {
                return Err(Error::NotImplemented {
                    what: format!("key {} without a scaling type", key("factor")),
                    hint: String::new(),
                });
            }
            Ok(match freqs {
                None => Scaling::None,
                Some(factors) => match llama3_of(&factors, h.rope_base, h.rope_dim) {
                    Some(l) => Scaling::Llama3(l),
                    None => Scaling::Factors { factors },
                },
            })
        }
        "linear" => Ok(Scaling::Linear {
            factor: factor("linear scaling")?,
        }),
        "yarn" => {
            if let Some(e) = k.yarn_ext_factor.filter(|&e| e != 1.0) {
                return Err(Error::NotImplemented {
                    what: format!("key {} = {e}", key("yarn_ext_factor")),
                    hint: "; HF's YaRN has no extrapolation factor (only 1 is accepted)".into(),
                });
            }
            if k.attn_factor.is_some_and(|a| a != 1.0) {
                return Err(Error::NotImplemented {
                    what: format!("key {} with YaRN", key("attn_factor")),
                    hint: "; YaRN's magnitude is read from yarn_attn_factor".into(),
                });
            }
            Ok(Scaling::Yarn(Yarn {
                factor: factor("YaRN")?,
                original_context: original_context("YaRN")?,
                beta_fast: k.yarn_beta_fast.unwrap_or(YARN_BETA_FAST),
                beta_slow: k.yarn_beta_slow.unwrap_or(YARN_BETA_SLOW),
                attention_factor: k.yarn_attn_factor,
                truncate: true,
            }))
        }
        other => Err(Error::NotImplemented {
            what: format!("key {} = '{other}'", key("type")),
            hint: "; implemented: none, linear, yarn, longrope, and per-chunk factors (rope_freqs.weight)"
                .into(),
        }),
    }
}

/// Llama 3 scaling whose divisors, rounded to f32, are `stored`, if there is one with the band factors
/// [`LLAMA3_BAND_FACTORS`]: the factor `s` is the largest divisor, the original context `L` is solved from the
/// first smoothed chunk (`1/f = (1 − t)/s + t`, `L = (t (b − a) + a) λ`) and rounded to an integer, and every
/// divisor the parameters give must agree with the stored one within 1e-6 relative. `None` when no chunk is
/// smoothed (the divisors 1 and `s` are then exact as stored) or when the check fails.
pub fn llama3_of(stored: &[f64], base: f64, rot_dim: usize) -> Option<Llama3> {
    let s = stored.iter().copied().fold(0.0, f64::max);
    let (a, b) = LLAMA3_BAND_FACTORS;
    let (l, &f) = stored.iter().enumerate().find(|(_, &f)| f > 1.0 && f < s)?;
    let t = (1.0 / f - 1.0 / s) / (1.0 - 1.0 / s);
    let wavelen = 2.0 * std::f64::consts::PI / plain_frequencies(base, rot_dim)[l];
    let old = ((t * (b - a) + a) * wavelen).round();
    if !(1.0..=1e12).contains(&old) {
        return None;
    }
    let candidate = Llama3 {
        factor: s,
        low_freq_factor: a,
        high_freq_factor: b,
        original_context: old as usize,
    };
    let agrees = candidate
        .divisors(base, rot_dim)
        .iter()
        .zip(stored)
        .all(|(c, d)| (c - d).abs() <= F32_AGREEMENT * d);
    agrees.then_some(candidate)
}

/// LongRoPE's magnitude as HF computes it from the context `C` and the original context `L`:
/// `sqrt(1 + ln(C/L) / ln L)` when `C > L`, else 1.
pub fn longrope_attention_factor(context: usize, original: usize) -> f64 {
    let factor = context as f64 / original as f64;
    if factor <= 1.0 {
        1.0
    } else {
        (1.0 + factor.ln() / (original as f64).ln()).sqrt()
    }
}

/// A per-chunk vector tensor (`n_chunks` finite positive values), if the file has it.
fn chunk_tensor(file: &GgufFile, name: &str, n_chunks: usize) -> Result<Option<Vec<f64>>> {
    let Ok(info) = file.tensor(name) else {
        return Ok(None);
    };
    let n: u64 = info.dims.iter().product();
    if info.dims.iter().skip(1).any(|&d| d != 1) || n != n_chunks as u64 {
        return Err(Error::Shape {
            tensor: name.into(),
            found: info.dims.clone(),
            expected: format!("[{n_chunks}] (one value per rotated chunk)"),
        });
    }
    let values: Vec<f64> = file
        .dequantize_f32(name)?
        .into_iter()
        .map(f64::from)
        .collect();
    if let Some(bad) = values.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(Error::Malformed(format!(
            "tensor '{name}' holds {bad}; RoPE frequency factors must be finite and positive"
        )));
    }
    Ok(Some(values))
}
