//! An optional capture is a capture: `None` asks for nothing, so an analysis left out of a scan costs nothing.

use crate::capture::{
    AttentionBlock, Capture, HeadCapture, HeadInfo, HeadRows, HeadVectors, LayerPlan,
};
use crate::numeric::Real;

impl<T: Real, H: HeadCapture<T>> HeadCapture<T> for Option<H> {
    fn vectors(&mut self, info: &HeadInfo, v: &HeadVectors<'_, T>) {
        if let Some(h) = self {
            h.vectors(info, v);
        }
    }
    fn block(&mut self, info: &HeadInfo, b: &AttentionBlock<'_, T>) {
        if let Some(h) = self {
            h.block(info, b);
        }
    }
    fn output(&mut self, info: &HeadInfo, out: HeadRows<'_, T>) {
        if let Some(h) = self {
            h.output(info, out);
        }
    }
}

impl<T: Real, C: Capture<T>> Capture<T> for Option<C> {
    type Head = Option<C::Head>;

    fn plan(&self, layer: usize) -> LayerPlan {
        self.as_ref().map(|c| c.plan(layer)).unwrap_or_default()
    }

    fn begin_head(&self, info: &HeadInfo) -> Option<C::Head> {
        self.as_ref().map(|c| c.begin_head(info))
    }

    fn end_head(&mut self, info: &HeadInfo, head: Option<C::Head>) {
        if let (Some(c), Some(h)) = (self.as_mut(), head) {
            c.end_head(info, h);
        }
    }

    fn residual(&mut self, layer: usize, stream: &[T]) {
        if let Some(c) = self {
            c.residual(layer, stream);
        }
    }
}
