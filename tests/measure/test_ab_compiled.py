"""`reviewkit ab` with torch.compile on a side: each side compiled once and kept across rounds,
its compile cost recorded apart, a recompile while the sides alternate a failure."""

from __future__ import annotations

import itertools
import os

import torch

from reviewkit.analysis.compare import compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.records import Run
from reviewkit.measure import ab, compiled
from reviewkit.review.checks import CHECKS
from reviewkit.review.gate import margins_of
from reviewkit.review.rubric import load_rubric


def test_compile_on_both_sides_is_an_aa_compiled_once_per_side():
    frames_before = compiled.frames_compiled() or 0
    request = ab.AbRequest({"compile_mode": "default"}, {"compile_mode": "default"}, "smoke",
                           "cpu", ("fp32",), "norm.bert*", rounds=3)  # fmt: skip
    base, cand, pairing = ab.ab(request)
    assert pairing["aa"] is True
    for doc in (base, cand):
        (w,) = doc["workloads"]
        assert w["status"] == "ok", w.get("reason")
        assert len(w["round_sizes"]) == 3  # three rounds sampled ...
        c = w["compile"]
        assert c["mode"] == "default" and not c["fell_back_to_eager"]
        assert c["warm_s"] > 0 and doc["phases_s"]["compile_warm"] > 0
        assert w["overhead"]["method"] == "floor-call", w["overhead"]["reason"]
    # each side compiles its own entry (compiled.own_code): sharing one, the candidate ran the
    # baseline's compiled code and read 2% slower in this very A/A (CI 1.012-1.031, four runs)
    for doc in (base, cand):
        c = doc["workloads"][0]["compile"]
        assert c["graphs"] >= 1 and not c["reused"]
    # one compile per side for the three rounds (kept across them), two for its floor and the
    # floor's double, then one warm compile per side after a reset
    assert (compiled.frames_compiled() or 0) - frames_before == 2 * (1 + 2 + 1)
    # against the default rubric's margin, as `reviewkit ab` compares: with none (statistics
    # only) a ~25 us compiled call read "slower" once on the loaded 2-core VM
    margins = margins_of(load_rubric(None, CHECKS))
    comp = compare(analyse_run(Run.from_json(base)), analyse_run(Run.from_json(cand)),
                   margins=margins)  # fmt: skip
    (row,) = comp.workloads
    # one mapping against itself: no direction
    assert row.verdict in ("equivalent", "inconclusive"), row
    assert list(comp.knob_changes) == []
    # the process's compile settings and inductor cache folder are back as they were
    assert "reviewkit-inductor-" not in os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")


def test_eager_against_compiled_records_the_compile_on_the_compiled_side_only():
    request = ab.AbRequest({}, {"compile_mode": "default"}, "smoke", "cpu", ("fp32",),
                           "norm.bert*", rounds=2)  # fmt: skip
    base, cand, _ = ab.ab(request)
    (b,), (c,) = base["workloads"], cand["workloads"]
    assert "compile" not in b and c["compile"]["cold_s"] > 0
    assert b["overhead"]["method"] == c["overhead"]["method"] == "floor-call"
    assert "compiled graph" in c["overhead"]["ops"]["floor"]
    assert "compiled graph" not in b["overhead"]["ops"]["floor"]
    assert base["knobs"]["compile_mode"] == "eager" and cand["knobs"]["compile_mode"] == "default"
    comp = compare(analyse_run(Run.from_json(base)), analyse_run(Run.from_json(cand)))
    assert [k.knob for k in comp.knob_changes] == ["compile_mode"]


def test_a_recompile_while_the_sides_alternate_fails_the_compiled_side(monkeypatch):
    counts = itertools.count()  # every read sees one more compiled frame
    monkeypatch.setattr(compiled, "frames_compiled", lambda: next(counts))
    request = ab.AbRequest({}, {"compile_mode": "default"}, "smoke", "cpu", ("fp32",),
                           "norm.bert*", rounds=1)  # fmt: skip
    base, cand, _ = ab.ab(request)
    (b,), (c,) = base["workloads"], cand["workloads"]
    assert b["status"] == "ok" and b["samples_s"]  # the eager side's calls were its own
    assert c["status"] == "error" and not c["samples_s"]
    assert "while this workload was sampled (a recompile)" in c["reason"]


def test_nested_compile_sessions_share_one_cache_folder():
    limit = torch._dynamo.config.cache_size_limit
    with compiled.session():
        folder = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        with compiled.session():
            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == folder
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == folder and os.path.isdir(folder)
        assert torch._dynamo.config.cache_size_limit == compiled.CACHE_ENTRIES_PER_CODE
    assert not os.path.exists(folder)
    assert torch._dynamo.config.cache_size_limit == limit
