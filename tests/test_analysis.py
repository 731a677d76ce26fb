"""Roofline numbers against hand-worked cases (design.md's definitions, term by term)."""

import pytest

from reviewkit.analysis import (
    COMPUTE_BOUND,
    FASTER_THAN_ROOFLINE,
    MEMORY_BOUND,
    NOISY,
    OVERHEAD_BOUND,
    TAIL_RISK,
    aggregate,
    analyse_run,
    flags,
    roofline,
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
