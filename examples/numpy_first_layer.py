"""SmolLM2's first-layer attention in plain numpy, checked against ropescope's float64 pass.

    pip install ./python gguf
    python examples/numpy_first_layer.py [--model PATH] [--wrong-rope]

The weights are read with the `gguf` package and dequantized with `gguf.quants.dequantize`. llama.cpp's
converter permutes the rows of llama's Q and K weights (per head, HF's "rotate-half" pairs (l, l + d/2) become
adjacent rows (2l, 2l + 1), the pairing of ggml's NORMAL RoPE). This implementation undoes the permutation and
applies HF's rotate-half RoPE. `--wrong-rope` skips the un-permutation, the classic mistake, and shows the message
`assert_attention_close` gives: exit status 1.
"""

import argparse
import os
import sys

import gguf
import numpy as np

import ropescope as rs
from ropescope.testing import assert_attention_close

TEXT = "The quick brown fox jumps over the lazy dog, and then the dog chases the fox around the garden."


def default_model():
    """SmolLM2 in the model cache that `fixtures/models.sh` fills."""
    cache = os.environ.get("ROPESCOPE_CACHE", os.path.expanduser("~/.cache/ropescope"))
    return os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def field(reader, key):
    """A scalar metadata value."""
    f = reader.fields[key]
    return f.parts[f.data[0]][0]


def weight(reader, name, rows=None):
    """Tensor `name` dequantized as float64 `[out, in]`, only `rows` of it when given."""
    t = next(t for t in reader.tensors if t.name == name)
    data = t.data if rows is None else t.data[rows]
    return gguf.quants.dequantize(data, t.tensor_type).astype(np.float64)


def unpermute(w, n_head):
    """HF's row order from the converter's: per head, rows (2l, 2l + 1) back to (l, l + d/2)."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, d // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


def rope(x, base):
    """HF's rotate-half RoPE of `x` `[heads, T, d]`: dims l and l + d/2 rotate by position * base^(-2l/d)."""
    d = x.shape[-1]
    inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angle = np.arange(x.shape[1], dtype=np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(np.concatenate([angle, angle], -1)), np.sin(np.concatenate([angle, angle], -1))
    rotated = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + rotated * sin


def first_layer_attention(path, ids, wrong_rope=False):
    """Attention probabilities `[heads, T, T]` of layer 0."""
    r = gguf.GGUFReader(path)
    n_head = int(field(r, "llama.attention.head_count"))
    n_kv = int(field(r, "llama.attention.head_count_kv"))
    eps = float(field(r, "llama.attention.layer_norm_rms_epsilon"))
    base = float(field(r, "llama.rope.freq_base"))

    x = weight(r, "token_embd.weight", rows=np.asarray(ids))  # [T, n_embd]
    h = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight(r, "blk.0.attn_norm.weight")
    wq, wk = weight(r, "blk.0.attn_q.weight"), weight(r, "blk.0.attn_k.weight")
    if not wrong_rope:
        wq, wk = unpermute(wq, n_head), unpermute(wk, n_kv)
    t, d = len(ids), wq.shape[0] // n_head
    q = rope((h @ wq.T).reshape(t, n_head, d).transpose(1, 0, 2), base)
    k = rope((h @ wk.T).reshape(t, n_kv, d).transpose(1, 0, 2), base)
    k = np.repeat(k, n_head // n_kv, axis=0)  # grouped-query attention: head i reads kv head i // group
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
    scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def main():
    """Computes the attention, checks it, and reports."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=default_model(), help="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--wrong-rope", action="store_true", help="apply rotate-half to the permuted rows")
    args = ap.parse_args()
    ids = rs.Model(args.model).tokenize(TEXT)
    attn = first_layer_attention(args.model, ids, wrong_rope=args.wrong_rope)
    try:
        assert_attention_close(args.model, ids, attn, layer=0, atol=1e-9, rtol=0)
    except AssertionError as e:
        print(f"FAIL: {e}")
        return 1
    print(f"PASS: layer 0 attention of {len(ids)} tokens, {attn.shape[0]} heads, within 1e-9 of ropescope's float64")
    return 0


if __name__ == "__main__":
    sys.exit(main())
