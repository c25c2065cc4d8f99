#!/usr/bin/env python3
"""Speed of ropescope beside its peers: model load and the forward pass, same tokens, same threads, at one or
several prompt lengths, in f32 and in f64.

What it measures
----------------
For each model (SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M, from fixtures/models.sh) and each prompt
length T of --tokens (default 512; e.g. --tokens 512,2048,8192), the same token ids (benches/peers/text.txt
tokenized by HF's tokenizer for that GGUF, the text repeated until there are enough tokens, then cut to T: the
ids of a shorter length are a prefix of those of a longer one) run through:

    ropescope        the release binary, `ropescope --threads K bench-forward MODEL --ids IDS.npy`: f32, full
                     capture (every layer's and head's q/k/v before and after RoPE, attention logits and
                     probabilities over all rows, head outputs) and the logits of every position.
    ropescope-nocap  the same with `--capture none`: only the logits of every position. Its memory does not grow
                     with T² (attention runs in row blocks), so it is the ropescope side of the long-prompt
                     comparison with llama.cpp.
    ropescope-packed `ropescope` with `--packed-weights 4096`: every weight matrix dequantized and packed for the
                     product kernel once, in the warm-up pass, and multiplied from there in the timed passes, as
                     a scan's passes do and as HF holds its weights dequantized (float32) in memory.
    ropescope-f64    the f64 engine, `bench-forward ... --precision f64`, full capture (as `ropescope`).
    ropescope-ggml   `bench-forward ... --capture none --arithmetic ggml`: f32 in llama.cpp's arithmetic (8-bit
                     activations before each quantized product, integer block dot products), logits only: the
                     ropescope side of the like-for-like comparison with llama.cpp.
    hf-eager         HF transformers, AutoModelForCausalLM from the GGUF (dequantized to float32),
                     attn_implementation="eager", forward with output_attentions=True, use_cache=False.
    hf-f64           HF transformers in pure float64: the model fixtures/reference/make_reference.py computes the
                     golden reference with, built by importing that script (its load_f64 and patches(): loaded
                     with dtype=torch.float64, every float32 island patched: RoPE tables, RMSNorm, the softmax,
                     Gemma 3's norms and norm weights), eager attention, output_attentions=True, use_cache=False.
                     The worker asserts every parameter and buffer, the logits and the attentions are float64,
                     and after the timed passes runs one untimed 16-token pass under f64_support.DtypeAudit that
                     fails if any aten op takes or gives a floating tensor that is not float64.
    llama.cpp        llama-cpp-python, Llama(model_path, n_ctx=n_batch=T, n_ubatch=T (or --llama-ubatch),
                     logits_all=True), llm.eval(ids): quantized weights, logits of every position.

Load is the time to a model ready to run: ropescope maps the file and checks every tensor, keeping the weights
quantized (its forward pass dequantizes them tile by tile); HF dequantizes with gguf-py and builds the torch
model (hf-f64 also reloads Gemma 3's norm weights exactly and sets the RoPE buffers to float64); llama.cpp maps
the file and creates its context (with logits_all, llama-cpp-python also allocates its tokens × vocab score
buffer). The model files are in the page cache for all of them (the first implementation to run reads them
first). Forward is the median of --repeat timed passes after one warm-up pass; the warm-up is reported too
("first"), because whatever a load leaves undone (faulting in mapped weights, building kernels) lands there, and
load + first is the time from nothing to the first result. Every implementation runs in its own process, one
after the other, with --threads threads (torch.set_num_threads; llama.cpp n_threads and n_threads_batch;
ropescope --threads).

Ratios, per model and T, are ours / peer (below 1: ropescope is faster):

    ropescope / hf-eager            f32 full capture against HF's attentions (the original bar)
    ropescope / llama.cpp           f32 full capture against llama.cpp's logits
    ropescope-nocap / llama.cpp     f32, logits only, on both sides: the long-prompt comparison
    ropescope-ggml / llama.cpp      llama.cpp's arithmetic, logits only, on both sides
    ropescope-f64 / hf-f64          the f64 engine against HF in pure float64 (the issue's target: ≤ 0.33,
                                    i.e. at least 3× faster)

Throughput: each forward pass is also reported in GFLOP/s, the model's floating-point operations (counted below,
the same count for every implementation) over the median forward time, and, with --peak-gflops F32,F64 (the FMA
peaks `cargo bench --bench breakdown` prints for the thread count used), as a fraction of the f32 peak (f64 peak
for ropescope-f64 and hf-f64). For llama.cpp, which multiplies quantized weights with integer dot products, the
rate is nominal (the same operation count over its time). The count, from the GGUF's tensor shapes:

    projections   2 · T · P, with P the number of weights of every matrix multiplied: per layer attn_q, attn_k,
                  attn_v, attn_output, ffn_gate, ffn_up, ffn_down, and the output head (output.weight, or
                  token_embd.weight when tied), since every implementation computes the logits of every position;
    attention     per layer and query head, 2 · d_k per scores entry (q · k) and 2 · d_v per entry of probs · v,
                  over the (query, key) pairs a causal mask lets through: T(T + 1)/2, or on Gemma 3's
                  sliding-window layers (all but every 6th, window W from the GGUF) Σ_i min(i + 1, W);
    not counted   norms, RoPE, softmax, activations, residual adds, the embedding lookup (O(T · d) or O(T²) per
                  head element-wise work), and whatever an implementation computes beyond the mask (HF eager
                  computes the whole T × T scores and masks them).

Long prompts and memory
-----------------------
Full capture keeps every head's T × T attention logits and probabilities (2 · layers · heads · T² values:
SmolLM2 f32 at T = 2048 is 9 GB, at 8192 145 GB), and HF with output_attentions keeps every head's T × T
probabilities plus the T × T scores of the layer it runs. So ropescope and ropescope-f64 are skipped above
--capture-max-tokens and hf-eager and hf-f64 above --hf-max-tokens (both default 2048), with a note. What runs
at every T is ropescope-nocap and llama.cpp. T above the model's context length (SmolLM2 8192, Gemma 3 32768;
llama.cpp needs n_ctx ≥ T) is skipped for every implementation. Before each run the script estimates the
process's dominant buffers (weights where the implementation copies them, capture or attentions, the T × vocab
logits: llama.cpp holds them twice, in its context and in llama-cpp-python's scores; llama.cpp's T × T × heads
attention buffer per ubatch) and skips an implementation whose estimate exceeds --max-memory-gb (default 0.8 of
MemAvailable at the start). The logits alone are large on Gemma 3's 262144-word vocabulary: at T = 8192 they are
8.6 GB for ropescope-nocap and 17 GB for llama.cpp.

How to run
----------
    cargo build --release
    $(fixtures/reference-venv.sh) benches/peers/compare.py [--threads 2] [--repeat 3] [--tokens 512]
        [--only ropescope,hf-eager,...] [--peak-gflops F32,F64] [--out results.json]

with the python that fixtures/reference-venv.sh prints (pins in fixtures/requirements-reference.txt, including
llama-cpp-python). --models defaults to the cache of fixtures/models.sh ($ROPESCOPE_CACHE/models, default
~/.cache/ropescope/models); a model whose file is absent is skipped. Nothing is fetched from a hub
(HF_HUB_OFFLINE=1). --only restricts the implementations. --file runs any GGUF file instead, such as a
random-weight file of a larger shape (`ropescope synth --like llama-3.1-8b --quant Q4_K --out F`; its ids are
the same text in its own tokenizer). The runs of docs/speed-peers.md and docs/speed-avx2.md:

    compare.py --tokens 512 --repeat 3 --out results-512.json                       # all six, 512 tokens
    compare.py --tokens 128,512,2048 --only ropescope-f64,hf-f64 --out results-f64.json
    compare.py --tokens 512,2048,8192 --only ropescope-nocap,llama.cpp --out results-long.json
    compare.py --file llama-3.1-8b-q4k.gguf --repeat 1 --only ropescope-nocap,ropescope-ggml,llama.cpp

The timings are wall-clock on whatever else the machine is doing: on a shared machine run it more than once and
compare the ratios, not the absolute times.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MODELS = {
    "smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3-270m": "gemma-3-270m-q4_k_m.gguf",
}
IMPLEMENTATIONS = [
    "ropescope", "ropescope-packed", "ropescope-nocap", "ropescope-ggml", "ropescope-f64", "hf-eager", "hf-f64",
    "llama.cpp",
]
# (ours, peer): the ratios reported, ours / peer.
PAIRS = [
    ("ropescope", "hf-eager"),
    ("ropescope-packed", "hf-eager"),
    ("ropescope", "llama.cpp"),
    ("ropescope-nocap", "llama.cpp"),
    ("ropescope-ggml", "llama.cpp"),
    ("ropescope-f64", "hf-f64"),
]
F64_IMPLEMENTATIONS = {"ropescope-f64", "hf-f64"}
FULL_CAPTURE = {"ropescope", "ropescope-packed", "ropescope-f64"}
HF = {"hf-eager", "hf-f64"}
# ropescope's bench-forward: (capture, precision, arithmetic, MiB of packed weights) of each of its implementations.
ROPESCOPE = {
    "ropescope": ("full", "f32", "exact", 0),
    "ropescope-packed": ("full", "f32", "exact", 4096),
    "ropescope-nocap": ("none", "f32", "exact", 0),
    "ropescope-ggml": ("none", "f32", "ggml", 0),
    "ropescope-f64": ("full", "f64", "exact", 0),
}
GEMMA3_GLOBAL_EVERY = 6  # Gemma 3: layers 5, 11, 17, ... are global, the others sliding-window (HF's pattern)


def default_models_dir():
    return Path(os.environ.get("ROPESCOPE_CACHE", Path.home() / ".cache/ropescope")) / "models"


def token_ids(model_path, n_tokens):
    """The text tokenized by HF's tokenizer of the GGUF, repeated until it has n_tokens ids, then cut."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_path.parent), gguf_file=model_path.name)
    text = (HERE / "text.txt").read_text(encoding="utf-8")
    repeated = text
    while True:
        ids = tok(repeated)["input_ids"]
        if len(ids) >= n_tokens:
            return [int(i) for i in ids[:n_tokens]]
        repeated += "\n" + text


# ---------------------------------------------------------------------------------------------------------------
# The model's shape, its operation count and the memory estimates (from the GGUF header and tensor shapes)

MATMULS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def model_shape(model_path):
    """What the operation count and the memory estimates need, read from the GGUF."""
    import gguf

    reader = gguf.GGUFReader(str(model_path))
    field = lambda k, default=None: reader.fields[k].contents() if k in reader.fields else default
    arch = field("general.architecture")
    tensors = {t.name: [int(n) for n in t.shape] for t in reader.tensors}
    n_layers = int(field(f"{arch}.block_count"))
    n_heads = int(field(f"{arch}.attention.head_count"))
    n_embd = int(field(f"{arch}.embedding_length"))
    d_k = int(field(f"{arch}.attention.key_length", n_embd // n_heads))
    d_v = int(field(f"{arch}.attention.value_length", d_k))
    emb = tensors["token_embd.weight"]
    vocab = emb[1]
    size = lambda shape: int(__import__("math").prod(shape))
    matmul = sum(size(shape) for name, shape in tensors.items()
                 if name.startswith("blk.") and name.rsplit(".", 2)[-2] in MATMULS)
    matmul += size(tensors.get("output.weight", emb))
    window = field(f"{arch}.attention.sliding_window")
    if arch == "gemma3":
        windows = [None if (l + 1) % GEMMA3_GLOBAL_EVERY == 0 else int(window) for l in range(n_layers)]
    else:
        assert window is None, f"{arch}: a sliding window this script does not know the layer pattern of"
        windows = [None] * n_layers
    return {
        "arch": arch,
        "n_layers": n_layers,
        "n_heads": n_heads,
        "n_embd": n_embd,
        "d_k": d_k,
        "d_v": d_v,
        "vocab": vocab,
        "context": int(field(f"{arch}.context_length")),
        "matmul_weights": matmul,
        "all_weights": sum(size(shape) for shape in tensors.values()),
        "windows": windows,
    }


def causal_pairs(t, window):
    """(query, key) pairs a causal mask lets through over t tokens, with at most `window` keys a query if given."""
    if window is None or t <= window:
        return t * (t + 1) // 2
    return window * (window + 1) // 2 + (t - window) * window


def forward_flops(shape, t):
    """Floating-point operations of one forward pass over t tokens (the count of the module docstring)."""
    projections = 2 * t * shape["matmul_weights"]
    attention = sum(shape["n_heads"] * 2 * (shape["d_k"] + shape["d_v"]) * causal_pairs(t, w) for w in shape["windows"])
    return projections + attention


def memory_estimate(impl, shape, t, ubatch):
    """Bytes of the dominant buffers of one implementation's process at t tokens (a rough guard, not a measure)."""
    b = 8 if impl in F64_IMPLEMENTATIONS else 4
    L, H, V = shape["n_layers"], shape["n_heads"], shape["vocab"]
    logits = t * V * b
    if impl in FULL_CAPTURE:
        # logits and probabilities of every head over all rows, q/k before and after RoPE, v and output a head
        return 2 * L * H * t * t * b + 6 * L * H * t * shape["d_k"] * b + logits
    if impl in ("ropescope-nocap", "ropescope-ggml"):
        return logits
    if impl in HF:
        # weights (dequantized in float32 at load, then cast), the kept attentions, one layer's scores, masked
        # scores and probabilities, the mask
        return shape["all_weights"] * (b + 4) + L * H * t * t * b + 3 * H * t * t * b + t * t * b + logits
    if impl == "llama.cpp":
        # logits in the context and in llama-cpp-python's scores; the scores and probabilities of one ubatch
        return 2 * t * V * 4 + 2 * H * t * ubatch * 4
    raise ValueError(impl)


def mem_available():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# ---------------------------------------------------------------------------------------------------------------
# Workers: each runs in its own process and prints one JSON object
# {"load_s": .., "first_forward_s": .., "forward_s": [..]}.


def worker_hf(model_path, ids_path, threads, repeat):
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    ids = torch.from_numpy(np.load(ids_path).astype(np.int64))[None, :]
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(
        str(model_path.parent),
        gguf_file=model_path.name,
        dtype=torch.float32,
        attn_implementation="eager",
    )
    model.eval()
    load_s = time.perf_counter() - start
    times = []
    with torch.inference_mode():
        for run in range(repeat + 1):
            start = time.perf_counter()
            out = model(input_ids=ids, output_attentions=True, use_cache=False)
            elapsed = time.perf_counter() - start
            assert out.logits.shape[1] == ids.shape[1] and len(out.attentions) == model.config.num_hidden_layers
            del out
            times.append(elapsed)
    return {"load_s": load_s, "first_forward_s": times[0], "forward_s": times[1:],
            "version": __import__("transformers").__version__}


def worker_hf_f64(model_path, ids_path, threads, repeat):
    """hf-f64: the float64 model of fixtures/reference/make_reference.py, its patches imported, not copied."""
    import numpy as np
    import torch
    import gguf

    sys.path.insert(0, str(REPO / "fixtures" / "reference"))
    import make_reference  # also puts fixtures/ on sys.path for f64_support
    import f64_support

    F64 = torch.float64
    torch.set_num_threads(threads)
    ids = torch.from_numpy(np.load(ids_path).astype(np.int64))[None, :]
    arch = gguf.GGUFReader(str(model_path)).fields["general.architecture"].contents()
    start = time.perf_counter()
    model = make_reference.load_f64(str(model_path.parent), model_path.name, arch)
    load_s = time.perf_counter() - start
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        assert t.dtype == F64, (name, t.dtype)
    n_params = sum(p.numel() for p in model.parameters())
    times = []
    with make_reference.patches():
        with torch.inference_mode():
            for run in range(repeat + 1):
                start = time.perf_counter()
                out = model(input_ids=ids, output_attentions=True, use_cache=False)
                elapsed = time.perf_counter() - start
                assert out.logits.shape[1] == ids.shape[1] and out.logits.dtype == F64, out.logits.dtype
                assert len(out.attentions) == model.config.num_hidden_layers
                assert all(a.dtype == F64 for a in out.attentions)
                del out
                times.append(elapsed)
        # Untimed, after the timed passes: every floating input and output of every aten op must be float64.
        audit = f64_support.DtypeAudit()
        with torch.no_grad(), audit:
            out = model(input_ids=ids[:, :16], output_attentions=True, use_cache=False)
        assert out.logits.dtype == F64
        assert not audit.bad, f"hf-f64 forward is not all float64: {dict(audit.bad)}"
    return {"load_s": load_s, "first_forward_s": times[0], "forward_s": times[1:],
            "version": __import__("transformers").__version__, "params": n_params,
            "dtype_check": f"{n_params} parameters, buffers, logits and attentions float64; "
                           f"16-token audit: {audit.n_ops} aten ops, every floating input and output float64"}


def worker_llama(model_path, ids_path, threads, repeat, ubatch=None):
    import numpy as np
    import llama_cpp

    ids = [int(i) for i in np.load(ids_path)]
    start = time.perf_counter()
    llm = llama_cpp.Llama(
        model_path=str(model_path),
        n_ctx=len(ids),
        n_batch=len(ids),
        n_ubatch=min(ubatch or len(ids), len(ids)),
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=True,
        use_mmap=True,
        verbose=False,
    )
    load_s = time.perf_counter() - start
    times = []
    for run in range(repeat + 1):
        llm.reset()
        start = time.perf_counter()
        llm.eval(ids)
        elapsed = time.perf_counter() - start
        assert llm.n_tokens == len(ids)
        times.append(elapsed)
    return {"load_s": load_s, "first_forward_s": times[0], "forward_s": times[1:], "version": llama_cpp.__version__,
            "n_ubatch": min(ubatch or len(ids), len(ids))}


WORKERS = {"hf-eager": worker_hf, "hf-f64": worker_hf_f64, "llama.cpp": worker_llama}


def run_ropescope(binary, model_path, ids_path, threads, repeat, capture, precision, arithmetic, packed_mib):
    cmd = [str(binary), "--threads", str(threads), "bench-forward", str(model_path), "--ids", str(ids_path),
           "--repeat", str(repeat), "--capture", capture, "--precision", precision, "--arithmetic", arithmetic,
           "--packed-weights", str(packed_mib)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    got = (r["capture"], r["precision"], r["arithmetic"], r["packed_weights_mib"])
    assert got == (capture, precision, arithmetic, packed_mib), got
    return r


def run_worker(kind, model_path, ids_path, threads, repeat, ubatch):
    cmd = [sys.executable, __file__, "--worker", kind, "--worker-model", str(model_path), "--worker-ids",
           str(ids_path), "--threads", str(threads), "--repeat", str(repeat)]
    if kind == "llama.cpp" and ubatch:
        cmd += ["--llama-ubatch", str(ubatch)]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------------------


def machine_facts():
    facts = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return facts


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def skip_reason(impl, t, shape, args, limit_bytes):
    """Why impl does not run at t tokens, or None."""
    if t > shape["context"]:
        return f"{t} tokens exceed the model's context length {shape['context']}"
    if impl in FULL_CAPTURE and t > args.capture_max_tokens:
        return f"full capture above --capture-max-tokens {args.capture_max_tokens}"
    if impl in HF and t > args.hf_max_tokens:
        return f"HF with output_attentions above --hf-max-tokens {args.hf_max_tokens}"
    need = memory_estimate(impl, shape, t, min(args.llama_ubatch or t, t))
    if limit_bytes is not None and need > limit_bytes:
        return f"estimated {need / 1e9:.2f} GB above --max-memory-gb {limit_bytes / 1e9:.2f}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=Path, default=default_models_dir(), help="directory of the GGUF files")
    ap.add_argument("--model", choices=sorted(MODELS), action="append", help="only this model (repeatable)")
    ap.add_argument("--file", type=Path, action="append",
                    help="this GGUF file instead of the default models, named by its file name (repeatable; e.g. "
                         "a `ropescope synth` file of a larger shape; --model adds the named ones back)")
    ap.add_argument("--only", default=",".join(IMPLEMENTATIONS), help="comma-separated implementations to run")
    ap.add_argument("--threads", type=int, default=2, help="threads for every implementation (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="timed forward passes after one warm-up (default 3)")
    ap.add_argument("--tokens", default="512", help="comma-separated sequence lengths (default 512)")
    ap.add_argument("--hf-max-tokens", type=int, default=2048,
                    help="skip hf-eager and hf-f64 above this many tokens (default 2048)")
    ap.add_argument("--capture-max-tokens", type=int, default=2048,
                    help="skip the full-capture ropescope and ropescope-f64 above this many tokens (default 2048)")
    ap.add_argument("--max-memory-gb", type=float,
                    help="skip an implementation whose estimated buffers exceed this (default 0.8 of MemAvailable)")
    ap.add_argument("--llama-ubatch", type=int, default=0,
                    help="llama.cpp n_ubatch (default 0: the token count, the whole prompt in one ubatch)")
    ap.add_argument("--peak-gflops", help="F32,F64: the machine's FMA peaks at --threads threads, in GFLOP/s "
                                          "(cargo bench --bench breakdown prints them); adds 'of peak'")
    ap.add_argument("--binary", type=Path, default=REPO / "target/release/ropescope", help="ropescope binary")
    ap.add_argument("--out", type=Path, help="write the results and ratios as JSON here")
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--worker-model", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--worker-ids", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        extra = {"ubatch": args.llama_ubatch} if args.worker == "llama.cpp" else {}
        fn = WORKERS[args.worker]
        print(json.dumps(fn(args.worker_model, args.worker_ids, args.threads, args.repeat, **extra)))
        return

    import numpy as np

    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(IMPLEMENTATIONS)
    if unknown:
        ap.error(f"unknown implementations {sorted(unknown)}; choose from {IMPLEMENTATIONS}")
    if any(s.startswith("ropescope") for s in only) and not args.binary.is_file():
        ap.error(f"{args.binary} is missing: run `cargo build --release` first")
    try:
        tokens = sorted({int(s) for s in args.tokens.split(",") if s.strip()})
    except ValueError:
        ap.error(f"--tokens takes comma-separated integers, not {args.tokens!r}")
    if not tokens or tokens[0] < 16:
        ap.error("--tokens: every length must be at least 16")
    peaks = None
    if args.peak_gflops:
        try:
            f32, f64 = (float(s) for s in args.peak_gflops.split(","))
        except ValueError:
            ap.error(f"--peak-gflops takes F32,F64 (two numbers), not {args.peak_gflops!r}")
        peaks = {"f32": f32, "f64": f64}
    if args.max_memory_gb is not None:
        limit_bytes = args.max_memory_gb * 1e9
    else:
        available = mem_available()
        limit_bytes = None if available is None else 0.8 * available

    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "threads": args.threads,
        "tokens": tokens,
        "repeat": args.repeat,
        "hf_max_tokens": args.hf_max_tokens,
        "capture_max_tokens": args.capture_max_tokens,
        "max_memory_gb": None if limit_bytes is None else limit_bytes / 1e9,
        "llama_ubatch": args.llama_ubatch or "tokens",
        "peak_gflops": peaks,
        "machine": machine_facts(),
        "load_average_start": load_average(),
        "shapes": {},
        "results": {},  # model -> str(tokens) -> implementation -> timings
        "ratios": {},  # model -> str(tokens) -> "ours/peer" -> ratios
        "skipped": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        chosen = [(name, args.models / MODELS[name]) for name in args.model or ([] if args.file else MODELS)]
        for name, path in chosen + [(f.stem, f) for f in args.file or []]:
            if not path.is_file():
                fetch = " (fixtures/models.sh downloads it)" if path.parent == args.models else ""
                print(f"skipping {name}: {path} is absent{fetch}", file=sys.stderr)
                continue
            shape = model_shape(path)
            report["shapes"][name] = shape
            all_ids = token_ids(path, tokens[-1])
            report["results"][name] = {}
            report["ratios"][name] = {}
            for t in tokens:
                ids_path = Path(tmp) / f"{name}-{t}.npy"
                np.save(ids_path, np.asarray(all_ids[:t], dtype=np.int64))
                flops = forward_flops(shape, t)
                results = {}
                for impl in only:
                    reason = skip_reason(impl, t, shape, args, limit_bytes)
                    if reason:
                        print(f"{name} {t}: skipping {impl}: {reason}", file=sys.stderr, flush=True)
                        report["skipped"].append({"model": name, "tokens": t, "implementation": impl,
                                                  "reason": reason})
                        continue
                    print(f"{name} {t}: {impl} ...", file=sys.stderr, flush=True)
                    if impl in ROPESCOPE:
                        r = run_ropescope(args.binary, path, ids_path, args.threads, args.repeat, *ROPESCOPE[impl])
                    else:
                        r = run_worker(impl, path, ids_path, args.threads, args.repeat, args.llama_ubatch)
                    r["forward_median_s"] = statistics.median(r["forward_s"])
                    r["gflop"] = flops / 1e9
                    r["gflops_per_s"] = flops / 1e9 / r["forward_median_s"]
                    if peaks:
                        r["of_peak"] = r["gflops_per_s"] / peaks["f64" if impl in F64_IMPLEMENTATIONS else "f32"]
                    results[impl] = r
                report["results"][name][str(t)] = results
                report["ratios"][name][str(t)] = {
                    f"{ours}/{peer}": {
                        "load": results[ours]["load_s"] / results[peer]["load_s"],
                        "load_first": (results[ours]["load_s"] + results[ours]["first_forward_s"])
                        / (results[peer]["load_s"] + results[peer]["first_forward_s"]),
                        "forward": results[ours]["forward_median_s"] / results[peer]["forward_median_s"],
                    }
                    for ours, peer in PAIRS
                    if ours in results and peer in results
                }
    report["load_average_end"] = load_average()

    print()
    print(f"{args.threads} threads, forward = median of {args.repeat} after one warm-up; GFLOP/s = the model's "
          f"operations (projections and causal attention, see the docstring) / forward"
          + ("; of peak: f32 peak, f64 peak for the f64 implementations" if peaks else ""))
    print(f"{'model':<14} {'tokens':>6} {'implementation':<16} {'load s':>8} {'first s':>8} {'forward s':>10} "
          f"{'GFLOP':>8} {'GFLOP/s':>8}" + (f" {'of peak':>8}" if peaks else ""))
    for name, by_t in report["results"].items():
        for t, results in by_t.items():
            for impl, r in results.items():
                print(f"{name:<14} {t:>6} {impl:<16} {r['load_s']:>8.3f} {r['first_forward_s']:>8.3f} "
                      f"{r['forward_median_s']:>10.3f} {r['gflop']:>8.1f} {r['gflops_per_s']:>8.1f}"
                      + (f" {r['of_peak']:>8.2f}" if peaks else ""))
    print()
    print("ratios, ours / peer (below 1: ropescope faster; ropescope-f64 / hf-f64 target: forward ≤ 0.33)")
    print(f"{'model':<14} {'tokens':>6} {'ours / peer':<30} {'load':>8} {'load+first':>11} {'forward':>10}")
    for name, by_t in report["ratios"].items():
        for t, ratios in by_t.items():
            for pair, r in ratios.items():
                print(f"{name:<14} {t:>6} {pair.replace('/', ' / '):<30} {r['load']:>8.2f} {r['load_first']:>11.2f} "
                      f"{r['forward']:>10.2f}")
    if report["skipped"]:
        print("\nskipped:")
        for s in report["skipped"]:
            print(f"  {s['model']} {s['tokens']} {s['implementation']}: {s['reason']}")
    start, end = report["load_average_start"], report["load_average_end"]
    if start is not None and end is not None:
        print(f"\nload average (1 min): {start:.2f} at start, {end:.2f} at end")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
