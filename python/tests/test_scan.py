"""`ropescope.scan` and `ropescope.merge`: the command line's scan, in process, returning its summary."""

import filecmp
import os
import subprocess

import pytest

import ropescope as rs

OPTIONS = dict(analyses="slash,rank", length=32, count=2)


def test_scan_returns_the_summary_the_command_line_writes(model_path, ropescope_bin, tmp_path):
    # No weights kept packed here, the command line's default there: no output depends on it.
    summary = rs.scan(model_path, tmp_path / "py", packed_weights=0, **OPTIONS)
    assert len(summary["heads"]) == 30 * 9
    assert {"layer", "head", "label", "slash", "rank"} <= set(summary["heads"][0])
    subprocess.run(
        [ropescope_bin, "scan", model_path, "--out", str(tmp_path / "cli"), "--quiet", "--analyses", "slash,rank",
         "--length", "32", "--count", "2"],
        check=True, capture_output=True,
    )
    # report.html differs only in the run (command, times), which meta.json records.
    for name in ("summary.json", "summary.txt", "slash_natural.npy", "singular_values_q_natural.npy"):
        assert filecmp.cmp(tmp_path / "py" / name, tmp_path / "cli" / name, shallow=False), name


def test_sharded_scan_merges_to_the_same_summary(model_path, tmp_path):
    whole = rs.scan(model_path, tmp_path / "whole", **OPTIONS)
    shards = []
    for k in range(2):
        record = rs.scan(model_path, tmp_path / f"s{k}", shard=(k, 2), **OPTIONS)
        assert (record["shard"], record["of"]) == (k, 2)
        shards.append(tmp_path / f"s{k}")
    assert rs.merge(shards, tmp_path / "merged") == whole


def test_scan_errors_are_the_command_lines(model_path, tmp_path):
    with pytest.raises(rs.RopescopeError, match="unknown analysis") as e:
        rs.scan(model_path, tmp_path / "out", analyses="nonsense")
    assert e.value.kind == "argument"
    assert not os.path.exists(tmp_path / "out")
    with pytest.raises(rs.RopescopeError, match="a shard of 2, given without shard 1/2") as e:
        rs.scan(model_path, tmp_path / "s0", shard=(0, 2), **OPTIONS)
        rs.merge([tmp_path / "s0"], tmp_path / "merged")
    assert e.value.kind == "bad_file"
    with pytest.raises(rs.RopescopeError, match="packed_weights is more memory than this machine can address") as e:
        rs.scan(model_path, tmp_path / "big", packed_weights=2**63, **OPTIONS)
    assert e.value.kind == "argument"
    assert not os.path.exists(tmp_path / "big")
