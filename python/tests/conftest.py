"""Fixtures of the Python package's tests: SmolLM2 from the model cache `fixtures/models.sh` fills."""

import os
import shutil

import pytest

import ropescope as rs

CACHE = os.environ.get("ROPESCOPE_CACHE", os.path.expanduser("~/.cache/ropescope"))
SMOLLM2 = os.path.join(CACHE, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
TEXT = "The golden reference: every head of every layer, exactly, in float64."


@pytest.fixture(scope="session")
def model_path():
    """The SmolLM2 file; run `fixtures/models.sh` first."""
    if not os.path.isfile(SMOLLM2):
        pytest.fail(f"{SMOLLM2} is missing: run fixtures/models.sh first")
    return SMOLLM2


@pytest.fixture(scope="session")
def model(model_path):
    """SmolLM2 in float64."""
    return rs.Model(model_path, precision="f64")


@pytest.fixture(scope="session")
def ids(model):
    """A short prompt's ids."""
    return model.tokenize(TEXT)


@pytest.fixture(scope="session")
def ropescope_bin():
    """The `ropescope` command line: $ROPESCOPE_BIN (tests/cli/python_package.rs sets it) or the PATH's."""
    path = os.environ.get("ROPESCOPE_BIN") or shutil.which("ropescope")
    if not path:
        pytest.skip("no ropescope binary (set ROPESCOPE_BIN or put it on the PATH)")
    return path
