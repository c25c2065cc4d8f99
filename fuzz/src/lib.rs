//! What the cargo-fuzz targets share: libFuzzer's own mutations alternating with the GGUF-aware mutator of
//! `ropescope::fuzz_harness::mutate`.

use ropescope::fuzz_harness::mutate::Mutator;
use ropescope::fuzz_harness::Target;

/// libFuzzer's custom mutator for `target`: half the time libFuzzer's own mutation, half the time ropescope's
/// (for GGUF inputs, the field-aware one). Returns the new length of `data[..size]`, at most `max_size`.
pub fn mutate(target: Target, data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    if seed % 2 == 0 {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let mut input = data[..size].to_vec();
    Mutator::new(target, seed as u64).mutate(&mut input, &[], max_size.min(data.len()));
    data[..input.len()].copy_from_slice(&input);
    input.len()
}
