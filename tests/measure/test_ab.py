"""`reviewkit ab`: interleaved A/B in one process, two ordinary bundles and their pairing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from reviewkit.analysis.compare import compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.records import Run
from reviewkit.bundle.run import load_run
from reviewkit.common.errors import UsageError
from reviewkit.measure import ab


def test_settings_parse_and_refuse_with_the_knob_named():
    assert ab.parse_settings("threads=1, float32_matmul_precision=high", "--baseline") == {
        "threads": 1,
        "float32_matmul_precision": "high",
    }
    assert ab.parse_settings("", "--baseline") == {}
    assert ab.parse_settings("mkldnn_enabled=off", "--candidate") == {"mkldnn_enabled": False}
    with pytest.raises(UsageError, match=r"knob 'interop_threads' cannot be switched in one "
                       r"process .* `reviewkit run` cannot set it either"):  # fmt: skip
        ab.parse_settings("interop_threads=2", "--candidate")
    with pytest.raises(UsageError, match="memory_format='nhwc': choose one of contiguous"):
        ab.parse_settings("memory_format=nhwc", "--candidate")
    with pytest.raises(UsageError, match="unknown knob 'thread'; choose from dtype, threads"):
        ab.parse_settings("thread=2", "--candidate")
    with pytest.raises(UsageError, match="threads='0': expected a positive integer"):
        ab.parse_settings("threads=0", "--candidate")
    with pytest.raises(UsageError, match="dtype='fp8': choose one of fp32, bf16, fp16"):
        ab.parse_settings("dtype=fp8", "--candidate")
    with pytest.raises(UsageError, match="expected KNOB=VALUE"):
        ab.parse_settings("threads", "--candidate")


def test_a_side_sets_its_knobs_only_while_active():
    side = ab.Side(
        {"threads": 1, "float32_matmul_precision": "medium"}, ("fp32",), label="candidate"
    )
    before = (torch.get_num_threads(), torch.get_float32_matmul_precision())
    with side.active():
        assert torch.get_num_threads() == 1
        assert torch.get_float32_matmul_precision() == "medium"
    assert (torch.get_num_threads(), torch.get_float32_matmul_precision()) == before
    knobs = side.knobs({"threads": 99, "dtypes": ["bf16"], "memory_format": "contiguous"})
    assert knobs["threads"] == 1 and knobs["float32_matmul_precision"] == "medium"
    assert knobs["dtypes"] == ["fp32"]


def test_an_interleaved_run_pairs_two_ordinary_bundles(tmp_path):
    threads = torch.get_num_threads()
    request = ab.AbRequest({"threads": 1}, {}, "smoke", "cpu", ("fp32",), "norm.*", rounds=3)
    order = []
    base, cand, pairing = ab.ab(request, lambda label, *_: order.append(label))
    assert torch.get_num_threads() == threads  # the process's setting is restored
    assert base["complete"] and cand["complete"]
    assert base["knobs"]["threads"] == 1 and cand["knobs"]["threads"] == threads
    # a ceiling belongs to the settings that move it: each side divides by a profile calibrated
    # at its own thread count (one profile, shared, where the machine has one thread anyway)
    at = [doc["ceilings"]["profile"]["settings"]["threads"] for doc in (base, cand)]
    assert at == [1, threads]
    assert (base["ceilings"] == cand["ceilings"]) == (threads == 1)
    assert base["pairing"]["id"] == cand["pairing"]["id"] == pairing["id"]
    assert (base["pairing"]["side"], cand["pairing"]["side"]) == ("baseline", "candidate")
    assert pairing["aa"] is False and pairing["rounds"] == 3
    assert pairing["calls"] == "alternated"  # what lets compare pair the calls
    for b, c in zip(base["workloads"], cand["workloads"], strict=True):
        assert b["id"] == c["id"] and b["status"] == c["status"] == "ok"
        assert len(b["round_sizes"]) == len(c["round_sizes"]) == 3
    comp = compare(analyse_run(Run.from_json(base)), analyse_run(Run.from_json(cand)))
    assert comp.design.startswith("rounds and calls paired")
    assert [k.knob for k in comp.knob_changes] == ["threads"]
    assert sum(label.startswith("round ") for label in order) == 3 * len(base["workloads"])


def test_sides_of_two_dtypes_pair_by_shape():
    request = ab.AbRequest({"dtype": "fp32"}, {"dtype": "bf16"}, "smoke", "cpu", ("fp32",),
                           "norm.*")  # fmt: skip
    base, cand = ab._sides(request)
    pairs = ab._pairs(base, cand)
    assert all(b is not None and c is not None for b, c in pairs)
    assert [base.specs[b].id.rsplit(".", 1)[0] for b, _ in pairs] == [
        cand.specs[c].id.rsplit(".", 1)[0] for _, c in pairs
    ]


def test_cli_writes_the_bundles_and_the_pairing(tmp_path):
    out = tmp_path / "aa"
    cmd = [sys.executable, "-m", "reviewkit", "ab", "--baseline", "", "--candidate", "",
           "--profile", "smoke", "--only", "norm.*", "--out", str(out), "--json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "A/A: the two sides are the same mapping" in done.stderr
    summary = json.loads(done.stdout)
    assert summary["comparison"]["design"].startswith("rounds and calls paired")
    pairing = json.loads((out / "pairing.json").read_text())
    assert pairing["aa"] is True and pairing["baseline"] == "baseline/run.json"
    assert load_run(out / "baseline").pairing["id"] == pairing["id"]
    refused = subprocess.run(
        [*cmd[:4], "--candidate", "interop_threads=1", "--out", str(tmp_path / "x")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 2 and "interop_threads" in refused.stderr
    assert not (tmp_path / "x").exists()
