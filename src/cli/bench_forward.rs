//! `ropescope bench-forward`: wall-clock time of model load and of the forward pass, as JSON, for the peer
//! comparison in `benches/peers/compare.py`.

use super::prompt::read_ids;
use crate::capture::{CollectSink, NoCapture};
use crate::gguf::GgufFile;
use crate::model::{packed_weight_bytes, Arithmetic, ForwardOptions, Model};
use crate::numeric::{Precision, Real};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// What the forward pass captures.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureMode {
    /// Every layer's and head's q, k (pre and post RoPE), v, attention logits and probabilities over all
    /// rows, and head outputs (a collecting sink over every layer).
    Full,
    /// Nothing beyond the output logits.
    None,
}

/// Largest `--repeat`: 1000 timed passes. The median of a few passes is the benchmark's result; a thousand
/// gives a distribution's tails, and each is a whole forward pass.
pub const MAX_REPEAT: usize = 1000;

/// Arguments of `ropescope bench-forward`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF model file.
    model: PathBuf,
    /// Token ids: a comma-separated list (`1,2,3`) or a `.npy` file of integers.
    #[arg(long)]
    ids: String,
    /// Timed forward passes, after one untimed warm-up pass (at most 1000).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// What the forward pass captures.
    #[arg(long, value_enum, default_value_t = CaptureMode::Full)]
    capture: CaptureMode,
    /// Arithmetic precision.
    #[arg(long, value_enum, default_value_t = Precision::F32)]
    precision: Precision,
    /// How the weight products are computed.
    #[arg(long, value_enum, default_value_t = Arithmetic::Exact)]
    arithmetic: Arithmetic,
    /// Memory (MiB) for weight matrices kept dequantized and packed for the product kernel from the warm-up
    /// pass on (as a scan keeps them between its passes); 0, the default, dequantizes and packs every weight
    /// tile in every pass.
    #[arg(long, value_name = "MIB", default_value_t = 0)]
    packed_weights: usize,
}

/// What `bench-forward` prints (one JSON line on stdout).
#[derive(Serialize)]
struct Report {
    /// Seconds to map the file, resolve the configuration and check every tensor (weights stay quantized).
    load_s: f64,
    /// Seconds of the first, untimed-for-the-median forward pass (it also faults in the mapped weights).
    first_forward_s: f64,
    /// Seconds of each timed forward pass (logits of every position, capture included).
    forward_s: Vec<f64>,
    capture: &'static str,
    precision: &'static str,
    arithmetic: &'static str,
    /// `--packed-weights`.
    packed_weights_mib: usize,
    tokens: usize,
    threads: usize,
}

fn run_in<T: Real>(args: &Args, ids: &[u32]) -> anyhow::Result<Report> {
    let packed = packed_weight_bytes(args.packed_weights)?;
    let start = Instant::now();
    let file = GgufFile::open(&args.model)?;
    let model = Model::<T>::load_with(&file, args.arithmetic)?;
    model.keep_packed_weights(packed);
    let load_s = start.elapsed().as_secs_f64();
    model.validate(ids)?;
    let opts = ForwardOptions {
        logits_rows: 0..ids.len(),
        rope_keep: None,
    };
    let layers: Vec<usize> = (0..model.config.n_layers).collect();
    let mut forward_s = Vec::with_capacity(args.repeat);
    let mut first_forward_s = 0.0;
    for run in 0..=args.repeat {
        let start = Instant::now();
        let logits = match args.capture {
            CaptureMode::Full => {
                let mut sink = CollectSink::new(layers.clone(), 0..ids.len());
                let out = model.forward(ids, &opts, &mut sink)?;
                std::hint::black_box(&sink);
                out.logits
            }
            CaptureMode::None => model.forward(ids, &opts, &mut NoCapture)?.logits,
        };
        let elapsed = start.elapsed().as_secs_f64();
        std::hint::black_box(&logits);
        if run > 0 {
            forward_s.push(elapsed);
        } else {
            first_forward_s = elapsed;
        }
    }
    Ok(Report {
        load_s,
        first_forward_s,
        forward_s,
        capture: match args.capture {
            CaptureMode::Full => "full",
            CaptureMode::None => "none",
        },
        precision: T::NAME,
        arithmetic: args.arithmetic.name(),
        packed_weights_mib: args.packed_weights,
        tokens: ids.len(),
        threads: rayon::current_num_threads(),
    })
}

/// Runs `bench-forward`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.repeat > MAX_REPEAT {
        refuse!(
            "--repeat {} is out of range: 0 to {MAX_REPEAT}",
            args.repeat
        );
    }
    let ids = read_ids(&args.ids)?;
    let report = match args.precision {
        Precision::F32 => run_in::<f32>(&args, &ids)?,
        Precision::F64 => run_in::<f64>(&args, &ids)?,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
