"""torch.compile as a knob of `run`: compiled once, its cost apart from the samples, and a
recompile while sampling a failure (measure/compiled.py)."""

from __future__ import annotations

import itertools

import torch

from reviewkit.measure import compiled
from reviewkit.measure import runner as measure
from reviewkit.suite import workloads as suite


def test_a_compiled_run_records_its_compile_apart_from_its_samples():
    limit = torch._dynamo.config.cache_size_limit
    doc = measure.run(measure.RunRequest(
        profile="smoke", dtypes=("fp32",), only="norm.bert*", rounds=1,
        settings={"compile_mode": "default"},
    ))  # fmt: skip
    (w,) = doc["workloads"]
    assert doc["knobs"]["compile_mode"] == "default"
    assert w["status"] == "ok" and w["samples_s"], w["reason"]
    c = w["compile"]
    assert c["mode"] == "default" and c["graphs"] >= 1 and not c["fell_back_to_eager"]
    assert c["graph_breaks"] == 0  # one F.layer_norm call: nothing to break on
    # compiling costs orders of magnitude more than a ~10 us call, and none of it is a sample
    assert c["cold_s"] > 10 * max(w["samples_s"]) and c["warm_s"] > 0
    assert "--knob 'compile_mode=default'" in w["reproduce"]
    assert doc["phases_s"]["compile_warm"] > 0
    # the overhead measured on compiled floor calls whose compiled calls dispatch what the
    # workload's does: one compiled graph each (a layer norm fuses into one inductor kernel)
    o = w["overhead"]
    assert o["available"] and o["method"] == "floor-call", o["reason"]
    assert o["ops"]["match"] and o["ops"]["workload"] == o["ops"]["floor"]
    assert o["ops"]["workload"].get("compiled graph") == 1
    assert "compiled: floor and double compiled" in o["reason"]
    assert "counted on the eager call" in w["op_profile"]["method"]
    assert torch._dynamo.config.cache_size_limit == limit  # restored after the run


def test_a_recompile_while_sampling_fails_the_workload_with_the_reason(monkeypatch):
    counts = itertools.count()  # every read sees one more compiled frame
    monkeypatch.setattr(compiled, "frames_compiled", lambda: next(counts))
    (spec,) = suite.plan_specs("smoke", ("fp32",), "norm.bert*")
    record = measure.measure_workload(
        spec, torch.device("cpu"), measure.suite_profile("smoke").sampling,
        {"compute": {}, "bandwidth": {}}, "reproduce",
    )  # fmt: skip
    assert record["status"] == "error" and not record["samples_s"]
    assert "compiled 1 frame(s) while this workload was sampled" in record["reason"]


def test_a_compile_that_captures_no_graph_is_recorded_as_eager():
    # dynamo compiles the frame (counted) but a list append holds no tensor op: no graph, so
    # the calls run eager, which the record must say rather than report a compiled workload
    compiler = compiled.Compiler("default")
    calls = []
    with compiler.configured():
        fn = compiler.compile("w", lambda: calls.append(1))
        fn()
    record = compiler.records["w"]
    assert record.fell_back_to_eager and record.graphs == 0 and not record.reused
    assert len(calls) == 2


def test_two_workloads_from_one_lambda_compile_their_own_entries():
    compiler = compiled.Compiler("default")
    make = lambda t: (lambda: t * 2)  # noqa: E731 - one code object, as the suite's kernels
    with compiler.configured():
        for name in ("a", "b"):
            compiler.compile(name, make(torch.ones(4)))
    # without compiled.own_code the second would run the first's entry (reused, no graph)
    assert [compiler.records[n].graphs for n in "ab"] == [1, 1]
    assert not any(compiler.records[n].reused for n in "ab")
