#!/usr/bin/env python3
"""Dump a llama.cpp forward pass in ropescope's reference layout, for `ropescope diverge`.

Runs a GGUF model with llama.cpp through llama-cpp-python's low-level API on given token ids, with an evaluation
callback (`cb_eval` in the context parameters, a `ggml_backend_sched_eval_callback`, as llama.cpp's own
`examples/eval-callback` uses) that copies the graph's named tensors as they are computed, and writes, per chosen
layer, the files `ropescope reference` writes and `ropescope diverge` reads (fixtures/reference/README.md, and the
docs/diverge.md):

    file              shape           llama.cpp tensor (ggml shape, fastest dimension first)
    q_pre_L{l}.npy    [H, T, d]       `Qcur-l` as the projection leaves it, reshaped to [d, H, T] (the node just
                                      before ROPE); on models with a QK-norm (gemma3) `Qcur_normed-l` instead
    k_pre_L{l}.npy    [H_kv, T, d]    the same for `Kcur-l` / `Kcur_normed-l`
    v_L{l}.npy        [H_kv, T, d_v]  `Vcur-l` [d, H_kv, T]
    q_L{l}.npy        [H, T, d]       `Qcur-l`, the ROPE node [d, H, T]: after RoPE; gemma3 scales it by
                                      f_attention_scale only after this node, so it is unscaled in both models
    k_L{l}.npy        [H_kv, T, d]    `Kcur-l`, the ROPE node
    scores_L{l}.npy   [H, T, T]       `kq-l` [n_kv, T, H] times the scale `kq_soft_max-l` applies (see below),
                                      key columns cut from the cache length n_kv to T
    attn_L{l}.npy     [H, T, T]       `kq_soft_max-l` [n_kv, T, H], columns cut to T
    out_L{l}.npy      [H, T, d_v]     `kqv_out-l` [H*d_v, T]: the heads' outputs before the output projection
    hidden_L{l}.npy   [T, n_embd]     `l_out-l` [n_embd, T]: the residual stream after layer l
    logits.npy        [T, V]          `result_output` [V, T] (every position is an output row)
    ids.npy           [T]             the ids, int64
    meta.json                         producer, versions, settings, what each file came from, the checks made

ggml lists dimensions fastest first, so a ggml tensor [d, H, T] is the numpy array [T, H, d] (read through its
byte strides nb, which also handles views) and is transposed to [H, T, d]; `kq` and `kq_soft_max` [n_kv, T, H]
are numpy [H, T, n_kv] already head-major.

Scores. llama.cpp's `kq-l` is the raw product k.q: the attention scale is not in it, `ggml_soft_max_ext(kq, mask,
scale, max_bias)` applies it. ggml's CPU soft_max computes, per row, softmax(scale * kq + slope * mask) in float32,
with slope = 1 when max_bias = 0 and the mask holding 0 for visible keys and -INFINITY for masked ones (future
keys; keys outside the window on sliding-window layers). The script reads scale and max_bias from the soft_max
node's op_params, writes scores = float32(scale * kq) (the product ggml forms), requires max_bias = 0 (no ALiBi),
and checks that its own float64 softmax of those scores with a causal mask reproduces `kq_soft_max` (max-abs is
stored in meta.json) and that the masked probabilities are exactly 0. For llama, scale = 1/sqrt(d) = 1/8 on
SmolLM2. gemma3 multiplies Qcur by f_attention_scale (query_pre_attn_scalar^-1/2 = 1/16 on Gemma 3 270M) before
the attention and calls soft_max with scale 1, so its kq already holds the scaled scores; both scales are powers of
two, which makes the product exact in float32. Future keys keep their real products, as the layout asks.

Coordinate order. ropescope's layout has q and k in half-split order (dims i and i + d/2 form rotation pair i).
llama.cpp's GGUF converter permutes the q/k weight rows of llama-architecture models to interleaved pairs (2i,
2i + 1), the order llama.cpp's normal RoPE (LLAMA_ROPE_TYPE_NORM) rotates. For such a model (rope type 0 from
llama_model_rope_type) q_pre, k_pre, q and k are reordered with new[..., j] = old[..., perm[j]], perm = (0, 2, 4,
..., d-2, 1, 3, 5, ..., d-1): llama.cpp's dim 2i becomes dim i, its dim 2i + 1 becomes dim i + d/2. With a partial
rotation (n_rot = `{arch}.rope.dimension_count` below d, e.g. GLM-4) only the first n_rot dims are reordered so (d
replaced by n_rot) and the unrotated rest stays in place. Models with NEOX RoPE (rope type 2: gemma3, qwen2, phi3,
...) are half-split already and left alone. v, scores, attn, out, hidden and logits do not depend on the order.

Settings, chosen so that llama.cpp runs its ordinary CPU path with every tensor of the layout formed: flash
attention off (LLAMA_FLASH_ATTN_TYPE_DISABLED; with it on, kq and kq_soft_max never exist), a float32 KV cache
(type_k = type_v = GGML_TYPE_F32; the default float16 cache would round the keys and values `kq` and `kqv` read),
n_batch = n_ubatch = n_ctx = T rounded up to 256 so that all rows go through one graph, every position an output
row, one sequence, no GPU offload, `--threads` threads (default 1) for both prompt and generation. The weights
stay as the file stores them: llama.cpp's CPU matrix products quantize the activations to the weight type's
`vec_dot_type` (ggml-cpu.c type_traits_cpu: Q8_1 for Q4_1, Q8_0 for Q5_0 and Q8_0, Q8_K for the K-quants) before
the integer dot products; that is llama.cpp as it runs, and `ropescope diverge` measures it.

Not obtained: nothing of the layout is missing. Tensors the layout has no file for (attn_norm, ffn_out, the KQ
mask) are not written. On the last layer llama.cpp's graph passes the attention output through ggml_get_rows with
the output ids; with every position an output that is the identity, and l_out of the last layer is the residual
stream as for the others (llama.cpp's `result_norm`, the final norm's output, is not what the layout calls hidden).

    ~/.cache/ropescope/venv/bin/python examples/llamacpp_dump.py --model PATH.gguf --ids IDS --out DIR
        [--layers 0,1,29|all] [--threads 1] [--no-logits] [--extra]

IDS is a comma-separated list or an .npy file of integers (`ropescope tokenize MODEL --text ... --json` gives
ropescope's own tokenization, so both engines read the same ids). --extra also writes, per layer, the input of
the q/k/v projections (`attn_norm-l`) as `x_attn_norm_L{l}.npy` [T, n_embd] and the projections' raw outputs (the
MUL_MAT nodes `Qcur-l`, `Kcur-l`, `Vcur-l`, in the GGUF's row order) as `x_{q,k,v}_proj_L{l}.npy` [T, rows]:
files `ropescope diverge` ignores (not of the layout) and `examples/llamacpp_replay.py` replays. Needs numpy and llama-cpp-python (tested with 0.3.36, CPU
build, x86-64 AVX2). Tested on SmolLM2-135M (llama) and Gemma 3 270M (gemma3).
"""
import argparse
import ctypes
import json
import os
import re
import sys

import numpy as np
import llama_cpp as L

GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
GGML_MAX_DIMS = 4
GGML_MAX_OP_PARAMS = 64
GGML_MAX_SRC = 10
GGML_MAX_NAME = 64


class GgmlTensor(ctypes.Structure):
    """struct ggml_tensor of ggml/include/ggml.h (the vendored ggml of llama-cpp-python 0.3.36)."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * GGML_MAX_DIMS),
        ("nb", ctypes.c_size_t * GGML_MAX_DIMS),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * (GGML_MAX_OP_PARAMS // 4)),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * GGML_MAX_SRC),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * GGML_MAX_NAME),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


def ggml_lib():
    """libggml-base from llama-cpp-python's lib folder, for ggml_op_name, ggml_get_name and the buffer check."""
    folder = os.path.join(os.path.dirname(L.__file__), "lib")
    lib = ctypes.CDLL(os.path.join(folder, "libggml-base.so"))
    lib.ggml_op_name.restype = ctypes.c_char_p
    lib.ggml_op_name.argtypes = [ctypes.c_int]
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.ggml_nelements.restype = ctypes.c_int64
    lib.ggml_nelements.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_buffer_is_host.restype = ctypes.c_bool
    lib.ggml_backend_buffer_is_host.argtypes = [ctypes.c_void_p]
    return lib


# The graph names copied out; `-l` is the layer. result_output has no layer.
WANTED = re.compile(r"^(Qcur|Kcur|Vcur|Qcur_normed|Kcur_normed|kq|kq_soft_max|kqv_out|l_out|attn_norm)-(\d+)$"
                    r"|^result_output$")


class Recorder:
    """The evaluation callback: copies every wanted tensor (by name) when the scheduler has computed it."""

    def __init__(self, layers, want_logits):
        self.lib = ggml_lib()
        self.layers = set(layers)
        self.want_logits = want_logits
        self.got = []  # (name, op name, numpy array [ne3, ne2, ne1, ne0] squeezed to 3 dims, op_params)
        self.callback = L.ggml_backend_sched_eval_callback(self._call)

    def _wanted(self, name):
        m = WANTED.match(name)
        if not m:
            return False
        if m.group(2) is None:
            return self.want_logits
        return int(m.group(2)) in self.layers

    def _call(self, ptr, ask, _user):
        t = GgmlTensor.from_address(ptr)
        name = t.name.decode()
        assert name == self.lib.ggml_get_name(ptr).decode(), "struct ggml_tensor does not match this ggml"
        if ask:
            return self._wanted(name)
        if not self._wanted(name):
            return True
        self.got.append((name, self.lib.ggml_op_name(t.op).decode(), self._read(ptr, t),
                         list(t.op_params[:4])))
        return True

    def _read(self, ptr, t):
        dtype = {GGML_TYPE_F32: np.float32, GGML_TYPE_F16: np.float16}.get(t.type)
        if dtype is None:
            raise SystemExit(f"error: {t.name.decode()} has ggml type {t.type}, not f32 or f16")
        if not self.lib.ggml_backend_buffer_is_host(t.buffer):
            raise SystemExit(f"error: {t.name.decode()} is not in host memory (run on the CPU)")
        ne = [int(x) for x in t.ne]
        nb = [int(x) for x in t.nb]
        assert int(np.prod(ne)) == self.lib.ggml_nelements(ptr)
        span = sum((n - 1) * s for n, s in zip(ne, nb)) + np.dtype(dtype).itemsize
        raw = (ctypes.c_char * span).from_address(t.data)
        a = np.ndarray(shape=ne[::-1], dtype=dtype, buffer=raw, strides=nb[::-1]).astype(np.float32)
        assert a.shape[0] == 1, f"{t.name.decode()}: ne[3] = {a.shape[0]}, expected 1 (one sequence)"
        return a[0]

    def one(self, name, op=None, last=True):
        """The array of the node called `name` (of op `op` when given): the last such node, or the first."""
        found = [g for g in self.got if g[0] == name and (op is None or g[1] == op)]
        if not found:
            return None
        return found[-1] if last else found[0]


def half_split(a, n_rot=None):
    """[..., d] in llama.cpp's interleaved pair order (2i, 2i + 1) -> half-split order (i, i + n_rot/2) over the first
    n_rot dims (the rotated ones; default all d), the unrotated rest left in place."""
    r = a.shape[-1] if n_rot is None else n_rot
    return np.concatenate([a[..., 0:r:2], a[..., 1:r:2], a[..., r:]], axis=-1)


def heads_first(a):
    """ggml [d, H, T] (numpy [T, H, d]) -> [H, T, d]."""
    return np.ascontiguousarray(a.transpose(1, 0, 2))


def parse_ids(spec):
    if spec.endswith(".npy"):
        return [int(i) for i in np.load(spec).reshape(-1)]
    return [int(s) for s in spec.split(",")]


def parse_layers(spec, n_layers):
    if spec == "all":
        return list(range(n_layers))
    layers = sorted({int(s) for s in spec.split(",")})
    bad = [l for l in layers if not 0 <= l < n_layers]
    if bad:
        sys.exit(f"error: layers {bad} do not exist (the model has {n_layers})")
    return layers


def meta_str(model, key):
    buf = ctypes.create_string_buffer(256)
    n = L.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode() if n >= 0 else None


# llama.cpp's log, dropped unless --verbose (kept at module level so that it outlives the call).
_QUIET = L.llama_log_callback(lambda _level, _text, _user: None)


def run(path, ids, layers, threads, want_logits, verbose):
    """Loads the model, decodes the ids in one batch with the recorder, returns (recorder, model facts)."""
    if not verbose:
        L.llama_log_set(_QUIET, None)
    L.llama_backend_init()
    mparams = L.llama_model_default_params()
    mparams.n_gpu_layers = 0
    model = L.llama_model_load_from_file(path.encode(), mparams)
    if not model:
        sys.exit(f"error: llama.cpp could not load {path}")
    n_layers = L.llama_model_n_layer(model)
    layers = parse_layers(layers, n_layers)
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    bad = [i for i in ids if not 0 <= i < n_vocab]
    if bad:
        sys.exit(f"error: token ids {bad} are outside the vocabulary ({n_vocab})")

    rec = Recorder(layers, want_logits)
    t = len(ids)
    n_ctx = (t + 255) // 256 * 256
    cparams = L.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = n_ctx
    cparams.n_ubatch = n_ctx
    cparams.n_seq_max = 1
    cparams.n_threads = threads
    cparams.n_threads_batch = threads
    cparams.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    cparams.type_k = GGML_TYPE_F32
    cparams.type_v = GGML_TYPE_F32
    cparams.offload_kqv = False
    cparams.op_offload = False
    cparams.no_perf = True
    cparams.cb_eval = rec.callback
    cparams.cb_eval_user_data = None
    ctx = L.llama_init_from_model(model, cparams)
    if not ctx:
        sys.exit("error: llama.cpp could not create a context")

    batch = L.llama_batch_init(t, 0, 1)
    batch.n_tokens = t
    for i, tok in enumerate(ids):
        batch.token[i] = tok
        batch.pos[i] = i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1
    rc = L.llama_decode(ctx, batch)
    if rc != 0:
        sys.exit(f"error: llama_decode returned {rc}")
    logits_api = None
    if want_logits:
        ptr = L.llama_get_logits(ctx)
        logits_api = np.ctypeslib.as_array(ptr, shape=(t, n_vocab)).copy()
    facts = {
        "architecture": meta_str(model, "general.architecture"),
        "n_layers": n_layers,
        "n_head": L.llama_model_n_head(model),
        "n_head_kv": L.llama_model_n_head_kv(model),
        "n_embd": L.llama_model_n_embd(model),
        "n_vocab": n_vocab,
        "rope_type": L.llama_model_rope_type(model),
        "n_rot": int(meta_str(model, f"{meta_str(model, 'general.architecture')}.rope.dimension_count") or 0) or None,
        "n_ctx": n_ctx,
        "layers": layers,
        "system_info": L.llama_print_system_info().decode().strip(),
    }
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)
    return rec, facts, logits_api


def assemble(rec, facts, t, extra):
    """The reference-layout arrays from the recorded nodes, with the checks made on them (for meta.json)."""
    files, checks, sources = {}, {}, {}
    interleaved = facts["rope_type"] == 0  # LLAMA_ROPE_TYPE_NORM
    reorder = (lambda a: half_split(a, facts["n_rot"])) if interleaved else (lambda a: a)

    def need(name, op=None, last=True):
        g = rec.one(name, op, last)
        if g is None:
            sys.exit(f"error: the graph has no node {name}{f' of op {op}' if op else ''} "
                     "(another llama.cpp version or architecture: check src/models/*.cpp)")
        return g

    for l in facts["layers"]:
        for x, kind in (("Q", "q"), ("K", "k")):
            post = need(f"{x}cur-{l}", "ROPE")
            normed = rec.one(f"{x}cur_normed-{l}")
            if normed is not None:  # OLMo 2 normalises the whole projection [H*d, T]: reshaped to [d, H, T]
                pre, pre_src = (normed[0], normed[1], normed[2].reshape(post[2].shape)), f"{x}cur_normed-{l}"
            else:
                # The Qcur/Kcur nodes before the ROPE one: the projection and its reshape to [d, H, T].
                before = []
                for g in rec.got:
                    if g is post:
                        break
                    if g[0] == f"{x}cur-{l}" and g[2].shape == post[2].shape:
                        before.append(g)
                if not before:
                    sys.exit(f"error: no {x}cur-{l} node of shape [d, H, T] before its RoPE")
                pre, pre_src = before[-1], f"{x}cur-{l} ({before[-1][1]}, before ROPE)"
            files[f"{kind}_pre_L{l}.npy"] = reorder(heads_first(pre[2]))
            files[f"{kind}_L{l}.npy"] = reorder(heads_first(post[2]))
            sources[f"{kind}_pre_L{l}.npy"] = pre_src
            sources[f"{kind}_L{l}.npy"] = f"{x}cur-{l} (ROPE)"
        files[f"v_L{l}.npy"] = heads_first(need(f"Vcur-{l}")[2])
        sources[f"v_L{l}.npy"] = f"Vcur-{l}"

        kq = need(f"kq-{l}", "MUL_MAT")[2]  # [H, T, n_kv]
        sm = need(f"kq_soft_max-{l}", "SOFT_MAX")
        scale = float(np.frombuffer(np.array(sm[3][0], dtype=np.int32).tobytes(), dtype=np.float32)[0])
        max_bias = float(np.frombuffer(np.array(sm[3][1], dtype=np.int32).tobytes(), dtype=np.float32)[0])
        if max_bias != 0.0:
            sys.exit(f"error: layer {l}: soft_max has max_bias {max_bias} (ALiBi), which the layout cannot express")
        p_full = sm[2]
        n_kv = kq.shape[2]
        scores = (kq[:, :, :t] * np.float32(scale)).astype(np.float32)
        attn = np.ascontiguousarray(p_full[:, :, :t])
        files[f"scores_L{l}.npy"] = np.ascontiguousarray(scores)
        files[f"attn_L{l}.npy"] = attn
        sources[f"scores_L{l}.npy"] = f"kq-{l} x {scale!r} (soft_max scale), columns 0..{t} of {n_kv}"
        sources[f"attn_L{l}.npy"] = f"kq_soft_max-{l}, columns 0..{t} of {n_kv}"
        # Checks: nothing beyond column T, exact zeros above the diagonal, our softmax reproduces ggml's.
        causal = np.triu(np.ones((t, t), dtype=bool), 1)
        s64 = np.where(causal, -np.inf, scores.astype(np.float64))
        s64 -= s64.max(axis=-1, keepdims=True)
        p64 = np.exp(s64)
        p64 /= p64.sum(axis=-1, keepdims=True)
        checks[f"layer {l}"] = {
            "soft_max_scale": scale,
            "soft_max_max_bias": max_bias,
            "n_kv": n_kv,
            "probability_beyond_T": float(np.abs(p_full[:, :, t:]).max()) if n_kv > t else 0.0,
            "masked_probabilities_exactly_zero": bool((attn[:, causal] == 0).all()),
            "max_abs_softmax_of_scores_vs_kq_soft_max": float(np.abs(p64 - attn).max()),
        }

        kqv = need(f"kqv_out-{l}")[2]  # [T, H*d_v] (ggml [H*d_v, T])
        h = facts["n_head"]
        out = kqv.reshape(kqv.shape[-2], h, -1)
        files[f"out_L{l}.npy"] = heads_first(out)
        sources[f"out_L{l}.npy"] = f"kqv_out-{l}"
        files[f"hidden_L{l}.npy"] = np.ascontiguousarray(need(f"l_out-{l}")[2].reshape(t, -1))
        sources[f"hidden_L{l}.npy"] = f"l_out-{l}"
        if extra:
            files[f"x_attn_norm_L{l}.npy"] = np.ascontiguousarray(need(f"attn_norm-{l}")[2].reshape(t, -1))
            sources[f"x_attn_norm_L{l}.npy"] = f"attn_norm-{l} (not of the layout)"
            for x in "QKV":
                proj = need(f"{x}cur-{l}", "MUL_MAT", last=False)[2].reshape(t, -1)
                files[f"x_{x.lower()}_proj_L{l}.npy"] = np.ascontiguousarray(proj)
                sources[f"x_{x.lower()}_proj_L{l}.npy"] = f"{x}cur-{l} (MUL_MAT, GGUF row order; not of the layout)"
    return files, checks, sources


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="a GGUF file")
    ap.add_argument("--ids", required=True, help="comma-separated token ids, or an .npy file of them")
    ap.add_argument("--out", required=True, help="output directory (created; existing files are replaced)")
    ap.add_argument("--layers", default="all", help="'all' or a comma-separated list")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-logits", action="store_true", help="leave logits.npy out")
    ap.add_argument("--extra", action="store_true", help="also write x_attn_norm_L{l}.npy (not of the layout)")
    ap.add_argument("--verbose", action="store_true", help="keep llama.cpp's log")
    args = ap.parse_args()

    ids = parse_ids(args.ids)
    rec, facts, logits_api = run(args.model, ids, args.layers, args.threads, not args.no_logits, args.verbose)
    t = len(ids)
    files, checks, sources = assemble(rec, facts, t, args.extra)
    if not args.no_logits:
        logits = rec.one("result_output")[2].reshape(t, -1)
        assert np.array_equal(logits, logits_api), "result_output differs from llama_get_logits"
        files["logits.npy"] = np.ascontiguousarray(logits)
        sources["logits.npy"] = "result_output (equal to llama_get_logits)"
    files["ids.npy"] = np.asarray(ids, dtype="<i8")

    os.makedirs(args.out, exist_ok=True)
    for fname, a in sorted(files.items()):
        if fname != "ids.npy":
            a = np.ascontiguousarray(a, dtype="<f4")
        np.save(os.path.join(args.out, fname), a)
    meta = {
        "producer": f"llama.cpp through llama-cpp-python {L.__version__} (examples/llamacpp_dump.py)",
        "model_file": os.path.basename(args.model),
        "architecture": facts["architecture"],
        "dtype": "float32",
        "rows": [0, t],
        "layers": facts["layers"],
        "n_tokens": t,
        "coordinate_order": "half-split",
        "reordered_from_interleaved": facts["rope_type"] == 0,
        "rope_type": facts["rope_type"],
        "settings": {
            "flash_attn": False,
            "type_k": "f32",
            "type_v": "f32",
            "n_ctx": facts["n_ctx"],
            "n_batch": facts["n_ctx"],
            "n_ubatch": facts["n_ctx"],
            "n_threads": args.threads,
            "n_gpu_layers": 0,
        },
        "system_info": facts["system_info"],
        "sources": sources,
        "checks": checks,
        "shapes": {f: list(a.shape) for f, a in sorted(files.items())},
    }
    with open(os.path.join(args.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    worst = max(c["max_abs_softmax_of_scores_vs_kq_soft_max"] for c in checks.values()) if checks else 0.0
    print(f"wrote {args.out}: {t} tokens, layers {facts['layers']}, {facts['architecture']}, "
          f"{'reordered to half-split' if facts['rope_type'] == 0 else 'half-split as computed'}; "
          f"softmax of the scores against kq_soft_max: max-abs {worst:.1e}")


if __name__ == "__main__":
    main()
