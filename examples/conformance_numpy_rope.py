"""RoPE in plain numpy, held to ropescope's conformance budget on golden vectors.

A float32 rotary embedding as an engine would write it: half-split pairs (dims ``l`` and ``l + rot_dim/2``
rotate together, the reference layout's order), each layer's frequencies from the vectors' RoPE tables
(``rope/inv_freq.npy``: the base and any linear, Llama 3 or YaRN scaling already applied) and the magnitude
implemented from the layer's scaling in ``rope/meta.json`` (YaRN: its attention factor, else
``0.1 ln(factor) + 1``; LongRoPE: its attention factor; 1 otherwise). It rotates each family's golden
``q_pre_L{l}`` and ``k_pre_L{l}`` and checks its ``q_L{l}`` and ``k_L{l}`` with ``ropescope.conformance``.
``--bug yarn-magnitude`` leaves the magnitude out, as engines that take YaRN's frequencies but not its factor
do: the YaRN families then fail, diagnosed as a ``magnitude`` mistake.

Make the vectors (from a clone of the repository, whose ``fixtures/converted`` holds the models), then run::

    ropescope conformance vectors --out vectors
    pip install ./python
    python examples/conformance_numpy_rope.py vectors [--family llama-yarn] [--bug yarn-magnitude]

It prints one line per family (``PASS`` or ``FAIL`` with the assertion's message) and exits with 1 when a
family fails.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

from ropescope import conformance


def magnitude(scaling):
    """The factor on cosine and sine for a layer's scaling (``rope/meta.json``'s ``scaling``)."""
    kind = scaling.get("type")
    if kind == "yarn":
        if scaling.get("attention_factor") is not None:
            return scaling["attention_factor"]
        return 1.0 if scaling["factor"] <= 1.0 else 0.1 * math.log(scaling["factor"]) + 1.0
    if kind == "longrope":
        return scaling["attention_factor"]
    return 1.0


def rope(x, inv_freq, rot_dim, m):
    """``x`` ``[heads, T, d]`` rotated to positions ``0..T`` in float32: chunk ``l`` turns dims ``l`` and
    ``l + rot_dim/2`` by ``p · inv_freq[l]`` and scales them by ``m``; chunks of frequency 0 pass through."""
    x = x.astype(np.float32)
    out = x.copy()
    half = rot_dim // 2
    t = x.shape[1]
    for l in range(half):
        g = inv_freq[l]
        if not g > 0.0:  # 0 (a chunk that does not rotate) or NaN (beyond this layer's rotated chunks)
            continue
        angle = np.arange(t, dtype=np.float64) * g
        cos = (m * np.cos(angle)).astype(np.float32)[None, :]
        sin = (m * np.sin(angle)).astype(np.float32)[None, :]
        a, b = x[:, :, l], x[:, :, l + half]
        out[:, :, l] = a * cos - b * sin
        out[:, :, l + half] = b * cos + a * sin
    return out


def engine(bug):
    """The engine: ``family -> {name: array}``, every layer's q and k rotated from the golden pre-RoPE ones."""

    def run(family):
        with open(os.path.join(family.directory, "rope", "meta.json"), encoding="utf-8") as f:
            layers = json.load(f)["layers"]
        inv_freq = family.array("rope/inv_freq")
        arrays = {}
        for layer in layers:
            l = layer["layer"]
            m = 1.0 if bug == "yarn-magnitude" else magnitude(layer["scaling"])
            for kind in ("q", "k"):
                pre = family.array(f"{kind}_pre_L{l}")
                arrays[f"{kind}_pre_L{l}"] = pre
                arrays[f"{kind}_L{l}"] = rope(pre, inv_freq[l], layer["rot_dim"], m)
        return arrays

    return run


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("vectors", help="a directory written by `ropescope conformance vectors --out DIR`")
    p.add_argument("--family", action="append", help="only this family (repeatable; default: all)")
    p.add_argument("--bug", choices=["yarn-magnitude"], help="leave YaRN's magnitude out")
    args = p.parse_args(argv)

    reports = conformance.run(args.vectors, engine(args.bug), families=args.family, precision="f32")
    failed = 0
    for name, report in reports.items():
        try:
            conformance.assert_conforms(report)
            print(f"PASS {name}: {report.verdict}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {name}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
