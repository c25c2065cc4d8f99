//! Where one 512-token full-capture forward pass (logits of every position, as `benches/forward.rs` and the
//! peer comparison run it) spends its time, step by step, on both cached real models
//! (`fixtures/models.sh`), in f32 and f64, with every product's rate as a fraction of the machine's measured FMA
//! peak.
//!
//! Steps and their meaning are `ropescope::profile::Step`'s: wall time for the steps the pass runs one after
//! another (they add up to the pass), and, indented, thread time summed over threads for the parts of the
//! projections (dequantizing weight tiles, multiplying by them) and of attention (scores, softmax, `probs · v`,
//! capture), whose shares say how the parallel step's wall time divides. Rates: the step's floating-point
//! operations (two per multiply-add, over every product it ran) per wall second for wall steps, per thread
//! second for parts; "of peak" divides by the FMA peak of the widest instruction set at the pool's thread
//! count (wall steps) or at one thread (parts). The last row rates the whole pass: every product's operations
//! over the pass's wall time.
//!
//! Each figure is the median over `RUNS` profiled passes after one warm-up pass, with glibc's allocator set as
//! the command line sets it (`cli::keep_freed_memory`). The FMA peaks are measured before the first profiled
//! pass and after each one, and the passes are rated against their median: a machine whose speed drifts
//! between runs (shared cloud cores) shows the drift as the printed range of the peaks, and a fraction is
//! taken against peaks of the same minutes. A model whose file is absent
//! is skipped with a note. `cargo bench --bench breakdown` (add `-- f32`, `-- f64` or `-- ggml` for one mode;
//! threads: `RAYON_NUM_THREADS`, default every core). `ggml` is the f32 pass with `--arithmetic ggml`, without
//! capture (the logits-only pass the peer comparison times against llama.cpp): its projections are integer
//! products, rated against the machine's measured byte-product peak where it has one
//! (`ropescope::linalg::peak::byte_product_peak_gops`, AVX-512 VNNI), else its 16-bit pair-product peak
//! (`pair_product_peak_gops`), in operations per second, two per product, instead of the FMA peak.
//! `ROPESCOPE_BREAKDOWN_FILE=F.gguf` profiles that file instead, one pass without capture (logits of every
//! position), e.g. the mixtures of experts of `benches/scale.sh`. `ROPESCOPE_BREAKDOWN_TOKENS=N` profiles
//! `N`-token passes instead of 512 (1 to 131072, within the model's context); past 512, one pass without
//! capture and with the last position's logits only, as at long context the engine runs attention without
//! materialising it (`model::attention::online`) and a full capture would hold every layer's `N × N`
//! probabilities.

#[path = "support/models.rs"]
mod models;

use models::{cached, token_ids, MODELS, TOKENS};
use ropescope::capture::{CollectSink, NoCapture};
use ropescope::gguf::GgufFile;
use ropescope::linalg::peak::{byte_product_peak_gops, fma_peak_gflops, pair_product_peak_gops};
use ropescope::linalg::Isa;
use ropescope::model::{Arithmetic, ForwardOptions, Model};
use ropescope::numeric::Real;
use ropescope::profile::{Profile, Step, StepTotal};
use std::path::Path;
use std::time::Instant;

/// Profiled passes per model and precision; the median of each step is reported.
const RUNS: usize = 3;
/// The longest prompt `ROPESCOPE_BREAKDOWN_TOKENS` takes.
const MAX_TOKENS: usize = 1 << 17;
/// Seconds per peak measurement.
const PEAK_SECONDS: f64 = 0.5;

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The widest instruction set, whose FMA peaks each model's passes are rated against, and for the ggml
/// arithmetic the pair-product and byte-product peaks (pool's threads, one thread) in GOP/s: its projections
/// are rated against the byte-product peak where the machine has one (the faster of the two), else the
/// pair-product peak.
struct Peaks {
    isa: Isa,
    pairs: Option<(Option<f64>, Option<f64>)>,
    bytes: Option<(Option<f64>, Option<f64>)>,
}

/// The medians of FMA peaks `measured` at the pool's threads and at one thread (a pair per measurement), each
/// with its range as text (`None` and `"-"` where the instruction set has no peak loop).
fn fma_peaks(
    measured: &[(Option<f64>, Option<f64>)],
) -> ((Option<f64>, String), (Option<f64>, String)) {
    let summary = |values: Vec<f64>| -> (Option<f64>, String) {
        if values.is_empty() {
            return (None, "-".into());
        }
        let (lo, hi) = values
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        (Some(median(values)), format!("{lo:.1}–{hi:.1}"))
    };
    (
        summary(measured.iter().filter_map(|m| m.0).collect()),
        summary(measured.iter().filter_map(|m| m.1).collect()),
    )
}

/// Profiles `runs` passes of `tokens` tokens of `path`'s model, with full capture or none.
fn run<T: Real>(
    (name, path): (&str, &Path),
    peaks: &Peaks,
    tokens: usize,
    capture: bool,
    runs: usize,
    arithmetic: Arithmetic,
) {
    let file = GgufFile::open(path).expect("model file");
    let model = Model::<T>::load_with(&file, arithmetic).expect("supported model");
    let ids = token_ids(model.config.vocab_size, tokens);
    if let Err(e) = model.validate(&ids) {
        println!("\nskipping {name}: {e}");
        return;
    }
    // Past 512 tokens, the last position's logits only: every position's would be `N × vocabulary` floats.
    let logits_rows = if tokens > TOKENS {
        tokens - 1..tokens
    } else {
        0..tokens
    };
    let opts = ForwardOptions {
        logits_rows,
        rope_keep: None,
    };
    let layers: Vec<usize> = (0..model.config.n_layers).collect();
    let pass = || {
        let start = Instant::now();
        if capture {
            let mut sink = CollectSink::new(layers.clone(), 0..tokens);
            model.forward(&ids, &opts, &mut sink).expect("forward");
        } else {
            model.forward(&ids, &opts, &mut NoCapture).expect("forward");
        }
        start.elapsed().as_secs_f64()
    };
    let threads = rayon::current_num_threads();
    let double = T::NAME == "f64";
    let fma = || {
        (
            fma_peak_gflops(peaks.isa, double, threads, PEAK_SECONDS),
            fma_peak_gflops(peaks.isa, double, 1, PEAK_SECONDS),
        )
    };
    pass();
    let mut measured = vec![fma()];
    let mut totals: Vec<Vec<StepTotal>> = Vec::new();
    let mut walls = Vec::new();
    for _ in 0..runs {
        let profile = Profile::start();
        walls.push(pass());
        totals.push(profile.finish());
        measured.push(fma());
    }
    let wall = median(walls);
    let ((all, all_range), (one, one_range)) = fma_peaks(&measured);
    let show = |p: Option<f64>| p.map_or("-".into(), |p| format!("{p:.1}"));
    println!(
        "\n{name} {}, arithmetic {}, {tokens} tokens, {}: {wall:.3} s per pass (median of {runs}); {} FMA peak {} GFLOP/s at {threads} threads ({all_range} around the passes), {} at 1 ({one_range})",
        T::NAME,
        arithmetic.name(),
        if capture { "full capture" } else { "no capture" },
        peaks.isa,
        show(all),
        show(one),
    );
    if let Some((all, one)) = peaks.pairs {
        println!(
            "16-bit pair-product peak: {} GOP/s at {} threads, {} at 1",
            show(all),
            rayon::current_num_threads(),
            show(one),
        );
    }
    if let Some((all, one)) = peaks.bytes {
        println!(
            "byte-product peak: {} GOP/s at {} threads, {} at 1",
            show(all),
            rayon::current_num_threads(),
            show(one),
        );
    }
    let integer = match peaks.bytes {
        Some(bytes @ (Some(_), _)) => Some(("byte", bytes)),
        _ => peaks.pairs.map(|p| ("pair", p)),
    };
    if let Some((kind, _)) = integer {
        println!("projections rated against the {kind}-product peak");
    }
    println!("| step | ms | share | GFLOP/s | of peak |");
    println!("|---|---|---|---|---|");
    // Median time of every step over the runs, in `Step::ALL`'s order.
    let secs: Vec<f64> = (0..Step::ALL.len())
        .map(|i| median(totals.iter().map(|t| t[i].time.as_secs_f64()).collect()))
        .collect();
    let sum_of = |steps: &[Step]| -> f64 { steps.iter().map(|s| secs[s.index()]).sum() };
    let projection_parts = sum_of(&[Step::Dequantize, Step::Multiply]);
    let attention_parts = sum_of(&[Step::Scores, Step::Softmax, Step::Values, Step::Capture]);
    let mut accounted = 0.0;
    for (i, &step) in Step::ALL.iter().enumerate() {
        let (secs, flops) = (secs[i], totals[0][i].flops as f64);
        if secs == 0.0 && flops == 0.0 {
            continue;
        }
        let thread = step.is_thread_time();
        if !thread {
            accounted += secs;
        }
        // Parts are shown as shares of their parallel step's thread time, wall steps as shares of the pass.
        let share = match step {
            Step::Dequantize | Step::Multiply => secs / projection_parts,
            _ if thread => secs / attention_parts,
            _ => secs / wall,
        };
        let rate = (flops > 0.0 && secs > 0.0).then(|| flops / secs / 1e9);
        let projection = matches!(
            step,
            Step::ProjectQkv
                | Step::ProjectO
                | Step::ProjectGateUp
                | Step::ProjectDown
                | Step::Logits
                | Step::Multiply
        );
        let (all, one) = match integer {
            Some((_, peak)) if projection => peak,
            _ => (all, one),
        };
        let peak = if thread { one } else { all };
        println!(
            "| {} | {:.1} | {:.1}% | {} | {} |",
            step.name(),
            secs * 1e3,
            100.0 * share,
            rate.map_or("".into(), |r| format!("{r:.1}")),
            match (rate, peak) {
                (Some(r), Some(p)) => format!("{:.0}%", 100.0 * r / p),
                _ => String::new(),
            }
        );
    }
    println!(
        "| (outside the steps) | {:.1} | {:.1}% | | |",
        (wall - accounted) * 1e3,
        100.0 * (wall - accounted) / wall
    );
    // The pass's operations: the wall steps' own (projections, logits) and attention's products, counted in its
    // parts; rated against the FMA peak, so not for the integer products of the ggml arithmetic.
    let pass_flops: f64 = Step::ALL
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_thread_time() || matches!(s, Step::Scores | Step::Values))
        .map(|(i, _)| totals[0][i].flops as f64)
        .sum();
    if integer.is_none() && pass_flops > 0.0 {
        let rate = pass_flops / wall / 1e9;
        println!(
            "| whole pass | {:.1} | 100% | {rate:.1} | {} |",
            wall * 1e3,
            all.map_or(String::new(), |p| format!("{:.0}%", 100.0 * rate / p))
        );
    }
}

fn main() {
    // The allocator as the command line sets it: passes reuse freed blocks instead of faulting in fresh pages.
    ropescope::cli::keep_freed_memory();
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |p: &str| filter.is_empty() || filter.iter().any(|f| f == p);
    let isa = Isa::best();
    let threads = rayon::current_num_threads();
    let tokens = match std::env::var("ROPESCOPE_BREAKDOWN_TOKENS") {
        Err(_) => TOKENS,
        Ok(n) => {
            match n.parse::<usize>() {
                Ok(n @ 1..=MAX_TOKENS) => n,
                _ => {
                    eprintln!("ROPESCOPE_BREAKDOWN_TOKENS must be a count from 1 to {MAX_TOKENS}, not {n:?}");
                    std::process::exit(2);
                }
            }
        }
    };
    for (mode, double, arithmetic) in [
        ("f32", false, Arithmetic::Exact),
        ("f64", true, Arithmetic::Exact),
        ("ggml", false, Arithmetic::Ggml),
    ] {
        if !wanted(mode) {
            continue;
        }
        let ggml = arithmetic == Arithmetic::Ggml;
        let peaks = Peaks {
            isa,
            pairs: ggml.then(|| {
                (
                    pair_product_peak_gops(isa, threads, PEAK_SECONDS),
                    pair_product_peak_gops(isa, 1, PEAK_SECONDS),
                )
            }),
            bytes: ggml.then(|| {
                (
                    byte_product_peak_gops(isa, threads, PEAK_SECONDS),
                    byte_product_peak_gops(isa, 1, PEAK_SECONDS),
                )
            }),
        };
        let chosen = std::env::var_os("ROPESCOPE_BREAKDOWN_FILE").map(std::path::PathBuf::from);
        let files: Vec<(String, std::path::PathBuf)> = match &chosen {
            Some(p) => vec![(p.display().to_string(), p.clone())],
            None => MODELS
                .iter()
                .filter_map(|(name, file_name)| Some((name.to_string(), cached(name, file_name)?)))
                .collect(),
        };
        // A chosen file may be a 30B mixture of experts, a long prompt costs minutes: one profiled pass,
        // without capture.
        let (capture, runs) = if chosen.is_some() || tokens > TOKENS {
            (false, 1)
        } else {
            (!ggml, RUNS)
        };
        for (name, path) in &files {
            let model = (name.as_str(), path.as_path());
            if double {
                run::<f64>(model, &peaks, tokens, capture, runs, arithmetic);
            } else {
                run::<f32>(model, &peaks, tokens, capture, runs, arithmetic);
            }
        }
    }
}
