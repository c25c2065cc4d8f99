#!/usr/bin/env python3
"""Replay llama.cpp's q/k/v projections in numpy, to show why its tensors leave ropescope's float64 pass.

llama.cpp's CPU backend does not multiply a quantized weight by the float32 activations: ggml_compute_forward_mul_mat
(ggml/src/ggml-cpu/ggml-cpu.c) first converts the activations to the weight type's `vec_dot_type` (the table
type_traits_cpu in the same file: Q8_1 for Q4_1 weights, Q8_0 for Q5_0 and Q8_0 weights, Q8_K for the K-quants)
and then takes integer dot products block by block. ropescope multiplies the dequantized weights by the
activations as they are, in float64. This script takes a dump written by `examples/llamacpp_dump.py --extra`
(llama.cpp's own input of the projections, `x_attn_norm_L{l}.npy`, and their outputs, `x_{q,k,v}_proj_L{l}.npy`)
and computes, from the same input and the same weights of the GGUF:

    exact     x @ W^T in float64, W the dequantized weight (what ropescope computes, on llama.cpp's input)
    emulated  x quantized as ggml's AVX2 quantize_row_q8_1 / quantize_row_q8_0 do (per block of 32: d = amax/127
              in float32, q = round-half-even(x * (127/amax)), d and, for Q8_1, s = d * sum(q) stored as float16),
              then the block dot products of ggml_vec_dot_q4_1_q8_1 (d_w d_x sum(q_w q_x) + m_w s_x) or
              ggml_vec_dot_q5_0_q8_0 / q8_0_q8_0 (d_w d_x sum(q_w q_x)), summed in float64

and prints the NMSE (sum (a - b)^2 / sum b^2) of llama.cpp's output against each, and of the emulation against the
exact product. On models with a QK-norm (gemma3) the rows `q_norm`/`k_norm` follow q and k through it (RMS norm
per head with the GGUF's weight and epsilon, in float64) and compare with the dump's q_pre/k_pre. When llama.cpp's output matches the emulation to float32 rounding while both are far from the
exact product, the quantized activations are the cause of the difference.

A second table replays each dumped layer's attention in float64 from the dump's own tensors: scores from its q and
k (scale 1/sqrt(d), which is both models' scale), probabilities as the causal softmax of its scores, head outputs
as its probabilities times its v. Small NMSEs there mean that llama.cpp's attention arithmetic adds only float32
rounding, so that the attention tensors differ from ropescope's only through their inputs.

    ~/.cache/ropescope/venv/bin/python examples/llamacpp_replay.py --model PATH.gguf --dump DIR [--layers 0,1]

Weight types handled: Q4_1, Q5_0, Q8_0, F32 (what SmolLM2-135M Q4_1 and Gemma 3 270M Q4_K_M use for q, k and v).
Needs numpy and gguf.
"""
import argparse
import glob
import os
import re

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

QK = 32


def blocks_q8(x):
    """ggml's AVX2 quantize_row_q8_0/q8_1 of the rows of x (float32 [T, n]): (d16, q, s16), per 32-block."""
    x = np.asarray(x, dtype=np.float32).reshape(x.shape[0], -1, QK)
    amax = np.abs(x).max(axis=-1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        iscale = np.where(amax != 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.rint((x * iscale).astype(np.float32))  # _mm256_round_ps(_MM_ROUND_NEAREST): half to even
    d16 = d.astype(np.float16).astype(np.float64)
    s16 = (d[..., 0] * q.sum(axis=-1).astype(np.float32)).astype(np.float16).astype(np.float64)
    return d16[..., 0], q.astype(np.float64), s16


def weight_blocks(tensor):
    """(kind, d, m, qw) per block of a GGUF weight [rows, n]: qw the integer quants, the block value d*qw (+ m)."""
    t = tensor.tensor_type
    raw = np.asarray(tensor.data)
    rows = int(tensor.shape[1]) if len(tensor.shape) > 1 else 1
    if t == Q.F32:
        return "f32", np.asarray(raw, dtype=np.float64).reshape(rows, -1), None, None
    b = raw.reshape(rows, -1, gguf.GGML_QUANT_SIZES[t][1])
    if t == Q.Q8_0:
        d = b[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)
        qw = b[..., 2:].copy().view(np.int8).astype(np.float64)
        return "q8_0", d, None, qw
    if t == Q.Q5_0:
        d = b[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)
        qh = b[..., 2:6].copy().view(np.uint32)[..., 0]
        qs = b[..., 6:]
        lo = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.int64)
        hi = ((qh[..., None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int64)
        return "q5_0", d, None, (lo | (hi << 4)).astype(np.float64) - 16
    if t == Q.Q4_1:
        d = b[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)
        m = b[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float64)
        qs = b[..., 4:]
        qw = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float64)
        return "q4_1", d, m, qw
    raise SystemExit(f"error: {tensor.name}: type {t.name} is not handled")


def exact(x, kind, d, m, qw):
    x = np.asarray(x, dtype=np.float64)
    if kind == "f32":
        return x @ d.T
    w = d[..., None] * qw + (m[..., None] if m is not None else 0.0)
    return x @ w.reshape(w.shape[0], -1).T


def emulated(x, kind, d, m, qw):
    if kind == "f32":
        return exact(x, kind, d, m, qw)
    dx, qx, sx = blocks_q8(x)  # [T, nb], [T, nb, 32], [T, nb]
    sumi = np.einsum("tbk,rbk->trb", qx, qw)  # integer block sums, exact in float64
    out = (sumi * (d[None, :, :] * dx[:, None, :])).sum(axis=-1)
    if kind == "q4_1":
        out += (m[None, :, :] * sx[:, None, :]).sum(axis=-1)
    return out


def nmse(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dump", required=True, help="a directory written by llamacpp_dump.py --extra")
    ap.add_argument("--layers", help="comma-separated (default: every layer with x_attn_norm_L{l}.npy)")
    args = ap.parse_args()
    reader = gguf.GGUFReader(args.model)
    tensors = {t.name: t for t in reader.tensors}
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    eps_field = reader.fields.get(f"{arch}.attention.layer_norm_rms_epsilon")
    eps = float(eps_field.parts[-1][0]) if eps_field is not None else 0.0
    if args.layers:
        layers = [int(s) for s in args.layers.split(",")]
    else:
        found = glob.glob(os.path.join(args.dump, "x_attn_norm_L*.npy"))
        layers = sorted(int(re.search(r"_L(\d+)\.npy$", f).group(1)) for f in found)
    if not layers:
        raise SystemExit(f"error: {args.dump} has no x_attn_norm_L*.npy (run llamacpp_dump.py with --extra)")
    print(f"{'layer':>5} {'proj':>4} {'type':>5} {'activations':>11}  {'llama.cpp vs exact':>18}  "
          f"{'llama.cpp vs emulated':>21}  {'emulated vs exact':>17}")
    for l in layers:
        x = np.load(os.path.join(args.dump, f"x_attn_norm_L{l}.npy"))
        for p in "qkv":
            got = np.load(os.path.join(args.dump, f"x_{p}_proj_L{l}.npy"))
            w = tensors[f"blk.{l}.attn_{p}.weight"]
            kind, d, m, qw = weight_blocks(w)
            ex, em = exact(x, kind, d, m, qw), emulated(x, kind, d, m, qw)
            act = {"q4_1": "Q8_1", "q5_0": "Q8_0", "q8_0": "Q8_0", "f32": "F32"}[kind]
            print(f"{l:>5} {p:>4} {w.tensor_type.name:>5} {act:>11}  {nmse(got, ex):>18.3e}  "
                  f"{nmse(got, em):>21.3e}  {nmse(em, ex):>17.3e}")
            norm_w = tensors.get(f"blk.{l}.attn_{p}_norm.weight")
            if norm_w is not None and p in "qk":
                g = np.asarray(norm_w.data, dtype=np.float64).reshape(-1)
                pre = np.load(os.path.join(args.dump, f"{p}_pre_L{l}.npy")).astype(np.float64)

                def qk_norm(a):
                    a = a.reshape(a.shape[0], -1, g.size)
                    a = a / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps) * g
                    return a.transpose(1, 0, 2)

                print(f"{l:>5} {p + '_norm':>4} {'':>5} {'':>11}  {nmse(pre, qk_norm(ex)):>18.3e}  "
                      f"{nmse(pre, qk_norm(em)):>21.3e}  {nmse(qk_norm(em), qk_norm(ex)):>17.3e}")
    print()
    attention_replay(args.dump, layers)


def attention_replay(dump, layers):
    print(f"{'layer':>5} {'scores vs scale q.k':>19}  {'attn vs softmax(scores)':>23}  {'out vs attn v':>13}")
    for l in layers:
        try:
            q, k, v, s, p, o = (np.load(os.path.join(dump, f"{n}_L{l}.npy")).astype(np.float64)
                                for n in ("q", "k", "v", "scores", "attn", "out"))
        except FileNotFoundError:
            continue
        h, t, d = q.shape
        group = h // k.shape[0]
        kk, vv = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        scores = q @ kk.transpose(0, 2, 1) / np.sqrt(d)
        masked = np.where(np.triu(np.ones((t, t), dtype=bool), 1), -np.inf, s)
        e = np.exp(masked - masked.max(axis=-1, keepdims=True))
        probs = e / e.sum(axis=-1, keepdims=True)
        print(f"{l:>5} {nmse(s, scores):>19.3e}  {nmse(p, probs):>23.3e}  {nmse(o, p @ vv):>13.3e}")


if __name__ == "__main__":
    main()
