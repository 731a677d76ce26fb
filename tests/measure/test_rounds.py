"""Rounds: seeded orders, a round's share of the policy, merging rounds, the build cache."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reviewkit.measure import rounds
from reviewkit.measure.timing import SamplingPolicy


def test_each_round_is_a_seeded_permutation():
    plan = rounds.plan_rounds(6, 4, seed=3)
    assert plan.rounds == 4 and len(plan.orders) == 4
    assert all(sorted(order) == list(range(6)) for order in plan.orders)
    assert len(set(plan.orders)) > 1  # the order changes between rounds
    assert rounds.plan_rounds(6, 4, seed=3) == plan  # and is the same for the same seed
    with pytest.raises(ValueError, match=r"rounds must be 1\.\.100"):
        rounds.plan_rounds(6, 0)


def test_a_round_takes_its_share_of_the_policy():
    quick = SamplingPolicy(warmup_calls=2, warmup_s=0.02, min_samples=20, min_time_s=0.2,
                           max_samples=1000, budget_s=3.0)  # fmt: skip
    first = rounds.round_policy(quick, 5, first=True)
    later = rounds.round_policy(quick, 5, first=False)
    # 20 samples and 0.2 s over 5 rounds: 4 and 0.04 s each; 1000 -> 200; 3 s -> 0.6 s, the
    # warm-up may still use the whole 3 s; later rounds warm up with one call.
    assert (first.min_samples, first.min_time_s, first.max_samples) == (4, pytest.approx(0.04), 200)
    assert (first.budget_s, first.warmup_budget_s) == (pytest.approx(0.6), 3.0)
    assert (first.warmup_calls, later.warmup_calls) == (2, 1)


def _record(samples, status="ok", reason=""):
    return {"status": status, "reason": reason, "samples_s": samples, "warmup_samples_s": [9.0],
            "stopped_by": "target", "round_wall_s": 0.1, "flops": 1.0,
            "energy": {"available": False, "reason": "no meter"}}  # fmt: skip


def test_rounds_merge_in_order_and_a_failure_is_kept():
    merged = rounds.merge_round(_record([], status="not-run"), _record([1.0, 2.0]), 0)
    merged = rounds.merge_round(merged, _record([3.0]), 1)
    assert merged["samples_s"] == [1.0, 2.0, 3.0] and merged["round_sizes"] == [2, 1]
    assert merged["round_wall_s"] == pytest.approx(0.2)
    failed = rounds.merge_round(merged, _record([], status="error", reason="boom"), 2)
    assert failed["status"] == "error" and failed["reason"] == "round 3: boom"
    timed_out = rounds.merge_round(merged, _record([], status="timeout", reason="slow"), 2)
    assert timed_out["status"] == "ok" and timed_out["round_sizes"] == [2, 1]
    assert rounds.budget_spent(timed_out, SamplingPolicy(budget_s=100.0))


@dataclass
class _Spec:
    id: str
    bytes: int
    layer_type: str = "model"


def test_the_build_cache_keeps_slow_builds_within_its_budget():
    now = [0.0]
    durations = {"slow": 0.5, "fast": 0.001, "big": 0.5}
    built = []

    def build(spec, device):
        built.append(spec.id)
        now[0] += durations[spec.id]
        return object()

    cache = rounds.BuildCache(build, max_bytes=100, clock=lambda: now[0])
    specs = [_Spec("slow", 60), _Spec("fast", 1), _Spec("big", 60)]
    first = [cache(s, None) for s in specs]
    second = [cache(s, None) for s in specs]
    # slow is kept (0.5 s >= 0.05 s, 60 of 100 bytes); fast is quick to rebuild; big would
    # pass the byte budget (120 > 100): both are built again.
    assert second[0] is first[0] and second[1] is not first[1] and second[2] is not first[2]
    assert built == ["slow", "fast", "big", "fast", "big"]


def test_a_tensor_op_is_rebuilt_every_round_however_slow_its_build():
    # a 100 MB GELU's inputs take 0.5 s to fill, as long as a model's weights: kept, its
    # tensors' placement would be the same in every round; an elementwise op is rebuilt, a
    # model of the same build time kept
    now = [0.0]
    built = []

    def build(spec, device):
        built.append(spec.id)
        now[0] += 0.5
        return object()

    cache = rounds.BuildCache(build, max_bytes=1000, clock=lambda: now[0])
    specs = [_Spec("gelu", 100, "elementwise"), _Spec("decoder", 100, "model"),
             _Spec("mlp", 100, "block"), _Spec("gemv", 100, "gemm")]  # fmt: skip
    first = [cache(s, None) for s in specs]
    second = [cache(s, None) for s in specs]
    assert [a is b for a, b in zip(first, second, strict=True)] == [False, True, True, False]
    assert built == ["gelu", "decoder", "mlp", "gemv", "gelu", "gemv"]


def test_a_compiling_mappings_cache_keeps_every_build():
    now = [0.0]
    built = []

    def build(spec, device):
        built.append(spec.id)
        now[0] += 0.001  # fast, and together over the byte budget: kept all the same
        return object()

    cache = rounds.BuildCache(build, max_bytes=100, clock=lambda: now[0], keep_all=True)
    specs = [_Spec("a", 60), _Spec("b", 60)]
    first = [cache(s, None) for s in specs]
    assert [cache(s, None) for s in specs] == first and built == ["a", "b"]
