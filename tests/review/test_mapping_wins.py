"""The sparse-or-quantized check: a sparse or quantized candidate slower than dense on a
workload its knob changes fails (the source's "win without fallback"); workloads the knob
leaves alone do not count."""

from __future__ import annotations

import json

from runfactory import make_run

from reviewkit.analysis.compare import compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run
from reviewkit.review.checks import CHECKS
from reviewkit.review.checks.registry import Context


def _run(folder, speedup=1.0, knobs=None, not_applicable=(), seed=0):
    """A runfactory run; `not_applicable` names workloads the weight knobs leave alone."""
    make_run(folder, speedup=speedup, knobs=knobs, seed=seed)
    path = folder / "run.json"
    doc = json.loads(path.read_text())
    for w in doc["workloads"]:
        if w["id"].rsplit(".", 1)[0] in not_applicable:
            w["knobs_not_applicable"] = {k: "no weight matrix" for k in knobs or {}}
    path.write_text(json.dumps(doc))
    return analyse_run(load_run(folder))


def _check(base, cand):
    ctx = Context(review=None, baseline=base, candidates=[(None, cand)],
                  comparisons=[compare(base, cand)], params={}, cited=object())  # fmt: skip
    return CHECKS["sparse-or-quantized-not-slower"](ctx)


def test_a_sparse_candidate_slower_where_it_applies_fails(tmp_path):
    base = _run(tmp_path / "a")
    # every workload at 1/0.7 = 1.43x the dense time: far outside the 2% sample spread
    cand = _run(tmp_path / "b", speedup=0.7, knobs={"sparsity": "unstructured-50"}, seed=1)
    result = _check(base, cand)
    n = len(cand.workloads)
    assert result.status == "fail"
    assert f"slower than dense on {n} of {n} workload(s)" in result.summary
    assert "sparsity=unstructured-50" in result.summary
    assert "1.43 times the dense time" in result.summary


def test_workloads_the_knob_leaves_alone_do_not_count(tmp_path):
    base = _run(tmp_path / "a")
    names = [w.id.rsplit(".", 1)[0] for w in base.workloads]
    cand = _run(tmp_path / "b", speedup=0.7, knobs={"quantization": "int8-dynamic"}, seed=1,
                not_applicable=names)  # fmt: skip
    result = _check(base, cand)
    # every slower workload is one int8 quantization does not change: dense on both sides
    assert result.status == "pass" and "no candidate runs" in result.summary


def test_a_faster_quantized_candidate_passes_and_a_dense_one_is_not_checked(tmp_path):
    base = _run(tmp_path / "a")
    fast = _run(tmp_path / "b", speedup=1.5, knobs={"quantization": "int8-weight-only"}, seed=1)
    result = _check(base, fast)
    n = len(fast.workloads)
    assert result.status == "pass" and f"({n} of {n} faster)" in result.summary
    dense = _run(tmp_path / "c", speedup=0.7, seed=1)
    assert "no candidate runs" in _check(base, dense).summary
