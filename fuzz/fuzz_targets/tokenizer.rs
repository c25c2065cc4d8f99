//! cargo-fuzz target `tokenizer`: `ropescope::fuzz_harness::Target::Tokenizer`.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target};
use ropescope::fuzz_harness::Target;

fuzz_target!(|data: &[u8]| {
    let _ = Target::Tokenizer.run(data);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    ropescope_fuzz::mutate(Target::Tokenizer, data, size, max_size, seed)
});
