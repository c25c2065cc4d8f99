//! Conformance of other engines to the float64 pass: the error budget an honest engine stays within, stage by
//! stage, and the kind of mistake that explains a stage beyond it.

pub mod attention;
pub mod budget;
pub mod matrix;
pub mod rotation;
pub mod stages;
pub mod vectors;
