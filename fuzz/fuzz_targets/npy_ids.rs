//! cargo-fuzz target `npy_ids`: `ropescope::fuzz_harness::Target::NpyIds`.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use ropescope::fuzz_harness::Target;

fuzz_target!(|data: &[u8]| {
    let _ = Target::NpyIds.run(data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    ropescope_fuzz::mutate(Target::NpyIds, data, size, max_size, seed)
});
