"""The energy-only loop: a workload whose timed window is too short for the energy counter gets
its energy from a loop of calls at least ten counter updates long, said so; a window long
enough keeps its own reading."""

from __future__ import annotations

import time

import pytest
import torch

from reviewkit.analysis.energy import workload_energy
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.records import Run
from reviewkit.measure import energy_loop
from reviewkit.suite import kernels
from reviewkit.suite import workloads as suite

WATTS = 40.0


class FakeMeter:
    """A board drawing a constant 40 W whose counter updates every 20 ms: the joules a window
    reads are 40 x its length rounded down to the last update (as NVML's counter is stale)."""

    method = "fake meter (test)"
    update_interval_s = 0.02
    total_of = ("gpu",)

    def start(self):
        self._start = time.perf_counter()

    def stop(self):
        elapsed = time.perf_counter() - self._start
        updates = int(elapsed / self.update_interval_s)
        return {"gpu": WATTS * updates * self.update_interval_s}


def _record(spec, energy):
    return {"id": spec.id, "status": "ok", "samples_s": [1e-5] * 20, "energy": energy}


def test_a_window_too_short_for_the_counter_is_metered_by_a_loop():
    (spec,) = suite.plan_specs("smoke", ("fp32",), "norm.bert*")
    # a 0.2 ms window against a 20 ms counter: it did not advance
    short = workload_energy({"gpu": 0.0}, ["gpu"], 2e-4, 20, spec.flops, "fake", 0.02)
    records = [_record(spec, short)]
    took_s = energy_loop.measure_energy_loops(
        [spec], records, torch.device("cpu"), kernels.build, FakeMeter(), lambda *_: None)
    e = records[0]["energy"]
    assert e["available"] and e["source"] == "energy-loop"
    # the loop runs max(0.5 s, 10 x 20 ms) = 0.5 s: 25 updates, so the reading is within one
    # update of 40 W x 0.5 s = 20 J (a stale end costs at most 40 W x 20 ms = 0.8 J, 4%)
    assert e["window_s"] >= energy_loop.ENERGY_LOOP_MIN_S and took_s >= e["window_s"]
    assert e["avg_watts"] == pytest.approx(WATTS, rel=0.05)
    assert e["calls"] > 20 and "back-to-back calls" in e["source_reason"]


def test_a_long_window_keeps_its_reading_and_a_looped_record_re_derives_per_call():
    (spec,) = suite.plan_specs("smoke", ("fp32",), "norm.bert*")
    # 1 s over a 1 ms counter: 1000 updates, high confidence: no loop
    long = workload_energy({"gpu": 40.0}, ["gpu"], 1.0, 20, spec.flops, "fake", 1e-3)
    records = [_record(spec, long)]
    energy_loop.measure_energy_loops([spec], records, torch.device("cpu"), kernels.build,
                                     FakeMeter(), lambda *_: None)  # fmt: skip
    assert records[0]["energy"] is long
    # a looped reading of 5000 calls in 0.5 s at 20 J: 4 mJ a call, not 1 J per sample
    looped = {**workload_energy({"gpu": 20.0}, ["gpu"], 0.5, 5000, spec.flops, "fake", 0.02),
              "source": "energy-loop", "source_reason": "test"}  # fmt: skip
    run = Run.from_json({
        "suite": {"name": "reviewkit-core", "version": "1.1", "hash": "h"}, "environment": {},
        "knobs": {"dtypes": ["fp32"]},
        "ceilings": {"compute": {"fp32": {"peak": 1e11}}, "bandwidth": {"peak": 1e10}},
        "workloads": [{**spec.definition(), "id": spec.id, "status": "ok", "samples_s": [1e-4] * 20,
                       "energy": looped}],
    })  # fmt: skip
    (w,) = analyse_run(run).workloads
    assert w.energy["calls"] == 5000 and w.energy["calls_per_joule"] == pytest.approx(250)
    assert w.energy["source"] == "energy-loop"


@pytest.mark.parametrize("energy,needed", [
    (None, True),
    ({"available": False, "reason": "the energy counter did not advance over the 0.01 s"}, True),
    ({"available": False, "reason": "no energy meter: RAPL is not exposed"}, False),
    # a 30 ms window over NVML's 100 ms counter: under one update
    ({"available": True, "window_s": 0.03, "counter_update_s": 0.1}, True),
    # 0.2 s over RAPL's 1 ms: 200 updates, more than a loop would span
    ({"available": True, "window_s": 0.2, "counter_update_s": 1e-3}, False),
])  # fmt: skip
def test_which_readings_need_a_loop(energy, needed):
    assert energy_loop.needs_loop(energy) is needed


def test_joules_per_query_and_per_token():
    from reviewkit.analysis.energy import with_per_token

    # 20 J over 5000 calls is 4 mJ a query; at 4 x 128 tokens a call, 7.8 uJ a token
    e = workload_energy({"gpu": 20.0}, ["gpu"], 0.5, 5000, 1e9, "fake", 0.02)
    out = with_per_token(e, 4 * 128)
    assert out["joules_per_call"] == pytest.approx(4e-3)
    assert out["joules_per_token"] == pytest.approx(4e-3 / 512)
    assert with_per_token(e, None)["joules_per_token"] is None  # a convolution counts no tokens
