//! The golden reference and its checks: the f64 pass written as `.npy` files (`write`), two reference
//! directories compared per tensor (`compare`), the first place another engine's dump leaves the reference
//! (`diverge`), and the RoPE tables of every variant for other implementations (`rope_tables`).

pub mod compare;
pub mod write;
internal_mod! {
    diverge;
    rope_tables;
}
