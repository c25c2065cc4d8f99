//! `ropescope inspect`: architecture, hyper-parameters and tensor types of a GGUF file.

use crate::gguf::{GgufFile, Hparams};
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
}

/// Runs `inspect`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let file = GgufFile::open(&args.model)?;
    let hparams = Hparams::from_gguf(&file).with_context(|| format!("{}", args.model.display()))?;
    let mut tensor_types = BTreeMap::new();
    for t in file.tensors() {
        *tensor_types.entry(t.ty.name().to_string()).or_insert(0) += 1;
    }
    let report = Report {
        file: args.model.display().to_string(),
        file_size: file.file_size(),
        gguf_version: file.version(),
        hparams,
        n_tensors: file.tensors().len(),
        tensor_types,
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
}
