//! `ropescope synth`: a random-weight GGUF file with the exact metadata, tensor directory and (with `keep`)
//! per-tensor types of a real header, or of a built-in named shape. See [`crate::synth`].

use super::OrArgument;
use crate::gguf::GgufFile;
use crate::io::check_output_file;
use crate::io::inputs::Inputs;
use crate::quant::GgmlType;
use crate::synth::{Mix, NamedShape, Plan, Quant, NAMED_SHAPES};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `ropescope synth`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A GGUF file whose header is copied (it may be cut inside its tensor data), or a built-in shape:
    /// llama-3.1-8b, qwen2.5-7b, gemma-7b, gemma-2-2b, gemma-3-4b, smollm3-3b, olmo-2-7b, pythia-1.4b,
    /// qwen3-30b-a3b, smollm2-135m, gemma-3-270m, gpt-oss-20b, deepseek-v2-lite, gemma-4-e2b.
    #[arg(long)]
    like: String,
    /// Storage type of every matrix (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, IQ4_NL, TQ1_0,
    /// TQ2_0, MXFP4, NVFP4, as ggml's reference quantizers write them; IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
    /// IQ3_XXS, IQ3_S, IQ4_XS as valid random blocks of the weights' RMS, since ggml's quantizers for them need
    /// an importance matrix), a mix of `llama-quantize` that types each tensor as it does (Q4_K_M, MXFP4_MOE), or
    /// `keep` to keep each tensor's type from `--like FILE`.
    #[arg(long, default_value = "keep")]
    quant: String,
    /// Seed of the random weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The file to write (written under a temporary name and renamed when complete).
    #[arg(long)]
    out: PathBuf,
    /// Replace `--out` if it exists (never the `--like` file).
    #[arg(long)]
    force: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Runs `synth`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let quant = if args.quant.eq_ignore_ascii_case("keep") {
        Quant::Keep
    } else if let Some(mix) = Mix::from_name(&args.quant) {
        Quant::Mix(mix)
    } else {
        Quant::All(GgmlType::from_name(&args.quant).or_argument(|| {
            let mixes: Vec<&str> = Mix::ALL.iter().map(|m| m.name()).collect();
            format!(
                "--quant {}: not a ggml type name, a mix ({}) or `keep`",
                args.quant,
                mixes.join(", ")
            )
        })?)
    };
    if args.out.exists() && !args.force {
        refuse!("{} exists; give --force to replace it", args.out.display());
    }
    check_output_file(&args.out, &Inputs::new([Path::new(&args.like)]))?;
    let plan = if let Some(shape) = NamedShape::find(&args.like) {
        if quant == Quant::Keep {
            refuse!(
                "--like {}: a named shape has no types to keep; give --quant TYPE",
                args.like
            );
        }
        Plan::named(shape, quant)?
    } else if Path::new(&args.like).exists() {
        Plan::like(&GgufFile::open_header(&args.like)?, quant)?
    } else {
        let names: Vec<&str> = NAMED_SHAPES.iter().map(|s| s.name).collect();
        refuse!(
            "--like {}: neither a file nor a built-in shape ({})",
            args.like,
            names.join(", ")
        );
    };
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    let size = plan.file_size();
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(size)
    };
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message("synth");
    let start = Instant::now();
    plan.write(args.seed, &args.out, &|done| bar.set_position(done))?;
    bar.finish_and_clear();
    eprintln!(
        "wrote {} ({} bytes, {} tensors) in {:.1} s",
        args.out.display(),
        size,
        plan.tensors.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
