#!/usr/bin/env python3
"""The machine's practical limit for the pass's products: torch's matrix product (oneDNN / MKL on x86) at the
shapes of ropescope's projections and attention blocks, the rate `cargo bench --bench kernels` compares the
engine's products against.

For each shape (512 activation rows, the projection shapes of SmolLM2-135M and Gemma 3 270M as
benches/kernels.rs lists them, and one attention block of 128 query rows at head dimension 64 against 512 keys),
`x @ w.T` in float32 (or float64 with --f64) on --threads threads, after three untimed products, timed --runs
times (at least; more for small shapes, about 20 GFLOP in all); the minimum and the median rate are printed.
Divided by the FMA peak the kernels bench measures (its first line), they say how close to the peak any
implementation gets at that shape on this machine.

    $(fixtures/reference-venv.sh) benches/peers/gemm.py --threads 2
"""

import argparse
import time

import torch

# (label, rows, inner, outputs): x[rows × inner] · w[outputs × inner]ᵀ.
SHAPES = [
    ("smollm2 q/o 576x576", 512, 576, 576),
    ("smollm2 k/v 192x576", 512, 576, 192),
    ("smollm2 gate/up 1536x576", 512, 576, 1536),
    ("smollm2 down 576x1536", 512, 1536, 576),
    ("gemma3 q 1024x640", 512, 640, 1024),
    ("gemma3 k/v 256x640", 512, 640, 256),
    ("gemma3 gate/up 2048x640", 512, 640, 2048),
    ("gemma3 down 640x2048", 512, 2048, 640),
    ("attention scores 128x64 · 512 keys", 128, 64, 512),
    ("attention probs · v 128x512 · 64", 128, 512, 64),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--runs", type=int, default=30, help="timed products per shape, at least")
    ap.add_argument("--f64", action="store_true", help="float64 instead of float32")
    args = ap.parse_args()
    if args.threads < 1 or args.runs < 1:
        ap.error("--threads and --runs must be at least 1")
    torch.set_num_threads(args.threads)
    dtype = torch.float64 if args.f64 else torch.float32
    gen = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {dtype}, {args.threads} threads")
    print("| product | min GFLOP/s | median GFLOP/s | runs |")
    print("|---|---|---|---|")
    for label, m, k, n in SHAPES:
        x = torch.randn(m, k, generator=gen, dtype=dtype)
        w = torch.randn(n, k, generator=gen, dtype=dtype)
        for _ in range(3):
            x @ w.T
        flops = 2 * m * k * n
        runs = max(args.runs, int(2e10 / flops))
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            x @ w.T
            times.append(time.perf_counter() - start)
        times.sort()
        rate = lambda t: flops / t / 1e9  # noqa: E731
        print(f"| {label} | {rate(times[0]):.1f} | {rate(times[len(times) // 2]):.1f} | {runs} |")


if __name__ == "__main__":
    main()
