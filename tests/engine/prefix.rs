//! A forward pass resumed from a kept prefix (`Model::forward_keeping_prefix`, `Model::forward_from_prefix`)
//! against the whole pass over the same tokens, on synthetic models of the architectures with something a
//! resumed pass could get wrong: biases (qwen2), QK-norm (qwen3), partial rotary (phi3), soft-capping and
//! sliding windows (gemma2), global and local layers (gemma3). The prompts are longer than two blocks of query
//! rows, and the passes differ from the first, a middle, a block-boundary and the last position. Also a pass
//! that asks for no logits, which stops after the last layer's attention, against one that asks for them.
//!
//! Tolerance: none. Every value the resumed pass computes (logits, attention logits and probabilities, the
//! keys, values and queries the capture sees) must have the bits of the whole pass's, in f32 and f64.

use ropescope::capture::{AttentionBlock, Capture, HeadCapture, HeadInfo, HeadVectors, LayerPlan};
use ropescope::gguf::GgufFile;
use ropescope::model::{ForwardOptions, Model};
use ropescope::numeric::Real;
use ropescope::synth::SyntheticModel;
use std::collections::BTreeMap;

/// Positions of the prompts.
const T: usize = 300;

fn synth(arch: &str) -> SyntheticModel {
    let mut m = SyntheticModel::new(arch);
    match arch {
        "gemma2" => {
            m.sliding_window = Some(70);
            m.softcaps = Some((5.0, 3.0));
        }
        "gemma3" => {
            m.sliding_window = Some(150);
            m.n_layers = 6;
        }
        "phi3" => m.rope_dim = 4,
        _ => {}
    }
    m
}

/// `T` varied token ids below 64 (every synthetic vocabulary's size or more).
fn prompt(seed: u32) -> Vec<u32> {
    (0..T as u32)
        .map(|i| (i * 37 + seed * 11 + i * i % 7) % 61)
        .collect()
}

/// Per (layer, head): each captured row's key columns, logits and probabilities as bits, and the head's
/// vectors (every key, pre-RoPE key and value row, and the last query row) as bits.
#[derive(Default, PartialEq, Debug)]
struct HeadRecord {
    rows: BTreeMap<usize, (usize, Vec<u64>, Vec<u64>)>,
    vectors: Vec<Vec<u64>>,
}

#[derive(Default)]
struct Recorder {
    heads: BTreeMap<(usize, usize), HeadRecord>,
    /// A layer whose residual stream the capture asks for.
    residual: Option<usize>,
}

fn bits<T: Real>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.to_f64_exact().to_bits()).collect()
}

impl<T: Real> HeadCapture<T> for HeadRecord {
    fn vectors(&mut self, info: &HeadInfo, v: &HeadVectors<'_, T>) {
        let n = info.n_tokens;
        self.vectors = (0..n)
            .flat_map(|j| [bits(v.k.row(j)), bits(v.k_pre.row(j)), bits(v.v.row(j))])
            .chain([bits(v.q.row(n - 1)), bits(v.q_pre.row(n - 1))])
            .collect();
    }

    fn block(&mut self, _info: &HeadInfo, b: &AttentionBlock<'_, T>) {
        for i in b.rows.clone() {
            let row = (b.cols.start, bits(b.logits_row(i)), bits(b.probs_row(i)));
            assert!(self.rows.insert(i, row).is_none(), "row {i} captured twice");
        }
    }
}

impl<T: Real> Capture<T> for Recorder {
    type Head = HeadRecord;

    fn plan(&self, layer: usize) -> LayerPlan {
        LayerPlan {
            vectors: true,
            attention: true,
            residual: self.residual == Some(layer),
            ..LayerPlan::default()
        }
    }

    fn begin_head(&self, _info: &HeadInfo) -> HeadRecord {
        HeadRecord::default()
    }

    fn end_head(&mut self, info: &HeadInfo, head: HeadRecord) {
        self.heads.insert((info.layer, info.head), head);
    }
}

fn options(rows: std::ops::Range<usize>, rope_keep: Option<Vec<Vec<bool>>>) -> ForwardOptions {
    ForwardOptions {
        logits_rows: rows,
        rope_keep,
    }
}

/// The whole pass over `changed` against the pass resumed from `base`'s, which share their first `s` tokens.
fn check<T: Real>(arch: &str, model: &Model<T>, s: usize, rope_keep: Option<Vec<Vec<bool>>>) {
    let base = prompt(1);
    let mut changed = base.clone();
    for (i, id) in changed.iter_mut().enumerate().skip(s) {
        *id = (*id + 1 + i as u32 % 5) % 61;
    }
    let opts = options(s..T, rope_keep.clone());
    let (_, prefix) = model
        .forward_keeping_prefix(&base, &options(0..0, rope_keep), &mut Recorder::default())
        .unwrap();
    let mut whole = Recorder::default();
    let want = model.forward(&changed, &opts, &mut whole).unwrap();
    let mut resumed = Recorder::default();
    let got = model
        .forward_from_prefix(&changed, &opts, &mut resumed, &prefix)
        .unwrap();
    let what = format!("{arch} {} from {s}", T::NAME);
    assert_eq!(got.rows, want.rows, "{what}");
    assert!(bits(&got.logits) == bits(&want.logits), "{what}: logits");
    assert_eq!(whole.heads.len(), resumed.heads.len(), "{what}");
    for (key, w) in &whole.heads {
        let g = &resumed.heads[key];
        assert!(g.vectors == w.vectors, "{what}: vectors of {key:?}");
        // The resumed pass captures the rows it computes, each as the whole pass does.
        let tail: Vec<_> = w.rows.range(s..).collect();
        assert_eq!(
            g.rows.iter().collect::<Vec<_>>(),
            tail,
            "{what}: rows of {key:?}"
        );
    }
}

#[test]
fn a_resumed_pass_gives_the_bits_of_the_whole_pass() {
    for arch in ["llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"] {
        let file = GgufFile::from_bytes(synth(arch).to_bytes()).unwrap();
        let (m32, m64) = (
            Model::<f32>::load(&file).unwrap(),
            Model::<f64>::load(&file).unwrap(),
        );
        for s in [0, 1, 127, 128, 150, T - 1] {
            check(arch, &m32, s, None);
            check(arch, &m64, s, None);
        }
        // With frequencies left unrotated (the ablation's masks), kept by both passes.
        let mut keep: Vec<Vec<bool>> = (m64.config.layers.iter())
            .map(|l| vec![true; l.rope.n_chunks()])
            .collect();
        keep[0][0] = false;
        check(arch, &m64, 150, Some(keep));
    }
}

#[test]
fn a_resumed_pass_refuses_what_it_cannot_give() {
    let file = GgufFile::from_bytes(synth("llama").to_bytes()).unwrap();
    let model = Model::<f64>::load(&file).unwrap();
    let base = prompt(1);
    let mut changed = base.clone();
    changed[200] += 1;
    let (_, prefix) = model
        .forward_keeping_prefix(&base, &options(0..0, None), &mut Recorder::default())
        .unwrap();
    let err = |ids: &[u32], opts: ForwardOptions, residual: Option<usize>| {
        let mut cap = Recorder {
            residual,
            ..Recorder::default()
        };
        let e = model
            .forward_from_prefix(ids, &opts, &mut cap, &prefix)
            .unwrap_err()
            .to_string();
        // Refused before any work: the capture received nothing.
        assert!(cap.heads.is_empty(), "{e}");
        e
    };
    assert!(err(&changed, options(100..T, None), None).contains("logits of positions 100..300"));
    let last = model.config.n_layers - 1;
    assert!(err(&changed, options(0..0, None), Some(last)).contains("residual"));
    assert!(err(&changed[..T - 1], options(0..0, None), None).contains("299 tokens"));
    let mask = vec![vec![true; model.config.n_chunks()]; model.config.n_layers];
    assert!(err(&changed, options(0..0, Some(mask)), None).contains("RoPE mask"));
    // Keys and values kept by another model.
    let other = GgufFile::from_bytes(synth("gemma3").to_bytes()).unwrap();
    let other = Model::<f64>::load(&other).unwrap();
    let mut cap = Recorder::default();
    let e = other
        .forward_from_prefix(&changed, &options(0..0, None), &mut cap, &prefix)
        .unwrap_err();
    assert!(e.to_string().contains("not of this model"), "{e}");
    // Logits of the computed rows are given.
    let out = model
        .forward_from_prefix(
            &changed,
            &options(250..T, None),
            &mut Recorder::default(),
            &prefix,
        )
        .unwrap();
    assert_eq!(
        (out.rows, out.logits.len()),
        (250..T, 50 * model.config.vocab_size)
    );
}

#[test]
fn a_pass_without_logits_captures_what_a_pass_with_them_does() {
    for arch in ["llama", "gemma3"] {
        let file = GgufFile::from_bytes(synth(arch).to_bytes()).unwrap();
        let model = Model::<f32>::load(&file).unwrap();
        let ids = prompt(2);
        let (mut without, mut with) = (Recorder::default(), Recorder::default());
        model
            .forward(&ids, &options(0..0, None), &mut without)
            .unwrap();
        let out = model
            .forward(&ids, &options(T - 1..T, None), &mut with)
            .unwrap();
        assert_eq!(out.logits.len(), model.config.vocab_size);
        let layers = model.config.n_layers;
        assert_eq!(with.heads.len(), layers * model.config.n_heads, "{arch}");
        assert!(with.heads == without.heads, "{arch}");
    }
}
