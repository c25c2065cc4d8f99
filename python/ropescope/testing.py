"""One-line checks of another implementation against ropescope's float64 forward pass, for pytest.

Each ``assert_*_close`` runs ropescope on the same model and ids and raises ``AssertionError`` when some
element of yours is outside ``|yours - ropescope| <= atol + rtol * |ropescope|`` (numpy's ``isclose`` rule;
NaN never passes). The message names the worst element (the largest ``|diff| / (atol + rtol * |ref|)``): its
layer, head, row (query position) and column (key position or coordinate), both values and the tolerances.
The defaults suit a float32 implementation of a small model.
"""

import functools
import os

import numpy as np

from . import Model

__all__ = ["assert_attention_close", "assert_logits_close", "assert_rope_close"]


@functools.lru_cache(maxsize=4)
def _model(path, precision):
    """The loaded model, kept across checks of one process."""
    return Model(path, precision)


def _as_model(model, precision):
    """``model`` as a :class:`ropescope.Model`: a path is loaded (once) in ``precision``."""
    if isinstance(model, Model):
        return model
    return _model(os.fspath(model), precision)


def _check(name, yours, ref, atol, rtol, labels, offsets):
    """Raises AssertionError naming the worst element of ``yours`` against ``ref``.

    ``labels`` names each axis of the arrays, ``offsets`` is added to each index (the first query row)."""
    yours = np.asarray(yours)
    if yours.shape != ref.shape:
        raise AssertionError(f"{name}: shape {yours.shape}, ropescope's is {ref.shape} ({' x '.join(labels)})")
    diff = np.abs(yours.astype(np.float64) - ref.astype(np.float64))
    bound = atol + rtol * np.abs(ref.astype(np.float64))
    bad = ~(diff <= bound)  # NaN compares False: it never passes
    if not bad.any():
        return
    ratio = np.where(np.isnan(diff), np.inf, diff / np.where(bound > 0, bound, np.finfo(np.float64).tiny))
    worst = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    where = ", ".join(f"{label} {int(i) + off}" for label, i, off in zip(labels, worst, offsets))
    raise AssertionError(
        f"{name} differs from ropescope's {ref.dtype} pass at {where}: yours {float(yours[worst])!r}, "
        f"ropescope's {float(ref[worst])!r}, |diff| {diff[worst]:.3e} > atol {atol:g} + rtol {rtol:g} x |ref| "
        f"({int(bad.sum())} of {bad.size} elements over tolerance)"
    )


def assert_attention_close(model, ids, attn, layer, rows=None, atol=1e-5, rtol=1e-4, precision="f64"):
    """Checks attention probabilities ``attn`` ``[heads, rows, T]`` of ``layer`` for token ``ids``.

    ``model``: a GGUF path or a :class:`ropescope.Model`; ``rows``: the query rows ``attn`` holds (a slice,
    range or ``(start, stop)``; default all ``T``). Masked entries must be 0 (within ``atol``).
    """
    m = _as_model(model, precision)
    out = m.forward(ids, layers=[layer], rows=rows, capture=("attn",))
    _check(f"attention of layer {layer}", attn, out["attn"][layer], atol, rtol,
           ("head", "row", "column"), (0, out["rows"][0], 0))


def assert_logits_close(model, ids, logits, rows=None, atol=1e-3, rtol=1e-4, precision="f64"):
    """Checks output logits ``logits`` ``[rows, vocab]`` for token ``ids`` (``rows`` as in
    :func:`assert_attention_close`); the column is the token id."""
    m = _as_model(model, precision)
    out = m.forward(ids, rows=rows, capture=(), logits=True)
    _check("logits", logits, out["logits"], atol, rtol, ("row", "token"), (out["rows"][0], 0))


def assert_rope_close(model, ids, layer, q=None, k=None, atol=1e-4, rtol=1e-4, precision="f64"):
    """Checks post-RoPE queries ``q`` ``[heads, T, d]`` and/or keys ``k`` ``[kv_heads, T, d]`` of ``layer``, in
    half-split coordinate order (HF's: dims ``l`` and ``l + d/2`` rotate together); the row is the position
    and the column the coordinate."""
    if q is None and k is None:
        raise ValueError("assert_rope_close: give q, k or both")
    m = _as_model(model, precision)
    kinds = [name for name, value in (("q", q), ("k", k)) if value is not None]
    out = m.forward(ids, layers=[layer], capture=kinds)
    for name, value, head in (("q", q, "head"), ("k", k, "kv head")):
        if value is not None:
            _check(f"post-RoPE {name} of layer {layer}", value, out[name][layer], atol, rtol,
                   (head, "row", "column"), (0, 0, 0))
