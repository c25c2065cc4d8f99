"""`ropescope.testing` and the numpy example that uses it."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from ropescope.testing import assert_attention_close, assert_logits_close, assert_rope_close

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "numpy_first_layer.py")


def test_attention_close_passes_on_ropescopes_own_attention(model_path, model, ids):
    out = model.forward(ids, layers=[3], capture=("attn", "q", "k"), logits=True)
    assert_attention_close(model_path, ids, out["attn"][3], layer=3, atol=0, rtol=0)
    assert_attention_close(model, ids, out["attn"][3][:, 4:7], layer=3, rows=slice(4, 7))
    assert_logits_close(model_path, ids, out["logits"].astype(np.float32))
    assert_rope_close(model_path, ids, layer=3, q=out["q"][3], k=out["k"][3])


def test_attention_close_names_layer_head_row_and_column(model_path, model, ids):
    attn = model.forward(ids, layers=[2], capture=("attn",))["attn"][2].copy()
    attn[4, 7, 3] += 1e-3
    attn[1, 5, 0] += 2e-5  # also over, but not the worst
    with pytest.raises(AssertionError) as e:
        assert_attention_close(model_path, ids, attn, layer=2)
    msg = str(e.value)
    assert "attention of layer 2" in msg and "head 4, row 7, column 3" in msg, msg
    assert "atol 1e-05 + rtol 0.0001" in msg and "2 of" in msg, msg


def test_rope_close_names_kv_head_position_and_coordinate(model_path, model, ids):
    k = model.forward(ids, layers=[0], capture=("k",))["k"][0].copy()
    k[2, 5, 40] = np.nan
    with pytest.raises(AssertionError, match=r"post-RoPE k of layer 0 .* at kv head 2, row 5, column 40"):
        assert_rope_close(model_path, ids, layer=0, k=k)


def test_shape_mismatch_is_reported(model_path, ids):
    with pytest.raises(AssertionError, match=r"shape \(9, 3, 3\), ropescope's is"):
        assert_attention_close(model_path, ids, np.zeros((9, 3, 3)), layer=0)


def run_example(model_path, *flags):
    return subprocess.run([sys.executable, EXAMPLE, "--model", model_path, *flags],
                          capture_output=True, text=True)


def test_numpy_first_layer_example_matches(model_path):
    run = run_example(model_path)
    assert run.returncode == 0 and run.stdout.startswith("PASS"), run.stdout + run.stderr


def test_numpy_first_layer_example_catches_a_wrong_rope(model_path):
    run = run_example(model_path, "--wrong-rope")
    assert run.returncode == 1, run.stdout + run.stderr
    assert re.search(r"attention of layer 0 differs .* at head \d+, row \d+, column \d+: yours", run.stdout), run.stdout
