"""The binding: configuration, tokenizer, forward pass against `ropescope reference`, errors, the GIL."""

import subprocess
import threading
import time

import numpy as np
import pytest

import ropescope as rs


def test_config_describes_smollm2(model):
    c = model.config
    assert (c["architecture"], c["n_layers"], c["n_heads"], c["n_kv_heads"], c["head_dim"]) == ("llama", 30, 9, 3, 64)
    rope = c["layers"][0]["rope"]
    assert (rope["base"], rope["rot_dim"], rope["pairing"]) == (100000.0, 64, "adjacent")


def test_tokenize_adds_no_bos_for_smollm2(model):
    ids = model.tokenize("Hello world")
    assert ids == model.tokenize("Hello world", add_special=False)
    assert all(isinstance(i, int) for i in ids) and len(ids) == 2


def test_forward_shapes_and_dtypes(model, ids):
    t = len(ids)
    out = model.forward(ids, layers=[0, 5], rows=slice(2, 6), capture=rs.KINDS, logits=True)
    assert out["rows"] == (2, 6)
    for layer in (0, 5):
        assert out["attn"][layer].shape == (9, 4, t)
        assert out["scores"][layer].shape == (9, 4, t)
        for kind in ("q_pre", "q", "out"):
            assert out[kind][layer].shape == (9, t, 64)
        for kind in ("k_pre", "k", "v"):
            assert out[kind][layer].shape == (3, t, 64)
        assert out["hidden"][layer].shape == (t, 576)
    assert out["logits"].shape == (4, 49152)
    arrays = [a for kind in rs.KINDS for a in out[kind].values()] + [out["logits"]]
    assert all(a.dtype == np.float64 and a.flags.c_contiguous for a in arrays)
    np.testing.assert_allclose(out["attn"][0].sum(-1), 1.0, atol=1e-12)
    assert np.all(out["attn"][0][:, 0, 3:] == 0.0)  # row 2 sees keys 0..2 only

    f32 = rs.Model(model.path, precision="f32").forward(ids, layers=[0], capture=("attn",))
    assert f32["attn"][0].dtype == np.float32 and f32["attn"][0].shape == (9, t, t)


def test_forward_equals_the_reference_files_bit_for_bit(model_path, model, ids, ropescope_bin, tmp_path):
    out_dir = tmp_path / "ref"
    subprocess.run(
        [ropescope_bin, "reference", model_path, "--ids", ",".join(map(str, ids)), "--layers", "0,5",
         "--rows", "3..9", "--out", str(out_dir)],
        check=True, capture_output=True,
    )
    out = model.forward(ids, layers=[0, 5], rows=range(3, 9), capture=rs.KINDS, logits=True)
    for layer in (0, 5):
        for kind in rs.KINDS:
            expected = np.load(out_dir / f"{kind}_L{layer}.npy")
            assert np.array_equal(out[kind][layer], expected), f"{kind}_L{layer}"
    assert np.array_equal(out["logits"], np.load(out_dir / "logits.npy"))


def test_the_ggml_arithmetic_is_the_command_lines(model_path, ids, ropescope_bin, tmp_path):
    """``arithmetic="ggml"`` gives the bits of ``reference --arithmetic ggml``; it needs float32."""
    out_dir = tmp_path / "ref"
    subprocess.run(
        [ropescope_bin, "reference", model_path, "--ids", ",".join(map(str, ids)), "--layers", "0",
         "--precision", "f32", "--arithmetic", "ggml", "--out", str(out_dir)],
        check=True, capture_output=True,
    )
    ggml = rs.Model(model_path, precision="f32", arithmetic="ggml")
    out = ggml.forward(ids, layers=[0], capture=("q_pre",), logits=True)
    assert np.array_equal(out["q_pre"][0], np.load(out_dir / "q_pre_L0.npy"))
    assert np.array_equal(out["logits"], np.load(out_dir / "logits.npy"))
    exact = rs.Model(model_path, precision="f32").forward(ids, layers=[0], capture=("q_pre",))
    assert not np.array_equal(exact["q_pre"][0], out["q_pre"][0])
    with pytest.raises(rs.RopescopeError, match="ggml arithmetic is llama.cpp's float32"):
        rs.Model(model_path, arithmetic="ggml")
    with pytest.raises(rs.RopescopeError, match="arithmetic 'fast' is not one of exact, ggml"):
        rs.Model(model_path, precision="f32", arithmetic="fast")


def test_reference_and_compare_from_python(model_path, ids, tmp_path):
    rs.reference(model_path, ids, tmp_path / "a", layers=[1], rows=(0, 4))
    rs.reference(model_path, ids, tmp_path / "b", layers=[1], rows=(0, 4), precision="f32")
    same = rs.compare(tmp_path / "a", tmp_path / "a")
    assert same["pass"] and same["verdict"].startswith("PASS")
    report = rs.compare(tmp_path / "b", tmp_path / "a", tol=["attn=max_abs:1e-12"])
    assert not report["pass"] and "attn" in report["verdict"]
    assert {c["file"] for c in report["comparisons"]} >= {"attn_L1.npy", "logits.npy", "ids.npy"}


def test_bad_path_is_a_python_exception_with_the_message(tmp_path):
    missing = tmp_path / "missing.gguf"
    with pytest.raises(rs.RopescopeError, match="missing.gguf: No such file") as e:
        rs.Model(missing)
    assert e.value.kind == "io"
    assert isinstance(e.value, ValueError)
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"not a model at all")
    with pytest.raises(rs.RopescopeError, match="not a GGUF file") as e:
        rs.Model(not_gguf)
    assert e.value.kind == "bad_file"


def test_bad_requests_carry_the_command_lines_messages(model, ids):
    with pytest.raises(rs.RopescopeError, match="layer 30 does not exist"):
        model.forward(ids, layers=[30])
    with pytest.raises(rs.RopescopeError, match="outside the vocabulary of 49152 tokens"):
        model.forward([1, 49152])
    with pytest.raises(rs.RopescopeError, match="token id -1 is not a valid id"):
        model.forward([-1])
    with pytest.raises(rs.RopescopeError, match="the prompt has no tokens"):
        model.forward([])
    with pytest.raises(rs.RopescopeError, match="unknown capture kind 'probs'"):
        model.forward(ids, capture=("probs",))
    with pytest.raises(rs.RopescopeError, match="precision 'f16' is not one of f64, f32"):
        rs.Model(model.path, precision="f16")


def test_the_gil_is_released_during_a_forward_pass(model):
    ids = list(range(1, 129))
    stamps, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    time.sleep(0.05)
    start = time.perf_counter()
    model.forward(ids, capture=())
    end = time.perf_counter()
    stop.set()
    thread.join()
    # Holding the GIL, the pass would leave the thread no step in its middle half.
    quarter = (end - start) / 4
    middle = [s for s in stamps if start + quarter < s < end - quarter]
    assert end - start > 0.05 and len(middle) >= 5, (end - start, len(middle))
