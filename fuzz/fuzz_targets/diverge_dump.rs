//! cargo-fuzz target `diverge_dump`: `ropescope::fuzz_harness::Target::DivergeDump`.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use ropescope::fuzz_harness::Target;

fuzz_target!(|data: &[u8]| {
    let _ = Target::DivergeDump.run(data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    ropescope_fuzz::mutate(Target::DivergeDump, data, size, max_size, seed)
});
