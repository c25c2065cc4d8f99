"""ropescope from Python: exact, inspectable RoPE attention on GGUF models.

The float64 forward pass is the golden reference; the float32 one is the fast path. Arrays come back as numpy
arrays that own the engine's buffers (no copy). Shapes, for ``T`` tokens, ``R`` query rows and a layer's
``H`` query heads, ``G`` key/value heads, head dimension ``d`` and value dimension ``d_v``:

==========  =====================  ================================================================
kind        shape                  what
==========  =====================  ================================================================
``attn``    ``[H, R, T]``          attention probabilities (exactly 0 for keys a row cannot see)
``scores``  ``[H, R, T]``          attention logits: scaled, soft-capped, *not* masked
``q_pre``   ``[H, T, d]``          queries before RoPE (after QK-norm where the model has one)
``q``       ``[H, T, d]``          queries after RoPE
``k_pre``   ``[G, T, d]``          keys before RoPE
``k``       ``[G, T, d]``          keys after RoPE
``v``       ``[G, T, d_v]``        values
``out``     ``[H, T, d_v]``        head outputs ``sum_j p_ij v_j``
``hidden``  ``[T, n_embd]``        the residual stream after the layer
``logits``  ``[R, vocab]``         output logits of the rows
==========  =====================  ================================================================

Query and key vectors are in *half-split* coordinate order (dims ``l`` and ``l + d_rot/2`` form RoPE chunk
``l``, fastest first), the order HF transformers uses, whatever the pairing of the GGUF file; this is the layout
of ``ropescope reference`` (``fixtures/reference/README.md`` in the repository).

Errors are :class:`RopescopeError` (a ``ValueError``) with the engine's message (a parameter is named by its
keyword, ``delta_max``, where the command line names its flag) and a ``kind``.
The GIL is released while the engine computes. Ctrl-C stops a pass within one layer (every pass checks before
each layer) and raises ``KeyboardInterrupt``; a directory being written is left as it was.

:mod:`ropescope.conformance` judges another engine's RoPE and attention stages against the golden vectors of
``ropescope conformance vectors`` (its pytest plugin: ``--ropescope-vectors DIR``); :mod:`ropescope.testing`
compares another engine's arrays with this engine's float64 pass.
"""

import json
import os
import sys

from ._native import Model as _NativeModel
from ._native import RopescopeError
from ._native import compare as _compare
from ._native import reference as _reference
from ._native import merge as _merge
from ._native import scan as _scan

__all__ = ["KINDS", "Model", "RopescopeError", "compare", "conformance", "merge", "reference", "scan"]

#: The per-layer quantities ``Model.forward`` can capture (``logits`` is asked for apart).
KINDS = ("attn", "scores", "q_pre", "q", "k_pre", "k", "v", "out", "hidden")


def _argument_error(message):
    """A RopescopeError of kind ``argument``, as the engine raises for a bad request."""
    e = RopescopeError(message)
    e.kind = "argument"
    return e


def _ids(ids):
    """Token ids as a list of non-negative ints, refusing what is not one."""
    out = []
    for v in ids:
        try:
            i = int(v)
        except (TypeError, ValueError):
            raise _argument_error(f"'{v}' is not a token id") from None
        if i != v or i < 0 or i >= 2**32:
            raise _argument_error(f"token id {v} is not a valid id")
        out.append(i)
    return out


def _rows(rows, n):
    """``rows`` (None, a slice, a range or a pair) as ``(start, stop)`` over ``n`` positions."""
    if rows is None:
        return (0, n)
    if isinstance(rows, (slice, range)):
        s = rows if isinstance(rows, slice) else slice(rows.start, rows.stop, rows.step)
        start, stop, step = s.indices(n)
        if step != 1:
            raise _argument_error(f"rows {rows!r}: only a step of 1 is supported")
        return (start, stop)
    try:
        start, stop = rows
        return (int(start), int(stop))
    except (TypeError, ValueError):
        raise _argument_error(f"rows {rows!r}: expected a slice, a range or (start, stop)") from None


class Model:
    """A GGUF model loaded for exact forward passes.

    ``Model(path, precision="f64", arithmetic="exact")`` reads and checks the file (the weights stay quantized
    in its memory map); ``precision`` is ``"f64"`` (the golden reference) or ``"f32"``; ``arithmetic="ggml"``
    computes as llama.cpp's CPU backend does (float32 only: 8-bit activations before each quantized product,
    integer block dot products), for comparisons with llama.cpp.
    """

    def __init__(self, path, precision="f64", arithmetic="exact"):
        self.path = os.fspath(path)
        self.precision = precision
        self.arithmetic = arithmetic
        self._native = _NativeModel(self.path, precision, arithmetic)
        self._config = None

    @property
    def config(self):
        """The resolved configuration as a dict: ``architecture``, ``n_layers``, ``n_embd``, ``n_heads``,
        ``n_kv_heads``, ``head_dim``, ``value_dim``, ``vocab_size``, ``context_length``, ``attn_scale``, ... and
        ``layers``, one dict per layer with its ``rope`` (``head_dim``, ``rot_dim``, ``base``, ``pairing``,
        ``scaling``) and ``window`` (``None`` for global attention)."""
        if self._config is None:
            self._config = json.loads(self._native.config_json())
        return self._config

    def tokenize(self, text, add_special=True):
        """The token ids of ``text`` under the model's own tokenizer; BOS/EOS as the file's metadata asks
        when ``add_special``."""
        return self._native.tokenize(text, add_special)

    def forward(self, ids, layers=None, rows=None, capture=("attn",), logits=False):
        """Runs the model on ``ids`` and returns what was asked for, as a dict.

        ``layers``: the layers to capture (default: all); ``rows``: the query rows of attention and logits, a
        slice, range or ``(start, stop)`` (default: every position); ``capture``: any of :data:`KINDS`;
        ``logits``: also return the rows' output logits.

        The result maps each captured kind to a dict ``{layer: ndarray}`` (shapes in the module's
        documentation), ``"logits"`` to an ndarray ``[rows, vocab]`` when asked, and ``"rows"`` to the
        ``(start, stop)`` used. Arrays are float64 or float32 as the model's precision.
        """
        ids = _ids(ids)
        capture = (capture,) if isinstance(capture, str) else tuple(capture)
        unknown = [k for k in capture if k not in KINDS]
        if unknown:
            raise _argument_error(f"unknown capture kind '{unknown[0]}' (one of: {', '.join(KINDS)})")
        if layers is None:
            layers = range(self.config["n_layers"]) if capture else []
        elif isinstance(layers, int):
            layers = [layers]
        layers = [int(layer) for layer in layers]
        if any(layer < 0 for layer in layers):
            raise _argument_error(f"layer {min(layers)} does not exist (the model has {self.config['n_layers']})")
        span = _rows(rows, len(ids))
        kinds = list(capture) + (["logits"] if logits else [])
        arrays = self._native.forward(ids, layers, span, kinds)
        out = {kind: {} for kind in capture}
        for name, array in arrays:
            if name == "logits":
                out["logits"] = array
            else:
                kind, layer = name.rsplit("_L", 1)
                out[kind][int(layer)] = array
        out["rows"] = span
        return out


def reference(model, ids, out, layers=None, rows=None, precision="f64", force=False, arithmetic="exact"):
    """Writes the golden-reference directory of one forward pass, exactly as ``ropescope reference`` does
    (``.npy`` per quantity and layer, ``ids.npy``, ``logits.npy`` and ``meta.json``).

    ``model``: the GGUF path; ``layers``: default all; ``rows``: as in :meth:`Model.forward`; ``force``:
    replace an existing non-empty ``out``; ``arithmetic``: as in :class:`Model`.
    """
    ids = _ids(ids)
    span = None if rows is None else _rows(rows, len(ids))
    layers = None if layers is None else [int(layer) for layer in layers]
    _reference(os.fspath(model), ids, os.fspath(out), layers, span, precision, arithmetic, force)


def compare(a, b, tol=()):
    """Compares reference directory ``a`` (under test) with ``b`` (the reference), as ``ropescope compare
    --json``: returns a dict with ``pass``, ``verdict``, ``comparisons`` (per common array: ``file``,
    ``shape``, ``nmse``, ``max_abs``, ``max_ref``, ``tolerance``, ``pass``) and ``unpaired``.

    ``tol``: overrides as on the command line, e.g. ``["attn=max_abs:1e-4", "logits=nmse:1e-8"]``.
    """
    tol = [tol] if isinstance(tol, str) else list(tol)
    return json.loads(_compare(os.fspath(a), os.fspath(b), tol))


def _report(text, warnings):
    """Prints a scan's ranked summary on standard output and its warnings on standard error."""
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(text, end="")


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def scan(model, out, analyses="all", length=None, count=None, prompts=(), precision="f32", seed=None,
         delta_max=None, kappa=None, shard=None, force=False, arithmetic="exact", packed_weights=None):
    """Runs a scan (``ropescope scan``) in this process and returns the scan's ``summary.json`` as Python objects (a
    dict: ``heads``, one dict per head with its label and scores, ``slash_dominant``, ``intrinsic``, ``cone``,
    ``warnings``; the repository's ``fixtures/scan/FORMAT.md`` documents every field). The whole directory
    (``.npy`` arrays, ``report.html``) is written to ``out`` as the command line writes it, and its ranked text
    summary is printed on the process's standard output.

    Options are the command line's: ``analyses`` (comma-separated or ``"all"``), ``length`` and ``count`` of the
    natural prompts, ``prompts`` (text or ``.npy`` files instead of the built-in texts), ``precision``,
    ``arithmetic`` (as in :class:`Model`), ``seed``, ``delta_max``, ``kappa``. With ``shard=(k, n)`` only shard ``k`` of ``n`` is done and its
    ``shard.json`` is returned instead; :func:`merge` folds the shards. ``packed_weights``: MiB of weight matrices
    kept packed between the scan's passes (``--packed-weights``; default 1024); no result depends on it.
    """
    prompts = [prompts] if isinstance(prompts, (str, os.PathLike)) else list(prompts)
    if shard is not None:
        k, n = shard
        shard = (int(k), int(n))
    text, warnings = _scan(os.fspath(model), os.fspath(out), analyses, length, count,
                           [os.fspath(p) for p in prompts], precision, arithmetic, seed, delta_max, kappa, shard,
                           force, packed_weights)
    _report(text, warnings)
    name = "shard.json" if shard is not None else "summary.json"
    return _read_json(os.path.join(os.fspath(out), name))


def merge(shards, out, model=None, force=False):
    """Merges the shard directories of a scan (``scan(..., shard=(k, n))``) into ``out``, the directory one
    unsharded scan writes, as ``ropescope merge`` does; returns its ``summary.json`` as Python objects.
    ``model``: the model file when it is not where the shards recorded it."""
    text, warnings = _merge([os.fspath(s) for s in shards], os.fspath(out),
                            None if model is None else os.fspath(model), force)
    _report(text, warnings)
    return _read_json(os.path.join(os.fspath(out), "summary.json"))


from . import conformance  # noqa: E402  (uses the helpers above)
