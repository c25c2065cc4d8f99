//! Running several captures in one forward pass: a pair of captures is a capture.
//!
//! The engine computes the union of the two plans; each side receives only the calls its own plan asked for.
//! When one side asks for full rows, the other also sees blocks with all `T` columns (its
//! [`AttentionBlock::cols`] says which), so analyses must read `cols` rather than assume a column range.
//! Larger sets nest: `(a, (b, c))`.

use super::{AttentionBlock, Capture, HeadCapture, HeadInfo, HeadRows, HeadVectors, LayerPlan};
use crate::numeric::Real;

/// Per-head state of a pair: each side's state with the plan it asked for.
pub struct PairHead<A, B> {
    a: Option<(A, LayerPlan)>,
    b: Option<(B, LayerPlan)>,
}

impl<T: Real, A: HeadCapture<T>, B: HeadCapture<T>> HeadCapture<T> for PairHead<A, B> {
    fn vectors(&mut self, info: &HeadInfo, v: &HeadVectors<'_, T>) {
        if let Some((a, _)) = self.a.as_mut().filter(|(_, p)| p.vectors) {
            a.vectors(info, v);
        }
        if let Some((b, _)) = self.b.as_mut().filter(|(_, p)| p.vectors) {
            b.vectors(info, v);
        }
    }
    fn block(&mut self, info: &HeadInfo, blk: &AttentionBlock<'_, T>) {
        if let Some((a, _)) = self.a.as_mut().filter(|(_, p)| p.attention) {
            a.block(info, blk);
        }
        if let Some((b, _)) = self.b.as_mut().filter(|(_, p)| p.attention) {
            b.block(info, blk);
        }
    }
    fn output(&mut self, info: &HeadInfo, out: HeadRows<'_, T>) {
        if let Some((a, _)) = self.a.as_mut().filter(|(_, p)| p.output) {
            a.output(info, out);
        }
        if let Some((b, _)) = self.b.as_mut().filter(|(_, p)| p.output) {
            b.output(info, out);
        }
    }
}

impl<T: Real, A: Capture<T>, B: Capture<T>> Capture<T> for (A, B) {
    type Head = PairHead<A::Head, B::Head>;

    fn plan(&self, layer: usize) -> LayerPlan {
        let (a, b) = (self.0.plan(layer), self.1.plan(layer));
        LayerPlan {
            vectors: a.vectors || b.vectors,
            attention: a.attention || b.attention,
            full_rows: a.full_rows || b.full_rows,
            output: a.output || b.output,
            residual: a.residual || b.residual,
            latent: a.latent || b.latent,
        }
    }

    fn begin_head(&self, info: &HeadInfo) -> Self::Head {
        let (pa, pb) = (self.0.plan(info.layer), self.1.plan(info.layer));
        PairHead {
            a: pa.any().then(|| (self.0.begin_head(info), pa)),
            b: pb.any().then(|| (self.1.begin_head(info), pb)),
        }
    }

    fn end_head(&mut self, info: &HeadInfo, head: Self::Head) {
        if let Some((a, _)) = head.a {
            self.0.end_head(info, a);
        }
        if let Some((b, _)) = head.b {
            self.1.end_head(info, b);
        }
    }

    fn residual(&mut self, layer: usize, stream: &[T]) {
        if self.0.plan(layer).residual {
            self.0.residual(layer, stream);
        }
        if self.1.plan(layer).residual {
            self.1.residual(layer, stream);
        }
    }

    fn latent(&mut self, layer: usize, latent: &[T]) {
        if self.0.plan(layer).latent {
            self.0.latent(layer, latent);
        }
        if self.1.plan(layer).latent {
            self.1.latent(layer, latent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the calls it receives for the layers it asks for.
    #[derive(Default)]
    struct Counter {
        layer: usize,
        vectors: bool,
        calls: (usize, usize, usize),
    }
    struct CounterHead((usize, usize, usize));
    impl HeadCapture<f64> for CounterHead {
        fn vectors(&mut self, _: &HeadInfo, _: &HeadVectors<'_, f64>) {
            self.0 .0 += 1;
        }
        fn block(&mut self, _: &HeadInfo, _: &AttentionBlock<'_, f64>) {
            self.0 .1 += 1;
        }
        fn output(&mut self, _: &HeadInfo, _: HeadRows<'_, f64>) {
            self.0 .2 += 1;
        }
    }
    impl Capture<f64> for Counter {
        type Head = CounterHead;
        fn plan(&self, layer: usize) -> LayerPlan {
            let on = layer == self.layer;
            LayerPlan {
                vectors: on && self.vectors,
                attention: on,
                full_rows: false,
                output: false,
                residual: false,
                latent: false,
            }
        }
        fn begin_head(&self, _: &HeadInfo) -> CounterHead {
            CounterHead((0, 0, 0))
        }
        fn end_head(&mut self, _: &HeadInfo, h: CounterHead) {
            self.calls.0 += h.0 .0;
            self.calls.1 += h.0 .1;
            self.calls.2 += h.0 .2;
        }
    }

    #[test]
    fn each_side_gets_only_what_it_asked_for() {
        use crate::gguf::GgufFile;
        use crate::model::{ForwardOptions, Model};
        let file =
            GgufFile::from_bytes(crate::synth::SyntheticModel::new("llama").to_bytes()).unwrap();
        let model = Model::<f64>::load(&file).unwrap();
        let mut pair = (
            Counter {
                layer: 0,
                vectors: true,
                ..Default::default()
            },
            Counter {
                layer: 1,
                vectors: false,
                ..Default::default()
            },
        );
        // One full row block and a partial second one.
        let n = crate::model::attention::ROW_BLOCK + 6;
        let ids: Vec<u32> = (0..n as u32).map(|i| i % 64).collect();
        model
            .forward(&ids, &ForwardOptions::default(), &mut pair)
            .unwrap();
        let heads = model.config.n_heads;
        assert_eq!(
            pair.0.calls,
            (heads, 2 * heads, 0),
            "layer 0: vectors once and two row blocks per head"
        );
        assert_eq!(pair.1.calls, (0, 2 * heads, 0), "layer 1: blocks only");
    }
}
