//! The engine: the GGUF reader's limits on malformed files (`gguf_malformed`); dequantization and quantization
//! bit for bit against ggml and gguf-py (`quant_*`); token ids against HF on the real models and on vocabularies
//! built in memory (`tokenizer_*`); the forward pass against a naive implementation on synthetic models of every
//! architecture (`synthetic`), against HF float64 on converter-made tiny models of every family and RoPE variant
//! (`converted`) and on the two real models (`fidelity`), resumed from a kept prefix (`prefix`); refusals of
//! what is not implemented (`model_refusals`); faer's GEMM on unaligned slices (`faer_unaligned`).
//!
//! One test binary, one module per former test file; helpers come from `ropescope_test_support`.

mod conformance;
mod converted;
mod faer_unaligned;
mod fidelity;
mod gguf_malformed;
mod model_refusals;
mod prefix;
mod quant_quantize;
mod quant_reference;
mod synthetic;
mod tokenizer_pre;
mod tokenizer_real;
mod tokenizer_synthetic;
