//! `ropescope inspect`: architecture, hyper-parameters, RoPE as the forward pass applies it, tensor types of a
//! GGUF file, how much of its tensor data is present, and what in it ropescope does not understand (which
//! `reference` and `scan` refuse).
//!
//! Only the header has to be whole: a file cut inside its tensor data (such as the first part of a split
//! download) is described, with the bytes and tensors missing.

use crate::gguf::{DataExtent, GgufFile, Hparams};
use crate::model::arch;
use crate::model::config::{
    Activation, FeedForward, LayerConfig, LogitScale, Mla, ModelConfig, Moe, Norm, QkNorm,
    Residual, Routing, Temperature,
};
use anyhow::Context;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Arguments of `ropescope inspect`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file.
    model: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// What `inspect --json` prints.
#[derive(Serialize)]
struct Report {
    file: String,
    file_size: u64,
    gguf_version: u32,
    #[serde(flatten)]
    hparams: Hparams,
    n_tensors: usize,
    tensor_types: BTreeMap<String, usize>,
    /// How much of the tensor data the directory announces is in the file.
    tensor_data: TensorDataReport,
    /// RoPE of the resolved configuration; `null` when the file cannot be resolved (see `problem`).
    rope: Option<RopeReport>,
    /// The blocks of the resolved configuration; `null` when the file cannot be resolved.
    block: Option<BlockReport>,
    /// What the engine assumes for this architecture where the file states nothing (as llama.cpp's loader does).
    assumptions: &'static [&'static str],
    /// Keys and tensors ropescope does not understand; `reference` and `scan` refuse a file that has any.
    not_understood: Vec<String>,
    /// Why the file cannot be run, if it cannot.
    problem: Option<String>,
}

/// `tensor_data` of `inspect --json`.
#[derive(Serialize)]
struct TensorDataReport {
    #[serde(flatten)]
    extent: DataExtent,
    /// `expected_size - file_size`: bytes of tensor data missing from the end of the file.
    missing_bytes: u64,
}

/// The RoPE of a model: one entry per distinct layer type.
#[derive(Serialize)]
struct RopeReport {
    /// Coordinate pairing of the file's Q/K weights (`adjacent` or `half-split`).
    pairing: &'static str,
    /// Head dimension of layer 0 (each layer type states its own).
    head_dim: usize,
    /// Rotated dimensions of the first rotating layer (each layer type states its own).
    rot_dim: usize,
    /// Multiplier of `q·k`.
    attn_scale: f64,
    /// Gemma's `query_pre_attn_scalar`, where the architecture has one.
    query_pre_attn_scalar: Option<f64>,
    /// The layer types.
    layer_types: Vec<LayerTypeReport>,
    /// Per layer, the earlier layer whose keys and values it attends over (Gemma 4's KV sharing); empty when
    /// every layer has its own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    kv_from: Vec<Option<usize>>,
}

/// How a block is built, as the forward pass runs it.
#[derive(Serialize)]
struct BlockReport {
    /// `rms` or `layer` (LayerNorm).
    norm: Norm,
    /// Where each block normalises: `pre`, `pre+post` or `post` (around attention and feed-forward).
    norm_placement: &'static str,
    /// RMSNorm of queries and keys before RoPE: `none`, `per-head` or `projection` (the whole projection).
    qk_norm: QkNorm,
    /// `sequential`, `parallel` or `parallel-shared-norm`.
    residual: Residual,
    /// `gated` or `plain`.
    feed_forward: FeedForward,
    /// The feed-forward non-linearity.
    activation: Activation,
    /// Whether every head has a learned sink logit: one more softmax entry per row, attached to no key.
    sinks: bool,
    /// Multi-head latent attention: the latent's width and the queries' bottleneck rank.
    mla: Option<Mla>,
    /// The mixture of experts in place of the feed-forward block, if any.
    moe: Option<Moe>,
    /// Multiplier of the token embeddings.
    embedding_scale: Option<f64>,
    /// Multiplier of each block's output before the residual add.
    residual_scale: Option<f64>,
    /// The scale of the output logits: `{"divide": d}` or `{"multiply": m}`.
    logit_scale: Option<LogitScale>,
}

impl BlockReport {
    fn of(c: &ModelConfig) -> Self {
        Self {
            norm: c.norm,
            norm_placement: match (c.pre_norms, c.post_norms) {
                (true, false) => "pre",
                (true, true) => "pre+post",
                (false, _) => "post",
            },
            qk_norm: c.qk_norm,
            residual: c.residual,
            feed_forward: c.feed_forward,
            activation: c.activation,
            sinks: c.sinks,
            mla: c.mla,
            moe: c.moe,
            embedding_scale: c.embed_scale,
            residual_scale: c.residual_scale,
            logit_scale: c.logit_scale,
        }
    }
}

/// Layers that share one RoPE and window.
#[derive(Serialize)]
struct LayerTypeReport {
    /// The layers of this type.
    layers: Vec<usize>,
    /// Query/key head dimension.
    head_dim: usize,
    /// Key/value heads.
    n_kv_heads: usize,
    /// Value head dimension.
    value_dim: usize,
    /// Feed-forward width (of the dense block; see `experts`).
    n_ff: usize,
    /// Whether the feed-forward block is the model's mixture of experts.
    experts: bool,
    /// Chunked attention: positions per chunk.
    chunk: Option<usize>,
    /// The queries' attention temperature by position.
    temperature: Option<Temperature>,
    /// Rotated dimensions; 0 on a NoPE layer, whose queries and keys carry no position.
    rot_dim: usize,
    /// Whether these layers rotate nothing (NoPE).
    nope: bool,
    /// Frequency base before scaling.
    base: f64,
    /// The scaling, with its parameters (`type`: none, linear, factors, yarn, longrope).
    scaling: crate::rope::Scaling,
    /// Sliding window, `null` for global attention.
    window: Option<usize>,
    /// Frequencies `g_l` (rad/token) really rotated by, for sequences of at most `long_above` tokens (or any).
    inv_freq: Vec<f64>,
    /// Magnitude multiplying cos and sin.
    magnitude: f64,
    /// LongRoPE: sequences longer than this use `inv_freq_long`.
    long_above: Option<usize>,
    /// LongRoPE: frequencies for sequences longer than `long_above`.
    inv_freq_long: Option<Vec<f64>>,
}

impl RopeReport {
    fn of(c: &ModelConfig) -> Self {
        // Layers of one type share RoPE, window and shapes.
        let mut types: Vec<(&LayerConfig, Vec<usize>)> = Vec::new();
        let same = |a: &LayerConfig, b: &LayerConfig| {
            a.rope == b.rope
                && (a.window, a.chunk, a.temperature, a.experts)
                    == (b.window, b.chunk, b.temperature, b.experts)
                && (a.n_kv_heads, a.value_dim, a.n_ff) == (b.n_kv_heads, b.value_dim, b.n_ff)
        };
        for (i, l) in c.layers.iter().enumerate() {
            match types.iter_mut().find(|(t, _)| same(t, l)) {
                Some((_, layers)) => layers.push(i),
                None => types.push((l, vec![i])),
            }
        }
        Self {
            pairing: c.pairing.name(),
            head_dim: c.head_dim,
            rot_dim: c
                .layers
                .iter()
                .find(|l| l.rope.rotates())
                .map_or(0, |l| l.rope.rot_dim),
            attn_scale: c.attn_scale,
            query_pre_attn_scalar: c.query_pre_attn_scalar,
            kv_from: match c.layers.iter().any(|l| l.kv_from.is_some()) {
                true => c.layers.iter().map(|l| l.kv_from).collect(),
                false => Vec::new(),
            },
            layer_types: types
                .into_iter()
                .map(|(t, layers)| {
                    let (rope, window) = (t.rope.clone(), t.window);
                    let short = rope.spec(0);
                    let long_above = rope.scaling.switches_above();
                    LayerTypeReport {
                        layers,
                        head_dim: t.head_dim(),
                        n_kv_heads: t.n_kv_heads,
                        value_dim: t.value_dim,
                        n_ff: t.n_ff,
                        experts: t.experts && c.moe.is_some(),
                        chunk: t.chunk,
                        temperature: t.temperature,
                        rot_dim: rope.rot_dim,
                        nope: !rope.rotates(),
                        base: rope.base,
                        window,
                        inv_freq: short.inv_freq,
                        magnitude: short.magnitude,
                        long_above,
                        inv_freq_long: long_above.map(|n| rope.spec(n + 1).inv_freq),
                        scaling: rope.scaling,
                    }
                })
                .collect(),
        }
    }
}

/// Runs `inspect`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let file = GgufFile::open_header(&args.model)?;
    let hparams = Hparams::from_gguf(&file).with_context(|| format!("{}", args.model.display()))?;
    let mut tensor_types = BTreeMap::new();
    for t in file.tensors() {
        *tensor_types.entry(t.ty.name().to_string()).or_insert(0) += 1;
    }
    let resolved = arch::resolve_unchecked(&file);
    let h_arch = hparams.architecture.clone();
    let not_understood = arch::keys::not_understood(&file);
    let extent = file.data_extent();
    let problem = match (&resolved, not_understood.first()) {
        _ if !extent.is_whole() => file.require_whole_data().err().map(|e| e.to_string()),
        (Err(e), _) => Some(e.to_string()),
        (Ok(_), Some(_)) => arch::keys::check(&file).err().map(|e| e.to_string()),
        (Ok(_), None) => None,
    };
    let report = Report {
        file: args.model.display().to_string(),
        file_size: file.file_size(),
        gguf_version: file.version(),
        hparams,
        n_tensors: file.tensors().len(),
        tensor_types,
        tensor_data: TensorDataReport {
            extent,
            missing_bytes: extent.missing_bytes(),
        },
        rope: resolved.as_ref().ok().map(RopeReport::of),
        block: resolved.as_ref().ok().map(BlockReport::of),
        assumptions: arch::assumptions(&h_arch),
        not_understood,
        problem,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    Ok(())
}

fn print_text(r: &Report) {
    let h = &r.hparams;
    let opt = |v: Option<usize>| v.map_or("-".to_string(), |x| x.to_string());
    let optf = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:e}"));
    println!(
        "file            {} ({} bytes, GGUF v{})",
        r.file, r.file_size, r.gguf_version
    );
    println!("architecture    {}", h.architecture);
    println!("layers          {}", h.n_layers);
    println!(
        "width           {} (feed-forward {})",
        h.n_embd,
        opt(h.n_ff)
    );
    println!(
        "heads           {} query / {} key-value, head dim {} (value {})",
        h.n_heads, h.n_kv_heads, h.head_dim, h.value_dim
    );
    println!(
        "rope            base {:e}, {} rotated dims",
        h.rope_base, h.rope_dim
    );
    println!(
        "context         {} (sliding window {})",
        h.context_length,
        opt(h.sliding_window)
    );
    println!(
        "norm eps        rms {} / layer {}",
        optf(h.rms_eps),
        optf(h.norm_eps)
    );
    println!(
        "soft-capping    attention {} / final {}",
        optf(h.attn_softcap),
        optf(h.final_softcap)
    );
    println!("vocabulary      {}", opt(h.vocab_size));
    let types: Vec<String> = r
        .tensor_types
        .iter()
        .map(|(t, n)| format!("{t} x{n}"))
        .collect();
    println!("tensors         {} ({})", r.n_tensors, types.join(", "));
    let d = &r.tensor_data.extent;
    if d.is_whole() {
        println!("tensor data     complete");
    } else {
        println!(
            "tensor data     INCOMPLETE: {} bytes missing (the directory needs a file of {} bytes, this one has {}); \
             {} tensors complete, {} incomplete",
            r.tensor_data.missing_bytes,
            d.expected_size,
            d.file_size,
            d.complete_tensors,
            d.incomplete_tensors
        );
    }
    if let Some(rope) = &r.rope {
        print_rope(rope);
    }
    if let Some(b) = &r.block {
        print_block(b);
    }
    for item in r.assumptions {
        println!("assumes         {item} (the file states nothing)");
    }
    for item in &r.not_understood {
        println!("NOT UNDERSTOOD  {item}");
    }
    if let Some(p) = &r.problem {
        println!("cannot run      {p}");
    }
}

fn print_rope(r: &RopeReport) {
    let shared: Vec<String> = r
        .kv_from
        .iter()
        .enumerate()
        .filter_map(|(l, src)| src.map(|s| format!("{l} <- {s}")))
        .collect();
    let scalar = r
        .query_pre_attn_scalar
        .map_or(String::new(), |s| format!(" (query_pre_attn_scalar {s})"));
    println!(
        "attention       scale {:.6}{scalar}; RoPE {} pairs over {} of {} dims",
        r.attn_scale, r.pairing, r.rot_dim, r.head_dim
    );
    let uniform = r.layer_types.windows(2).all(|w| {
        (w[0].head_dim, w[0].n_kv_heads, w[0].value_dim, w[0].n_ff)
            == (w[1].head_dim, w[1].n_kv_heads, w[1].value_dim, w[1].n_ff)
    });
    for t in &r.layer_types {
        let mut window = match (t.window, t.chunk) {
            (Some(w), _) => format!("window {w}"),
            (None, Some(c)) => format!("chunks of {c}"),
            (None, None) => "global".into(),
        };
        if let Some(temp) = t.temperature {
            window += &format!(
                ", query temperature 1 + {} ln(1 + floor((p + 1) / {}))",
                temp.scale, temp.floor
            );
        }
        if t.experts {
            window += ", experts";
        }
        let window = match uniform {
            true => window,
            false => format!(
                "{window}, head dim {} (value {}), {} key-value heads, feed-forward {}",
                t.head_dim, t.value_dim, t.n_kv_heads, t.n_ff
            ),
        };
        if t.nope {
            println!(
                "  layers {}: NoPE (no rotation: queries and keys carry no position), {window}",
                ranges(&t.layers)
            );
            continue;
        }
        let scaling = serde_json::to_value(&t.scaling)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| {
                        *k != "type" && *k != "short" && *k != "long" && *k != "factors"
                    })
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        let g = &t.inv_freq;
        println!(
            "  layers {}: base {:e}, {window}, scaling {}{}{}, magnitude {}, g from {:.4e} to {:.4e} rad/token",
            ranges(&t.layers),
            t.base,
            t.scaling.name(),
            if scaling.is_empty() { "" } else { " " },
            scaling,
            t.magnitude,
            g.first().copied().unwrap_or(f64::NAN),
            g.last().copied().unwrap_or(f64::NAN),
        );
        if let Some(k) = match t.scaling {
            crate::rope::Scaling::Proportional { rotated } => Some(rotated),
            _ => None,
        } {
            println!(
                "    proportional RoPE: chunks 0-{} rotate (dims l and l + {}), the other {} have frequency 0",
                k.saturating_sub(1),
                t.rot_dim / 2,
                t.rot_dim / 2 - k
            );
        }
        if let (Some(n), Some(long)) = (t.long_above, &t.inv_freq_long) {
            println!(
                "    above {n} tokens: g from {:.4e} to {:.4e} rad/token",
                long.first().copied().unwrap_or(f64::NAN),
                long.last().copied().unwrap_or(f64::NAN)
            );
        }
    }
    if !shared.is_empty() {
        println!(
            "  layers attending over an earlier layer's keys and values: {}",
            shared.join(", ")
        );
    }
}

fn print_block(b: &BlockReport) {
    let norm = match b.norm {
        Norm::Rms => "RMSNorm",
        Norm::Layer => "LayerNorm",
    };
    let qk = match b.qk_norm {
        QkNorm::None => "none",
        QkNorm::PerHead => "per head",
        QkNorm::Projection => "over each token's whole projection",
        QkNorm::Unit => "per head without gains, on the rotating layers",
    };
    println!(
        "blocks          {norm} ({}), QK-norm {qk}; residual {}; feed-forward {} {}",
        b.norm_placement,
        serde_name(&b.residual),
        serde_name(&b.feed_forward),
        match b.activation {
            Activation::ClampedSwiglu { alpha, limit } => {
                format!("clamped-swiglu (slope {alpha}, clamp {limit})")
            }
            other => serde_name(&other),
        },
    );
    if let Some(m) = &b.mla {
        let queries = m.q_lora_rank.map_or("projected directly".into(), |r| {
            format!("through a normed rank-{r} bottleneck")
        });
        println!(
            "latent          keys and values decompressed per head from a normed latent of {}, one rotated key \
             part shared by the heads; queries {queries}",
            m.kv_lora_rank
        );
    }
    if b.sinks {
        println!("sinks           every head has a learned sink logit: one more softmax entry per row, no value");
    }
    if let Some(m) = &b.moe {
        println!(
            "experts         {} per layer, {} per token, each {} wide; chosen weights {}",
            m.n_experts,
            m.n_used,
            m.n_ff,
            match m.routing {
                Routing::SoftmaxTopK { normalize: true } =>
                    "softmax over all, renormalised to sum 1",
                Routing::SoftmaxTopK { normalize: false } => "softmax over all, as it gives them",
                Routing::TopKSoftmax => "softmax over the chosen logits",
                Routing::TopKSigmoid => "the sigmoid of each chosen logit",
                Routing::SigmoidGrouped { normalize: true, .. } =>
                    "their sigmoids renormalised to sum 1 (chosen on the biased sigmoids within the best groups)",
                Routing::SigmoidGrouped { normalize: false, .. } =>
                    "their sigmoids (chosen on the biased sigmoids within the best groups)",
            }
        );
        if m.weights_input {
            println!("                the weights multiply the chosen experts' inputs, not their outputs");
        }
        if let Some(w) = m.n_ff_shared {
            println!("                a shared expert {w} wide runs on every token");
        }
    }
    let (logits_divided, logits_multiplied) = match b.logit_scale {
        Some(LogitScale::Divide(d)) => (Some(d), None),
        Some(LogitScale::Multiply(m)) => (None, Some(m)),
        None => (None, None),
    };
    let scales: Vec<String> = [
        ("embedding scale", b.embedding_scale),
        ("residual scale", b.residual_scale),
        ("logits divided by", logits_divided),
        ("logits multiplied by", logits_multiplied),
    ]
    .iter()
    .filter_map(|(name, v)| v.map(|v| format!("{name} {v}")))
    .collect();
    if !scales.is_empty() {
        println!("multipliers     {}", scales.join(", "));
    }
}

/// The name serde gives a unit variant.
fn serde_name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `0-4,6-10,12` style list of layer indices.
fn ranges(layers: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < layers.len() {
        let mut j = i;
        while j + 1 < layers.len() && layers[j + 1] == layers[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            layers[i].to_string()
        } else {
            format!("{}-{}", layers[i], layers[j])
        });
        i = j + 1;
    }
    parts.join(",")
}
