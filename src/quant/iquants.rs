//! Dequantization of ggml's i-quants: the lattice formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S), whose groups of 8 or 4 values are points of a fixed grid ([`super::grids`]) with signs, and the
//! non-linear 4-bit formats (IQ4_NL, IQ4_XS), whose 4-bit codes index one table of 16 levels.
//!
//! Each value is formed as ggml's `dequantize_row_*` forms it: the group scale first (`d * (0.5 + s) * 0.25`,
//! `d * (1 + 2s)`, ...), in f32, then `scale * grid * sign` (or `scale * (grid + delta)` for IQ1), so the
//! results are bit-identical to ggml and gguf-py.

use super::f16_at;
use super::grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};

/// ggml's `kvalues_iq4nl`: the 16 levels of IQ4_NL and IQ4_XS.
pub(super) const IQ4_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// ggml's `IQ1S_DELTA`: the offset IQ1_S and IQ1_M add to every grid coordinate, with the group's sign.
const IQ1_DELTA: f32 = 0.125;

/// The little-endian u16 at `offset`.
#[inline]
fn u16_at(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}

/// The little-endian u32 at `offset`.
#[inline]
fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes([
        bytes[offset],
        bytes[offset + 1],
        bytes[offset + 2],
        bytes[offset + 3],
    ])
}

/// ggml's `ksigns_iq2xs`: eight sign bits from seven stored ones, the eighth making the count of minus signs
/// even.
#[inline]
fn even_signs(seven: u32) -> u8 {
    let s = (seven & 0x7F) as u8;
    s | (((s.count_ones() & 1) as u8) << 7)
}

/// Eight values `scale * grid[j] * (bit j of signs ? -1 : 1)`, `grid` holding coordinate `j` in byte `j`. The
/// multiplication by −1 is exact, so it is done as a flip of the sign bit, which the compiler vectorises.
#[inline]
fn signed_eight(y: &mut [f32], scale: f32, grid: u64, signs: u8) {
    let y: &mut [f32; 8] = (&mut y[..8]).try_into().expect("eight values");
    let g = grid.to_le_bytes();
    let mut v = [0f32; 8];
    let mut flip = [0u32; 8];
    for j in 0..8 {
        v[j] = scale * (g[j] as f32);
        flip[j] = (((signs >> j) & 1) as u32) << 31;
    }
    for j in 0..8 {
        y[j] = f32::from_bits(v[j].to_bits() ^ flip[j]);
    }
}

/// `IQ4_LEVELS` as f32 (exact), so that the IQ4 kernels multiply without converting.
const IQ4_LEVELS_F32: [f32; 16] = super::levels_f32(&IQ4_LEVELS);

/// Two points of a 4-dimensional grid as the eight coordinates of one group.
#[inline]
fn pair(first: u32, second: u32) -> u64 {
    first as u64 | (second as u64) << 32
}

/// The scale `d * (0.5 + s) * 0.25` of an IQ2 group with 4-bit scale `s`.
#[inline]
fn iq2_scale(d: f32, s: u32) -> f32 {
    d * (0.5 + s as f32) * 0.25
}

/// IQ2_XXS: `d: f16, qs: [u32; 64]`; per 32 values two u32: four grid indices (bytes), then four 7-bit sign
/// groups and a 4-bit scale (top bits); 8 values per grid point of `IQ2XXS_GRID`.
pub fn iq2_xxs(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    for (q, y) in block[2..66].chunks_exact(8).zip(out.chunks_exact_mut(32)) {
        let aux = u32_at(q, 4);
        let db = iq2_scale(d, aux >> 28);
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let grid = IQ2XXS_GRID[q[l] as usize];
            signed_eight(y, db, grid, even_signs(aux >> (7 * l)));
        }
    }
}

/// IQ2_XS: `d: f16, qs: [u16; 32], scales: [u8; 8]`; each u16 holds a 9-bit index into `IQ2XS_GRID` and 7
/// sign bits; one 4-bit scale per 16 values.
pub fn iq2_xs(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let qs = &block[2..66];
    let scales = &block[66..74];
    for (ib, y) in out.chunks_exact_mut(32).enumerate() {
        let db = [
            iq2_scale(d, (scales[ib] & 0x0F) as u32),
            iq2_scale(d, (scales[ib] >> 4) as u32),
        ];
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let q = u16_at(qs, 2 * (4 * ib + l)) as u32;
            let grid = IQ2XS_GRID[(q & 511) as usize];
            signed_eight(y, db[l / 2], grid, even_signs(q >> 9));
        }
    }
}

/// IQ2_S: `d: f16, qs: [u8; 32], signs: [u8; 32], qh: [u8; 8], scales: [u8; 8]`; 10-bit indices into
/// `IQ2S_GRID` (low bytes in `qs`, two high bits each in `qh`), 8 explicit sign bits per group, one 4-bit scale
/// per 16 values.
pub fn iq2_s(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let qs = &block[2..34];
    let signs = &block[34..66];
    let qh = &block[66..74];
    let scales = &block[74..82];
    for (ib, y) in out.chunks_exact_mut(32).enumerate() {
        let db = [
            iq2_scale(d, (scales[ib] & 0x0F) as u32),
            iq2_scale(d, (scales[ib] >> 4) as u32),
        ];
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let g = 4 * ib + l;
            let index = qs[g] as usize | (((qh[ib] >> (2 * l)) & 3) as usize) << 8;
            signed_eight(y, db[l / 2], IQ2S_GRID[index], signs[g]);
        }
    }
}

/// IQ3_XXS: `d: f16, qs: [u8; 64], scales_and_signs: [u32; 8]`; byte indices into the 4-dimensional
/// `IQ3XXS_GRID`, and per 32 values one u32 of four 7-bit sign groups and a 4-bit scale,
/// `d * (0.5 + s) * 0.5`.
pub fn iq3_xxs(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let qs = &block[2..66];
    for (ib, y) in out.chunks_exact_mut(32).enumerate() {
        let aux = u32_at(block, 66 + 4 * ib);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let k = 8 * ib + 2 * l;
            let grid = pair(IQ3XXS_GRID[qs[k] as usize], IQ3XXS_GRID[qs[k + 1] as usize]);
            signed_eight(y, db, grid, even_signs(aux >> (7 * l)));
        }
    }
}

/// IQ3_S: `d: f16, qs: [u8; 64], qh: [u8; 8], signs: [u8; 32], scales: [u8; 4]`; 9-bit indices into the
/// 4-dimensional `IQ3S_GRID` (high bits in `qh`), 8 explicit sign bits per group, one 4-bit scale per 32 values,
/// `d * (1 + 2s)`.
pub fn iq3_s(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let qs = &block[2..66];
    let qh = &block[66..74];
    let signs = &block[74..106];
    let scales = &block[106..110];
    for (ib, y) in out.chunks_exact_mut(32).enumerate() {
        let s = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let db = d * ((1 + 2 * s) as f32);
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let k = 8 * ib + 2 * l;
            let index =
                |i: usize| qs[k + i] as usize | (((qh[ib] >> (2 * l + i)) & 1) as usize) << 8;
            let grid = pair(IQ3S_GRID[index(0)], IQ3S_GRID[index(1)]);
            signed_eight(y, db, grid, signs[4 * ib + l]);
        }
    }
}

/// Eight values `scale * (grid[j] + delta)` of an IQ1 group, `grid` holding signed coordinate `j` in byte `j`.
#[inline]
fn shifted_eight(y: &mut [f32], scale: f32, grid: u64, delta: f32) {
    let y: &mut [f32; 8] = (&mut y[..8]).try_into().expect("eight values");
    let g = grid.to_le_bytes();
    for j in 0..8 {
        y[j] = scale * (g[j] as i8 as f32 + delta);
    }
}

/// IQ1_S: `d: f16, qs: [u8; 32], qh: [u16; 8]`; 11-bit indices into `IQ1S_GRID` (low bytes in `qs`, three high
/// bits each in `qh`), and per 32 values a 3-bit scale `d * (2s + 1)` and the sign of the delta (`qh`'s top bits).
pub fn iq1_s(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let qs = &block[2..34];
    for (ib, y) in out.chunks_exact_mut(32).enumerate() {
        let qh = u16_at(block, 34 + 2 * ib);
        let dl = d * ((2 * ((qh >> 12) & 7) + 1) as f32);
        let delta = if qh & 0x8000 != 0 {
            -IQ1_DELTA
        } else {
            IQ1_DELTA
        };
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let index = qs[4 * ib + l] as usize | (((qh >> (3 * l)) & 7) as usize) << 8;
            shifted_eight(y, dl, IQ1S_GRID[index], delta);
        }
    }
}

/// IQ1_M: `qs: [u8; 32], qh: [u8; 16], scales: [u16; 4]`; 11-bit indices into `IQ1S_GRID` (three high bits and
/// the delta's sign in a nibble of `qh` per group), 3-bit scales `d * (2s + 1)` per 16 values, and the f16 `d`
/// spread over the top nibbles of the four scale words.
pub fn iq1_m(block: &[u8], out: &mut [f32]) {
    let qs = &block[0..32];
    let qh = &block[32..48];
    let sc = [0, 1, 2, 3].map(|i| u16_at(block, 48 + 2 * i));
    let d_bits =
        (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000);
    let d = half::f16::from_bits(d_bits).to_f32();
    for (ib, y) in out.chunks_exact_mut(32).enumerate() {
        let shift = 6 * (ib % 2);
        let dl = [0, 3].map(|s| d * ((2 * ((sc[ib / 2] >> (shift + s)) & 7) + 1) as f32));
        for (l, y) in y.chunks_exact_mut(8).enumerate() {
            let nibble = (qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0x0F;
            let index = qs[4 * ib + l] as usize | ((nibble & 7) as usize) << 8;
            let delta = if nibble & 8 != 0 {
                -IQ1_DELTA
            } else {
                IQ1_DELTA
            };
            shifted_eight(y, dl[l / 2], IQ1S_GRID[index], delta);
        }
    }
}

/// IQ4_NL: `d: f16, qs: [u8; 16]`; `y = d * level[nibble]`, low nibbles first.
pub fn iq4_nl(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let (low, high) = out.split_at_mut(16);
    for ((&q, a), b) in block[2..18].iter().zip(low).zip(high) {
        *a = d * IQ4_LEVELS_F32[(q & 0x0F) as usize];
        *b = d * IQ4_LEVELS_F32[(q >> 4) as usize];
    }
}

/// IQ4_XS: `d: f16, scales_h: u16, scales_l: [u8; 4], qs: [u8; 128]`; per 32 values a 6-bit scale
/// `d * (s - 32)` (low nibble in `scales_l`, two high bits in `scales_h`) times `level[nibble]`, low nibbles
/// first.
pub fn iq4_xs(block: &[u8], out: &mut [f32]) {
    let d = f16_at(block, 0);
    let scales_h = u16_at(block, 2);
    let scales_l = &block[4..8];
    for (ib, (q, y)) in block[8..136]
        .chunks_exact(16)
        .zip(out.chunks_exact_mut(32))
        .enumerate()
    {
        let low = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let high = ((scales_h >> (2 * ib)) & 3) as u8;
        let dl = d * (((low | (high << 4)) as i32 - 32) as f32);
        let (first, second) = y.split_at_mut(16);
        for ((&b, a), c) in q.iter().zip(first).zip(second) {
            *a = dl * IQ4_LEVELS_F32[(b & 0x0F) as usize];
            *c = dl * IQ4_LEVELS_F32[(b >> 4) as usize];
        }
    }
}
