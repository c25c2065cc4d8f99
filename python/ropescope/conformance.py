"""Conformance of another engine to ropescope's float64 pass, stage by stage, for that engine's CI.

``ropescope conformance vectors --out DIR`` writes golden vectors: for each model family, the model, a prompt
and every stage of the float64 pass. Your engine runs the family's model on the family's ids (or takes the
golden pre-RoPE ``q_pre``/``k_pre`` and rotates them) and hands back its arrays in the reference layout;
:func:`check` judges each stage from your engine's *own* inputs, as ``ropescope conformance check`` does:

- the RoPE stage of layer ``l``: your ``q_L{l}`` (``k_L{l}``) against ropescope's rotation of your
  ``q_pre_L{l}`` (``k_pre_L{l}``);
- the attention stage: your ``attn_L{l}`` against the float64 softmax of your ``q_L{l}`` and ``k_L{l}``.

Each stage is held to the error budget of your working precision (``f32``, ``bf16``, ``f16``); a stage beyond
it is explained, where one kind of mistake does, as a magnitude, a frequency, a position offset, a pairing, a
layout, a mask or a scale. :func:`assert_conforms` turns a report into an ``AssertionError`` naming the first
stage beyond budget, its worst element and the mistake.

Arrays are in the reference layout: ``q_pre``/``q`` ``[heads, T, d]``, ``k_pre``/``k`` ``[kv_heads, T, d]``,
half-split coordinate order with each head's rotated part first, ``attn`` ``[heads, rows, T]`` (every row, or
the family's last rows ``family.rows``). The pytest plugin (``ropescope.pytest_plugin``, option
``--ropescope-vectors DIR``) parametrizes tests over the families.
"""

import collections
import collections.abc
import json
import os
import re
import tempfile

import numpy as np

from . import RopescopeError, _argument_error, _ids
from ._native import conformance_check as _conformance_check

__all__ = ["Family", "PRECISIONS", "Report", "Stage", "Vectors", "assert_conforms", "check", "describe_mistake",
           "run"]

#: The working precisions a budget exists for.
PRECISIONS = ("f32", "bf16", "f16")

#: The format and version of ``manifest.json`` this module reads.
FORMAT, FORMAT_VERSION = "ropescope-conformance-vectors", 1

#: The per-layer kinds of the reference layout an array may be named after (``{kind}_L{layer}``).
LAYER_KINDS = ("q_pre", "q", "k_pre", "k", "v", "kv_latent", "scores", "attn", "sink", "out", "hidden")

#: Kinds whose arrays hold query rows: ``{kind: axis of the rows}``.
_ROW_AXES = {"attn": 1, "scores": 1, "logits": 0}

_NAME = re.compile(r"^([a-z_]+)_L(0|[1-9][0-9]*)$")


def _error(kind, message):
    """A RopescopeError of ``kind``, as the engine raises."""
    e = RopescopeError(message)
    e.kind = kind
    return e


def _precision(precision):
    if precision not in PRECISIONS:
        raise _argument_error(f"precision '{precision}' is not one of {', '.join(PRECISIONS)}")
    return precision


class Family:
    """One model and prompt of a vectors directory (an entry of ``manifest.json``'s ``families``).

    Attributes: ``name`` (its directory), ``variant``, ``case``, ``architecture``, ``model_path`` (the absolute
    path of its GGUF file), ``model_sha256``, ``ids`` (the prompt, a list of ints), ``n_layers``, ``rows``
    (``(A, B)``: the query rows of its ``attn``, ``scores`` and ``logits`` files), ``features`` (the RoPE and
    attention features it exercises, e.g. ``"scaling:yarn"``), ``stages`` (one dict per golden file: ``file``,
    ``kind``, ``layer``, ``shape``, ``hf``, ``llama_cpp``) and ``directory``.
    """

    def __init__(self, entry, root):
        self.name = entry["name"]
        self.variant = entry["variant"]
        self.case = entry["case"]
        self.architecture = entry["architecture"]
        self.model_sha256 = entry["model_sha256"]
        self.ids = [int(i) for i in entry["ids"]]
        self.n_layers = int(entry["n_layers"])
        self.rows = tuple(int(r) for r in entry["rows"])
        self.features = list(entry["features"])
        self.stages = [dict(s) for s in entry["stages"]]
        self.directory = os.path.join(root, self.name)
        self.model_path = os.path.join(root, entry["model_file"])

    def __repr__(self):
        return f"Family({self.name!r}, {self.architecture}, {len(self.ids)} tokens, {self.n_layers} layers)"

    @property
    def judged_stages(self):
        """The ``(layer, stage)`` pairs whose golden files make a stage to judge, in computation order:
        ``"q"`` (``q_pre`` and ``q``), ``"k"`` (``k_pre`` and ``k``), ``"attn"`` (``q``, ``k`` and ``attn``)."""
        have = {(s["kind"], s["layer"]) for s in self.stages}
        out = []
        for layer in sorted({s["layer"] for s in self.stages if s["layer"] is not None}):
            for stage, needs in (("q", ("q_pre", "q")), ("k", ("k_pre", "k")), ("attn", ("q", "k", "attn"))):
                if all((kind, layer) in have for kind in needs):
                    out.append((layer, stage))
        return out

    def array(self, file):
        """The golden float64 array ``file`` of this family: a stage file of ``stages`` (``"q_pre_L0"`` or
        ``"q_pre_L0.npy"``), ``"ids"``, or a RoPE table (``"rope/inv_freq"``, ``"rope/cos"``, ...)."""
        name = os.fspath(file)
        if not name.endswith(".npy"):
            name += ".npy"
        known = {s["file"] for s in self.stages} | {"ids.npy"}
        parts = name.split("/")
        if name not in known and not (len(parts) == 2 and parts[0] == "rope" and parts[1] not in ("", "..")):
            raise _argument_error(
                f"family '{self.name}' has no array '{file}': one of its stage files (e.g. "
                f"{sorted(known)[0]}), ids or rope/TABLE")
        path = os.path.join(self.directory, *parts)
        if not os.path.isfile(path):
            raise _error("io", f"{path}: no such file")
        return np.load(path, allow_pickle=False)


class Vectors:
    """A directory of golden vectors written by ``ropescope conformance vectors --out DIR``.

    ``Vectors(path)`` reads and checks ``manifest.json`` (format ``ropescope-conformance-vectors``, version 1;
    each family's model file inside the directory and present). ``families`` is the list of :class:`Family`;
    ``vectors["llama-yarn"]`` is one by name; iterating goes over the families.
    """

    def __init__(self, path):
        self.path = os.path.abspath(os.fspath(path))
        manifest = os.path.join(self.path, "manifest.json")
        if not os.path.isdir(self.path):
            raise _argument_error(f"{self.path} is not a directory")
        if not os.path.isfile(manifest):
            raise _argument_error(
                f"{self.path} has no manifest.json: not a (complete) directory of `ropescope conformance vectors`")
        try:
            with open(manifest, encoding="utf-8") as f:
                m = json.load(f)
        except (OSError, ValueError) as e:
            raise _error("bad_file", f"{manifest}: not a readable JSON file ({e})") from None
        if not isinstance(m, dict) or (m.get("format"), m.get("format_version")) != (FORMAT, FORMAT_VERSION):
            got = (m.get("format"), m.get("format_version")) if isinstance(m, dict) else (None, None)
            raise _error("bad_file", f"{manifest}: format '{got[0]}' version {got[1]}, expected '{FORMAT}' "
                                     f"version {FORMAT_VERSION}")
        self.producer = m.get("producer")
        self.families = []
        for entry in m.get("families", []):
            try:
                name = entry["name"]
                bad_name = (not isinstance(name, str) or not name or "/" in name or "\\" in name
                            or name.startswith("."))
                if bad_name or entry["model_file"] != f"{name}/model.gguf":
                    raise _error("bad_file", f"{manifest}: family '{name}': a name must be one directory "
                                             f"holding model.gguf")
                family = Family(entry, self.path)
            except (KeyError, TypeError, ValueError) as e:
                if isinstance(e, RopescopeError):
                    raise
                raise _error("bad_file", f"{manifest}: a family without a valid {e}") from None
            if not os.path.isfile(family.model_path):
                raise _error("bad_file", f"{manifest}: family '{family.name}': {family.model_path} is missing")
            self.families.append(family)

    def __repr__(self):
        return f"Vectors({self.path!r}, {len(self.families)} families)"

    def __iter__(self):
        return iter(self.families)

    def __len__(self):
        return len(self.families)

    def __getitem__(self, name):
        for f in self.families:
            if f.name == name:
                return f
        raise KeyError(f"no family '{name}' in {self.path} (it has: {', '.join(f.name for f in self.families)})")

    @property
    def names(self):
        """The families' names, in the manifest's order."""
        return [f.name for f in self.families]


#: One judged stage: ``layer``, ``stage`` (``"q"``, ``"k"`` or ``"attn"``), ``ratio`` (largest deviation over
#: its budget; within budget when ≤ 1, ``inf`` for a non-finite value) and ``mistake`` (``None``, or a dict with
#: ``kind`` and its parameters).
Stage = collections.namedtuple("Stage", ["layer", "stage", "ratio", "mistake"])

_STAGE_KEYS = (("q", "q"), ("k", "k"), ("attn", "attention"))


class Report(dict):
    """The report of :func:`check`: the JSON of ``ropescope conformance check --json`` as a dict
    (``precision``, ``n_tokens``, ``rows``, ``layers`` with each layer's ``q``, ``k`` and ``attention``
    checks, ``stages``, ``within``, ``verdict``), with ``family`` (the family's name) and conveniences."""

    def __init__(self, data, family=None):
        super().__init__(data)
        self.family = family

    @property
    def within(self):
        """Whether every stage judged is within its budget."""
        return bool(self["within"])

    @property
    def verdict(self):
        """One line: ``within budget: ...`` or the first stage beyond it and its mistake."""
        return self["verdict"]

    @property
    def stages(self):
        """Every judged stage as a :data:`Stage` ``(layer, stage, ratio, mistake)``, in computation order."""
        out = []
        for layer in self["layers"]:
            for stage, key in _STAGE_KEYS:
                c = layer.get(key)
                if c is not None:
                    ratio = float("inf") if c["ratio"] is None else float(c["ratio"])
                    out.append(Stage(layer["layer"], stage, ratio, c.get("mistake")))
        return out

    def __repr__(self):
        return f"Report({self.family!r}: {self.verdict})"


def _array_name(name):
    """``name`` without ``.npy``, checked against the reference layout; returns ``(name, kind)``."""
    if not isinstance(name, str):
        raise _argument_error(f"array name {name!r} is not a string")
    stem = name[:-4] if name.endswith(".npy") else name
    if stem == "logits":
        return stem, "logits"
    m = _NAME.match(stem)
    if m is None or m.group(1) not in LAYER_KINDS:
        raise _argument_error(
            f"'{name}' is not an array of the reference layout: KIND_L{{layer}} (KIND one of "
            f"{', '.join(LAYER_KINDS)}) or logits, e.g. 'q_pre_L0', 'q_L0', 'attn_L0'")
    return stem, m.group(1)


def _float_array(name, value):
    """``value`` as a little-endian, C-ordered float32 (kept) or float64 (anything else floating) array."""
    a = np.asarray(value)
    if a.dtype.kind in "biucOSUMm":
        raise _argument_error(f"{name}: dtype {a.dtype}, expected floating point")
    dtype = "<f4" if a.dtype == np.float32 else "<f8"
    try:
        return np.ascontiguousarray(a, dtype=dtype)
    except (TypeError, ValueError):
        raise _argument_error(f"{name}: dtype {a.dtype} cannot be read as floating point") from None


def _rows_of(family, written):
    """The ``meta.json`` ``rows`` of a dump holding ``written`` (``{name: (kind, array)}``): ``None`` when
    every row-holding array has all the prompt's rows, the family's ``rows`` when they have those; refuses
    anything else."""
    t = len(family.ids)
    a, b = family.rows
    cut = set()
    for name, (kind, array) in sorted(written.items()):
        axis = _ROW_AXES.get(kind)
        if axis is None or array.ndim <= axis:
            continue  # a wrong rank is the engine's to report, with the expected shape
        r = array.shape[axis]
        if r == t:
            cut.add(False)
        elif r == b - a:
            cut.add(True)
        else:
            raise _argument_error(
                f"{name} holds {r} query rows (axis {axis} of shape {array.shape}): give all {t} rows of "
                f"family '{family.name}' or its rows {a}..{b} ({b - a} rows)")
    if cut == {True, False}:
        raise _argument_error(
            f"family '{family.name}': some of attn/scores/logits hold all {t} rows and some rows {a}..{b} "
            f"only; give the same rows in all")
    return [a, b] if cut == {True} else None


def _has_stage(names):
    """Whether ``names`` make some stage to judge."""
    layers = {n.rsplit("_L", 1)[1] for n in names if "_L" in n}
    return any({f"q_pre_L{l}", f"q_L{l}"} <= names or {f"k_pre_L{l}", f"k_L{l}"} <= names
               or {f"q_L{l}", f"k_L{l}", f"attn_L{l}"} <= names for l in layers)


def check(family, arrays, precision="f32"):
    """Judges your engine's arrays of ``family`` stage by stage and returns a :class:`Report`.

    ``family``: a :class:`Family` of a :class:`Vectors`; your engine ran its model (``family.model_path``) on
    its ids (``family.ids``). ``arrays``: ``{name: ndarray}`` named as the reference layout's files, with or
    without ``.npy`` (``"q_pre_L0"``, ``"q_L0"``, ``"k_pre_L0"``, ``"k_L0"``, ``"attn_L0"``; other kinds of the
    layout are accepted and not judged), float32 or float64 (other floating dtypes are widened to float64).
    A stage is judged when its inputs and output are all given: ``q_pre`` and ``q``, ``k_pre`` and ``k``, or
    ``q``, ``k`` and ``attn``. ``attn`` holds every query row or the family's last rows ``family.rows``.
    ``precision``: your engine's working precision, ``"f32"``, ``"bf16"`` or ``"f16"``; it sets the budget.

    The arrays are written into a temporary dump directory with the family's ``ids.npy`` (and ``meta.json``
    with ``rows`` for row-cut attention) and judged as ``ropescope conformance check`` does. A shape that does
    not fit the model and prompt is a :class:`RopescopeError` naming the array and the shape expected.
    """
    if not isinstance(family, Family):
        raise _argument_error(f"family: expected a ropescope.conformance.Family, got {type(family).__name__}")
    _precision(precision)
    if not isinstance(arrays, collections.abc.Mapping):
        raise _argument_error(f"arrays: expected a dict of name to ndarray, got {type(arrays).__name__}")
    written = {}
    for name, value in arrays.items():
        stem, kind = _array_name(name)
        if stem in written:
            raise _argument_error(f"array '{stem}' is given twice (with and without .npy)")
        written[stem] = (kind, _float_array(stem, value))
    if not _has_stage(set(written)):
        given = ", ".join(sorted(written)) or "nothing"
        raise _argument_error(
            f"family '{family.name}': no stage to judge in {given}: a stage needs q_pre_L{{l}} with q_L{{l}}, "
            f"k_pre_L{{l}} with k_L{{l}}, or q_L{{l}} and k_L{{l}} with attn_L{{l}}")
    rows = _rows_of(family, written)
    ids = _ids(family.ids)
    with tempfile.TemporaryDirectory(prefix="ropescope-conformance-") as dump:
        np.save(os.path.join(dump, "ids.npy"), np.asarray(ids, dtype="<i8"))
        for stem, (_, array) in written.items():
            np.save(os.path.join(dump, stem + ".npy"), array)
        if rows is not None:
            with open(os.path.join(dump, "meta.json"), "w", encoding="utf-8") as f:
                json.dump({"rows": rows}, f)
        text = _conformance_check(family.model_path, ids, dump, precision)
    return Report(json.loads(text), family=family.name)


def run(vectors, engine, families=None, precision="f32"):
    """Runs ``engine(family) -> {name: ndarray}`` on every family of ``vectors`` (a :class:`Vectors` or its
    directory), or on those named in ``families``, judges each with :func:`check` in ``precision`` and returns
    ``{family name: Report}`` in the manifest's order."""
    if not isinstance(vectors, Vectors):
        vectors = Vectors(vectors)
    if not callable(engine):
        raise _argument_error(f"engine: expected a callable engine(family) -> dict, got {type(engine).__name__}")
    _precision(precision)
    if families is None:
        chosen = vectors.families
    else:
        names = [families] if isinstance(families, str) else list(families)
        unknown = [n for n in names if n not in vectors.names]
        if unknown:
            raise _argument_error(
                f"no family '{unknown[0]}' in {vectors.path} (it has: {', '.join(vectors.names)})")
        chosen = [f for f in vectors.families if f.name in names]
    return {f.name: check(f, engine(f), precision) for f in chosen}


def _chunks(chunks):
    """``3 ×1.4255, 6–31 ×8.0000``: each chunk's rate over the expected one, runs of equal ratios joined."""
    runs = []
    for c in chunks:
        r = c["engine"] / c["expected"]
        ratio = f"{r:.6f}" if abs(r - 1.0) < 1e-3 else f"{r:.4f}"
        if runs and runs[-1][1] + 1 == c["chunk"] and runs[-1][2] == ratio:
            runs[-1][1] = c["chunk"]
        else:
            runs.append([c["chunk"], c["chunk"], ratio])
    return ", ".join(f"{a} ×{r}" if a == b else f"{a}–{b} ×{r}" for a, b, r in runs)


def describe_mistake(mistake):
    """A diagnosed mistake (a report's ``mistake``: a dict with ``kind`` and its parameters, or ``None``) in
    words."""
    if mistake is None:
        return "no single kind of mistake explains it"
    kind = mistake.get("kind")
    if kind == "magnitude":
        return (f"magnitude: every rotated pair scaled by {mistake['ratio']:.6f} (a cos/sin factor such as "
                f"YaRN's or LongRoPE's attention factor applied wrongly, dropped or applied twice)")
    if kind == "position_offset":
        off = mistake["offset"]
        return f"position offset: position p rotated as p {'-' if off < 0 else '+'} {abs(off)} (cancels in q·k)"
    if kind == "pairing":
        return f"pairing: pairs rotated {mistake['engine']} where the model's are {mistake['expected']}"
    if kind == "layout":
        return f"layout: the right rotation stored permuted ({mistake['permutation']})"
    if kind == "frequency":
        chunks = mistake["chunks"]
        if mistake.get("engine_base") is not None and len(chunks) > 3:
            text = (f"frequency: chunks {chunks[0]['chunk']}–{chunks[-1]['chunk']} turn at the rates of base "
                    f"{mistake['engine_base']:.6e}, not the model's {mistake['expected_base']:.6e}")
        else:
            text = f"frequency: chunks {_chunks(chunks)} turn at another rate"
        if mistake.get("magnitude", 1.0) != 1.0:
            text += f", and every pair scaled by {mistake['magnitude']:.6f}"
        return text
    if kind == "mask":
        return f"mask: {mistake['extra']} masked keys given weight, {mistake['missing']} visible keys given none"
    if kind == "scale":
        return f"scale: scores multiplied by {mistake['factor']:.6f} times the model's scale"
    return f"{kind}: {json.dumps({k: v for k, v in mistake.items() if k != 'kind'})}"


def assert_conforms(report, family=None):
    """Raises ``AssertionError`` unless every stage of ``report`` (from :func:`check`) is within its budget.

    The message names the family (``family``, a name or :class:`Family`; default the report's), the first stage
    beyond budget (layer and ``q``, ``k`` or ``attn``), its worst element (head, row and column: the position
    and coordinate for q and k, the query and key positions for attn), its ratio to the budget, the mistake
    diagnosed in words, and how many stages are beyond budget.
    """
    if not isinstance(report, Report):
        raise _argument_error(f"report: expected a ropescope.conformance.Report, got {type(report).__name__}")
    if report.within:
        return
    name = family.name if isinstance(family, Family) else (family or report.family or "?")
    beyond = [s for s in report.stages if not s.ratio <= 1.0]
    if not beyond:
        raise AssertionError(f"family '{name}' does not conform: {report.verdict}")
    first = beyond[0]
    layer = next(layer for layer in report["layers"] if layer["layer"] == first.layer)
    c = layer[dict(_STAGE_KEYS)[first.stage]]
    head, row, col = c["worst"]
    if first.stage == "attn":
        where = f"head {head}, row {row} (query position), column {col} (key position)"
    else:
        head_name = "head" if first.stage == "q" else "kv head"
        where = f"{head_name} {head}, row {row} (position), column {col} (coordinate)"
    also = ", ".join(f"layer {s.layer} {s.stage}" for s in beyond[1:4]) + (", ..." if len(beyond) > 4 else "")
    raise AssertionError(
        f"family '{name}' does not conform: layer {first.layer} {first.stage} is beyond the {report['precision']} "
        f"budget, worst at {where}: {first.ratio:.3e} × budget; mistake: {describe_mistake(first.mistake)} "
        f"({len(beyond)} of {len(report.stages)} stages beyond budget" + (f"; also {also})" if also else ")")
    )
