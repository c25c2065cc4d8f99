//! Writing results: atomic files, NumPy `.npy` arrays, and the golden-reference directory format.

pub mod atomic;
pub mod compare;
pub mod npy;
pub mod reference;

pub use atomic::write_atomic;
