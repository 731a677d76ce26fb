"""The load generator: Poisson schedules, server queueing, validity, knee and SLA search."""

from __future__ import annotations

import numpy as np
import pytest
from evidencedocs import FakeClock

from reviewkit.evidence import loadgen
from reviewkit.evidence.loadgen import Level, Validity
from reviewkit.measure import allocator


def test_poisson_rate_and_seed_reproducibility():
    a = loadgen.poisson_arrivals_s(200.0, 20000, seed=3)
    b = loadgen.poisson_arrivals_s(200.0, 20000, seed=3)
    c = loadgen.poisson_arrivals_s(200.0, 20000, seed=4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    # Exponential gaps of mean 1/200 s: 20000 arrivals span ~100 s; the mean gap's standard
    # error is (1/200)/sqrt(20000) = 3.5e-5 s, so 5 standard errors is a 3.5% band on the rate.
    rate = len(a) / a[-1]
    assert rate == pytest.approx(200.0, rel=0.035)
    gaps = np.diff(a)
    # Exponential: standard deviation equals the mean (coefficient of variation 1).
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)
    assert np.all(gaps > 0)


def test_poisson_refuses_bad_rate():
    with pytest.raises(ValueError):
        loadgen.poisson_arrivals_s(0.0, 10)


def test_queries_cover_count_and_duration():
    v = Validity(min_duration_s=2.0, min_queries=100, max_level_s=60.0)
    assert loadgen.queries_for(10.0, v) == 100  # 10/s x 2 s = 20 < 100: the count rules
    assert loadgen.queries_for(500.0, v) == 1000  # 500/s x 2 s = 1000 > 100


def test_server_latency_includes_queueing():
    clock = FakeClock()
    # Arrivals at 0, 1, 2 ms; each query takes 3 ms on one server. Completion times are 3, 6
    # and 9 ms, so latencies (completion - arrival) are 3, 5 and 7 ms.
    lat, duration, stopped = loadgen.run_server(
        clock.work(3e-3), [0.0, 1e-3, 2e-3], 10.0, clock, clock.wait_until
    )
    assert lat == pytest.approx([3e-3, 5e-3, 7e-3])
    assert duration == pytest.approx(9e-3)
    assert not stopped


def test_server_waits_for_arrivals_when_idle():
    clock = FakeClock()
    # Arrivals 10 ms apart, 1 ms of work: no queueing, every latency is the service time.
    lat, duration, _ = loadgen.run_server(
        clock.work(1e-3), [0.01, 0.02, 0.03], 10.0, clock, clock.wait_until
    )
    assert lat == pytest.approx([1e-3] * 3)
    assert duration == pytest.approx(0.031 - 0.01)


def test_server_stops_at_level_budget():
    clock = FakeClock()
    lat, _, stopped = loadgen.run_server(clock.work(1.0), [0.0] * 10, 2.5, clock, clock.wait_until)
    # Work of 1 s per query: after 3 queries 3 s have passed, beyond the 2.5 s budget.
    assert len(lat) == 3 and stopped


def test_latency_summary_matches_numpy_linear_percentiles():
    lat = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    s = loadgen.latency_summary(lat)
    # Linear interpolation on 100 points: p50 at rank 49.5 -> 50.5 ms; p99 at rank 98.01 ->
    # 99 + 0.01 = 99.01 ms; p95 at 94.05 -> 95.05 ms.
    assert s["p50_s"] == pytest.approx(0.0505)
    assert s["p95_s"] == pytest.approx(0.09505)
    assert s["p99_s"] == pytest.approx(0.09901)
    assert s["max_s"] == pytest.approx(0.1)
    assert loadgen.latency_summary([]) == {}


def _level(n: int, duration: float, stopped: bool = False) -> Level:
    return Level("server", 10.0, 0.5, 100, tuple([1e-3] * n), duration, stopped)


def test_validity_rules_name_each_shortfall():
    v = Validity(min_duration_s=1.0, min_queries=100, max_level_s=5.0)
    assert loadgen.invalid_reasons(_level(100, 1.0), v) == []
    reasons = loadgen.invalid_reasons(_level(50, 0.5, stopped=True), v)
    assert len(reasons) == 3
    assert "50 queries" in reasons[0] and "minimum 100" in reasons[0]
    assert "0.5 s" in reasons[1]
    assert "5 s level budget" in reasons[2]
    doc = loadgen.level_json(_level(50, 0.5), v)
    assert doc["valid"] is False and doc["invalid_reasons"]


def _server(rate: float, p99: float, valid: bool = True) -> dict:
    return {"target_rate_per_s": rate, "achieved_rate_per_s": rate * 0.99, "valid": valid,
            "latency": {"p99_s": p99}}  # fmt: skip


def test_knee_is_first_load_past_twice_the_best_lower_p99():
    levels = [_server(10, 4e-3), _server(20, 3e-3), _server(30, 5e-3), _server(40, 7e-3)]
    knee = loadgen.find_knee(levels)
    # Best p99 below 40/s is 3 ms; 5 ms at 30/s is under 6 ms, 7 ms at 40/s is over: knee 40.
    assert knee["found"] and knee["rate_per_s"] == 40 and knee["last_below_rate_per_s"] == 30
    assert knee["reference_p99_s"] == 3e-3


def test_knee_ignores_invalid_levels_and_may_be_absent():
    levels = [_server(10, 1e-3), _server(20, 9e-3, valid=False), _server(30, 1.5e-3)]
    assert loadgen.find_knee(levels)["found"] is False


def test_best_under_sla_picks_highest_passing_valid_level():
    levels = [_server(10, 1e-3), _server(20, 2e-3), _server(30, 9e-3), _server(40, 1e-3, False)]
    s = loadgen.best_under_sla(levels, p99_s=2e-3)
    assert s["met"] and s["max_rate_per_s"] == 20
    assert s["levels_passing"] == 2 and s["levels_failing"] == 1
    assert loadgen.best_under_sla(levels, p99_s=1e-4)["met"] is False


def test_sweep_end_to_end_on_a_deterministic_server():
    clock = FakeClock()
    v = Validity(min_duration_s=0.0, min_queries=200, max_level_s=100.0)
    sweep = loadgen.Sweep(
        clock.work(1e-3), v, clock=clock, fractions=(0.25, 0.5, 1.1), wait_until=clock.wait_until
    )
    out = sweep.run(sla_p99_s=3e-3)
    # Back to back at 1 ms a call: 1000 queries/s offline, every latency exactly 1 ms.
    assert out["offline"]["achieved_rate_per_s"] == pytest.approx(1000.0)
    assert out["single-stream"]["latency"]["p99_s"] == pytest.approx(1e-3)
    rates = [lv["target_rate_per_s"] for lv in out["server"]]
    assert rates == sorted(rates)
    by_rate = {round(lv["target_rate_per_s"]): lv for lv in out["server"]}
    # Offered 1100/s on a 1000/s server: the queue grows by ~0.1 query per arrival, so after
    # 200 queries the last waits ~20 ms; p99 far beyond the 3 ms SLA.
    assert by_rate[1100]["latency"]["p99_s"] > 10e-3
    assert by_rate[250]["latency"]["p50_s"] == pytest.approx(1e-3)
    assert out["knee"]["found"] and out["knee"]["rate_per_s"] == pytest.approx(1100.0)
    # The search adds bisection levels between 500/s (passing) and 1100/s (failing).
    assert len(out["server"]) > 3
    assert out["sla"]["met"] and 499.99 <= out["sla"]["max_rate_per_s"] < 1100


def test_cli_sweep_smoke_writes_a_versioned_result(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "sweep.json"
    cmd = [sys.executable, "-m", "reviewkit", "sweep", "--profile", "smoke", "--sla-p99-s",
           "0.05", "--out", str(out), "--json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc == json.loads(out.read_text())
    assert doc["kind"] == "reviewkit.sweep" and doc["schema_version"] == 1
    # the CPU heap held as `run` holds it, or said why not (measure/allocator.py)
    held = allocator._glibc()[0] is not None and not allocator.user_settings()
    assert (allocator.WHY in doc["environment"]["cpu_allocator"]) == held
    (w,) = doc["workloads"]
    assert w["status"] == "ok" and w["id"].startswith("model.")
    for lv in [w["single-stream"], w["offline"], *w["server"]]:
        assert lv["queries"] == len(lv["latencies_s"])
        assert lv["valid"] == (not lv["invalid_reasons"])
    assert "sla" in w and w["sla"]["p99_s"] == 0.05
    bad = subprocess.run([*cmd[:3], "sweep", "--profile", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--profile 'nope'" in bad.stderr


def test_sla_search_stops_where_a_level_cannot_be_valid():
    # A 1 ms server and an SLA under its service time: every level fails. Bisection goes down
    # from the lowest failing level, 25% of 1000/s = 250/s, to 125/s, where 200 queries span
    # about 1.6 s, past the 1 s level budget: it stops there and says so, trying nothing twice.
    clock = FakeClock()
    v = Validity(min_duration_s=0.0, min_queries=200, max_level_s=1.0)
    sweep = loadgen.Sweep(
        clock.work(1e-3), v, clock=clock, fractions=(0.25, 0.5), wait_until=clock.wait_until
    )
    out = sweep.run(sla_p99_s=1e-4)
    assert [round(lv["target_rate_per_s"]) for lv in out["server"]] == [250, 500]
    assert out["sla"]["met"] is False
    assert "a level at 125/s needs 200 queries over about 1.6 s" in out["sla"]["search_stopped"]
