//! One executable check per claim of `theory/`, each with a companion that breaks a hypothesis, and the index
//! that keeps `theory/` and these checks in step (`index`). The fixed proptest seed is in
//! `ropescope_test_support::theory`.
//!
//! One test binary, one module per former test file.

mod index;
mod pos_sym;
mod prope;
mod round_and_round;
mod slash;
mod table_1;
