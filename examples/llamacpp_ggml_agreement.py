#!/usr/bin/env python3
"""How close llama.cpp's logits come to ropescope's pass in llama.cpp's own arithmetic, and to themselves.

For each real model (SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M, from fixtures/models.sh) and each prompt
(the ids of the committed llama.cpp dumps in fixtures/diverge/, and benches/peers/text.txt cut to --tokens ids
by the model's own tokenizer, `ropescope tokenize`), this computes the logits of every position with:

    llama.cpp        llama-cpp-python, logits_all, float32 KV cache, no flash attention, --threads threads, the
                     whole prompt in one batch (n_batch = n_ubatch = the context)
    llama.cpp-b1     the same, one token per batch (llama.cpp then takes its one-row kernels: other products,
                     other float32 roundings, the same arithmetic otherwise)
    exact            `ropescope reference --precision f32` (the dequantized weights times the activations)
    ggml             `ropescope reference --precision f32 --arithmetic ggml` (8-bit activations before each
                     quantized product, integer block dot products, float32 residual stream, ggml's RMSNorm and
                     GELU table)

and prints the NMSE (Σ(a − b)² / Σb²) of each against llama.cpp's one-batch logits, the share of positions with
the same top token, and the first layer where a llama.cpp dump of the same pass (examples/llamacpp_dump.py)
leaves the ggml pass by more than NMSE 1e-10 (`ropescope diverge --arithmetic ggml`): the layer of the first
activation the two engines quantize to a different 8-bit step. A flip moves a value by a whole step (about
1/127 of its block's largest magnitude), and every later quantizer turns that into more flips, so the logits
end about as far from llama.cpp's as llama.cpp's own one-token run is: the column llama.cpp-b1.

    PY="$(fixtures/reference-venv.sh)"
    $PY examples/llamacpp_ggml_agreement.py [--binary target/release/ropescope] [--tokens 128] [--threads 2]

Needs numpy and llama-cpp-python (the venv of fixtures/reference-venv.sh) and a release build of ropescope.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODELS = [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "llamacpp-smollm2"),
    ("gemma-3-270m-q4_k_m.gguf", "llamacpp-gemma3"),
]
FLIP_NMSE = 1e-10


def nmse(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(((a - b) ** 2).sum() / (b**2).sum())


def top_agreement(a, b):
    return float((np.argmax(a, axis=-1) == np.argmax(b, axis=-1)).mean())


def llamacpp_logits(model, ids, threads, batch):
    from llama_cpp import Llama

    n_ctx = max(256, -(-len(ids) // 256) * 256)
    llm = Llama(model_path=str(model), logits_all=True, n_ctx=n_ctx, n_batch=batch or n_ctx,
                n_ubatch=batch or n_ctx, n_threads=threads, n_threads_batch=threads, type_k=0, type_v=0,
                flash_attn=False, verbose=False)
    llm.eval([int(i) for i in ids])
    return np.array(llm.scores[: len(ids)], dtype=np.float64)


def ropescope_logits(binary, model, ids_path, arithmetic, out):
    subprocess.run([str(binary), "reference", str(model), "--ids", str(ids_path), "--layers", "0",
                    "--precision", "f32", "--arithmetic", arithmetic, "--out", str(out), "--force"],
                   check=True, capture_output=True)
    return np.load(out / "logits.npy").astype(np.float64)


def first_flip_layer(binary, model, ids_path, threads, work):
    """The layer of the first tensor over NMSE 1e-10 when a llama.cpp dump is held to the ggml pass."""
    dump = work / "dump"
    subprocess.run([sys.executable, str(REPO / "examples/llamacpp_dump.py"), "--model", str(model), "--ids",
                    str(ids_path), "--layers", "all", "--no-logits", "--threads", str(threads), "--out",
                    str(dump)], check=True, capture_output=True)
    out = subprocess.run([str(binary), "diverge", str(model), "--ids", str(ids_path), "--against", str(dump),
                          "--arithmetic", "ggml", "--tol", f"attn=nmse:{FLIP_NMSE}", "--json", "-"],
                         capture_output=True, text=True)
    report = json.loads(out.stdout)
    if report["first"] is None:
        return None
    return report["tensors"][report["first"]]["layer"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(REPO / "target/release/ropescope"))
    ap.add_argument("--models-dir", default=os.environ.get(
        "ROPESCOPE_MODELS", str(Path(os.environ.get("ROPESCOPE_CACHE", Path.home() / ".cache/ropescope")) / "models")))
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    text = (REPO / "benches/peers/text.txt").read_text()
    print(f"{'model':<34} {'T':>4} {'layers':>6} {'exact':>9} {'ggml':>9} {'llama.cpp-b1':>12} "
          f"{'top-1 ggml':>10} {'top-1 b1':>8} {'first flip':>10}")
    for file, fixture in MODELS:
        model = Path(args.models_dir) / file
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            tok = subprocess.run([args.binary, "tokenize", str(model), "--text", text, "--json"], check=True,
                                 capture_output=True, text=True)
            ids = json.loads(tok.stdout)["ids"]
            while len(ids) < args.tokens:
                ids = ids + ids
            prompts = [np.load(REPO / "fixtures/diverge" / fixture / "ids.npy"), np.array(ids[: args.tokens])]
            for ids in prompts:
                ids_path = work / "ids.npy"
                np.save(ids_path, ids.astype(np.int64))
                lc = llamacpp_logits(model, ids, args.threads, None)
                b1 = llamacpp_logits(model, ids, args.threads, 1)
                exact = ropescope_logits(args.binary, model, ids_path, "exact", work / "exact")
                ggml = ropescope_logits(args.binary, model, ids_path, "ggml", work / "ggml")
                flip = first_flip_layer(args.binary, model, ids_path, args.threads, work)
                info = subprocess.run([args.binary, "inspect", str(model), "--json"], check=True,
                                      capture_output=True, text=True)
                layers = json.loads(info.stdout)["n_layers"]
                print(f"{file:<34} {len(ids):>4} {layers:>6} {nmse(exact, lc):>9.2e} {nmse(ggml, lc):>9.2e} "
                      f"{nmse(b1, lc):>12.2e} {top_agreement(ggml, lc):>10.2f} {top_agreement(b1, lc):>8.2f} "
                      f"{'none' if flip is None else flip:>10}", flush=True)


if __name__ == "__main__":
    main()
