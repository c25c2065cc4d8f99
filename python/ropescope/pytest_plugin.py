"""pytest plugin of ropescope (entry point ``pytest11``: ``ropescope``): your engine's tests parametrized over the
golden vectors of ``ropescope conformance vectors``.

Options: ``--ropescope-vectors DIR`` (a vectors directory) and ``--ropescope-precision`` (your engine's working
precision, ``f32`` by default, ``bf16`` or ``f16``: the budget). With ``--ropescope-vectors``, a test function
taking ``ropescope_family`` runs once per family of the vectors (test ids: the family names); one also taking
``ropescope_stage`` runs once per stage of each family, ``ropescope_stage`` being ``(layer, stage)`` with stage
``"q"``, ``"k"`` or ``"attn"`` (test ids ``FAMILY-L{layer}-{stage}``). Without the option those tests are
skipped. Fixtures:

- ``ropescope_family``: a :class:`ropescope.conformance.Family` (``model_path``, ``ids``, ``array(file)``, ...);
- ``ropescope_stage``: ``(layer, stage)``;
- ``ropescope_vectors``: the :class:`ropescope.conformance.Vectors`;
- ``ropescope_check``: ``ropescope_check(family, arrays)`` judges your arrays (:func:`ropescope.conformance.check`
  in the precision of ``--ropescope-precision``), fails the test with
  :func:`ropescope.conformance.assert_conforms`'s message when a stage is beyond budget, and returns the report.

::

    def test_rope_conforms(ropescope_family, ropescope_check):
        f = ropescope_family
        q = my_engine.rope(f.array("q_pre_L0"), layer=0)
        ropescope_check(f, {"q_pre_L0": f.array("q_pre_L0"), "q_L0": q})
"""

import os

import pytest

_SKIP = "no golden vectors: give --ropescope-vectors DIR (written by `ropescope conformance vectors --out DIR`)"
_loaded = {}


def pytest_addoption(parser):
    group = parser.getgroup("ropescope", "ropescope conformance to the float64 pass")
    group.addoption("--ropescope-vectors", metavar="DIR", default=None,
                    help="golden vectors (`ropescope conformance vectors --out DIR`): parametrize tests taking "
                         "ropescope_family (and ropescope_stage) over their families")
    group.addoption("--ropescope-precision", default="f32", choices=("f32", "bf16", "f16"),
                    help="the engine's working precision, which sets the budget (default: f32)")


def _vectors(config):
    """The Vectors of ``--ropescope-vectors`` (loaded once), or None without the option."""
    path = config.getoption("ropescope_vectors")
    if path is None:
        return None
    path = os.path.abspath(path)
    if path not in _loaded:
        from .conformance import Vectors
        from . import RopescopeError

        try:
            _loaded[path] = Vectors(path)
        except RopescopeError as e:
            raise pytest.UsageError(f"--ropescope-vectors {path}: {e}") from None
    return _loaded[path]


def pytest_configure(config):
    _vectors(config)  # a bad directory is a usage error before any test runs


def pytest_generate_tests(metafunc):
    if "ropescope_family" not in metafunc.fixturenames:
        return
    vectors = _vectors(metafunc.config)
    if vectors is None:
        return  # the fixtures skip
    if "ropescope_stage" in metafunc.fixturenames:
        params = [(f, stage) for f in vectors.families for stage in f.judged_stages]
        ids = [f"{f.name}-L{layer}-{stage}" for f, (layer, stage) in params]
        metafunc.parametrize(("ropescope_family", "ropescope_stage"), params, ids=ids)
    else:
        metafunc.parametrize("ropescope_family", vectors.families, ids=vectors.names)


@pytest.fixture(scope="session")
def ropescope_vectors(pytestconfig):
    """The golden vectors of ``--ropescope-vectors`` (skips without the option)."""
    vectors = _vectors(pytestconfig)
    if vectors is None:
        pytest.skip(_SKIP)
    return vectors


@pytest.fixture
def ropescope_family(ropescope_vectors):
    """One family of the vectors; the plugin parametrizes this argument (skips without the option)."""
    pytest.skip(_SKIP)  # reached only when the test was not parametrized


@pytest.fixture
def ropescope_stage(ropescope_vectors):
    """``(layer, stage)``; the plugin parametrizes this argument with ``ropescope_family``."""
    pytest.skip(_SKIP)


@pytest.fixture(scope="session")
def ropescope_check(pytestconfig):
    """``ropescope_check(family, arrays)``: judges ``arrays`` of ``family`` in the precision of
    ``--ropescope-precision``, asserts every stage is within budget, returns the report."""
    from .conformance import assert_conforms, check

    precision = pytestconfig.getoption("ropescope_precision")

    def ropescope_check(family, arrays):
        report = check(family, arrays, precision)
        assert_conforms(report, family)
        return report

    return ropescope_check
