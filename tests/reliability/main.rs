//! Reliability: hostile and faulty inputs of every class, each refused with one clear error and nothing lost
//! (README, "Reliability"). One test binary, one module per class; `support` holds what they share.

#[path = "../common/mod.rs"]
mod common;

mod bounds;
mod finite;
mod outputs;
mod readers;
mod support;
mod validation;
