"""`ropescope.conformance`, its pytest plugin and the numpy RoPE example, on golden vectors of three small families."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ropescope as rs
from ropescope import conformance

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CONVERTED = os.path.join(ROOT, "fixtures", "converted")
EXAMPLE = os.path.join(ROOT, "examples", "conformance_numpy_rope.py")
FAMILIES = ("llama", "llama-linear", "llama-yarn")
JUDGED = ("q_pre", "q", "k_pre", "k", "attn")


@pytest.fixture(scope="session")
def vectors_dir(ropescope_bin, tmp_path_factory):
    """`ropescope conformance vectors` of FAMILIES: each model and its `main` prompt copied into a converted-style
    directory first."""
    src = tmp_path_factory.mktemp("converted")
    for name in FAMILIES:
        os.makedirs(src / name / "main")
        shutil.copy(os.path.join(CONVERTED, name, "model.gguf"), src / name / "model.gguf")
        shutil.copy(os.path.join(CONVERTED, name, "main", "ids.npy"), src / name / "main" / "ids.npy")
    out = tmp_path_factory.mktemp("vectors") / "vectors"
    subprocess.run([ropescope_bin, "conformance", "vectors", "--from", str(src), "--out", str(out)],
                   check=True, capture_output=True)
    return str(out)


@pytest.fixture(scope="session")
def vectors(vectors_dir):
    return conformance.Vectors(vectors_dir)


def golden(family, kinds=JUDGED, layers=None):
    """The family's golden arrays of `kinds` (all layers unless `layers`), named as the reference layout."""
    return {s["file"][:-4]: family.array(s["file"]) for s in family.stages
            if s["kind"] in kinds and (layers is None or s["layer"] in layers)}


def rotate(x, family, layer, offset=0):
    """`x` [heads, T, d] rotated half-split at positions `offset..T+offset`, from the family's RoPE tables."""
    with open(os.path.join(family.directory, "rope", "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)["layers"][layer]
    g, m, half = family.array("rope/inv_freq")[layer], meta["magnitude"], meta["rot_dim"] // 2
    angle = (np.arange(x.shape[1]) + offset)[:, None] * g[None, :half]
    cos, sin = m * np.cos(angle), m * np.sin(angle)
    out = x.copy()
    a, b = x[..., :half], x[..., half:2 * half]
    out[..., :half] = a * cos - b * sin
    out[..., half:2 * half] = b * cos + a * sin
    return out


def test_vectors_describe_the_families(vectors, vectors_dir):
    assert vectors.names == list(FAMILIES) and len(vectors) == 3
    f = vectors["llama-yarn"]
    assert os.path.isabs(f.model_path) and os.path.isfile(f.model_path)
    assert f.ids == np.load(os.path.join(CONVERTED, "llama-yarn", "main", "ids.npy")).tolist()
    assert f.rows == (len(f.ids) - 8, len(f.ids)) and "scaling:yarn" in f.features
    assert f.judged_stages == [(0, "q"), (0, "k"), (0, "attn"), (1, "q"), (1, "k"), (1, "attn")]
    assert f.array("q_L0.npy").dtype == np.float64 and np.array_equal(f.array("q_L0"), f.array("q_L0.npy"))
    with pytest.raises(rs.RopescopeError, match="has no array 'nope_L0'") as e:
        f.array("nope_L0")
    assert e.value.kind == "argument"
    with pytest.raises(KeyError, match="no family 'gemma'"):
        vectors["gemma"]


def test_vectors_refuse_another_format(tmp_path, vectors_dir):
    with pytest.raises(rs.RopescopeError, match="has no manifest.json") as e:
        conformance.Vectors(tmp_path)
    assert e.value.kind == "argument"
    with open(os.path.join(vectors_dir, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    manifest["format_version"] = 2
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(rs.RopescopeError, match="version 2, expected 'ropescope-conformance-vectors' version 1") as e:
        conformance.Vectors(tmp_path)
    assert e.value.kind == "bad_file"


@pytest.mark.parametrize("name", FAMILIES)
def test_golden_arrays_are_within_budget(vectors, name):
    family = vectors[name]
    report = conformance.check(family, golden(family))
    assert report.within and report.verdict.startswith("within budget: 6 stages of 2 layers (f32)"), report.verdict
    assert [(s.layer, s.stage, s.mistake) for s in report.stages] == [
        (layer, stage, None) for layer in (0, 1) for stage in ("q", "k", "attn")]
    assert all(0 <= s.ratio <= 1 for s in report.stages)
    assert report["rows"] == list(family.rows) and report.family == name
    conformance.assert_conforms(report)
    # float32 copies, names with .npy, a stage alone: within too
    arrays = {f"{k}.npy": v.astype(np.float32) for k, v in golden(family, ("q_pre", "q"), [1]).items()}
    report = conformance.check(family, arrays, precision="bf16")
    assert report.within and [s[:2] for s in report.stages] == [(1, "q")] and report["precision"] == "bf16"


def test_a_scaled_rotation_is_a_magnitude_mistake(vectors):
    family = vectors["llama-yarn"]
    arrays = golden(family)
    arrays["q_L1"] = arrays["q_L1"] * 1.05
    report = conformance.check(family, arrays)
    assert not report.within
    beyond = [s for s in report.stages if s.ratio > 1]
    assert [(s.layer, s.stage) for s in beyond] == [(1, "q"), (1, "attn")]  # the attention of the scaled q too
    assert beyond[0].mistake == {"kind": "magnitude", "ratio": pytest.approx(1.05)}
    head, row, col = report["layers"][1]["q"]["worst"]
    with pytest.raises(AssertionError) as e:
        conformance.assert_conforms(report)
    msg = str(e.value)
    assert (f"family 'llama-yarn' does not conform: layer 1 q is beyond the f32 budget, worst at head {head}, "
            f"row {row} (position), column {col} (coordinate): ") in msg, msg
    assert "× budget; mistake: magnitude: every rotated pair scaled by 1.050000" in msg, msg
    assert "(2 of 6 stages beyond budget; also layer 1 attn)" in msg, msg


def test_positions_shifted_by_one_are_an_offset_that_cancels_in_attention(vectors):
    family = vectors["llama"]
    arrays = golden(family, layers=[0])
    for kind in ("q", "k"):
        arrays[f"{kind}_L0"] = rotate(arrays[f"{kind}_pre_L0"], family, 0, offset=1)
    report = conformance.check(family, arrays)
    assert [(s.stage, s.ratio > 1, s.mistake) for s in report.stages] == [
        ("q", True, {"kind": "position_offset", "offset": 1}),
        ("k", True, {"kind": "position_offset", "offset": 1}),
        ("attn", False, None),
    ]
    with pytest.raises(AssertionError, match=r"family 'llama' does not conform: layer 0 q is beyond the f32 budget, "
                                             r"worst at head \d+, row \d+ \(position\), column \d+ \(coordinate\): "
                                             r".* mistake: position offset: position p rotated as p \+ 1 .*"
                                             r"\(2 of 3 stages beyond budget; also layer 0 k\)"):
        conformance.assert_conforms(report, family)


def test_attention_worst_element_is_named_by_query_and_key_position(vectors):
    family = vectors["llama-linear"]
    arrays = golden(family, layers=[1])
    a, _ = family.rows
    arrays["attn_L1"] = arrays["attn_L1"].copy()
    arrays["attn_L1"][2, 3, 5] += 1e-3
    report = conformance.check(family, arrays)
    assert [(s.stage, s.ratio > 1) for s in report.stages] == [("q", False), ("k", False), ("attn", True)]
    with pytest.raises(AssertionError) as e:
        conformance.assert_conforms(report, "my-llama-linear")
    msg = str(e.value)
    assert ("family 'my-llama-linear' does not conform: layer 1 attn is beyond the f32 budget, worst at head 2, "
            f"row {a + 3} (query position), column 5 (key position)") in msg, msg


def test_bad_arguments_are_refused(vectors):
    family = vectors["llama"]
    arrays = golden(family, layers=[0])
    t = len(family.ids)
    cases = [
        ({"Q_L0": arrays["q_L0"]}, "'Q_L0' is not an array of the reference layout"),
        ({"q_L0": arrays["q_L0"], "q_L0.npy": arrays["q_L0"]}, "'q_L0' is given twice"),
        ({"q_L0": arrays["q_L0"], "v_L0": arrays["k_L0"]}, "no stage to judge in q_L0, v_L0"),
        ({"q_pre_L0": arrays["q_pre_L0"], "q_L0": arrays["q_L0"].astype(np.int32)}, "q_L0: dtype int32"),
        (dict(arrays, attn_L0=arrays["attn_L0"][:, :3]), f"attn_L0 holds 3 query rows .* all {t} rows"),
    ]
    for bad, message in cases:
        with pytest.raises(rs.RopescopeError, match=message) as e:
            conformance.check(family, bad)
        assert e.value.kind == "argument"
    with pytest.raises(rs.RopescopeError, match="precision 'f64' is not one of f32, bf16, f16"):
        conformance.check(family, arrays, precision="f64")
    with pytest.raises(rs.RopescopeError, match=r"q_L0.npy: shape \[4, \d+, 8\], expected \[4, \d+, 16\]") as e:
        conformance.check(family, {"q_pre_L0": arrays["q_pre_L0"], "q_L0": arrays["q_L0"][..., :8]})
    assert e.value.kind == "bad_file"


def test_run_calls_the_engine_on_the_named_families(vectors_dir):
    seen = []

    def engine(family):
        seen.append(family.name)
        return golden(family)

    reports = conformance.run(vectors_dir, engine, families=["llama-yarn", "llama"])
    assert seen == ["llama", "llama-yarn"] and list(reports) == seen
    assert all(r.within for r in reports.values())
    with pytest.raises(rs.RopescopeError, match="no family 'qwen2'"):
        conformance.run(vectors_dir, engine, families="qwen2")


def run_example(vectors_dir, *flags):
    return subprocess.run([sys.executable, EXAMPLE, vectors_dir, *flags], capture_output=True, text=True)


def test_numpy_rope_example_conforms(vectors_dir):
    run = run_example(vectors_dir)
    assert run.returncode == 0, run.stdout + run.stderr
    assert [line.split(":")[0] for line in run.stdout.splitlines()] == [f"PASS {n}" for n in FAMILIES], run.stdout


def test_numpy_rope_example_without_yarn_magnitude_fails_as_magnitude(vectors_dir):
    run = run_example(vectors_dir, "--bug", "yarn-magnitude")
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("PASS llama:") and lines[1].startswith("PASS llama-linear:"), run.stdout
    assert re.match(r"FAIL llama-yarn: family 'llama-yarn' does not conform: layer 0 q is beyond the f32 budget, "
                    r"worst at head \d+, row \d+ \(position\), column \d+ \(coordinate\): .* mistake: magnitude: "
                    r"every rotated pair scaled by 0\.878\d+", lines[2]), run.stdout
    only = run_example(vectors_dir, "--bug", "yarn-magnitude", "--family", "llama-yarn")
    assert only.returncode == 1 and only.stdout.count("\n") == 1, only.stdout


PLUGIN_TESTS = '''
import os

import numpy as np


def golden(family):
    return {s["file"][:-4]: family.array(s["file"]) for s in family.stages
            if s["kind"] in ("q_pre", "q", "k_pre", "k", "attn")}


def test_family(ropescope_family, ropescope_check, ropescope_vectors):
    assert ropescope_family in ropescope_vectors.families
    arrays = golden(ropescope_family)
    if os.environ.get("BREAK_ROPE"):
        arrays["k_L0"] = arrays["k_L0"] * 0.5
    ropescope_check(ropescope_family, arrays)


def test_stage(ropescope_family, ropescope_stage, ropescope_check):
    layer, stage = ropescope_stage
    arrays = golden(ropescope_family)
    needs = {"q": ("q_pre", "q"), "k": ("k_pre", "k"), "attn": ("q", "k", "attn")}[stage]
    report = ropescope_check(ropescope_family, {f"{k}_L{layer}": arrays[f"{k}_L{layer}"] for k in needs})
    assert [(s.layer, s.stage) for s in report.stages] == [(layer, stage)]


def test_unrelated():
    pass
'''


def run_pytest(tmp_path, *args, env=None):
    (tmp_path / "test_engine.py").write_text(textwrap.dedent(PLUGIN_TESTS))
    return subprocess.run([sys.executable, "-m", "pytest", "-v", "-rs", "-p", "no:cacheprovider", "test_engine.py",
                           *args], cwd=tmp_path, capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_pytest_plugin_parametrizes_over_the_families(tmp_path, vectors_dir):
    run = run_pytest(tmp_path, "--ropescope-vectors", vectors_dir)
    assert run.returncode == 0, run.stdout + run.stderr
    passed = re.findall(r"test_engine.py::(\S+) PASSED", run.stdout)
    stages = [f"test_stage[{n}-L{layer}-{s}]" for n in FAMILIES for layer in (0, 1) for s in ("q", "k", "attn")]
    assert passed == [f"test_family[{n}]" for n in FAMILIES] + stages + ["test_unrelated"], run.stdout
    assert "22 passed" in run.stdout, run.stdout


def test_pytest_plugin_fails_a_family_beyond_budget(tmp_path, vectors_dir):
    run = run_pytest(tmp_path, "--ropescope-vectors", vectors_dir, "--ropescope-precision", "bf16", "-k",
                     "test_family", env={"BREAK_ROPE": "1"})
    assert run.returncode == 1, run.stdout + run.stderr
    assert "3 failed" in run.stdout, run.stdout
    assert re.search(r"AssertionError: family 'llama-yarn' does not conform: layer 0 k is beyond the bf16 budget, "
                     r"worst at kv head \d+, row \d+ \(position\), column \d+ \(coordinate\): .* magnitude: every "
                     r"rotated pair scaled by 0\.500000", run.stdout), run.stdout


def test_pytest_plugin_skips_without_vectors(tmp_path):
    run = run_pytest(tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 2 skipped" in run.stdout, run.stdout
    assert "no golden vectors: give --ropescope-vectors DIR" in run.stdout, run.stdout
    bad = run_pytest(tmp_path, "--ropescope-vectors", str(tmp_path))
    assert bad.returncode != 0 and "has no manifest.json" in bad.stderr, bad.stdout + bad.stderr
