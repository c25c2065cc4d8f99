//! The step profiler on a real forward pass (a synthetic llama model): its operation counts are the products'
//! exact sizes, its wall steps fit inside the pass, and switching it on changes no result.
//!
//! One test in its own binary: the profiler counts process-wide, so no other forward pass may run beside it.

use ropescope::capture::{CollectSink, NoCapture};
use ropescope::gguf::GgufFile;
use ropescope::model::{ForwardOptions, Model};
use ropescope::profile::{Profile, Step};
use ropescope::synth::SyntheticModel;
use std::time::Instant;

#[test]
fn profile_counts_every_product_and_changes_nothing() {
    let s = SyntheticModel::new("llama");
    let file = GgufFile::from_bytes(s.to_bytes()).unwrap();
    let model = Model::<f64>::load(&file).unwrap();
    let t = 37;
    let ids: Vec<u32> = (0..t).map(|i| (i * 5 % s.vocab) as u32).collect();
    let opts = ForwardOptions {
        logits_rows: 0..t,
        rope_keep: None,
    };
    let plain = model.forward(&ids, &opts, &mut NoCapture).unwrap();

    let layers: Vec<usize> = (0..s.n_layers).collect();
    let mut sink = CollectSink::new(layers, 0..t);
    let profile = Profile::start();
    let start = Instant::now();
    let profiled = model.forward(&ids, &opts, &mut sink).unwrap();
    let wall = start.elapsed();
    let totals = profile.finish();
    assert_eq!(
        plain.logits.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        profiled
            .logits
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    );

    let get = |step: Step| totals.iter().find(|x| x.step == step).unwrap();
    let (d, hd, l) = (s.n_embd, s.head_dim, s.n_layers);
    let proj = |outputs: usize, inputs: usize| (2 * t * outputs * inputs * l) as u64;
    assert_eq!(
        get(Step::ProjectQkv).flops,
        proj((s.n_heads + 2 * s.n_kv_heads) * hd, d)
    );
    assert_eq!(get(Step::ProjectO).flops, proj(d, s.n_heads * hd));
    assert_eq!(get(Step::ProjectGateUp).flops, proj(2 * s.n_ff, d));
    assert_eq!(get(Step::ProjectDown).flops, proj(d, s.n_ff));
    assert_eq!(get(Step::Logits).flops, (2 * t * s.vocab * d) as u64);
    // The tiles multiply exactly the projections' and the output head's operations.
    let projections: u64 = [
        Step::ProjectQkv,
        Step::ProjectO,
        Step::ProjectGateUp,
        Step::ProjectDown,
        Step::Logits,
    ]
    .iter()
    .map(|&st| get(st).flops)
    .sum();
    assert_eq!(get(Step::Multiply).flops, projections);
    // Full capture computes every row's logits over all keys: the scores are t × t × head_dim per head, and
    // `probs · v` at least the causal triangle.
    let heads = (s.n_heads * l) as u64;
    assert_eq!(get(Step::Scores).flops, heads * (2 * t * t * hd) as u64);
    assert!(get(Step::Values).flops >= heads * (t * (t + 1) * hd) as u64);
    // Wall steps run one after another inside the pass; every instrumented step took some time.
    let wall_steps: std::time::Duration = totals
        .iter()
        .filter(|x| !x.step.is_thread_time())
        .map(|x| x.time)
        .sum();
    assert!(wall_steps <= wall, "{wall_steps:?} > {wall:?}");
    for step in Step::ALL {
        assert!(!get(step).time.is_zero(), "{step:?} was not timed");
    }
}
