//! Quantization of f32 values into ggml blocks, as ggml's reference quantizers (`quantize_row_*_ref` in
//! `ggml-quants.c`, what llama.cpp's `llama-quantize` runs without an importance matrix) compute them.
//!
//! Written by hand because no crate quantizes to ggml's formats. Each function is a transcription of ggml's
//! reference: the same f32 operations in the same order, `roundf` where ggml rounds half away from zero and
//! ggml's `nearest_int` (round half to even, by the 1.5·2²³ trick) where it uses that, so the bytes are
//! identical to ggml's. The fixture `fixtures/quant/make_quantize_fixtures.py` produces the reference bytes with
//! llama.cpp's own `libggml-base` and, for the types it can quantize, with gguf-py's `gguf.quants.quantize`.

use super::fp4::{ue4m3_half, E2M1_DOUBLED};
use super::iquants::IQ4_LEVELS;
use super::random_blocks::random_block;
use super::types::{GgmlType, QK_K};
use crate::error::{Error, Result};
use half::{bf16, f16};

/// Quantizes one block: `x` holds the type's `block_size` values, `out` receives its `type_size` bytes.
type BlockQuantizer = fn(&[f32], &mut [u8]);

/// The per-block quantizer of a type, where ropescope has one (for the i-quants that need an importance matrix,
/// and IQ4_XS, valid random blocks of the values' RMS: `random_blocks`).
fn block_quantizer(ty: GgmlType) -> Option<BlockQuantizer> {
    use GgmlType::*;
    Some(match ty {
        F32 => |x, o| o.copy_from_slice(&x[0].to_le_bytes()),
        F16 => |x, o| o.copy_from_slice(&f16::from_f32(x[0]).to_le_bytes()),
        BF16 => |x, o| o.copy_from_slice(&bf16::from_f32(x[0]).to_le_bytes()),
        Q4_0 => q4_0,
        Q4_1 => q4_1,
        Q5_0 => q5_0,
        Q5_1 => q5_1,
        Q8_0 => q8_0,
        Q4_K => q4_k,
        Q6_K => q6_k,
        IQ4_NL => iq4_nl,
        TQ1_0 => tq1_0,
        TQ2_0 => tq2_0,
        MXFP4 => mxfp4,
        NVFP4 => nvfp4,
        IQ1_S => |x, o| random_block(IQ1_S, x, o),
        IQ1_M => |x, o| random_block(IQ1_M, x, o),
        IQ2_XXS => |x, o| random_block(IQ2_XXS, x, o),
        IQ2_XS => |x, o| random_block(IQ2_XS, x, o),
        IQ2_S => |x, o| random_block(IQ2_S, x, o),
        IQ3_XXS => |x, o| random_block(IQ3_XXS, x, o),
        IQ3_S => |x, o| random_block(IQ3_S, x, o),
        IQ4_XS => |x, o| random_block(IQ4_XS, x, o),
        _ => return None,
    })
}

/// Whether [`quantize_into`] can write type `ty`.
pub fn can_quantize(ty: GgmlType) -> bool {
    block_quantizer(ty).is_some()
}

/// Quantizes `x` (a whole number of `ty`'s blocks) into `out` (exactly the bytes they take); `tensor` names the
/// tensor in errors.
pub fn quantize_into(ty: GgmlType, x: &[f32], out: &mut [u8], tensor: &str) -> Result<()> {
    let quantizer = block_quantizer(ty).ok_or_else(|| {
        Error::Unsupported(format!(
            "tensor '{tensor}': ropescope cannot quantize to {}",
            ty.name()
        ))
    })?;
    let (bs, ts) = (ty.block_size(), ty.type_size());
    if !x.len().is_multiple_of(bs) || out.len() != x.len() / bs * ts {
        return Err(Error::Unsupported(format!(
            "tensor '{tensor}': {} values do not fill whole {} blocks of {bs} into {} bytes",
            x.len(),
            ty.name(),
            out.len()
        )));
    }
    for (block, bytes) in x.chunks_exact(bs).zip(out.chunks_exact_mut(ts)) {
        quantizer(block, bytes);
    }
    Ok(())
}

/// ggml's `GGML_FP32_TO_FP16` (round to nearest even), little-endian.
fn put_f16(out: &mut [u8], v: f32) {
    out.copy_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// ggml's `GGML_FP16_TO_FP32` of a value just rounded to half precision.
fn via_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// ggml's `nearest_int`: round half to even through the bits of `v + 1.5·2²³` (valid for |v| ≤ 4194303).
fn nearest_int(v: f32) -> i32 {
    let shifted = v + 12_582_912.0f32;
    (shifted.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The value of largest magnitude (the first of equal magnitudes) and that magnitude.
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// The minimum and maximum of a block, starting from ±`f32::MAX` as ggml does.
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// Q4_0: `d = max / -8` with `max` the value of largest magnitude; `q = min(15, trunc(x/d + 8.5))`.
fn q4_0(x: &[f32], out: &mut [u8]) {
    let (max, _) = signed_absmax(x);
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(&mut out[0..2], d);
    for j in 0..16 {
        let lo = ((x[j] * id + 8.5) as i8).min(15) as u8;
        let hi = ((x[j + 16] * id + 8.5) as i8).min(15) as u8;
        out[2 + j] = lo | (hi << 4);
    }
}

/// Q4_1: `d = (max - min) / 15`, `m = min`; `q = min(15, trunc((x - min)/d + 0.5))`.
fn q4_1(x: &[f32], out: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(&mut out[0..2], d);
    put_f16(&mut out[2..4], min);
    for j in 0..16 {
        let lo = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
        let hi = (((x[j + 16] - min) * id + 0.5) as i8).min(15) as u8;
        out[4 + j] = lo | (hi << 4);
    }
}

/// Packs 32 five-bit values into a Q5 block's `qh` (fifth bits, little-endian) and `qs` (low nibbles).
fn pack_five_bit(q: &[u8; 32], qh: &mut [u8], qs: &mut [u8]) {
    let mut high = 0u32;
    for j in 0..16 {
        qs[j] = (q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4);
        high |= (((q[j] & 0x10) >> 4) as u32) << j;
        high |= (((q[j + 16] & 0x10) >> 4) as u32) << (j + 16);
    }
    qh.copy_from_slice(&high.to_le_bytes());
}

/// Q5_0: `d = max / -16`; `q = min(31, trunc(x/d + 16.5))`.
fn q5_0(x: &[f32], out: &mut [u8]) {
    let (max, _) = signed_absmax(x);
    let d = max / -16.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(&mut out[0..2], d);
    let mut q = [0u8; 32];
    for (qj, &v) in q.iter_mut().zip(x) {
        *qj = ((v * id + 16.5) as i8).min(31) as u8;
    }
    let (qh, qs) = out[2..].split_at_mut(4);
    pack_five_bit(&q, qh, qs);
}

/// Q5_1: `d = (max - min) / 31`, `m = min`; `q = trunc((x - min)/d + 0.5)`.
fn q5_1(x: &[f32], out: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(&mut out[0..2], d);
    put_f16(&mut out[2..4], min);
    let mut q = [0u8; 32];
    for (qj, &v) in q.iter_mut().zip(x) {
        *qj = ((v - min) * id + 0.5) as u8;
    }
    let (qh, qs) = out[4..].split_at_mut(4);
    pack_five_bit(&q, qh, qs);
}

/// Q8_0: `d = amax / 127`; `q = roundf(x/d)` (half away from zero).
fn q8_0(x: &[f32], out: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    put_f16(&mut out[0..2], d);
    for (o, &v) in out[2..].iter_mut().zip(x) {
        *o = (v * id).round() as i8 as u8;
    }
}

/// ggml's `GROUP_MAX_EPS`: a group whose largest magnitude is below it quantizes to zeros.
const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `make_qkx2_quants`: the scale and (negated) minimum of an asymmetric `0..=nmax` quantization of `x`
/// with weights `w`, searched over `nstep + 1` trial scales; `l` receives the levels.
#[allow(clippy::too_many_arguments)] // the signature of ggml's function, kept for auditing against it
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    w: &[f32],
    l: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> (f32, f32) {
    let n = x.len();
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = w[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l[i] = q as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    let mut aux = [0u8; 32];
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let q = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            aux[i] = q as u8;
            let lf = q as f32;
            sum_l += w[i] * lf;
            sum_l2 += w[i] * lf * lf;
            sum_xl += w[i] * lf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                cur_error += w[i] * (diff * diff);
            }
            if cur_error < best_error {
                l[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Q4_K: 8 groups of 32 with 6-bit scales and minimums under f16 super-scales `d`, `dmin`.
fn q4_k(x: &[f32], out: &mut [u8]) {
    let mut levels = [0u8; QK_K];
    let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let group = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in group {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut weights = [0.0f32; 32];
        for (w, &v) in weights.iter_mut().zip(group) {
            *w = av_x + v.abs();
        }
        let (scale, min) = make_qkx2_quants(
            15,
            group,
            &weights,
            &mut levels[32 * j..32 * j + 32],
            -1.0,
            0.1,
            20,
        );
        (scales[j], mins[j]) = (scale, min);
        max_scale = max_scale.max_ggml(scale);
        max_min = max_min.max_ggml(min);
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let (d, dmin) = (max_scale / 63.0, max_min / 63.0);
    put_f16(&mut out[0..2], d);
    put_f16(&mut out[2..4], dmin);
    out[4..16].copy_from_slice(&packed);
    let (d, dmin) = (via_f16(d), via_f16(dmin));
    let (sc, mn) = super::kquants::scale_min_k4(&packed);
    for j in 0..8 {
        let dj = d * sc[j] as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin * mn[j] as f32;
        for i in 0..32 {
            levels[32 * j + i] = nearest_int((x[32 * j + i] + dm) / dj).clamp(0, 15) as u8;
        }
    }
    let qs = &mut out[16..];
    for (chunk, q) in levels.chunks_exact(64).zip(qs.chunks_exact_mut(32)) {
        for l in 0..32 {
            q[l] = chunk[l] | (chunk[l + 32] << 4);
        }
    }
}

/// ggml's `make_qx_quants` with `rmse_type = 1` and no importance weights (weights `x²`): a symmetric
/// quantization of `x` to `-nmax..nmax-1`, searched over 18 trial scales; `l` receives the levels plus `nmax`.
fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let (max, amax) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let mut iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (li, &v) in l.iter_mut().zip(x) {
        let q = level(iscale, v);
        *li = (q + nmax) as i8;
        let w = v * v;
        sumlx += w * v * q as f32;
        suml2 += w * q as f32 * q as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let q = level(iscale, v);
            let w = v * v;
            sumlx += w * v * q as f32;
            suml2 += w * q as f32 * q as f32;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (li, &v) in l.iter_mut().zip(x) {
                *li = (level(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Q6_K: 16 groups of 16 with signed 8-bit scales under one f16 super-scale `d`; 6-bit levels.
fn q6_k(x: &[f32], out: &mut [u8]) {
    let mut levels = [0i8; QK_K];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
    for ib in 0..16 {
        let scale = make_qx_quants(
            32,
            &x[16 * ib..16 * ib + 16],
            &mut levels[16 * ib..16 * ib + 16],
        );
        scales[ib] = scale;
        if scale.abs() > max_abs_scale {
            max_abs_scale = scale.abs();
            max_scale = scale;
        }
    }
    // Layout: ql [128], qh [64], scales [16] (i8), d (f16).
    if max_abs_scale < GROUP_MAX_EPS {
        out.fill(0);
        return;
    }
    let iscale = -128.0 / max_scale;
    put_f16(&mut out[208..210], 1.0 / iscale);
    let d = via_f16(1.0 / iscale);
    for ib in 0..16 {
        out[192 + ib] = nearest_int(iscale * scales[ib]).min(127) as i8 as u8;
    }
    for j in 0..16 {
        let dj = d * (out[192 + j] as i8) as f32;
        if dj == 0.0 {
            continue;
        }
        for i in 0..16 {
            levels[16 * j + i] = (nearest_int(x[16 * j + i] / dj).clamp(-32, 31) + 32) as i8;
        }
    }
    let (ql, rest) = out.split_at_mut(128);
    let qh = &mut rest[..64];
    for (half, (ql, qh)) in ql
        .chunks_exact_mut(64)
        .zip(qh.chunks_exact_mut(32))
        .enumerate()
    {
        let lv = &levels[128 * half..128 * half + 128];
        for l in 0..32 {
            let q = |k: usize| lv[l + 32 * k] as u8;
            ql[l] = (q(0) & 0xF) | ((q(2) & 0xF) << 4);
            ql[l + 32] = (q(1) & 0xF) | ((q(3) & 0xF) << 4);
            qh[l] = (q(0) >> 4) | ((q(1) >> 4) << 2) | ((q(2) >> 4) << 4) | ((q(3) >> 4) << 6);
        }
    }
}

/// MXFP4: `e = floor(log2(amax)) - 2 + 127` (E8M0; 0 for an all-zero block), then each value's nearest level of
/// `2^(e-128) * E2M1_DOUBLED` (the first of equal distances); low nibbles hold the first 16 values.
fn mxfp4(x: &[f32], out: &mut [u8]) {
    let mut amax = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
        }
    }
    // ggml converts the float to `uint8_t` directly; on its targets that goes through a 32-bit integer.
    let e = if amax > 0.0 {
        (amax.log2().floor() - 2.0 + 127.0) as i32 as u8
    } else {
        0
    };
    let d = if e < 2 {
        f32::from_bits(0x0020_0000u32 << e)
    } else {
        f32::from_bits(((e - 1) as u32) << 23)
    };
    out[0] = e;
    for j in 0..16 {
        out[1 + j] = best_e2m1(x[j], d) | (best_e2m1(x[j + 16], d) << 4);
    }
}

/// ggml's `best_index_mxfp4`: the index of the level of `d * E2M1_DOUBLED` nearest `v` (the first of equal
/// distances).
fn best_e2m1(v: f32, d: f32) -> u8 {
    let mut best_index = 0u8;
    let mut best_err = (E2M1_DOUBLED[0] as f32 * d - v).abs();
    for (i, &k) in E2M1_DOUBLED.iter().enumerate().skip(1) {
        let err = (k as f32 * d - v).abs();
        if err < best_err {
            best_index = i as u8;
            best_err = err;
        }
    }
    best_index
}

/// NVFP4: for each sub-block of 16, the unsigned E4M3 scale of `amax / 6` (`ggml_fp32_to_ue4m3`), then each
/// value's nearest level of half that scale times `E2M1_DOUBLED`; low nibbles hold the sub-block's first 8.
fn nvfp4(x: &[f32], out: &mut [u8]) {
    let (scales, qs) = out.split_at_mut(4);
    for (s, (xb, q)) in x.chunks_exact(16).zip(qs.chunks_exact_mut(8)).enumerate() {
        let mut amax = 0.0f32;
        for &v in xb {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        let ue = to_ue4m3(amax / 6.0);
        scales[s] = ue;
        let d = ue4m3_half(ue);
        for j in 0..8 {
            q[j] = best_e2m1(xb[j], d) | (best_e2m1(xb[j + 8], d) << 4);
        }
    }
}

/// ggml's `ggml_fp32_to_ue4m3`: unsigned E4M3 (bias 7) of `x`, its mantissa rounded on the first dropped bit,
/// saturating at 0x7E (448); 0 for `x ≤ 0` or NaN, subnormals rounded half up.
fn to_ue4m3(x: f32) -> u8 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let x = x.min(448.0);
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32 - 127 + 7;
    if exp <= 0 {
        let man = ((x * 512.0 + 0.5) as i32).min(7);
        return if man < 1 { 0 } else { man as u8 };
    }
    if exp >= 15 {
        return 0x7E;
    }
    let mut man = ((bits >> 20) & 7) as i32 + ((bits >> 19) & 1) as i32;
    let mut exp = exp;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return 0x7E;
        }
    }
    ((exp << 3) | man) as u8
}

/// The scale of a ternary block (its largest magnitude) and its inverse (0 for an all-zero block).
fn ternary_scale(x: &[f32]) -> (f32, f32) {
    let mut amax = 0.0f32;
    for &v in x {
        amax = if amax > v.abs() { amax } else { v.abs() };
    }
    (amax, if amax != 0.0 { 1.0 / amax } else { 0.0 })
}

/// The ternary digit `round(v / d) + 1` (`lroundf`, half away from zero) in `0..=2`.
fn trit(v: f32, id: f32) -> u8 {
    ((v * id).round() as i32 + 1) as u8
}

/// `trits` base-3 digits (the first most significant) packed into a byte as TQ1_0 keeps them: the number they
/// spell times 256/243, rounded up, so each digit surfaces at the top of `byte · 3ⁿ`.
fn pack_trits(digits: impl Iterator<Item = u8>, shift: bool) -> u8 {
    let mut q = 0u8;
    for t in digits {
        q = q.wrapping_mul(3).wrapping_add(t);
    }
    if shift {
        q = q.wrapping_mul(3);
    }
    (q as u16 * 256).div_ceil(243) as u8
}

/// TQ1_0: `d = amax`; the ternary digits of values 0..160 five to a byte over 32 bytes (byte `m` holds values
/// `m + 32n`), of values 160..240 five to a byte over 16 bytes, of values 240..256 four to a byte of `qh`.
fn tq1_0(x: &[f32], out: &mut [u8]) {
    let (d, id) = ternary_scale(x);
    for m in 0..32 {
        out[m] = pack_trits((0..5).map(|n| trit(x[m + 32 * n], id)), false);
    }
    let x2 = &x[160..240];
    for m in 0..16 {
        out[32 + m] = pack_trits((0..5).map(|n| trit(x2[m + 16 * n], id)), false);
    }
    let x3 = &x[240..256];
    for j in 0..4 {
        out[48 + j] = pack_trits((0..4).map(|m| trit(x3[j + 4 * m], id)), true);
    }
    put_f16(&mut out[52..54], d);
}

/// TQ2_0: `d = amax`; 2-bit codes `round(x/d) + 1`, four per byte (per 32 bytes, bit pair `n` of byte `m` is
/// value `32 n + m`).
fn tq2_0(x: &[f32], out: &mut [u8]) {
    let (d, id) = ternary_scale(x);
    for (xs, qs) in x.chunks_exact(128).zip(out[..64].chunks_exact_mut(32)) {
        for (m, q) in qs.iter_mut().enumerate() {
            *q = (0..4).fold(0u8, |a, n| a | ((trit(xs[m + 32 * n], id) & 3) << (2 * n)));
        }
    }
    put_f16(&mut out[64..66], d);
}

/// ggml's `best_index_int8`: the index of the level nearest `x` (the upper of two equally near).
fn best_index_int8(values: &[i8; 16], x: f32) -> u8 {
    if x <= values[0] as f32 {
        return 0;
    }
    if x >= values[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < values[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (values[mu - 1] as f32) < values[mu] as f32 - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// IQ4_NL (ggml's `quantize_row_iq4_nl_impl` with one block of 32, no importance weights and no scale search):
/// levels for `d = max / -127`, then `d` refitted by least squares with weights `x²`. A block whose largest
/// magnitude is below `GROUP_MAX_EPS` gets `d = 0` and all-zero codes (ggml leaves that block's codes as its
/// scratch array held them; they do not change the values).
fn iq4_nl(x: &[f32], out: &mut [u8]) {
    let (max, amax) = signed_absmax(x);
    let mut levels = [0u8; 32];
    let mut d = 0.0f32;
    if amax >= GROUP_MAX_EPS {
        let id = 1.0 / (max / IQ4_LEVELS[0] as f32);
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (l, &v) in levels.iter_mut().zip(x) {
            *l = best_index_int8(&IQ4_LEVELS, id * v);
            let q = IQ4_LEVELS[*l as usize] as f32;
            let w = v * v;
            sumqx += w * q * v;
            sumq2 += w * q * q;
        }
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    }
    put_f16(&mut out[0..2], d);
    for j in 0..16 {
        out[2 + j] = levels[j] | (levels[j + 16] << 4);
    }
}

/// `if v > self { v } else { self }`, ggml's running maximum (unlike `f32::max`, it keeps `self` for NaN).
trait GgmlMax {
    fn max_ggml(self, v: f32) -> f32;
}

impl GgmlMax for f32 {
    fn max_ggml(self, v: f32) -> f32 {
        if v > self {
            v
        } else {
            self
        }
    }
}
