"""Roofline numbers against hand-worked cases (docs/metrics.md's definitions, term by term)."""

import pytest
from runfactory import analysed

from reviewkit.analysis.bottleneck import lever, per_op_roof
from reviewkit.analysis.energy import energy_aggregate, energy_confidence, workload_energy
from reviewkit.analysis.roofline import (
    BELOW_ROOF,
    COMMUNICATION_BOUND,
    COMPUTE_BOUND,
    FASTER_THAN_ROOFLINE,
    MEMORY_BOUND,
    NOISY,
    OVERHEAD_BOUND,
    OVERHEAD_OVERESTIMATED,
    TAIL_RISK,
    UNCLASSIFIED,
    aggregate,
    flags,
    roofline,
)
from reviewkit.bundle.records import Workload

P = 1e12  # peak FLOP/s
W = 1e11  # peak bytes/s; ridge point P/W = 10 FLOP/byte
SHARE = 0.5  # the default rubric's [roofline] below_roof_share


def test_compute_bound_by_hand():
    # F=1e9, B=1e6: t_c = 1e9/1e12 = 1 ms, t_m = 1e6/1e11 = 10 us; t = 1.25 ms, t_o = 50 us.
    r = roofline(1e9, 1e6, 1.25e-3, P, W, overhead_s=50e-6)
    assert r.compute_time_s == pytest.approx(1e-3)
    assert r.memory_time_s == pytest.approx(1e-5)
    assert r.mfu == pytest.approx(0.8)  # 1 / 1.25
    assert r.bandwidth_util == pytest.approx(0.008)  # 0.01 / 1.25
    assert r.achieved_flops_per_s == pytest.approx(8e11)
    assert r.arithmetic_intensity == pytest.approx(1000)
    assert r.ridge_point == pytest.approx(10)
    d = r.decomposition
    # t_k = 1.25 - 0.05 = 1.2 ms; compute = min(1, 1.2) / 1.25 = 0.8; stall: t_m < t_c -> 0
    assert d.kernel_time_s == pytest.approx(1.2e-3)
    assert r.compute_fraction == pytest.approx(0.8)
    assert r.memory_stall_fraction == 0
    assert r.overhead_fraction == pytest.approx(0.04)  # 0.05 / 1.25
    assert r.inefficiency_fraction == pytest.approx(0.16)  # 1 - 0.8 - 0.04 = (1.2 - 1) / 1.25
    assert d.roof_share == pytest.approx(1 / 1.2)  # t_roof / t_k
    assert r.bottleneck == COMPUTE_BOUND
    assert not d.below_roof and not r.faster_than_roofline


def test_memory_bound_by_hand():
    # F=1e6, B=1e8: t_c = 1 us, t_m = 1 ms; t = 1.25 ms, t_o = 0.25 ms -> t_k = 1 ms.
    r = roofline(1e6, 1e8, 1.25e-3, P, W, overhead_s=0.25e-3)
    assert r.compute_fraction == pytest.approx(0.0008)  # 1e-6 / 1.25e-3
    assert r.memory_stall_fraction == pytest.approx(0.7992)  # (1e-3 - 1e-6) / 1.25e-3
    assert r.overhead_fraction == pytest.approx(0.2)
    assert r.inefficiency_fraction == pytest.approx(0.0, abs=1e-12)
    assert r.bottleneck == MEMORY_BOUND


def test_a_floor_of_80_percent_is_overhead_bound():
    # Fake clock: t = 100 us, floor 80 us, roof t_c = 1 us, t_m = 10 us. t_k = 20 us:
    # compute 1%, stall 9%, overhead 80%, inefficiency 10%.
    r = roofline(1e6, 1e6, 1e-4, P, W, overhead_s=80e-6)
    assert (r.compute_fraction, r.memory_stall_fraction) == pytest.approx((0.01, 0.09))
    assert r.overhead_fraction == pytest.approx(0.8)
    assert r.inefficiency_fraction == pytest.approx(0.1)
    assert r.bottleneck == OVERHEAD_BOUND
    assert "batching" in lever(r.decomposition)


def test_a_floor_of_1_percent_at_35_percent_of_roof_is_compute_bound_below_roof():
    # The 27 ms causal attention: t = 27 ms, floor 0.27 ms (1%), t_c = 0.35 x 26.73 ms =
    # 9.3555 ms (F = 9.3555e9 at P = 1e12), t_m small. t_k = 26.73 ms, share = 0.35 < 0.5.
    r = roofline(9.3555e9, 1e6, 27e-3, P, W, overhead_s=0.27e-3)
    d = r.decomposition
    assert r.overhead_fraction == pytest.approx(0.01)
    assert d.roof_share == pytest.approx(0.35)
    assert r.bottleneck == COMPUTE_BOUND and d.below_roof
    assert r.inefficiency_fraction == pytest.approx(1 - 0.01 - 9.3555 / 27)
    assert BELOW_ROOF in flags(r, tail_ratio=1.0)
    assert lever(d).startswith("the kernel or the mapping")


def test_overhead_bound_is_judged_on_the_interval_lower_bound():
    # t = 100 us (interval up to 110 us), floor 55 us (interval down to 50 us): the point
    # fraction 0.55 is over 0.5, but the lower bound min(50, 110) / 110 = 0.4545 is not.
    r = roofline(1e6, 1e6, 1e-4, P, W, overhead_s=55e-6, time_high_s=110e-6,
                 overhead_low_s=50e-6)  # fmt: skip
    assert r.overhead_fraction == pytest.approx(0.55)
    assert r.decomposition.overhead_fraction_low == pytest.approx(50 / 110)
    assert r.bottleneck == MEMORY_BOUND  # the roof's dominant term: t_m 10 us > t_c 1 us
    # With a tight interval (lower bound 0.55) it is overhead-bound; at exactly 0.5, too.
    assert roofline(1e6, 1e6, 1e-4, P, W, overhead_s=55e-6).bottleneck == OVERHEAD_BOUND
    assert roofline(1e6, 1e6, 1e-4, P, W, overhead_s=50e-6).bottleneck == OVERHEAD_BOUND


def test_faster_than_roofline_is_clamped_and_flagged():
    # t_c = 1 ms but t = 0.5 ms, floor 10 us: MFU reads 2.0; compute clamps to the kernel time.
    r = roofline(1e9, 1e6, 5e-4, P, W, overhead_s=1e-5)
    assert r.mfu == pytest.approx(2.0)
    assert r.compute_fraction == pytest.approx(0.98)  # t_k = 0.49 ms, all of it compute
    assert r.overhead_fraction == pytest.approx(0.02)
    assert r.inefficiency_fraction == pytest.approx(0.0, abs=1e-12)
    assert r.faster_than_roofline
    assert FASTER_THAN_ROOFLINE in flags(r, tail_ratio=1.0)
    assert OVERHEAD_OVERESTIMATED not in flags(r, tail_ratio=1.0)  # t < t_roof: not this case


def test_overhead_overestimated_keeps_the_roof_whole():
    # t = 1.1 ms >= t_roof = 1 ms, but a floor of 0.3 ms leaves t_k = 0.8 ms < t_roof: the
    # floor over-measured. t_o becomes t - t_roof = 0.1 ms; compute 1/1.1, overhead 0.1/1.1.
    r = roofline(1e9, 1e6, 1.1e-3, P, W, overhead_s=0.3e-3)
    d = r.decomposition
    assert d.overhead_overestimated and not d.faster_than_roofline
    assert d.overhead_time_s == pytest.approx(0.1e-3)
    assert r.compute_fraction == pytest.approx(1 / 1.1)
    assert r.overhead_fraction == pytest.approx(0.1 / 1.1)
    assert d.roof_share == pytest.approx(1.0)
    assert OVERHEAD_OVERESTIMATED in flags(r, tail_ratio=1.0)


def test_a_collective_is_communication_bound_with_its_latency_in_communication():
    # 4 MiB all-reduce on 2 ranks: t_comm = alpha 50 us + 4 MiB / 1 GB/s = 4.2443 ms; its own
    # compute and memory roofs are microseconds. t = 40 ms, t_o = 0 (host cost is inside alpha):
    # share of roof 4.2443 / 40 = 0.106 -> communication-bound, below roof.
    t_comm = 50e-6 + 4 * 2**20 / 1e9
    r = roofline(2**20, 8 * 2**20, 40e-3, P, W, t_comm, overhead_s=0.0)
    d = r.decomposition
    t_m = 8 * 2**20 / W  # 83.9 us
    assert r.bottleneck == COMMUNICATION_BOUND and d.below_roof
    assert r.communication_fraction == pytest.approx(t_comm / 40e-3)
    assert r.memory_stall_fraction == pytest.approx((t_m - 2**20 / P) / 40e-3)
    assert d.roof_share == pytest.approx((t_m + t_comm) / 40e-3)
    assert r.overhead_fraction == 0.0
    assert "overlap" in lever(d)


def test_composite_is_classified_by_its_per_op_roof_with_fusion_headroom():
    # A block of F = 2e9, B = 2e6 (fused: t_c 2 ms, t_m 20 us -> compute). Its ops: a GEMM
    # (t_c 2 ms, t_m 0.1 ms) and 3 vector ops of t_c 1 us, t_m 1 ms each: per-op roof
    # 2 + 3 x 1 = 5 ms, 3 ms of it memory-dominated -> memory-bound; headroom (5 - 2) / 6 = 0.5.
    per_op = per_op_roof([(2e-3, 0.1e-3, 1), (1e-6, 1e-3, 3)])
    assert per_op.roof_time_s == pytest.approx(5e-3)
    r = roofline(2e9, 2e6, 6e-3, P, W, overhead_s=0.3e-3, per_op=per_op)
    assert r.bottleneck == MEMORY_BOUND
    assert r.fusion_headroom_fraction == pytest.approx(0.5)
    # compute = (2 ms + 3 us) / 6 ms; stall = 3 x (1 ms - 1 us) / 6 ms
    assert r.compute_fraction == pytest.approx(2.003e-3 / 6e-3)
    assert r.memory_stall_fraction == pytest.approx(2.997e-3 / 6e-3)
    assert r.overhead_fraction == pytest.approx(0.05)
    assert r.mfu == pytest.approx(2 / 6)  # MFU keeps the analytic F


def test_unmeasured_overhead_is_never_called_overhead():
    # A schema-5 bundle: t = 100 us, t_roof = 10 us -> 10% of t, under 0.5: unclassified.
    r = roofline(1e6, 1e6, 1e-4, P, W)
    d = r.decomposition
    assert r.bottleneck == UNCLASSIFIED and "overhead not measured" in d.note
    assert r.overhead_fraction is None and r.inefficiency_fraction is None
    assert d.unattributed_fraction == pytest.approx(0.9)  # 1 - 0.01 - 0.09
    # Roof 80% of t: gets its roof class, its share a lower bound.
    r = roofline(1e9, 1e6, 1.25e-3, P, W)
    assert r.bottleneck == COMPUTE_BOUND and r.decomposition.roof_share == pytest.approx(0.8)


@pytest.mark.parametrize(
    "flops,bytes_,t,t_o",
    [(1e9, 1e6, 3e-3, 1e-4), (1e6, 1e8, 2e-3, 0.0), (5e8, 5e7, 6e-4, 5e-4), (1e9, 1e9, 1e-4, 0),
     (0, 0, 1e-6, 2e-6), (1e9, 1e6, 1.1e-3, 0.5e-3)],
)  # fmt: skip
def test_five_fractions_sum_to_one(flops, bytes_, t, t_o):
    r = roofline(flops, bytes_, t, P, W, 1e-5, overhead_s=t_o)
    total = sum(v for k, v in r.decomposition.fractions().items() if k != "unattributed")
    assert total == pytest.approx(1)
    assert all(v >= 0 for v in r.decomposition.fractions().values())


def test_tail_risk_flag_at_threshold():
    r = roofline(1e9, 1e6, 1.25e-3, P, W, overhead_s=0.0)
    assert TAIL_RISK in flags(r, tail_ratio=1.5)  # docs/metrics.md: p99 / p50 >= 1.5
    assert TAIL_RISK not in flags(r, tail_ratio=1.49)


def test_noisy_flag():
    r = roofline(1e9, 1e6, 1.25e-3, P, W, overhead_s=0.0)
    assert flags(r, tail_ratio=1.0, noisy=True) == [NOISY]
    assert flags(r, tail_ratio=1.0) == []


def test_rejects_non_positive_time():
    with pytest.raises(ValueError):
        roofline(1, 1, 0.0, P, W)


def test_layer_aggregate_is_time_weighted():
    a = roofline(1e9, 1e6, 1.25e-3, P, W, overhead_s=0.05e-3)  # t_c 1 ms, overhead 0.05 ms
    b = roofline(1e6, 1e8, 1.25e-3, P, W, overhead_s=0.25e-3)  # t_c 1 us, stall 0.999 ms
    c = roofline(1e6, 1e6, 2.5e-3, P, W, overhead_s=2e-3)  # norm: 2.5 ms, overhead-bound
    agg = aggregate([("gemm", a), ("gemm", b), ("norm", c)], SHARE)
    g = agg["gemm"]
    # MFU = (1e-3 + 1e-6) / 2.5e-3 = 0.4004; stall = (0 + 0.999e-3) / 2.5e-3 = 0.3996
    assert g.mfu == pytest.approx(0.4004)
    assert g.memory_stall_fraction == pytest.approx(0.3996)
    # overhead = (0.05 + 0.25) / 2.5 = 0.12; inefficiency = (0.2 + 0) / 2.5 = 0.08
    assert g.overhead_fraction == pytest.approx(0.12)
    assert g.inefficiency_fraction == pytest.approx(0.08)
    # roof share = sum t_roof / sum t_k = (1 + 1) / (1.2 + 1.0) ms
    assert g.roof_share == pytest.approx(2 / 2.2)
    assert g.time_share == pytest.approx(0.5)  # 2.5 ms of 5 ms
    assert agg["norm"].time_share == pytest.approx(0.5)
    assert agg["norm"].bottleneck == OVERHEAD_BOUND  # 2 / 2.5 = 0.8 of its time
    # sum t_m = 1e-5 + 1e-3 > sum t_c = 1.001e-3 -> memory-bound by the same rule
    assert g.bottleneck == MEMORY_BOUND
    assert g.workloads == 2
    assert g.faster_than_roofline == 0


def test_layer_aggregate_without_measured_overhead_says_so():
    a = roofline(1e6, 1e6, 1e-4, P, W)  # roof 10% of t
    agg = aggregate([("norm", a)], SHARE)["norm"]
    assert agg.bottleneck == UNCLASSIFIED
    assert agg.overhead_fraction is None and agg.unattributed_fraction == pytest.approx(0.9)


def test_layer_aggregate_counts_faster_than_roofline_workloads():
    fast = roofline(1e9, 1e6, 5e-4, P, W, overhead_s=0.0)  # beats t_c = 1 ms
    agg = aggregate([("gemm", fast), ("gemm", roofline(1e9, 1e6, 1.25e-3, P, W, overhead_s=0))])
    assert agg["gemm"].faster_than_roofline == 1
    # (1 ms + 1 ms) / (0.5 ms + 1.25 ms): an MFU above 100% that the count explains.
    assert agg["gemm"].mfu == pytest.approx(2e-3 / 1.75e-3)


def _analysed(ceilings, workloads):
    """A hand-made run of `workloads` against `ceilings`, analysed."""
    return analysed({"suite": {}, "environment": {}, "knobs": {}, "ceilings": ceilings,
                     "workloads": workloads})  # fmt: skip


def _raw_workload(dtype, flops, bytes_, samples, overhead=None):
    w = {
        "id": f"x.{dtype}",
        "layer_type": "gemm",
        "dtype": dtype,
        "status": "ok",
        "flops": flops,
        "bytes": bytes_,
        "samples_s": samples,
    }
    if overhead is not None:
        w["overhead"] = overhead
    return w


def test_analyse_run_recomputes_from_samples():
    # Median of [1, 1.25, 1.5] ms = 1.25 ms -> the compute-bound hand case above, its floor
    # call's median 50 us.
    floor = {"available": True, "method": "floor-call", "samples_s": [40e-6, 50e-6, 60e-6]}
    run = _analysed(
        {"compute": {"fp32": {"peak": P}}, "bandwidth": {"peak": W}},
        [
            _raw_workload("fp32", 1e9, 1e6, [1.5e-3, 1.0e-3, 1.25e-3], floor),
            {**_raw_workload("fp32", 1, 1, []), "id": "failed", "status": "unsupported"},
        ],
    )
    w = run.workloads[0]
    assert w.stats.p50_s == pytest.approx(1.25e-3)
    assert w.mfu == pytest.approx(0.8)
    assert w.decomposition.overhead_fraction == pytest.approx(0.04)
    assert w.decomposition.inefficiency_fraction == pytest.approx(0.16)
    assert w.overhead_method == "floor-call" and w.bottleneck == COMPUTE_BOUND
    assert run.workloads[1].mfu is None
    assert run.layer_types["gemm"].mfu == pytest.approx(0.8)
    assert run.layer_types_by_dtype["fp32"]["gemm"].workloads == 1


def test_analyse_run_takes_the_floors_own_work_out_with_its_double():
    # Floor median 10 us, its double (twice the work, same ops) 14 us: the line through them
    # meets zero work at 2 x 10 - 14 = 6 us. The call: 100 us -> overhead 6%.
    floor = {"available": True, "method": "floor-call", "samples_s": [9e-6, 10e-6, 11e-6],
             "double_samples_s": [13e-6, 14e-6, 15e-6]}  # fmt: skip
    run = _analysed({"compute": {"fp32": {"peak": P}}, "bandwidth": {"peak": W}},
                    [_raw_workload("fp32", 5e7, 1e6, [99e-6, 100e-6, 101e-6], floor)])
    assert run.workloads[0].decomposition.overhead_time_s == pytest.approx(6e-6)
    assert run.workloads[0].decomposition.overhead_fraction == pytest.approx(0.06)


def test_analyse_run_reads_a_graph_replay_as_eager_minus_replay():
    # Eager median 30 us, CUDA-graph replay median 18 us: t_o = 12 us of 30 us = 0.4.
    graph = {"available": True, "method": "cuda-graph", "samples_s": [17e-6, 18e-6, 19e-6]}
    run = _analysed({"compute": {"fp32": {"peak": P}}, "bandwidth": {"peak": W}},
                    [_raw_workload("fp32", 1e6, 1e6, [29e-6, 30e-6, 31e-6], graph)])
    assert run.workloads[0].decomposition.overhead_fraction == pytest.approx(0.4)


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
    return Workload.from_json(_metered_doc(wid, layer_type, flops, joules, window_s, calls, dtype))


def _metered_doc(wid, layer_type, flops, joules, window_s, calls, dtype="fp32"):
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
    bare_doc = {**_raw_workload("fp32", 1e9, 1e6, [1e-3]), "id": "bare"}
    bare = Workload.from_json(bare_doc)
    why = Workload.from_json({**bare_doc, "id": "why",
                              "energy": {"available": False, "reason": "no RAPL here"}})
    agg = energy_aggregate([a, bare])
    assert agg["available"] is False
    assert agg["reason"] == (
        "1 of 2 measured workload(s) have no energy reading (bare: no energy recorded for "
        "this workload)"
    )
    assert energy_aggregate([why])["reason"].endswith("(why: no RAPL here)")
    assert energy_aggregate([]) == {"available": False, "reason": "no measured workloads"}


def test_analyse_run_aggregates_energy_per_layer_type():
    a = _metered_doc("a", "gemm", 1e9, joules=10.0, window_s=0.5, calls=40)
    b = _metered_doc("b", "gemm", 2e9, joules=30.0, window_s=1.0, calls=10, dtype="bf16")
    n = {**_raw_workload("fp32", 1e6, 1e6, [1e-3] * 3), "id": "n", "layer_type": "norm"}
    failed = {**_raw_workload("fp32", 1, 1, []), "id": "f", "status": "unsupported",
              "energy": {"available": False, "reason": "not measured: unsupported"}}  # fmt: skip
    a["energy"]["avg_watts"] = 999.0  # a stale derived number: recomputed from joules/window
    run = _analysed(
        {"compute": {"fp32": {"peak": P}, "bf16": {"peak": P}}, "bandwidth": {"peak": W}},
        [a, b, n, failed],
    )  # fmt: skip
    assert run.workloads[0].energy["avg_watts"] == pytest.approx(20.0)  # 10 J / 0.5 s
    gemm = run.layer_energy["gemm"]
    assert gemm["available"] and gemm["flops_per_joule"] == pytest.approx(1.5e9)  # as above
    assert gemm["avg_watts"] == pytest.approx(40 / 1.5)
    # norm's one workload has no reading: absent, with the reason (the failed one is not
    # measured, so it is not counted against any layer type).
    assert run.layer_energy["norm"] == {
        "available": False,
        "reason": "1 of 1 measured workload(s) have no energy reading (n: no energy recorded "
        "for this workload)",
    }
    assert set(run.layer_energy) == {"gemm", "norm"}
    # By dtype: fp32 gemm is a alone (1e9 x 40 / 10 J = 4e9), bf16 gemm is b (2e9 x 10 / 30 J).
    assert run.layer_energy_by_dtype["fp32"]["gemm"]["flops_per_joule"] == pytest.approx(4e9)
    assert run.layer_energy_by_dtype["bf16"]["gemm"]["flops_per_joule"] == pytest.approx(
        2e10 / 30
    )


def test_a_composite_whose_counted_ops_miss_its_flops_keeps_the_fused_roof():
    # An encoder layer on its fast path: one fused op the FLOP registry does not know (0 FLOPs,
    # 10 MB) against an analytic F = 2e9: 0 < half of 2e9, so no per-op roof; the fused roof
    # (t_c = 2 ms > t_m = 20 us) makes it compute-bound, with no fusion headroom.
    ops = {"ops": [{"op": "aten::_transformer_encoder_layer_fwd", "calls": 1, "flops": 0,
                    "bytes": 10_000_000, "dtype": "fp32"}]}  # fmt: skip
    floor = {"available": True, "method": "floor-call", "samples_s": [1e-4] * 3}
    ceilings = {"compute": {"fp32": {"peak": P}}, "bandwidth": {"peak": W}}
    block = {**_raw_workload("fp32", 2e9, 2e6, [3e-3] * 3, floor), "layer_type": "block",
             "op_profile": ops}  # fmt: skip
    w = _analysed(ceilings, [block]).workloads[0]
    assert w.bottleneck == COMPUTE_BOUND and w.fusion_headroom_fraction is None
    # with its GEMMs counted (1.9e9 of 2e9 FLOPs) the per-op roof applies
    ops["ops"] = [{"op": "aten::addmm", "calls": 2, "flops": 950_000_000, "bytes": 1_000_000,
                   "dtype": "fp32"}]  # fmt: skip
    w = _analysed(ceilings, [block]).workloads[0]
    assert w.fusion_headroom_fraction is not None
