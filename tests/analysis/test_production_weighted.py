"""The production-weighted verdict: the source material's case, worked by hand, and its parts."""

from __future__ import annotations

import numpy as np
import pytest
from runfactory import fake_clock_run

from reviewkit.analysis.compare import compare
from reviewkit.analysis.production_weighted import (
    HOST_OVERHEAD,
    OTHER_IDLE,
    floor_call_ratio,
    mix_of,
    production_verdict,
)

ROUNDS, CALLS = 6, 30
# per layer type: baseline per-call time (s) and the candidate's ratio. The candidate is the
# platform that "looked best on synthetic GEMM": 0.6x on GEMMs, 1.5x on the memory-bound norm
# and elementwise calls and on its per-call overhead
LAYERS = {"gemm": (4e-3, 0.6), "norm": (2e-4, 1.5), "elementwise": (1e-4, 1.5)}
OVERHEAD_S, OVERHEAD_RATIO = 10e-6, 1.5


def side(ratio_of: dict, overhead_ratio: float, label: str, seed: int):
    rng = np.random.default_rng(seed)
    workloads = []
    for lt, (t, _) in LAYERS.items():
        level = t * ratio_of.get(lt, 1.0)
        by_round = [level * (1 + rng.normal(0, 0.003)) * (1 + rng.normal(0, 0.002, CALLS))
                    for _ in range(ROUNDS)]  # fmt: skip
        o = OVERHEAD_S * overhead_ratio
        workloads.append({
            "id": f"{lt}.w.fp32", "layer_type": lt, "dtype": "fp32", "status": "ok",
            "flops": 1e9 if lt == "gemm" else 1e5, "bytes": 1e6, "params": {}, "reproduce": "",
            "samples_s": np.concatenate(by_round).tolist(), "round_sizes": [CALLS] * ROUNDS,
            "overhead": {"available": True, "method": "floor-call",
                         "samples_s": (o * (1 + rng.normal(0, 0.001, 40))).tolist()},
        })  # fmt: skip
    return fake_clock_run(workloads, {"id": "ab-1", "side": label})


@pytest.fixture(scope="module")
def compared():
    base = side({}, 1.0, "baseline", 1)
    cand = side({lt: r for lt, (_, r) in LAYERS.items()}, OVERHEAD_RATIO, "candidate", 2)
    return base, cand, compare(base, cand)


def gpu_trace(layers: dict, window_s: float, idle: float, host_overhead: float) -> dict:
    """A device-basis trace: busy time split by layer type, idle and host-overhead shares."""
    busy = sum(layers.values())
    return {"path": "prod.json", "time_basis": "device",
            "op_mix": {"time_s": busy, "unmapped": {"time_s": 0.0, "share": 0.0},
                       "layer_types": {k: {"time_s": v, "share": v / busy}
                                       for k, v in layers.items()}},
            "device": {"window_s": window_s, "idle_share": idle,
                       "host_overhead_share": host_overhead}}  # fmt: skip


def test_the_source_case_a_gemm_win_that_production_weighs_as_a_loss(compared):
    base, cand, comp = compared
    by_layer = {lt.layer_type: lt for lt in comp.layer_types}
    assert by_layer["gemm"].verdict == "faster"  # the synthetic-GEMM view: a clear win
    # production: a 1 s window, the device idle 30% of it, 20 points of that with the host
    # busy (host overhead); of the 0.7 s busy, GEMMs 0.14 s (20%), norm 0.28, elementwise 0.28
    mix = mix_of([gpu_trace({"gemm": 0.14, "norm": 0.28, "elementwise": 0.28}, 1.0, 0.3, 0.2)])
    assert mix.layers == pytest.approx({"gemm": 0.14, "norm": 0.28, "elementwise": 0.28})
    assert (mix.host_overhead, mix.other_idle) == pytest.approx((0.2, 0.1))
    overhead = floor_call_ratio([(w.baseline_id, w.candidate_id) for w in comp.workloads],
                                base, cand)  # fmt: skip
    assert overhead == pytest.approx(OVERHEAD_RATIO, rel=0.01)
    pv = production_verdict(comp.layer_draws, {k: v.time_ratio for k, v in by_layer.items()},
                            mix, overhead, margin=0.02)  # fmt: skip
    # by hand: 0.14 x 0.6 + 0.28 x 1.5 + 0.28 x 1.5 + 0.2 x 1.5 (host overhead) + 0.1 x 1
    # (other idle) = 0.084 + 0.42 + 0.42 + 0.3 + 0.1 = 1.324: a production loss
    assert pv.ratio == pytest.approx(1.324, rel=0.01)
    assert pv.verdict == "slower" and pv.ci[0] > 1.02
    assert pv.carried_at_one == pytest.approx(0.1)
    parts = {p.name: p for p in pv.parts}
    assert parts[HOST_OVERHEAD].ratio == pytest.approx(1.5, rel=0.01)
    assert parts[OTHER_IDLE].ratio == 1.0


def test_a_gemm_heavy_production_keeps_the_win(compared):
    _, _, comp = compared
    by_layer = {lt.layer_type: lt.time_ratio for lt in comp.layer_types}
    # 90% GEMM, no idle: 0.9 x 0.6 + 0.05 x 1.5 + 0.05 x 1.5 = 0.69, faster
    mix = mix_of([gpu_trace({"gemm": 0.9, "norm": 0.05, "elementwise": 0.05}, 1.0, 0.0, 0.0)])
    pv = production_verdict(comp.layer_draws, by_layer, mix, 1.5, margin=0.02)
    assert pv.ratio == pytest.approx(0.69, rel=0.01) and pv.verdict == "faster"


def test_layer_types_the_comparison_did_not_measure_are_carried_at_one(compared):
    _, _, comp = compared
    by_layer = {lt.layer_type: lt.time_ratio for lt in comp.layer_types}
    # half the busy time in attention, which the comparison has no workload of: 0.5 x 0.6
    # (gemm) + 0.5 x 1 = 0.8, and half the time said to be carried at 1
    mix = mix_of([gpu_trace({"gemm": 0.5, "attention": 0.5}, 1.0, 0.0, 0.0)])
    pv = production_verdict(comp.layer_draws, by_layer, mix, None, margin=0.02)
    assert pv.ratio == pytest.approx(0.8, rel=0.01) and pv.carried_at_one == pytest.approx(0.5)
    none = mix_of([gpu_trace({"attention": 1.0}, 1.0, 0.0, 0.0)])
    assert production_verdict(comp.layer_draws, by_layer, none, None, margin=0.02) is None


def test_a_host_trace_weighs_by_operator_time():
    trace = {"path": "cpu.json", "time_basis": "host",
             "op_mix": {"time_s": 2.0, "unmapped": {"time_s": 0.5},
                        "layer_types": {"gemm": {"time_s": 1.5}}}}  # fmt: skip
    mix = mix_of([trace])
    assert mix.layers == {"gemm": 0.75} and mix.unmapped == 0.25 and mix.host_overhead == 0.0
    assert mix_of([trace, {**trace, "time_basis": "device"}]) is None  # one basis only


def test_an_a_a_weighs_to_no_difference():
    # the same mapping on both sides (two seeds of one interleaved A/B): every layer's ratio is
    # 1 within noise, so production's weighted ratio is too, whatever the mix
    base = side({}, 1.0, "baseline", 3)
    cand = side({}, 1.0, "candidate", 4)
    comp = compare(base, cand)
    by_layer = {lt.layer_type: lt.time_ratio for lt in comp.layer_types}
    mix = mix_of([gpu_trace({"gemm": 0.14, "norm": 0.28, "elementwise": 0.28}, 1.0, 0.3, 0.2)])
    overhead = floor_call_ratio([(w.baseline_id, w.candidate_id) for w in comp.workloads],
                                base, cand)  # fmt: skip
    pv = production_verdict(comp.layer_draws, by_layer, mix, overhead, margin=0.02)
    assert pv.ratio == pytest.approx(1.0, abs=0.01)
    assert pv.verdict in ("equivalent", "inconclusive") and pv.ci[0] < 1 < pv.ci[1]
