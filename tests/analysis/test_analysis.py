"""Roofline numbers against hand-worked cases (design.md's definitions, term by term)."""

import pytest

from reviewkit.analysis.roofline import (
    COMPUTE_BOUND,
    FASTER_THAN_ROOFLINE,
    MEMORY_BOUND,
    NOISY,
    OVERHEAD_BOUND,
    TAIL_RISK,
    aggregate,
    analyse_run,
    energy_aggregate,
    energy_confidence,
    flags,
    roofline,
    workload_energy,
)

P = 1e12  # peak FLOP/s
W = 1e11  # peak bytes/s; ridge point P/W = 10 FLOP/byte


def test_compute_bound_by_hand():
    # F=1e9, B=1e6: t_c = 1e9/1e12 = 1 ms, t_m = 1e6/1e11 = 10 us; measured t = 1.25 ms.
    r = roofline(1e9, 1e6, 1.25e-3, P, W)
    assert r.compute_time_s == pytest.approx(1e-3)
    assert r.memory_time_s == pytest.approx(1e-5)
    assert r.mfu == pytest.approx(0.8)  # 1 / 1.25
    assert r.bandwidth_util == pytest.approx(0.008)  # 0.01 / 1.25
    assert r.achieved_flops_per_s == pytest.approx(8e11)
    assert r.arithmetic_intensity == pytest.approx(1000)
    assert r.ridge_point == pytest.approx(10)
    assert r.compute_fraction == pytest.approx(0.8)
    assert r.memory_stall_fraction == 0  # t_m < t_c: no stall beyond compute
    assert r.overhead_fraction == pytest.approx(0.2)  # (1.25 - 1) / 1.25
    assert r.bottleneck == COMPUTE_BOUND
    assert not r.faster_than_roofline


def test_memory_bound_by_hand():
    # F=1e6, B=1e8: t_c = 1 us, t_m = 1 ms; t = 1.25 ms.
    r = roofline(1e6, 1e8, 1.25e-3, P, W)
    assert r.compute_fraction == pytest.approx(0.0008)  # 1e-6 / 1.25e-3
    assert r.memory_stall_fraction == pytest.approx(0.7992)  # (1e-3 - 1e-6) / 1.25e-3
    assert r.overhead_fraction == pytest.approx(0.2)  # (1.25e-3 - 1e-3) / 1.25e-3
    assert r.bottleneck == MEMORY_BOUND


def test_overhead_bound_by_hand():
    # F=1e6, B=1e6: t_c = 1 us, t_m = 10 us; t = 100 us: 90% of the time is neither.
    r = roofline(1e6, 1e6, 1e-4, P, W)
    assert r.compute_fraction == pytest.approx(0.01)
    assert r.memory_stall_fraction == pytest.approx(0.09)
    assert r.overhead_fraction == pytest.approx(0.9)
    assert r.bottleneck == OVERHEAD_BOUND


def test_overhead_threshold_is_inclusive():
    # t_c = 1 ms, t = 2 ms: overhead fraction exactly 0.5 -> overhead-bound (design.md: "at least").
    assert roofline(1e9, 1e6, 2e-3, P, W).bottleneck == OVERHEAD_BOUND


def test_faster_than_roofline_is_clamped_and_flagged():
    # t_c = 1 ms but t = 0.5 ms: MFU reads 2.0; the fractions clamp to compute = 1.
    r = roofline(1e9, 1e6, 5e-4, P, W)
    assert r.mfu == pytest.approx(2.0)
    assert (r.compute_fraction, r.memory_stall_fraction, r.overhead_fraction) == (1.0, 0.0, 0.0)
    assert r.faster_than_roofline
    assert FASTER_THAN_ROOFLINE in flags(r, tail_ratio=1.0)


def test_memory_side_clamp():
    # F=0, t_m = 1 ms, t = 0.5 ms (cache-resident data): stall clamps to the whole time.
    r = roofline(0, 1e8, 5e-4, P, W)
    assert (r.compute_fraction, r.memory_stall_fraction, r.overhead_fraction) == (0.0, 1.0, 0.0)
    assert r.bottleneck == MEMORY_BOUND
    assert r.faster_than_roofline


@pytest.mark.parametrize(
    "flops,bytes_,t",
    [(1e9, 1e6, 3e-3), (1e6, 1e8, 2e-3), (5e8, 5e7, 6e-4), (1e9, 1e9, 1e-4), (0, 0, 1e-6)],
)
def test_fractions_sum_to_one(flops, bytes_, t):
    r = roofline(flops, bytes_, t, P, W)
    assert r.compute_fraction + r.memory_stall_fraction + r.overhead_fraction == pytest.approx(1)


def test_tail_risk_flag_at_threshold():
    r = roofline(1e9, 1e6, 1.25e-3, P, W)
    assert TAIL_RISK in flags(r, tail_ratio=1.5)  # design.md: p99 / p50 >= 1.5
    assert TAIL_RISK not in flags(r, tail_ratio=1.49)


def test_noisy_flag():
    r = roofline(1e9, 1e6, 1.25e-3, P, W)
    assert flags(r, tail_ratio=1.0, noisy=True) == [NOISY]
    assert flags(r, tail_ratio=1.0) == []


def test_rejects_non_positive_time():
    with pytest.raises(ValueError):
        roofline(1, 1, 0.0, P, W)


def test_layer_aggregate_is_time_weighted():
    a = roofline(1e9, 1e6, 1.25e-3, P, W)  # gemm: t_c 1 ms, stall 0
    b = roofline(1e6, 1e8, 1.25e-3, P, W)  # gemm: t_c 1 us, stall 0.999 ms
    c = roofline(1e6, 1e6, 2.5e-3, P, W)  # norm: 2.5 ms
    agg = aggregate([("gemm", a), ("gemm", b), ("norm", c)])
    g = agg["gemm"]
    # MFU = (1e-3 + 1e-6) / 2.5e-3 = 0.4004; stall = (0 + 0.999e-3) / 2.5e-3 = 0.3996
    assert g.mfu == pytest.approx(0.4004)
    assert g.memory_stall_fraction == pytest.approx(0.3996)
    # overhead = (0.25e-3 + 0.25e-3) / 2.5e-3 = 0.2
    assert g.overhead_fraction == pytest.approx(0.2)
    assert g.time_share == pytest.approx(0.5)  # 2.5 ms of 5 ms
    assert agg["norm"].time_share == pytest.approx(0.5)
    # sum t_m = 1e-5 + 1e-3 > sum t_c = 1.001e-3 -> memory-bound by the same rule
    assert g.bottleneck == MEMORY_BOUND
    assert g.workloads == 2
    assert g.faster_than_roofline == 0


def test_layer_aggregate_counts_faster_than_roofline_workloads():
    fast = roofline(1e9, 1e6, 5e-4, P, W)  # beats t_c = 1 ms
    agg = aggregate([("gemm", fast), ("gemm", roofline(1e9, 1e6, 1.25e-3, P, W))])
    assert agg["gemm"].faster_than_roofline == 1
    # (1 ms + 1 ms) / (0.5 ms + 1.25 ms): an MFU above 100% that the count explains.
    assert agg["gemm"].mfu == pytest.approx(2e-3 / 1.75e-3)


def _raw_workload(dtype, flops, bytes_, samples):
    return {
        "id": f"x.{dtype}",
        "layer_type": "gemm",
        "dtype": dtype,
        "status": "ok",
        "flops": flops,
        "bytes": bytes_,
        "samples_s": samples,
    }


def test_analyse_run_recomputes_from_samples():
    # Median of [1, 1.25, 1.5] ms = 1.25 ms -> the compute-bound hand case above.
    doc = {
        "ceilings": {"compute": {"fp32": {"peak": P}}, "bandwidth": {"peak": W}},
        "workloads": [
            _raw_workload("fp32", 1e9, 1e6, [1.5e-3, 1.0e-3, 1.25e-3]),
            {**_raw_workload("fp32", 1, 1, []), "id": "failed", "status": "unsupported"},
        ],
    }
    analyse_run(doc)
    w = doc["workloads"][0]
    assert w["stats"]["p50_s"] == pytest.approx(1.25e-3)
    assert w["mfu"] == pytest.approx(0.8)
    assert w["fractions"]["overhead"] == pytest.approx(0.2)
    assert doc["workloads"][1]["mfu"] is None
    assert doc["layer_types"]["gemm"]["mfu"] == pytest.approx(0.8)
    assert doc["layer_types_by_dtype"]["fp32"]["gemm"]["workloads"] == 1


# --- energy: work per joule over the measured window ------------------------------------------


def _energy(joules, window_s, calls, flops, domains=None, update_s=1e-3):
    return workload_energy(
        domains or {"package-0": joules}, ["package-0"] if not domains else ["package-0", "dram"],
        window_s, calls, flops, "test meter", update_s,
    )  # fmt: skip


def test_workload_energy_by_hand():
    # package-0 9 J + dram 1 J = 10 J (core 4 J lies inside the package: not added).
    e = _energy(None, 0.5, 40, 1e9, domains={"package-0": 9.0, "dram": 1.0, "core": 4.0})
    assert e["available"] and e["joules"] == pytest.approx(10.0)
    assert e["joules_by_domain"] == {"package-0": 9.0, "dram": 1.0, "core": 4.0}
    assert e["avg_watts"] == pytest.approx(20.0)  # 10 J / 0.5 s
    assert e["flops_per_joule"] == pytest.approx(4e9)  # 1e9 FLOP x 40 calls / 10 J
    assert e["calls_per_joule"] == pytest.approx(4.0)  # 40 calls / 10 J
    # 0.5 s / 1 ms = 500 updates >= 100: high; a stale end is at most 2/500 = 0.4%.
    assert e["confidence"] == "high" and "0.4%" in e["confidence_reason"]
    assert e["method"] == "test meter" and e["counter_update_s"] == 1e-3


def test_energy_confidence_thresholds():
    # RAPL, 0.1 s window: 0.1 / 1e-3 = 100 updates, exactly the threshold: high.
    assert energy_confidence(0.1, 1e-3)[0] == "high"
    # RAPL, 0.05 s: 50 updates, low; a stale end can be 2/50 = 4% off.
    level, why = energy_confidence(0.05, 1e-3)
    assert level == "low" and "~4%" in why and "50 updates" in why
    # NVML (~100 ms updates), 2 s window: 20 updates, low, 2/20 = 10%.
    level, why = energy_confidence(2.0, 0.1)
    assert level == "low" and "~10%" in why
    # NVML needs 100 x 0.1 s = 10 s for high.
    assert energy_confidence(10.0, 0.1)[0] == "high"


def test_counter_that_did_not_advance_gives_no_value():
    e = _energy(0.0, 0.05, 10, 1e9, update_s=0.1)
    assert e == {"available": False, "reason": e["reason"]}
    assert "did not advance over the 0.05 s" in e["reason"]
    assert "no value is estimated" in e["reason"]


def _metered(wid, layer_type, flops, joules, window_s, calls, dtype="fp32"):
    # Samples sum to 80% of the window (the window also holds the loop's bookkeeping).
    return {
        **_raw_workload(dtype, flops, 1e6, [0.8 * window_s / calls] * calls),
        "id": wid, "layer_type": layer_type,
        "energy": _energy(joules, window_s, calls, flops),
    }  # fmt: skip


def test_energy_aggregate_by_hand():
    a = _metered("a", "gemm", 1e9, joules=10.0, window_s=0.5, calls=40)
    b = _metered("b", "gemm", 2e9, joules=30.0, window_s=1.0, calls=10)
    agg = energy_aggregate([a, b])
    # Work: 1e9 x 40 + 2e9 x 10 = 6e10 FLOP over 10 + 30 = 40 J: 1.5e9 FLOP/J.
    assert agg["flops"] == pytest.approx(6e10) and agg["joules"] == pytest.approx(40.0)
    assert agg["flops_per_joule"] == pytest.approx(1.5e9)
    # Time-weighted watts: (20 W x 0.5 s + 30 W x 1.0 s) / 1.5 s = 40 J / 1.5 s = 26.67 W.
    assert agg["avg_watts"] == pytest.approx(40 / 1.5)
    assert agg["window_s"] == pytest.approx(1.5) and agg["calls"] == 50
    assert agg["confidence"] == "high"  # 500 and 1000 RAPL updates
    # One reading over 0.05 s (50 updates): the aggregate is low confidence, naming it.
    c = _metered("c", "gemm", 1e9, joules=1.0, window_s=0.05, calls=5)
    low = energy_aggregate([a, c])
    assert low["confidence"] == "low" and "1 of 2" in low["confidence_reason"]


def test_energy_aggregate_is_absent_unless_every_workload_has_energy():
    a = _metered("a", "gemm", 1e9, joules=10.0, window_s=0.5, calls=40)
    bare = {**_raw_workload("fp32", 1e9, 1e6, [1e-3]), "id": "bare"}
    why = {**bare, "id": "why", "energy": {"available": False, "reason": "no RAPL here"}}
    agg = energy_aggregate([a, bare])
    assert agg["available"] is False
    assert agg["reason"] == (
        "1 of 2 measured workload(s) have no energy reading (bare: no energy recorded for "
        "this workload)"
    )
    assert energy_aggregate([why])["reason"].endswith("(why: no RAPL here)")
    assert energy_aggregate([]) == {"available": False, "reason": "no measured workloads"}


def test_analyse_run_aggregates_energy_per_layer_type():
    a = _metered("a", "gemm", 1e9, joules=10.0, window_s=0.5, calls=40)
    b = _metered("b", "gemm", 2e9, joules=30.0, window_s=1.0, calls=10, dtype="bf16")
    n = {**_raw_workload("fp32", 1e6, 1e6, [1e-3] * 3), "id": "n", "layer_type": "norm"}
    failed = {**_raw_workload("fp32", 1, 1, []), "id": "f", "status": "unsupported",
              "energy": {"available": False, "reason": "not measured: unsupported"}}  # fmt: skip
    a["energy"]["avg_watts"] = 999.0  # a stale derived number: recomputed from joules/window
    doc = {
        "ceilings": {
            "compute": {"fp32": {"peak": P}, "bf16": {"peak": P}}, "bandwidth": {"peak": W},
        },
        "workloads": [a, b, n, failed],
    }  # fmt: skip
    analyse_run(doc)
    assert doc["workloads"][0]["energy"]["avg_watts"] == pytest.approx(20.0)  # 10 J / 0.5 s
    gemm = doc["layer_energy"]["gemm"]
    assert gemm["available"] and gemm["flops_per_joule"] == pytest.approx(1.5e9)  # as above
    assert gemm["avg_watts"] == pytest.approx(40 / 1.5)
    # norm's one workload has no reading: absent, with the reason (the failed one is not
    # measured, so it is not counted against any layer type).
    assert doc["layer_energy"]["norm"] == {
        "available": False,
        "reason": "1 of 1 measured workload(s) have no energy reading (n: no energy recorded "
        "for this workload)",
    }
    assert set(doc["layer_energy"]) == {"gemm", "norm"}
    # By dtype: fp32 gemm is a alone (1e9 x 40 / 10 J = 4e9), bf16 gemm is b (2e9 x 10 / 30 J).
    assert doc["layer_energy_by_dtype"]["fp32"]["gemm"]["flops_per_joule"] == pytest.approx(4e9)
    assert doc["layer_energy_by_dtype"]["bf16"]["gemm"]["flops_per_joule"] == pytest.approx(
        2e10 / 30
    )
