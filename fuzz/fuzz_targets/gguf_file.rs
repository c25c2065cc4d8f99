//! cargo-fuzz target `gguf_file`: `ropescope::fuzz_harness::Target::GgufFile`.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use ropescope::fuzz_harness::Target;

fuzz_target!(|data: &[u8]| {
    let _ = Target::GgufFile.run(data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    ropescope_fuzz::mutate(Target::GgufFile, data, size, max_size, seed)
});
