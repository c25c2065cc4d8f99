#!/usr/bin/env python3
"""Speed of ropescope beside its peers: model load and the 512-token forward pass, same tokens, same threads.

What it measures
----------------
For each model (SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M, from fixtures/models.sh), the same token ids
(benches/peers/text.txt tokenized by HF's tokenizer for that GGUF, the text repeated until there are enough
tokens, then cut to --tokens) run through:

    ropescope        the release binary, `ropescope --threads K bench-forward MODEL --ids IDS.npy`: f32, full
                     capture (every layer's and head's q/k/v before and after RoPE, attention logits and
                     probabilities over all rows, head outputs) and the logits of every position.
    ropescope-nocap  the same without capture (for reference; not a peer).
    hf-eager         HF transformers, AutoModelForCausalLM from the GGUF (dequantized to float32),
                     attn_implementation="eager", forward with output_attentions=True, use_cache=False.
    llama.cpp        llama-cpp-python, Llama(model_path, n_ctx=n_batch=n_ubatch=tokens, logits_all=True),
                     llm.eval(ids): quantized weights, logits of every position.

Load is the time to a model ready to run: ropescope maps the file and checks every tensor, keeping the weights
quantized (its forward pass dequantizes them tile by tile); HF dequantizes with gguf-py and builds the torch
model; llama.cpp maps the file and creates its context (with logits_all, llama-cpp-python also allocates its
tokens × vocab score buffer). The model files are in the page cache for all three (the first implementation to
run reads them first). Forward is the median of --repeat timed passes after one warm-up pass; the warm-up is
reported too ("first"), because whatever a load leaves undone (faulting in mapped weights, building kernels)
lands there, and load + first is the time from nothing to the first result. Every implementation runs in its own process, one after the other, with
--threads threads (torch.set_num_threads; llama.cpp n_threads and n_threads_batch; ropescope --threads).

The ratios are ropescope (full capture) / peer: below 1 means ropescope is faster.

How to run
----------
    cargo build --release
    $(fixtures/reference-venv.sh) benches/peers/compare.py [--threads 2] [--repeat 3] [--out results.json]

with the python that fixtures/reference-venv.sh prints (pins in fixtures/requirements-reference.txt, including
llama-cpp-python). --models defaults to the cache of fixtures/models.sh ($ROPESCOPE_CACHE/models, default
~/.cache/ropescope/models); a model whose file is absent is skipped. Nothing is fetched from a hub
(HF_HUB_OFFLINE=1). --only restricts the implementations (e.g. --only ropescope,hf-eager).

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
IMPLEMENTATIONS = ["ropescope", "ropescope-nocap", "hf-eager", "llama.cpp"]
PEERS = ["hf-eager", "llama.cpp"]


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


def worker_llama(model_path, ids_path, threads, repeat):
    import numpy as np
    import llama_cpp

    ids = [int(i) for i in np.load(ids_path)]
    start = time.perf_counter()
    llm = llama_cpp.Llama(
        model_path=str(model_path),
        n_ctx=len(ids),
        n_batch=len(ids),
        n_ubatch=len(ids),
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
    return {"load_s": load_s, "first_forward_s": times[0], "forward_s": times[1:], "version": llama_cpp.__version__}


def run_ropescope(binary, model_path, ids_path, threads, repeat, capture):
    cmd = [str(binary), "--threads", str(threads), "bench-forward", str(model_path), "--ids", str(ids_path),
           "--repeat", str(repeat), "--capture", capture]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_worker(kind, model_path, ids_path, threads, repeat):
    cmd = [sys.executable, __file__, "--worker", kind, "--worker-model", str(model_path), "--worker-ids",
           str(ids_path), "--threads", str(threads), "--repeat", str(repeat)]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=Path, default=default_models_dir(), help="directory of the GGUF files")
    ap.add_argument("--model", choices=sorted(MODELS), action="append", help="only this model (repeatable)")
    ap.add_argument("--only", default=",".join(IMPLEMENTATIONS), help="comma-separated implementations to run")
    ap.add_argument("--threads", type=int, default=2, help="threads for every implementation (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="timed forward passes after one warm-up (default 3)")
    ap.add_argument("--tokens", type=int, default=512, help="sequence length (default 512)")
    ap.add_argument("--binary", type=Path, default=REPO / "target/release/ropescope", help="ropescope binary")
    ap.add_argument("--out", type=Path, help="write the results and ratios as JSON here")
    ap.add_argument("--worker", choices=["hf-eager", "llama.cpp"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-model", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--worker-ids", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        fn = worker_hf if args.worker == "hf-eager" else worker_llama
        print(json.dumps(fn(args.worker_model, args.worker_ids, args.threads, args.repeat)))
        return

    import numpy as np

    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(IMPLEMENTATIONS)
    if unknown:
        ap.error(f"unknown implementations {sorted(unknown)}; choose from {IMPLEMENTATIONS}")
    if any(s.startswith("ropescope") for s in only) and not args.binary.is_file():
        ap.error(f"{args.binary} is missing: run `cargo build --release` first")

    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "threads": args.threads,
        "tokens": args.tokens,
        "repeat": args.repeat,
        "machine": machine_facts(),
        "load_average_start": load_average(),
        "results": {},
        "ratios": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.model or list(MODELS):
            path = args.models / MODELS[name]
            if not path.is_file():
                print(f"skipping {name}: {path} is absent (fixtures/models.sh downloads it)", file=sys.stderr)
                continue
            ids = token_ids(path, args.tokens)
            ids_path = Path(tmp) / f"{name}.npy"
            np.save(ids_path, np.asarray(ids, dtype=np.int64))
            results = {}
            for impl in only:
                print(f"{name}: {impl} ...", file=sys.stderr, flush=True)
                if impl == "ropescope":
                    r = run_ropescope(args.binary, path, ids_path, args.threads, args.repeat, "full")
                elif impl == "ropescope-nocap":
                    r = run_ropescope(args.binary, path, ids_path, args.threads, args.repeat, "none")
                else:
                    r = run_worker(impl, path, ids_path, args.threads, args.repeat)
                r["forward_median_s"] = statistics.median(r["forward_s"])
                results[impl] = r
            report["results"][name] = results
            if "ropescope" in results:
                ours = results["ropescope"]
                report["ratios"][name] = {
                    peer: {
                        "load": ours["load_s"] / results[peer]["load_s"],
                        "load_first": (ours["load_s"] + ours["first_forward_s"])
                        / (results[peer]["load_s"] + results[peer]["first_forward_s"]),
                        "forward": ours["forward_median_s"] / results[peer]["forward_median_s"],
                    }
                    for peer in PEERS
                    if peer in results
                }
    report["load_average_end"] = load_average()

    print()
    print(f"{args.tokens} tokens, {args.threads} threads, forward = median of {args.repeat} after one warm-up")
    print(f"{'model':<14} {'implementation':<16} {'load s':>8} {'first s':>8} {'forward s':>10}")
    for name, results in report["results"].items():
        for impl, r in results.items():
            print(f"{name:<14} {impl:<16} {r['load_s']:>8.3f} {r['first_forward_s']:>8.3f} "
                  f"{r['forward_median_s']:>10.3f}")
    print()
    print("ratios, ropescope (f32, full capture) / peer (below 1: ropescope faster)")
    print(f"{'model':<14} {'peer':<16} {'load':>8} {'load+first':>11} {'forward':>10}")
    for name, ratios in report["ratios"].items():
        for peer, r in ratios.items():
            print(f"{name:<14} {peer:<16} {r['load']:>8.2f} {r['load_first']:>11.2f} {r['forward']:>10.2f}")
    print(f"\nload average (1 min): {report['load_average_start']:.2f} at start, {report['load_average_end']:.2f} at end")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
