//! The forward engine on synthetic models of every supported architecture, against a naive implementation
//! written here from the architectures' published conventions (plain loops in f64, no shared code with the
//! engine beyond the GGUF reader).
//!
//! Tolerances: the engine in f64 and the naive forward differ only in summation order, so logits agree to
//! `1e-12 · max|logit|` and attention probabilities to `1e-13`; the f32 engine meets the project's f32 bar
//! (logits NMSE ≤ 1e-10 against f64).

use ropescope::capture::{
    AttentionBlock, Capture, CollectSink, HeadCapture, HeadInfo, HeadVectors, LayerPlan,
};
use ropescope::gguf::GgufFile;
use ropescope::model::{ForwardOptions, Model};
use ropescope::synth::{SyntheticExperts, SyntheticModel};

const F64_LOGITS_REL: f64 = 1e-12;
const F64_PROBS_ABS: f64 = 1e-13;
const F32_LOGITS_NMSE: f64 = 1e-10;

const ARCHS: [&str; 17] = [
    "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "smollm3", "olmo2",
    "gptneox", "phi2", "granite", "exaone4", "cohere2", "qwen3moe", "glm4",
];

/// A synthetic model for `arch` exercising its special features: a sliding window shorter than the prompt
/// (where the architecture's GGUF has one: not Gemma 1, and not Qwen, whose HF windows apply only above
/// `max_window_layers`, which GGUF cannot express), six layers for gemma3 (so layer 5 is global) and four for
/// the families whose every 4th layer differs (a NoPE or global layer), soft-capping for gemma2, partial rotary
/// for phi3, gptneox and phi2.
fn synth(arch: &str) -> SyntheticModel {
    let mut m = SyntheticModel::new(arch);
    if !matches!(
        arch,
        "gemma"
            | "qwen2"
            | "qwen3"
            | "qwen3moe"
            | "smollm3"
            | "gptneox"
            | "phi2"
            | "granite"
            | "glm4"
    ) {
        m.sliding_window = Some(5);
    }
    if arch == "gemma3" {
        m.n_layers = 6;
    }
    if matches!(arch, "smollm3" | "olmo2" | "exaone4" | "cohere2") {
        m.n_layers = 4;
    }
    if arch == "gemma2" {
        m.softcaps = Some((5.0, 3.0));
    }
    if matches!(arch, "phi3" | "gptneox" | "phi2" | "glm4") {
        m.rope_dim = 4;
    }
    m
}

fn ids() -> Vec<u32> {
    vec![3, 17, 5, 60, 2, 9, 9, 33, 41, 0, 12, 7]
}

// ---------------------------------------------------------------------------------------------------------
// The naive forward pass.

/// Attention probabilities `[layer][head][i][j]`.
type Probs = Vec<Vec<Vec<Vec<f64>>>>;

struct Naive {
    arch: String,
    f: GgufFile,
    n_layers: usize,
    d: usize,
    h: usize,
    hkv: usize,
    hd: usize,
    rot: usize,
    ff: usize,
    vocab: usize,
    base: f64,
    window: Option<usize>,
    softcaps: Option<(f64, f64)>,
    experts: Option<SyntheticExperts>,
}

impl Naive {
    fn new(bytes: Vec<u8>, m: &SyntheticModel) -> Self {
        Naive {
            arch: m.arch.clone(),
            f: GgufFile::from_bytes(bytes).unwrap(),
            n_layers: m.n_layers,
            d: m.n_embd,
            h: m.n_heads,
            hkv: m.n_kv_heads,
            hd: m.head_dim,
            rot: m.rope_dim,
            ff: m.n_ff,
            vocab: m.vocab,
            base: m.rope_base as f64,
            window: m.sliding_window.map(|w| w as usize),
            softcaps: m.softcaps.map(|(a, b)| (a as f64, b as f64)),
            experts: m.experts,
        }
    }

    fn t(&self, name: &str) -> Vec<f64> {
        self.f
            .dequantize_f32(name)
            .unwrap()
            .into_iter()
            .map(|v| v as f64)
            .collect()
    }
    fn has(&self, name: &str) -> bool {
        self.f.tensor(name).is_ok()
    }
    fn gemma(&self) -> bool {
        self.arch.starts_with("gemma")
    }
    fn post_norms(&self) -> bool {
        matches!(
            self.arch.as_str(),
            "gemma2" | "gemma3" | "olmo2" | "exaone4" | "glm4"
        )
    }
    fn pre_norms(&self) -> bool {
        !matches!(self.arch.as_str(), "olmo2" | "exaone4")
    }
    fn layer_norm(&self) -> bool {
        matches!(self.arch.as_str(), "gptneox" | "phi2" | "cohere2")
    }
    /// Attention and feed-forward both read the block's input.
    fn parallel(&self) -> bool {
        matches!(self.arch.as_str(), "gptneox" | "phi2" | "cohere2")
    }
    /// Granite's multipliers (embedding, attention, residual, logit divisor), as `SyntheticModel` writes them.
    fn granite(&self) -> Option<(f64, f64, f64, f64)> {
        (self.arch == "granite").then_some((12.0, 0.0078125, 0.22f32 as f64, 8.0))
    }

    /// The block norm `{name}`: LayerNorm (with its bias where the file has one) or RMSNorm.
    fn norm(&self, x: &[f64], name: &str) -> Vec<f64> {
        let w = self.t(&format!("{name}.weight"));
        if !self.layer_norm() {
            return Self::rms(x, &w);
        }
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let b = if self.has(&format!("{name}.bias")) {
            self.t(&format!("{name}.bias"))
        } else {
            vec![0.0; x.len()]
        };
        let inv = 1.0 / (var + 1e-6f32 as f64).sqrt();
        x.iter()
            .zip(w.iter().zip(&b))
            .map(|(v, (g, b))| (v - mean) * inv * g + b)
            .collect()
    }

    /// `W x` for a GGUF matrix stored as `[in, out]` (row `o` of W is `w[o*in..(o+1)*in]`).
    fn matvec(w: &[f64], x: &[f64]) -> Vec<f64> {
        w.chunks(x.len())
            .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
            .collect()
    }

    fn rms(x: &[f64], w: &[f64]) -> Vec<f64> {
        let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
        let inv = 1.0 / (ms + 1e-6f32 as f64).sqrt();
        x.iter().zip(w).map(|(v, g)| v * inv * g).collect()
    }

    /// Qwen 3 MoE's feed-forward block on one normed row: the softmax of the router's logits, the most probable
    /// experts with their probabilities renormalised, each expert's SiLU-gated block weighted after its down
    /// projection, summed in ascending expert order.
    fn experts(&self, n: &dyn Fn(&str) -> String, hn: &[f64]) -> Vec<f64> {
        let x = self.experts.expect("a model with experts");
        let (e_n, ff, d) = (x.count, x.n_ff, self.d);
        let logits = Self::matvec(&self.t(&n("ffn_gate_inp.weight")), hn);
        let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = logits.iter().map(|v| (v - max).exp()).collect();
        let s: f64 = p.iter().sum();
        let mut order: Vec<usize> = (0..e_n).collect();
        order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
        let top = &order[..x.used];
        let total: f64 = top.iter().map(|&e| p[e] / s).sum();
        let (gate, up, down) = (
            self.t(&n("ffn_gate_exps.weight")),
            self.t(&n("ffn_up_exps.weight")),
            self.t(&n("ffn_down_exps.weight")),
        );
        let mut out = vec![0.0; d];
        for e in 0..e_n {
            if !top.contains(&e) {
                continue;
            }
            let w = p[e] / s / total;
            let g = Self::matvec(&gate[e * ff * d..(e + 1) * ff * d], hn);
            let u = Self::matvec(&up[e * ff * d..(e + 1) * ff * d], hn);
            let act: Vec<f64> = g
                .iter()
                .zip(&u)
                .map(|(&g, &u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let y = Self::matvec(&down[e * d * ff..(e + 1) * d * ff], &act);
            out.iter_mut().zip(&y).for_each(|(o, y)| *o += y * w);
        }
        out
    }

    /// Layer-specific (base, window, whether it rotates) by the architecture's rules.
    fn layer_geometry(&self, l: usize) -> (f64, Option<usize>, bool) {
        let fourth = (l + 1).is_multiple_of(4);
        match self.arch.as_str() {
            "gemma3" if !(l + 1).is_multiple_of(6) => (10_000.0, self.window, true),
            "gemma3" => (self.base, None, true),
            "gemma2" if l % 2 == 1 => (self.base, None, true),
            "smollm3" => (self.base, None, !fourth),
            "olmo2" => (self.base, self.window.filter(|_| !fourth), true),
            "exaone4" | "cohere2" if fourth => (self.base, None, false),
            _ => (self.base, self.window, true),
        }
    }

    fn rope(&self, x: &mut [f64], pos: usize, base: f64) {
        let half = self.rot / 2;
        for i in 0..half {
            let theta = pos as f64 / base.powf(2.0 * i as f64 / self.rot as f64);
            let adjacent = matches!(
                self.arch.as_str(),
                "llama" | "mistral" | "smollm3" | "granite" | "cohere2" | "glm4"
            );
            let (a, b) = if adjacent {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + half)
            };
            let (xa, xb) = (x[a], x[b]);
            x[a] = xa * theta.cos() - xb * theta.sin();
            x[b] = xa * theta.sin() + xb * theta.cos();
        }
    }

    /// Logits `[T][V]` and attention probabilities `[layer][head][i][j]`.
    fn forward(&self, ids: &[u32]) -> (Vec<Vec<f64>>, Probs) {
        let (d, hd, t) = (self.d, self.hd, ids.len());
        let emb = self.t("token_embd.weight");
        let scale_emb = match self.granite() {
            Some((e, ..)) => e,
            None if self.gemma() => (d as f64).sqrt(),
            None => 1.0,
        };
        let mut x: Vec<Vec<f64>> = ids
            .iter()
            .map(|&i| {
                emb[i as usize * d..][..d]
                    .iter()
                    .map(|v| v * scale_emb)
                    .collect()
            })
            .collect();
        let mut all_probs = Vec::new();
        for l in 0..self.n_layers {
            let n = |s: &str| format!("blk.{l}.{s}");
            let (base, window, rotates) = self.layer_geometry(l);
            let hx: Vec<Vec<f64>> = x
                .iter()
                .map(|r| match self.pre_norms() {
                    true => self.norm(r, &n("attn_norm")),
                    false => r.clone(),
                })
                .collect();
            let (wq, wk, wv) = if self.has(&n("attn_qkv.weight")) {
                let f = self.t(&n("attn_qkv.weight"));
                let (q, k) = (self.h * hd * d, self.hkv * hd * d);
                (f[..q].to_vec(), f[q..q + k].to_vec(), f[q + k..].to_vec())
            } else {
                (
                    self.t(&n("attn_q.weight")),
                    self.t(&n("attn_k.weight")),
                    self.t(&n("attn_v.weight")),
                )
            };
            // Biases, of the separate projections or of the fused one, split like its rows.
            let qkv_bias = |part: usize| -> Option<Vec<f64>> {
                let b = self.t(&n("attn_qkv.bias"));
                let (q, k) = (self.h * hd, self.hkv * hd);
                Some(match part {
                    0 => b[..q].to_vec(),
                    1 => b[q..q + k].to_vec(),
                    _ => b[q + k..].to_vec(),
                })
            };
            let bias = |s: &str, v: Vec<f64>| -> Vec<f64> {
                let fused_part = ["attn_q.bias", "attn_k.bias", "attn_v.bias"]
                    .iter()
                    .position(|p| *p == s)
                    .filter(|_| self.has(&n("attn_qkv.bias")));
                let b = match fused_part {
                    Some(part) => qkv_bias(part),
                    None => self.has(&n(s)).then(|| self.t(&n(s))),
                };
                match b {
                    Some(b) => v.iter().zip(b).map(|(a, b)| a + b).collect(),
                    None => v,
                }
            };
            let mut q: Vec<Vec<f64>> = hx
                .iter()
                .map(|r| bias("attn_q.bias", Self::matvec(&wq, r)))
                .collect();
            let mut k: Vec<Vec<f64>> = hx
                .iter()
                .map(|r| bias("attn_k.bias", Self::matvec(&wk, r)))
                .collect();
            let v: Vec<Vec<f64>> = hx
                .iter()
                .map(|r| bias("attn_v.bias", Self::matvec(&wv, r)))
                .collect();
            for (pos, (qr, kr)) in q.iter_mut().zip(k.iter_mut()).enumerate() {
                for (m, norm) in [(qr, "attn_q_norm.weight"), (kr, "attn_k_norm.weight")] {
                    // QK-norm over each head (gains of head_dim) or over the whole projection (OLMo 2).
                    if self.has(&n(norm)) {
                        let gains = self.t(&n(norm));
                        for seg in m.chunks_mut(gains.len()) {
                            let normed = Self::rms(seg, &gains);
                            seg.copy_from_slice(&normed);
                        }
                    }
                    for head in m.chunks_mut(hd) {
                        if rotates {
                            self.rope(head, pos, base);
                        }
                    }
                }
            }
            // Every Gemma 2/3 size but the 27B models has query_pre_attn_scalar = head_dim.
            let scale = match self.granite() {
                Some((_, a, ..)) => a,
                None => 1.0 / (hd as f64).sqrt(),
            };
            let mut heads_out = vec![vec![0.0; self.h * hd]; t];
            let mut layer_probs = Vec::new();
            for head in 0..self.h {
                let g = head / (self.h / self.hkv);
                let mut probs = vec![vec![0.0; t]; t];
                for i in 0..t {
                    let lo = window.map_or(0, |w| (i + 1).saturating_sub(w));
                    let mut a: Vec<f64> = (lo..=i)
                        .map(|j| {
                            let dot: f64 = (0..hd)
                                .map(|c| q[i][head * hd + c] * k[j][g * hd + c])
                                .sum::<f64>()
                                * scale;
                            match self.softcaps {
                                Some((cap, _)) => cap * (dot / cap).tanh(),
                                None => dot,
                            }
                        })
                        .collect();
                    let max = a.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    a.iter_mut().for_each(|v| *v = (*v - max).exp());
                    let s: f64 = a.iter().sum();
                    for (j, p) in (lo..=i).zip(&a) {
                        probs[i][j] = p / s;
                        for c in 0..hd {
                            heads_out[i][head * hd + c] += p / s * v[j][g * hd + c];
                        }
                    }
                }
                layer_probs.push(probs);
            }
            all_probs.push(layer_probs);
            let wo = self.t(&n("attn_output.weight"));
            let add_bias = |v: Vec<f64>, s: &str| -> Vec<f64> {
                if self.has(&n(s)) {
                    v.iter().zip(self.t(&n(s))).map(|(a, b)| a + b).collect()
                } else {
                    v
                }
            };
            let residual = self.granite().map_or(1.0, |(_, _, r, _)| r);
            for i in 0..t {
                let mut o = add_bias(Self::matvec(&wo, &heads_out[i]), "attn_output.bias");
                if self.post_norms() {
                    o = Self::rms(&o, &self.t(&n("post_attention_norm.weight")));
                }
                o.iter_mut().for_each(|v| *v *= residual);
                let hn = if self.parallel() {
                    // The feed-forward block reads the block's input, through its own norm (GPT-NeoX) or the
                    // attention's (Phi-2, Cohere).
                    match self.has(&n("ffn_norm.weight")) {
                        true => self.norm(&x[i], &n("ffn_norm")),
                        false => hx[i].clone(),
                    }
                } else {
                    x[i].iter_mut().zip(&o).for_each(|(a, b)| *a += b);
                    match self.pre_norms() {
                        true => self.norm(&x[i], &n("ffn_norm")),
                        false => x[i].clone(),
                    }
                };
                if self.experts.is_some() {
                    let f = self.experts(&n, &hn);
                    x[i].iter_mut().zip(&f).for_each(|(a, b)| *a += b);
                    continue;
                }
                let up = add_bias(
                    Self::matvec(&self.t(&n("ffn_up.weight")), &hn),
                    "ffn_up.bias",
                );
                let gelu_tanh = |g: f64| {
                    0.5 * g
                        * (1.0
                            + ((2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g.powi(3)))
                                .tanh())
                };
                let act: Vec<f64> = match self.arch.as_str() {
                    "gptneox" => up
                        .iter()
                        .map(|&g| 0.5 * g * (1.0 + libm::erf(g / std::f64::consts::SQRT_2)))
                        .collect(),
                    "phi2" => up.iter().map(|&g| gelu_tanh(g)).collect(),
                    _ => {
                        let (gate, up) = if self.has(&n("ffn_gate.weight")) {
                            (Self::matvec(&self.t(&n("ffn_gate.weight")), &hn), up)
                        } else {
                            (up[..self.ff].to_vec(), up[self.ff..].to_vec())
                        };
                        gate.iter()
                            .zip(&up)
                            .map(|(&g, &u)| {
                                let a = if self.gemma() {
                                    gelu_tanh(g)
                                } else {
                                    g / (1.0 + (-g).exp())
                                };
                                a * u
                            })
                            .collect()
                    }
                };
                let mut f = add_bias(
                    Self::matvec(&self.t(&n("ffn_down.weight")), &act),
                    "ffn_down.bias",
                );
                if self.post_norms() {
                    f = Self::rms(&f, &self.t(&n("post_ffw_norm.weight")));
                }
                f.iter_mut().for_each(|v| *v *= residual);
                if self.parallel() {
                    x[i].iter_mut()
                        .zip(o.iter().zip(&f))
                        .for_each(|(a, (o, f))| *a += o + f);
                } else {
                    x[i].iter_mut().zip(&f).for_each(|(a, b)| *a += b);
                }
            }
        }
        let out_w = if self.has("output.weight") {
            self.t("output.weight")
        } else {
            emb
        };
        let out_b = self.has("output.bias").then(|| self.t("output.bias"));
        let logits = x
            .iter()
            .map(|r| {
                let mut l = Self::matvec(&out_w, &self.norm(r, "output_norm"));
                if let Some(b) = &out_b {
                    l.iter_mut().zip(b).for_each(|(v, b)| *v += b);
                }
                if let Some((.., divisor)) = self.granite() {
                    l.iter_mut().for_each(|v| *v /= divisor);
                }
                if self.arch == "cohere2" {
                    l.iter_mut().for_each(|v| *v *= 0.25);
                }
                match self.softcaps {
                    Some((_, cap)) => l.iter().map(|v| cap * (v / cap).tanh()).collect(),
                    None => l,
                }
            })
            .collect::<Vec<Vec<f64>>>();
        assert_eq!(logits[0].len(), self.vocab);
        (logits, all_probs)
    }
}

fn run<T: ropescope::numeric::Real>(
    bytes: &[u8],
    ids: &[u32],
    layers: Vec<usize>,
) -> (Vec<T>, CollectSink<T>) {
    let file = GgufFile::from_bytes(bytes.to_vec()).unwrap();
    let model = Model::<T>::load(&file).unwrap();
    let mut sink = CollectSink::new(layers, 0..ids.len());
    let out = model
        .forward(
            ids,
            &ForwardOptions {
                logits_rows: 0..ids.len(),
                rope_keep: None,
            },
            &mut sink,
        )
        .unwrap();
    (out.logits, sink)
}

#[test]
fn every_architecture_matches_the_naive_forward() {
    for arch in ARCHS {
        let m = synth(arch);
        let bytes = m.to_bytes();
        let (want_logits, want_probs) = Naive::new(bytes.clone(), &m).forward(&ids());
        let (logits, sink) = run::<f64>(&bytes, &ids(), (0..m.n_layers).collect());
        let v = m.vocab;
        let max_logit = want_logits
            .iter()
            .flatten()
            .fold(0.0f64, |a, b| a.max(b.abs()));
        for (i, row) in want_logits.iter().enumerate() {
            for (j, w) in row.iter().enumerate() {
                let got = logits[i * v + j];
                assert!(
                    (got - w).abs() <= F64_LOGITS_REL * max_logit,
                    "{arch}: logit [{i},{j}] {got} vs {w}"
                );
            }
        }
        for (l, heads) in want_probs.iter().enumerate() {
            for (h, rows) in heads.iter().enumerate() {
                let rec = sink.get(l, h).unwrap();
                let t = ids().len();
                for (i, row) in rows.iter().enumerate() {
                    for (j, w) in row.iter().enumerate() {
                        let got = rec.probs[i * t + j];
                        assert!(
                            (got - w).abs() <= F64_PROBS_ABS,
                            "{arch} L{l} H{h} p[{i},{j}] {got} vs {w}"
                        );
                        if *w == 0.0 {
                            assert_eq!(got, 0.0, "{arch}: masked entries are exactly zero");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn f32_engine_meets_the_f32_bar_against_f64() {
    for arch in ARCHS {
        let bytes = synth(arch).to_bytes();
        let (l64, _) = run::<f64>(&bytes, &ids(), vec![]);
        let (l32, _) = run::<f32>(&bytes, &ids(), vec![]);
        let num: f64 = l32
            .iter()
            .zip(&l64)
            .map(|(a, b)| (*a as f64 - b).powi(2))
            .sum();
        let den: f64 = l64.iter().map(|b| b * b).sum();
        assert!(num / den <= F32_LOGITS_NMSE, "{arch}: NMSE {}", num / den);
    }
}

/// Tiny models of the families the naive forward above does not cover: GPT-OSS (sinks, biased experts, YaRN),
/// DeepSeek (latent attention, a dense layer then shared and routed experts) and Gemma 4 (sliding and global
/// layers of different heads, proportional RoPE, per-layer inputs, and here the last three of six layers
/// reusing earlier keys and values with double-wide feed-forward blocks). Each resolves with those features,
/// runs to finite logits in f64, and in f32 within the f32 bar.
#[test]
fn families_beyond_the_naive_forward_run_to_finite_logits() {
    let mut gemma4 = SyntheticModel::new("gemma4");
    gemma4.n_layers = 6;
    let g = gemma4.gemma4.as_mut().unwrap();
    (g.global_every, g.shared_kv_layers, g.double_wide) = (3, 3, true);
    for m in [
        SyntheticModel::new("gpt-oss"),
        SyntheticModel::new("deepseek2"),
        gemma4,
    ] {
        let bytes = m.to_bytes();
        let c =
            ropescope::model::arch::resolve(&GgufFile::from_bytes(bytes.clone()).unwrap()).unwrap();
        let arch = m.arch.as_str();
        match arch {
            "gpt-oss" => {
                assert!(c.sinks && c.moe.is_some());
                assert_eq!((c.layers[0].window, c.layers[1].window), (Some(8), None));
            }
            "deepseek2" => {
                assert_eq!(c.mla.map(|m| m.kv_lora_rank), Some(16));
                assert_eq!((c.layers[0].experts, c.layers[1].experts), (false, true));
            }
            _ => {
                assert_eq!(c.per_layer_input, Some(4));
                let kv_from: Vec<_> = c.layers.iter().map(|l| l.kv_from).collect();
                assert_eq!(kv_from, [None, None, None, Some(1), Some(1), Some(2)]);
                assert_eq!((c.layers[2].n_ff, c.layers[5].n_ff), (48, 96));
                let global = &c.layers[5].rope;
                assert_eq!((global.head_dim, c.layers[4].rope.head_dim), (16, 8));
                assert_eq!(
                    global.scaling,
                    ropescope::rope::Scaling::Proportional { rotated: 2 }
                );
            }
        }
        let (l64, _) = run::<f64>(&bytes, &ids(), vec![]);
        assert_eq!(l64.len(), ids().len() * m.vocab);
        assert!(l64.iter().all(|x| x.is_finite()), "{arch}");
        let (l32, _) = run::<f32>(&bytes, &ids(), vec![]);
        let num: f64 = l32
            .iter()
            .zip(&l64)
            .map(|(a, b)| (*a as f64 - b).powi(2))
            .sum();
        let den: f64 = l64.iter().map(|b| b * b).sum();
        assert!(num / den <= F32_LOGITS_NMSE, "{arch}: NMSE {}", num / den);
    }
}

/// The converter's permutation of llama Q/K rows: GGUF row `2i + s` of a head is HF row `s·d/2 + i`.
fn permute_rows(w: &[f32], n_heads: usize, head_dim: usize, width: usize) -> Vec<f32> {
    let mut out = vec![0.0; w.len()];
    for h in 0..n_heads {
        for i in 0..head_dim / 2 {
            for s in 0..2 {
                let (dst, src) = (
                    h * head_dim + 2 * i + s,
                    h * head_dim + s * head_dim / 2 + i,
                );
                out[dst * width..(dst + 1) * width]
                    .copy_from_slice(&w[src * width..(src + 1) * width]);
            }
        }
    }
    out
}

/// A `llama` file whose Q/K rows are permuted as llama.cpp's converter does computes exactly what a half-split
/// model (`qwen2` with zero biases) computes with the unpermuted rows: the two pairings are one RoPE.
#[test]
fn adjacent_pairing_of_permuted_weights_equals_half_split() {
    let mut hs = SyntheticModel::new("qwen2");
    hs.seed = 11;
    let base_bytes = hs.to_bytes();
    let base = GgufFile::from_bytes(base_bytes).unwrap();
    let (d, hd) = (hs.n_embd, hs.head_dim);
    let mut adj = SyntheticModel::new("llama");
    adj.tied = hs.tied;
    for (name, _, _) in hs.tensor_shapes() {
        let mut v = base.dequantize_f32(&name).unwrap();
        if name.ends_with(".bias") {
            v.iter_mut().for_each(|b| *b = 0.0);
            hs.overrides.insert(name, v);
            continue;
        }
        hs.overrides.insert(name.clone(), v.clone());
        if name.ends_with("attn_q.weight") {
            v = permute_rows(&v, hs.n_heads, hd, d);
        } else if name.ends_with("attn_k.weight") {
            v = permute_rows(&v, hs.n_kv_heads, hd, d);
        }
        adj.overrides.insert(name, v);
    }
    let (a, _) = run::<f64>(&adj.to_bytes(), &ids(), vec![]);
    let (b, _) = run::<f64>(&hs.to_bytes(), &ids(), vec![]);
    let max = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-12 * max));
    // and without the permutation the two differ: the pairing matters.
    let mut wrong = adj.clone();
    for (name, _, _) in hs
        .tensor_shapes()
        .into_iter()
        .filter(|(n, _, _)| n.ends_with("attn_q.weight"))
    {
        wrong
            .overrides
            .insert(name.clone(), hs.overrides[&name].clone());
    }
    let (c, _) = run::<f64>(&wrong.to_bytes(), &ids(), vec![]);
    assert!(c.iter().zip(&b).any(|(x, y)| (x - y).abs() > 1e-6 * max));
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    for arch in ["llama", "gemma3"] {
        let bytes = synth(arch).to_bytes();
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        let (l1, s1) = pool(1).install(|| run::<f32>(&bytes, &ids(), vec![0, 1]));
        for n in [2, 3] {
            let (ln, sn) = pool(n).install(|| run::<f32>(&bytes, &ids(), vec![0, 1]));
            assert!(
                l1.iter().zip(&ln).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{arch}: logits differ at {n} threads"
            );
            for (a, b) in s1.records.iter().zip(&sn.records) {
                assert!(a
                    .probs
                    .iter()
                    .zip(&b.probs)
                    .all(|(x, y)| x.to_bits() == y.to_bits()));
                assert!(a
                    .q
                    .iter()
                    .zip(&b.q)
                    .all(|(x, y)| x.to_bits() == y.to_bits()));
            }
        }
    }
}

/// Records blocks as the engine streams them (compact columns) and checks each against the head's vectors.
struct Checker;
struct CheckHead {
    q_pre: Vec<Vec<f64>>,
    q: Vec<Vec<f64>>,
    k: Vec<Vec<f64>>,
    v: Vec<Vec<f64>>,
    blocks: usize,
}

impl HeadCapture<f64> for CheckHead {
    fn vectors(&mut self, info: &HeadInfo, v: &HeadVectors<'_, f64>) {
        let rows = |r: &ropescope::capture::HeadRows<'_, f64>| {
            (0..r.len()).map(|i| r.row(i).to_vec()).collect::<Vec<_>>()
        };
        self.q_pre = rows(&v.q_pre);
        self.q = rows(&v.q);
        self.k = rows(&v.k);
        self.v = rows(&v.v);
        for (i, (pre, post)) in self.q_pre.iter().zip(&self.q).enumerate() {
            let mut r = pre.clone();
            info.rope.rotate(&mut r, i);
            assert!(
                r.iter().zip(post).all(|(a, b)| (a - b).abs() < 1e-12),
                "post-RoPE q is RoPE(pre-RoPE q)"
            );
        }
    }
    fn block(&mut self, info: &HeadInfo, b: &AttentionBlock<'_, f64>) {
        self.blocks += 1;
        assert!(
            b.cols.end <= b.rows.end,
            "streamed blocks cover only columns some row can see"
        );
        for i in b.rows.clone() {
            let (lr, pr) = (b.logits_row(i), b.probs_row(i));
            let lo = info.first_visible(i);
            let mut sum = 0.0;
            for (c, j) in b.cols.clone().enumerate() {
                let dot: f64 = self.q[i]
                    .iter()
                    .zip(&self.k[j])
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
                    * info.scale;
                assert!(
                    (lr[c] - dot).abs() < 1e-12,
                    "logit = scale · q·k, also for masked keys"
                );
                if j < lo || j > i {
                    assert_eq!(pr[c], 0.0);
                }
                sum += pr[c];
            }
            assert!((sum - 1.0).abs() < 1e-12);
        }
    }
    fn output(&mut self, info: &HeadInfo, out: ropescope::capture::HeadRows<'_, f64>) {
        assert_eq!(out.len(), info.n_tokens);
        assert!(self.blocks > 0);
    }
}

impl Capture<f64> for Checker {
    type Head = CheckHead;
    fn plan(&self, _layer: usize) -> LayerPlan {
        LayerPlan {
            vectors: true,
            attention: true,
            full_rows: false,
            output: true,
            residual: false,
            latent: false,
        }
    }
    fn begin_head(&self, _info: &HeadInfo) -> CheckHead {
        CheckHead {
            q_pre: vec![],
            q: vec![],
            k: vec![],
            v: vec![],
            blocks: 0,
        }
    }
    fn end_head(&mut self, info: &HeadInfo, head: CheckHead) {
        assert_eq!(head.v.len(), info.n_tokens);
    }
}

#[test]
fn streamed_capture_is_consistent_with_the_head_vectors() {
    let long: Vec<u32> = (0..150).map(|i| (i * 7 % 64) as u32).collect();
    for arch in ["llama", "qwen2", "gemma3"] {
        let file = GgufFile::from_bytes(synth(arch).to_bytes()).unwrap();
        let model = Model::<f64>::load(&file).unwrap();
        model
            .forward(&long, &ForwardOptions::default(), &mut Checker)
            .unwrap();
    }
}

#[test]
fn bad_input_is_rejected_before_any_work() {
    let m = synth("llama");
    let file = GgufFile::from_bytes(m.to_bytes()).unwrap();
    let model = Model::<f32>::load(&file).unwrap();
    let err = |ids: &[u32]| model.validate(ids).unwrap_err().to_string();
    assert!(err(&[]).contains("no tokens"));
    assert!(err(&[1, 64]).contains("token id 64 at position 1"));
    let long = vec![1u32; m.context_length + 1];
    assert!(err(&long).contains("more than the model's context of 512"));
    let mut cap = ropescope::capture::NoCapture;
    let opts = ForwardOptions {
        logits_rows: 0..1,
        rope_keep: Some(vec![vec![true; 3]; m.n_layers]),
    };
    assert!(model
        .forward(&[1, 2], &opts, &mut cap)
        .unwrap_err()
        .to_string()
        .contains("RoPE mask has [3, 3] entries per layer"));
}

/// Rewrites a GGUF file with metadata key `key` replaced (`Some`) or removed (`None`).
fn with_key(bytes: Vec<u8>, key: &str, value: Option<ropescope::gguf::Value>) -> Vec<u8> {
    let file = GgufFile::from_bytes(bytes).unwrap();
    let mut w = ropescope::gguf::GgufWriter::new();
    for (k, v) in file.metadata() {
        match (k == key, &value) {
            (false, _) => w = w.kv(k, v.clone()),
            (true, Some(new)) => w = w.kv(k, new.clone()),
            (true, None) => {}
        }
    }
    for t in file.tensors() {
        w = w.tensor_raw(&t.name, &t.dims, t.ty, file.tensor_bytes(t).to_vec());
    }
    w.to_bytes()
}

fn load_error(bytes: Vec<u8>) -> String {
    Model::<f32>::load(&GgufFile::from_bytes(bytes).unwrap())
        .err()
        .expect("the model must be rejected")
        .to_string()
}

#[test]
fn unsupported_or_incomplete_models_are_clear_errors() {
    use ropescope::gguf::Value;
    let bytes = synth("llama").to_bytes();
    let e = load_error(with_key(
        bytes.clone(),
        "general.architecture",
        Some(Value::String("rwkv6".into())),
    ));
    assert!(e.contains("'rwkv6' is not supported"), "{e}");
    let e = load_error(with_key(bytes.clone(), "llama.block_count", None));
    assert!(
        e.contains("llama.block_count") && e.contains("missing"),
        "{e}"
    );
    let e = load_error(with_key(
        bytes.clone(),
        "llama.attention.head_count",
        Some(Value::U32(8)),
    ));
    assert!(
        e.contains("llama.attention.head_count") && e.contains("'blk.0.attn_q.weight' has 32 rows"),
        "{e}"
    );
    let e = load_error(with_key(
        bytes,
        "llama.attention.head_count_kv",
        Some(Value::U32(3)),
    ));
    assert!(e.contains("does not divide"), "{e}");
}

/// The memory pre-flight counts what a mixture of experts adds per token (router logits, the f64 sum of the
/// experts' outputs, one expert's gathered input and its gate, up and down outputs, the routes), and a dense
/// model adds nothing.
#[test]
fn the_memory_preflight_counts_the_experts() {
    let mut m = SyntheticModel::new("qwen3moe");
    m.experts = Some(SyntheticExperts {
        count: 64,
        used: 8,
        n_ff: 96,
        shared: 0,
        leading_dense: 0,
    });
    let model = Model::<f32>::load(&GgufFile::from_bytes(m.to_bytes()).unwrap()).unwrap();
    let c = &model.config;
    let d = c.n_embd as u64;
    let least = 4 * (64 + 2 * 96 + 2 * d) + 8 * d + 8 * 2 * 16;
    assert_eq!(model.expert_bytes_per_token(), least);
    let n = 100;
    assert!(model.activation_bytes(n) >= n as u64 * least);
    let dense =
        Model::<f32>::load(&GgufFile::from_bytes(SyntheticModel::new("llama").to_bytes()).unwrap())
            .unwrap();
    assert_eq!(dense.expert_bytes_per_token(), 0);
}
