//! Synthetic models, for running ropescope where real weights are not at hand. Two sizes, one home:
//!
//! - [`SyntheticModel`] (`tiny.rs`): tiny seeded models of every architecture, written to memory or a small
//!   file, any tensor replaceable by hand-built values (tests, doc examples, the named shapes' headers);
//! - `Plan` (`plan.rs`, `ropescope synth`): random-weight files of a real header's exact layout or of a named
//!   shape of the papers' models (`shapes.rs`), filled so activations look trained (`fill.rs`) and streamed to
//!   disk at any size.

pub mod tiny;
internal_mod! {
    fill;
    mix;
    plan;
    shapes;
}

pub use tiny::{SyntheticExperts, SyntheticGemma4, SyntheticMla, SyntheticModel, SyntheticYarn};
#[cfg(feature = "internals")]
pub use {
    fill::Fill,
    mix::Mix,
    plan::{Plan, Quant},
    shapes::{NamedShape, NAMED_SHAPES},
};
#[cfg(not(feature = "internals"))]
pub(crate) use {
    mix::Mix,
    plan::{Plan, Quant},
    shapes::{NamedShape, NAMED_SHAPES},
};
