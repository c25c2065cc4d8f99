//! Support of the report tests: a generator of a small, complete and valid scan directory (2 layers × 3 heads,
//! prompts of 32 tokens, 16×16 maps, Δmax = 8) whose statistics are computed from synthetic attention matrices
//! exactly as `fixtures/scan/FORMAT.md` defines them, and a well-formedness check of XML.
//!
//! The heads: L0H0 previous-token, L0H1 sink, L0H2 positional, L1H0 slash(3), L1H1 sink, L1H2 induction. Every
//! analysis ran; `cauchy-schwarz` tabled L0H0 only, so the other heads' records say they are not in its head
//! set. `fixtures/scan/example/` is this generator's output.

pub mod browser;
pub mod headlines;

use ropescope::io::{npy, write_json};
use ropescope::scan::external::head_record;
use ropescope::scan::format::*;
use ropescope::scan::{Analysis, ScanParams};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Layers.
pub const L: usize = 2;
/// Heads per layer.
pub const H: usize = 3;
/// Prompt length.
pub const N: usize = 32;
/// Side of the attention maps.
pub const M: usize = 16;
/// Largest slash offset.
pub const DMAX: usize = 8;
/// Head dimension.
pub const D: usize = 8;
/// Rotating chunks.
pub const C: usize = 4;
/// κ of the example: at N = 32 uniform causal attention already puts `H_N / N ≈ 0.13` on the diagonal, so the
/// scan's default 0.1 (meant for N = 512) would call every head diagonal.
const KAPPA: f64 = 0.25;
const SINK_THRESHOLD: f64 = 0.5;

/// The shape of a generated scan directory.
pub struct Shape {
    /// Layers.
    pub layers: usize,
    /// Heads per layer.
    pub heads: usize,
    /// Prompt length.
    pub n: usize,
    /// Side of the attention maps.
    pub m: usize,
    /// Largest slash offset.
    pub dmax: usize,
    /// Head dimension.
    pub d: usize,
    /// Rotating chunks (a multiple of 4: the synthetic chunk norms come in four bands).
    pub c: usize,
    /// κ.
    pub kappa: f64,
}

/// The example: 2 layers × 3 heads, 32-token prompts, 16×16 maps.
pub const EXAMPLE: Shape = Shape {
    layers: L,
    heads: H,
    n: N,
    m: M,
    dmax: DMAX,
    d: D,
    c: C,
    kappa: KAPPA,
};

/// The shape of the default SmolLM2-135M scan (30 layers × 9 heads, 512-token prompts, 256×256 maps, 32
/// chunks, Δmax = 16, κ = 0.1), with the example's synthetic heads tiled over it: what page sizes are measured on.
pub const SMOLLM2: Shape = Shape {
    layers: 30,
    heads: 9,
    n: 512,
    m: 256,
    dmax: 16,
    d: 64,
    c: 32,
    kappa: 0.1,
};

/// The committed example directory.
pub fn example_dir() -> PathBuf {
    crate::paths::fixture("scan/example")
}

/// Kind of synthetic head.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Previous,
    Sink,
    Positional,
    Slash3,
    Content,
}

/// The kind of head `(l, h)`: the example's 2 × 3 pattern, tiled over larger shapes.
fn kind(l: usize, h: usize) -> Kind {
    [
        [Kind::Previous, Kind::Sink, Kind::Positional],
        [Kind::Slash3, Kind::Sink, Kind::Content],
    ][l % 2][h % 3]
}

/// The causal attention matrix of a head on a prompt set (`random` weakens content-driven structure).
fn attention(sh: &Shape, l: usize, h: usize, random: bool) -> Vec<f64> {
    let mut s = vec![0.0; sh.n * sh.n];
    for i in 0..sh.n {
        let mut row: Vec<f64> = (0..=i)
            .map(|j| {
                let d = i - j;
                let w = match kind(l, h) {
                    Kind::Previous => 1.0 + 30.0 * f64::from(d == 1) + 3.0 * f64::from(j == 0),
                    Kind::Sink => {
                        1.0 + (40.0 + 20.0 * l as f64) * f64::from(j == 0) + 2.0 * f64::from(d == 0)
                    }
                    Kind::Positional => 1.0 / (1.0 + d as f64 / 10.0),
                    Kind::Slash3 => 1.0 + 25.0 * f64::from(d == 3) + 3.0 * f64::from(j == 0),
                    Kind::Content => {
                        let hit = (i * 7 + j * 13) % 11 == 0;
                        1.0 + if random { 2.0 } else { 10.0 } * f64::from(hit)
                    }
                };
                if random && kind(l, h) != Kind::Content {
                    w * (1.0 + 0.1 * (((i * 31 + j * 17) % 7) as f64 / 7.0))
                } else {
                    w
                }
            })
            .collect();
        let total: f64 = row.iter().sum();
        row.iter_mut().for_each(|w| *w /= total);
        s[i * sh.n..i * sh.n + i + 1].copy_from_slice(&row);
    }
    s
}

fn slash_scores(sh: &Shape, s: &[f64]) -> Vec<f64> {
    (0..=sh.dmax)
        .map(|d| (d..sh.n).map(|i| s[i * sh.n + i - d]).sum::<f64>() / (sh.n - d) as f64)
        .collect()
}

fn sink_score(sh: &Shape, s: &[f64]) -> f64 {
    (1..sh.n).map(|i| s[i * sh.n]).sum::<f64>() / (sh.n - 1) as f64
}

fn block_map(sh: &Shape, s: &[f64]) -> Vec<f32> {
    let mut sum = vec![0.0; sh.m * sh.m];
    let mut count = vec![0.0; sh.m * sh.m];
    for i in 0..sh.n {
        for j in 0..sh.n {
            let b = (i * sh.m / sh.n) * sh.m + j * sh.m / sh.n;
            sum[b] += s[i * sh.n + j];
            count[b] += 1.0;
        }
    }
    sum.iter()
        .zip(&count)
        .map(|(a, c)| (a / c) as f32)
        .collect()
}

fn frequencies(sh: &Shape) -> Vec<f64> {
    (0..sh.c)
        .map(|l| 10000f64.powf(-2.0 * l as f64 / sh.d as f64))
        .collect()
}

fn chunk_norms(sh: &Shape, l: usize, h: usize, key: bool) -> Vec<f64> {
    let base = match kind(l, h) {
        Kind::Previous | Kind::Slash3 => [3.0, 1.2, 0.8, 0.6],
        Kind::Sink => [0.5, 0.7, 1.5, 4.0],
        _ => [1.0, 1.1, 1.0, 1.3],
    };
    let scale = if key { 0.8 } else { 1.0 } + 0.05 * (l * sh.heads + h) as f64;
    // Four bands of chunks, fastest first (one chunk each in the example).
    (0..sh.c).map(|k| base[k * 4 / sh.c] * scale).collect()
}

fn singular_values(sh: &Shape, l: usize, h: usize, key: bool) -> Vec<f64> {
    let first = if kind(l, h) == Kind::Sink { 10.0 } else { 4.0 };
    let ratio: f64 = if key { 0.5 } else { 0.6 };
    // Repeated products rather than `powi`, whose rounding may differ between optimisation levels: the example
    // must be the same bytes from `cargo test` and `cargo test --release`.
    (0..sh.d)
        .scan(2.0, |tail, k| {
            if k == 0 {
                Some(first)
            } else {
                *tail *= ratio;
                Some(*tail)
            }
        })
        .collect()
}

fn phases(sh: &Shape, l: usize, h: usize) -> Vec<f64> {
    let delta = match kind(l, h) {
        Kind::Previous => 1.0,
        Kind::Slash3 => 3.0,
        _ => 0.0,
    };
    frequencies(sh).iter().map(|g| -g * delta).collect()
}

fn bands(sh: &Shape, values: &[f64]) -> Bands {
    let g = frequencies(sh);
    let total: f64 = values.iter().sum();
    let share = |f: &dyn Fn(f64) -> bool| {
        values
            .iter()
            .zip(&g)
            .filter(|(_, &g)| f(g))
            .map(|(v, _)| v)
            .sum::<f64>()
            / total
    };
    Bands {
        low: share(&|g| g < 0.01),
        medium: share(&|g| (0.01..0.1).contains(&g)),
        high: share(&|g| g >= 0.1),
        nope: None,
    }
}

fn argmax(v: &[f64]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

/// Pearson's correlation, written out here as the tests' independent recomputation of the library's.
fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

fn jaccard<T: PartialEq>(a: &[T], b: &[T]) -> f64 {
    let inter = a.iter().filter(|x| b.contains(x)).count();
    let union = a.len() + b.len() - inter;
    if union == 0 {
        1.0
    } else {
        inter as f64 / union as f64
    }
}

/// The label of `fixtures/scan/FORMAT.md`'s rules, from the best offset and score, the larger neighbouring
/// score, the sink, induction and posym scores.
fn label(
    sh: &Shape,
    (best, neighbour): ((usize, f64), Option<f64>),
    sink: f64,
    induction: f64,
    posym: (f64, f64),
) -> String {
    let sinks = sink >= SINK_THRESHOLD;
    let peaks = neighbour.is_none_or(|n| best.1 >= 1.5 * n);
    if best.1 >= sh.kappa && peaks && (!sinks || best.1 >= sink) {
        return match best.0 {
            0 => "diagonal".into(),
            1 => "previous-token".into(),
            d => format!("slash({d})"),
        };
    }
    if induction >= 0.3 {
        return "induction".into();
    }
    if sinks {
        return "sink".into();
    }
    if posym.0 - posym.1 >= 0.2 {
        "positional".into()
    } else if posym.1 - posym.0 >= 0.2 {
        "symbolic".into()
    } else {
        "mixed".into()
    }
}

/// Writes the complete example scan directory into `dir` (created if needed).
pub fn write_example(dir: &Path) {
    write_scan(dir, &EXAMPLE);
}

/// Writes a complete scan directory of shape `sh` into `dir` (created if needed).
pub fn write_scan(dir: &Path, sh: &Shape) {
    std::fs::create_dir_all(dir).unwrap();
    let npy64 = |name: &str, shape: &[usize], data: &[f64]| {
        npy::write(&dir.join(name), shape, data).unwrap()
    };
    let lh = |f: &dyn Fn(usize, usize) -> Vec<f64>| -> Vec<f64> {
        (0..sh.layers)
            .flat_map(|l| (0..sh.heads).flat_map(move |h| f(l, h)))
            .collect()
    };
    let (mut slash, mut sink) = (vec![Vec::new(), Vec::new()], vec![Vec::new(), Vec::new()]);
    for (set, name) in PROMPT_SETS.iter().enumerate() {
        let mut maps = Vec::new();
        for l in 0..sh.layers {
            for h in 0..sh.heads {
                let s = attention(sh, l, h, set == 1);
                slash[set].extend(slash_scores(sh, &s));
                sink[set].push(sink_score(sh, &s));
                maps.extend(block_map(sh, &s));
            }
        }
        npy64(
            &files::for_set(files::SLASH, name),
            &[sh.layers, sh.heads, sh.dmax + 1],
            &slash[set],
        );
        npy64(
            &files::for_set(files::SINK, name),
            &[sh.layers, sh.heads],
            &sink[set],
        );
        npy::write(
            &dir.join(files::for_set(files::ATTENTION_MAP, name)),
            &[sh.layers, sh.heads, sh.m, sh.m],
            &maps,
        )
        .unwrap();
        let lhc = [sh.layers, sh.heads, sh.c];
        npy64(
            &files::for_set(files::CHUNK_NORMS_Q, name),
            &lhc,
            &lh(&|l, h| chunk_norms(sh, l, h, false)),
        );
        npy64(
            &files::for_set(files::CHUNK_NORMS_K, name),
            &lhc,
            &lh(&|l, h| chunk_norms(sh, l, h, true)),
        );
        npy64(
            &files::for_set(files::CHUNK_NORMS_V, name),
            &lhc,
            &lh(&|_, _| vec![1.0; sh.c]),
        );
        npy64(
            &files::for_set(files::SINGULAR_VALUES_Q, name),
            &[sh.layers, sh.heads, sh.d],
            &lh(&|l, h| singular_values(sh, l, h, false)),
        );
        npy64(
            &files::for_set(files::SINGULAR_VALUES_K, name),
            &[sh.layers, sh.heads, sh.d],
            &lh(&|l, h| singular_values(sh, l, h, true)),
        );
        let amp = |l, h| -> Vec<f64> {
            let (q, k) = (chunk_norms(sh, l, h, false), chunk_norms(sh, l, h, true));
            q.iter().zip(&k).map(|(a, b)| 0.5 * a * b).collect()
        };
        npy64(
            &files::for_set(files::FOURIER_AMPLITUDE, name),
            &lhc,
            &lh(&amp),
        );
        npy64(
            &files::for_set(files::FOURIER_PHASE, name),
            &lhc,
            &lh(&|l, h| phases(sh, l, h)),
        );
    }
    let g = frequencies(sh);
    npy64(
        files::CHUNK_FREQUENCY,
        &[sh.layers, sh.c],
        &g.repeat(sh.layers),
    );
    let cone = lh(&|l, h| vec![0.3 + 0.1 * l as f64, 0.9 + 0.05 * h as f64]);
    npy64(files::CONE_Q, &[sh.layers, sh.heads, 2], &cone);
    npy64(
        files::CONE_K,
        &[sh.layers, sh.heads, 2],
        &cone.iter().map(|a| a * 0.9).collect::<Vec<_>>(),
    );

    let idx = |l: usize, h: usize| l * sh.heads + h;
    let posym = |l: usize, h: usize| match kind(l, h) {
        Kind::Positional | Kind::Previous | Kind::Slash3 => {
            (0.85 - 0.05 * h as f64, 0.2 + 0.05 * l as f64)
        }
        Kind::Content => (0.25, 0.8),
        Kind::Sink => (0.55, 0.45),
    };
    let induction = |l: usize, h: usize| {
        if kind(l, h) == Kind::Content {
            0.62
        } else {
            0.03 + 0.01 * h as f64
        }
    };
    // How much of a head's slash an ablation variant leaves: 1 for the baseline; slash heads lose theirs when
    // the fast chunks stop rotating.
    let kept = |variant: usize, l: usize, h: usize| {
        let slashy = matches!(kind(l, h), Kind::Previous | Kind::Slash3);
        [1.0, 0.6, 0.1, 0.3][variant]
            * if slashy {
                1.0
            } else {
                0.9 + 0.1 * variant as f64
            }
    };
    let per_head = |f: &dyn Fn(usize, usize) -> f64| -> serde_json::Value {
        (0..sh.layers)
            .map(|l| (0..sh.heads).map(|h| f(l, h)).collect::<Vec<_>>())
            .collect()
    };
    write_json(
        &dir.join("posym.json"),
        &json!({
            "block_count": 8, "temperature": 0.1,
            "s_pos": per_head(&|l, h| posym(l, h).0), "s_sym": per_head(&|l, h| posym(l, h).1)
        }),
    )
    .unwrap();
    write_json(
        &dir.join("detectors.json"),
        &json!({
            "induction": per_head(&induction),
            "previous_token": per_head(&|l, h| slash[0][idx(l, h) * (sh.dmax + 1) + 1]),
            "sink": per_head(&|l, h| sink[0][idx(l, h)])
        }),
    )
    .unwrap();
    let variants = [
        json!({"kind": "baseline"}),
        json!({"kind": "p_rope", "p": 0.5}),
        json!({"kind": "p_rope", "p": 0.0}),
        json!({"kind": "band_masked", "band": "high"}),
    ];
    let losses = [2.0, 2.25, 5.5, 3.125];
    // A value per chunk from one per band: the four bands hold `sh.c / 4` chunks each, fastest first.
    let per_band = |bands: [bool; 4]| -> Vec<bool> {
        bands
            .iter()
            .flat_map(|&b| std::iter::repeat_n(b, sh.c / 4))
            .collect()
    };
    let ablation_variant = |v: usize| {
        let peak = |l: usize, h: usize| {
            let i = idx(l, h);
            let profile = &slash[0][i * (sh.dmax + 1)..(i + 1) * (sh.dmax + 1)];
            let best = argmax(profile);
            (
                best,
                profile[best] * kept(v, l, h),
                profile[best] * (kept(v, l, h) - 1.0),
            )
        };
        json!({
            "variant": variants[v], "rotated_chunks": per_band([v != 2 && v != 3, v == 0 || v == 3, v != 2, v != 2]),
            "loss": losses[v], "loss_change": losses[v] - losses[0],
            "peak_delta": (0..sh.layers).map(|l| (0..sh.heads).map(|h| peak(l, h).0).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "peak_score": per_head(&|l, h| peak(l, h).1),
            "baseline_peak_change": per_head(&|l, h| peak(l, h).2)
        })
    };
    let chunk_bands: Vec<&str> = ["high", "medium", "low", "low"]
        .iter()
        .flat_map(|&b| std::iter::repeat_n(b, sh.c / 4))
        .collect();
    let ablation = json!({
        "n_predicted": 2 * (sh.n - 1), "chunk_bands": chunk_bands,
        "baseline": ablation_variant(0), "variants": (1..4).map(ablation_variant).collect::<Vec<_>>()
    });
    write_json(&dir.join("ablation.json"), &ablation).unwrap();
    let pair = |n: u64, a: f64, b: f64, r: f64| json!({"n_pairs": n, "mean_activation": a, "mean_bound": b, "mean_ratio": r, "mean_pre_rope_ratio": r / 2.0});
    let cauchy_schwarz = json!({"heads": [{
        "target": {"layer": 0, "head": 0, "kind": "previous_token"},
        "table": [{"position": 1, "token": 103, "diagonal_bound": 4.0, "diagonal": -1.0,
                   "previous_bound": 5.0, "previous": 2.5}],
        "diagonal": pair(62, -1.0, 4.0, -0.25),
        "previous": pair(60, 2.5, 5.0, 0.5),
        "baseline": pair(870, -0.5, 4.5, -0.125)
    }]});
    write_json(&dir.join("cauchy_schwarz.json"), &cauchy_schwarz).unwrap();

    let record =
        |a, report: &serde_json::Value, l, h| head_record(a, report, (sh.layers, sh.heads), (l, h));
    let mut heads = Vec::new();
    let (mut nat, mut ran) = (Vec::new(), Vec::new());
    for l in 0..sh.layers {
        for h in 0..sh.heads {
            let i = idx(l, h);
            let sl = |set: usize| &slash[set][i * (sh.dmax + 1)..(i + 1) * (sh.dmax + 1)];
            let (best, rbest) = (argmax(sl(0)), argmax(sl(1)));
            for (set, list) in [(0, &mut nat), (1, &mut ran)] {
                for (d, &v) in sl(set).iter().enumerate() {
                    if v >= sh.kappa {
                        list.push(SlashHead {
                            layer: l,
                            head: h,
                            delta: d,
                        });
                    }
                }
            }
            let sv = |key| -> (f64, f64) {
                let s = singular_values(sh, l, h, key);
                let sq: f64 = s.iter().map(|v| v * v).sum();
                let tot: f64 = s.iter().sum();
                let ent: f64 = s.iter().map(|v| v / tot).map(|p| -p * p.ln()).sum();
                (s[0] * s[0] / sq, ent.exp())
            };
            let ((q1, qe), (k1, ke)) = (sv(false), sv(true));
            let amp: Vec<f64> = chunk_norms(sh, l, h, false)
                .iter()
                .zip(chunk_norms(sh, l, h, true))
                .map(|(a, b)| 0.5 * a * b)
                .collect();
            let ph = phases(sh, l, h);
            let logit: Vec<f64> = (0..=sh.dmax)
                .map(|d| {
                    (0..sh.c)
                        .map(|c| amp[c] * (g[c] * d as f64 + ph[c]).cos())
                        .sum()
                })
                .collect();
            let (p, s) = posym(l, h);
            let neighbour = [best.checked_sub(1), Some(best + 1)]
                .into_iter()
                .flatten()
                .filter_map(|d| sl(0).get(d).copied())
                .reduce(f64::max);
            heads.push(HeadSummary {
                layer: l,
                head: h,
                kv_head: h,
                label: label(
                    sh,
                    ((best, sl(0)[best]), neighbour),
                    sink[0][i],
                    induction(l, h),
                    (p, s),
                ),
                slash: Some(HeadSlash {
                    best_delta: best,
                    best_score: sl(0)[best],
                    neighbour_score: neighbour,
                    random_score_at_best_delta: Some(sl(1)[best]),
                    random_best_delta: Some(rbest),
                    sink: sink[0][i],
                    random_sink: Some(sink[1][i]),
                    learned_sink: None,
                    slash_dominant: sl(0)[best] >= sh.kappa,
                    random_slash_dominant: Some(sl(1)[best] >= sh.kappa),
                }),
                rank: Some(HeadRank {
                    q_rank_one_share: q1,
                    q_effective_rank: qe,
                    k_rank_one_share: k1,
                    k_effective_rank: ke,
                    q_cos_mean: 0.9,
                    q_cos_std: 0.05,
                    k_cos_mean: 0.85,
                    k_cos_std: 0.07,
                }),
                fourier: Some(HeadFourier {
                    amplitude_shares: bands(sh, &amp),
                    predicted_delta: argmax(&logit),
                    measured_delta: Some(best),
                }),
                frequency: Some(HeadFrequency {
                    q: bands(sh, &chunk_norms(sh, l, h, false)),
                    k: bands(sh, &chunk_norms(sh, l, h, true)),
                }),
                cone: Some(HeadCone {
                    q_mean_angle: cone[i * 2],
                    q_max_angle: cone[i * 2 + 1],
                    k_mean_angle: cone[i * 2] * 0.9,
                    k_max_angle: cone[i * 2 + 1] * 0.9,
                }),
                posym: Some(json!({"s_pos": p, "s_sym": s})),
                detectors: Some(json!({
                    "induction": induction(l, h),
                    "previous_token": sl(0)[1],
                    "sink": sink[0][i]
                })),
                cauchy_schwarz: record(Analysis::CauchySchwarz, &cauchy_schwarz, l, h),
                ablation: record(Analysis::Ablation, &ablation, l, h),
            });
        }
    }
    let heads_of = |v: &[SlashHead]| -> Vec<(usize, usize)> {
        let mut out: Vec<_> = v.iter().map(|s| (s.layer, s.head)).collect();
        out.dedup();
        out
    };
    let best = |set: usize| -> Vec<f64> {
        slash[set]
            .chunks(sh.dmax + 1)
            .map(|c| c.iter().cloned().fold(f64::MIN, f64::max))
            .collect()
    };
    let mut summary = Summary {
        format_version: FORMAT_VERSION,
        intrinsic: Some(Intrinsic {
            jaccard: jaccard(&nat, &ran),
            jaccard_heads: jaccard(&heads_of(&nat), &heads_of(&ran)),
            pearson_all: pearson(&slash[0], &slash[1]),
            pearson_best: pearson(&best(0), &best(1)),
        }),
        slash_dominant: Some(SlashDominantSets {
            kappa: sh.kappa,
            natural: nat,
            random: ran,
        }),
        cone: Some(EmbeddingCone {
            n_tokens: 64,
            mean_angle: 1.2,
            max_angle: 1.5,
        }),
        heads,
        warnings: Vec::new(),
        claims: Vec::new(),
    };
    summary.claims = ropescope::scan::claims::evaluate(&ropescope::scan::claims::ClaimInputs {
        summary: &summary,
        params: &ScanParams {
            kappa: sh.kappa,
            delta_max: sh.dmax,
            ..ScanParams::default()
        },
        frequencies: &vec![frequencies(sh); sh.layers],
    });
    write_json(&dir.join(files::SUMMARY), &summary).unwrap();
    let mut text = String::from("layer head label            best_delta best_score sink\n");
    for h in &summary.heads {
        let s = h.slash.as_ref().unwrap();
        text += &format!(
            "{:5} {:4} {:16} {:10} {:10.4} {:.4}\n",
            h.layer, h.head, h.label, s.best_delta, s.best_score, s.sink
        );
    }
    std::fs::write(dir.join(files::SUMMARY_TEXT), text).unwrap();

    let natural: Vec<Vec<u32>> = (0..2)
        .map(|p| {
            (0..sh.n as u32)
                .map(|t| if t == 0 { 1 } else { 100 + 3 * t + p })
                .collect()
        })
        .collect();
    let random: Vec<Vec<u32>> = (0..2)
        .map(|p| {
            (0..sh.n as u32)
                .map(|t| {
                    if t == 0 {
                        1
                    } else {
                        (t * 7919 + p * 104_729) % 1000
                    }
                })
                .collect()
        })
        .collect();
    write_json(&dir.join(files::PROMPTS), &Prompts { natural, random }).unwrap();
    let set = |name: &str, source: &str| PromptSetMeta {
        repeats_from: Vec::new(),
        name: name.into(),
        count: 2,
        lengths: vec![sh.n, sh.n],
        sources: vec![source.into(); 2],
    };
    let meta = Meta {
        format_version: FORMAT_VERSION,
        ropescope_version: "0.1.0".into(),
        model_file: format!("synthetic-{}x{}.gguf", sh.layers, sh.heads),
        model_sha256: "0f".repeat(32),
        model: ModelMeta {
            architecture: "llama".into(),
            n_layers: sh.layers,
            n_heads: sh.heads,
            n_kv_heads: sh.heads,
            head_dim: sh.d,
            value_dim: sh.d,
            kv_heads: Vec::new(),
            head_dims: Vec::new(),
            value_dims: Vec::new(),
            n_chunks: sh.c,
            rotated_chunks: Vec::new(),
            rope_bases: vec![10000.0; sh.layers],
            windows: vec![None; sh.layers],
            chunks: Vec::new(),
            context_length: 2048,
            vocab_size: 1000,
        },
        precision: "f64".into(),
        arithmetic: Default::default(),
        prompt_sets: vec![
            set("natural", "synthetic text"),
            set("random", "uniform random ids"),
        ],
        parameters: ScanParams {
            analyses: Vec::new(),
            delta_max: sh.dmax,
            kappa: sh.kappa,
            low_band_max_frequency: 0.01,
            high_band_min_frequency: 0.1,
            sink_threshold: SINK_THRESHOLD,
            map_size: sh.m,
            cone_tokens: 64,
            seed: 0,
            prompt_length: sh.n,
        },
        analyses: [
            "slash",
            "intrinsic",
            "frequency",
            "rank",
            "fourier",
            "cone",
            "posym",
            "detectors",
            "cauchy-schwarz",
            "ablation",
        ]
        .map(String::from)
        .to_vec(),
        command: ["ropescope", "scan", "synthetic-2x3.gguf"]
            .map(String::from)
            .to_vec(),
        complete: true,
        elapsed_seconds: 1.5,
        step_seconds: vec![StepTime {
            step: "natural prompts".into(),
            seconds: 1.25,
        }],
    };
    write_json(&dir.join(files::META), &meta).unwrap();
}

/// A fresh copy of the example scan directory in a temporary directory.
pub fn example() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_example(dir.path());
    dir
}

/// Checks that `text` is well-formed XML as far as a report needs: tags balanced and properly nested, attribute
/// quotes closed, no stray `<` or `&` in text; a `<script>`'s content is raw text, as in HTML. Returns the first
/// problem.
pub fn check_xml(text: &str) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open])?;
        let after = &rest[open + 1..];
        if let Some(body) = after.strip_prefix("!--") {
            let end = body.find("-->").ok_or("unclosed comment")?;
            rest = &body[end + 3..];
            continue;
        }
        let end = tag_end(after)
            .ok_or_else(|| format!("unclosed tag near {:?}", &after[..after.len().min(40)]))?;
        let tag = &after[..end];
        rest = &after[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack
                .pop()
                .ok_or_else(|| format!("closing </{name}> with nothing open"))?;
            if top != name.trim() {
                return Err(format!("</{name}> closes <{top}>"));
            }
        } else if !tag.ends_with('/') {
            let name = tag.split(|c: char| c.is_whitespace()).next().unwrap_or("");
            stack.push(name.to_string());
            if name == "script" {
                // Raw text, as HTML reads it: up to the closing tag, whatever it holds.
                rest = &rest[rest.find("</script>").ok_or("unclosed <script>")?..];
            }
        }
    }
    check_text(rest)?;
    match stack.pop() {
        Some(t) => Err(format!("<{t}> never closed")),
        None => Ok(()),
    }
}

/// Index of the `>` ending a tag, skipping quoted attribute values.
fn tag_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

fn check_text(t: &str) -> Result<(), String> {
    for (i, _) in t.match_indices('&') {
        let entity = &t[i..t.len().min(i + 8)];
        if !["&amp;", "&lt;", "&gt;", "&quot;", "&#"]
            .iter()
            .any(|e| entity.starts_with(e))
        {
            return Err(format!("bare & in text: {entity:?}"));
        }
    }
    Ok(())
}
