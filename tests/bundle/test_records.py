"""The run as records: a bundle's JSON round-trips through them, analysis never touches its input,
and every key `show --json` prints is documented in docs/bundle.md."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload, LayerAggregate
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.records import (
    ANALYSED_RUN_KEYS,
    ANALYSED_WORKLOAD_KEYS,
    Run,
    Workload,
)
from reviewkit.bundle.run import load_run

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*/run.json"))
BUNDLE_DOC = ROOT / "docs" / "bundle.md"


def _measured_only(doc: dict) -> dict:
    """A recorded run.json without what the analysis derives (what a Run record holds)."""
    out = {k: v for k, v in doc.items() if k not in ANALYSED_RUN_KEYS}
    out["workloads"] = [
        {k: v for k, v in w.items() if k not in ANALYSED_WORKLOAD_KEYS} for w in doc["workloads"]
    ]
    if out.get("distributed"):
        out["distributed"] = {
            k: v for k, v in out["distributed"].items() if k not in ("stragglers", "scaling")
        }
    return out


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.parent.name)
def test_a_recorded_bundle_round_trips_through_its_record(path):
    raw = json.loads(path.read_text())
    run = Run.from_json(raw)
    assert isinstance(run.workloads[0], Workload)
    # the same keys in the same order, the same values: writing a bundle back loses nothing
    assert json.dumps(run.to_json()) == json.dumps(_measured_only(raw))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.parent.name)
def test_analysis_leaves_its_input_as_it_was_and_is_read_back_whole(path):
    run = load_run(path)
    before = json.dumps(run.to_json())
    analysed = analyse_run(run)
    assert json.dumps(run.to_json()) == before
    assert isinstance(analysed, AnalysedRun)
    assert all(isinstance(w, AnalysedWorkload) for w in analysed.workloads)
    # what analysis adds is dropped on reading: the analysed run reads back as the run it was
    assert json.dumps(Run.from_json(analysed.to_json()).to_json()) == before


def test_records_are_frozen(tmp_path):
    run = load_run(SAMPLES[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.complete = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.workloads[0].samples_s = ()  # type: ignore[misc]


def _one_gemm_run() -> Run:
    return Run.from_json({
        "suite": {"name": "t", "version": "0", "hash": "0"},
        "environment": {"device_type": "cpu"},
        "knobs": {"device": "cpu", "threads": 1},
        "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
        "workloads": [{
            "id": "gemm.t.fp32", "layer_type": "gemm", "kernel": "linear", "dtype": "fp32",
            "status": "ok", "samples_s": [0.01] * 21, "flops": 2e9, "bytes": 1e8,
            "params": {},
        }],
    })  # fmt: skip


def test_one_workload_by_hand():
    analysed = analyse_run(_one_gemm_run())
    w = analysed.workloads[0]
    # t = 10 ms; t_c = 2e9 / 1e12 = 2 ms; t_m = 1e8 / 1e11 = 1 ms: MFU 0.2, compute-dominated
    assert w.stats.p50_s == pytest.approx(0.01)
    assert w.mfu == pytest.approx(0.2)
    assert w.compute_time_s == pytest.approx(2e-3)
    assert w.memory_time_s == pytest.approx(1e-3)
    assert w.arithmetic_intensity == pytest.approx(20.0)
    assert w.decomposition.roof_class == "compute-bound"
    assert w.overhead_method == "not-measured"
    layer = analysed.layer_types["gemm"]
    assert isinstance(layer, LayerAggregate)
    assert layer.mfu == pytest.approx(0.2) and layer.time_share == pytest.approx(1.0)
    assert analysed.layer_types_by_dtype["fp32"]["gemm"].mfu == pytest.approx(0.2)
    # the JSON keeps every derived value beside the measured ones
    doc = analysed.to_json()
    assert doc["workloads"][0]["mfu"] == pytest.approx(0.2)
    assert doc["workloads"][0]["fractions"]["compute"] == pytest.approx(0.2)


# Tables keyed by data (a layer type's name, a dtype), `levels` deep: their values are walked.
KEYED_BY_DATA = {"layer_types": 1, "layer_types_by_dtype": 2}


def _keys(value, out: set[str], skip: frozenset[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(k)
            if k in KEYED_BY_DATA and isinstance(v, dict):
                rows = list(v.values())
                for _ in range(KEYED_BY_DATA[k] - 1):
                    rows = [x for r in rows for x in r.values()]
                for row in rows:
                    _keys(row, out, skip)
            elif k not in skip:
                _keys(v, out, skip)
    elif isinstance(value, list):
        for v in value:
            _keys(v, out, skip)


# Documents whose keys are listed elsewhere in bundle.md (or open by nature): not walked.
OPEN_DOCUMENTS = frozenset({
    "suite", "knobs", "ceilings", "run_to_run", "overhead_probe", "phases_s", "ranks", "hosts",
    "ranks_per_host", "topology",
})  # fmt: skip


@pytest.mark.parametrize("sample", ["cpu-quick-tp2-gloo-2core", "cpu-quick-epyc-2core"])
def test_every_key_show_json_prints_is_documented(sample):
    from reviewkit.cli.console import summary

    printed = summary(analyse_run(load_run(ROOT / "samples" / sample)), sample)
    keys: set[str] = set()
    _keys(printed, keys, OPEN_DOCUMENTS)
    documented = set(re.findall(r"`([a-z_0-9]+)`", BUNDLE_DOC.read_text()))
    assert keys - documented == set()
