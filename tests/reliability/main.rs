//! Reliability: hostile and faulty inputs of every class, each refused with one clear error and nothing lost
//! (README, "Reliability"). One test binary, one module per class; what they share (the deadline runner, the
//! one-line refusal check, the inputs they write) is in `ropescope_test_support::{cli, inputs}`.

mod bounds;
mod finite;
mod outputs;
mod readers;
mod validation;
