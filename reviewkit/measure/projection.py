"""A run's projected duration from its calls' roofline times and the sampling policy (torch-free).

Before a long profile measures (the serving profile on a CPU: hours), `run` prints how long
its sampling will take and asks for `--yes` above the profile's limit. Each call is taken at
its roofline lower bound (runner.predicted_call_s: FLOPs at the measured compute ceiling, bytes
at the bandwidth of the memory level that holds them), so the projection is a lower bound of
the sampling time too, less building inputs (and compiling, where a workload compiles in its
build: the FlexAttention decode cells, seconds each) and the overhead phase.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reviewkit.suite.profiles import SamplingPolicy

MINUTE_S = 60.0
# The phases after sampling, per measured workload, as measure/device_time.py and
# measure/overhead.py run them (tests/measure/test_memory_fit_projection.py holds these equal
# to device_time's constants; this module stays torch-free). t_device: a warm-up window and up
# to ten more, each at least 2 ms, within max(0.5 s, three windows) (the last one may overrun).
DEVICE_TIME_WINDOW_S = 2e-3
DEVICE_TIME_SAMPLES = 10
DEVICE_TIME_BUDGET_S = 0.5
DEVICE_TIME_MIN_WINDOWS = 3
# The overhead phase profiles one call of the workload; its floor calls are small by design.
OVERHEAD_PHASE_CALLS = 1


def later_phases_s(call_s: float) -> float:
    """The t_device and overhead phases of one workload whose call takes `call_s`."""
    w = max(call_s, DEVICE_TIME_WINDOW_S)
    budget = max(DEVICE_TIME_BUDGET_S, DEVICE_TIME_MIN_WINDOWS * w)
    device_time = min((1 + DEVICE_TIME_SAMPLES) * w, budget + w)
    return device_time + OVERHEAD_PHASE_CALLS * call_s


@dataclass(frozen=True)
class Projection:
    total_s: float  # sampling and the later phases
    workloads: int
    skipped: int  # over the budget at the roofline, or not fitting memory: cost nothing
    unknown: int  # no ceiling for the dtype (fp8 on a CPU): taken at its whole budget
    # every measured workload at its whole budget: what a CPU, far below its roofline, comes
    # near (a workload may pass its budget by part of its last round)
    most_s: float = 0.0
    later_s: float = 0.0  # of total_s, the t_device and overhead phases

    def text(self) -> str:
        parts = [f"{self.workloads - self.skipped} of {self.workloads} workloads measured"]
        if self.skipped:
            parts.append(f"{self.skipped} skipped (over budget or not fitting memory)")
        if self.unknown:
            parts.append(f"{self.unknown} without a ceiling taken at their whole budget")
        return (f"projected time at least {self.total_s / MINUTE_S:.1f} min from the device "
                f"profile's ceilings ({self.later_s / MINUTE_S:.1f} of it the t_device and "
                f"overhead phases), {self.most_s / MINUTE_S:.1f} min if every workload used its "
                f"whole sampling budget; building inputs comes on top ({'; '.join(parts)})")


def round_s(call_s: float, policy: SamplingPolicy, rounds: int, first: bool) -> float:
    """One round of a workload whose every call takes `call_s` (measure/rounds.round_policy's
    share of the policy; timing.collect_samples' stopping rules)."""
    warmup_calls = policy.warmup_calls if first else 1
    warmup = max(warmup_calls * call_s, math.ceil(policy.warmup_s / rounds / call_s) * call_s)
    wanted = max(math.ceil(policy.min_samples / rounds) * call_s, policy.min_time_s / rounds)
    sampled = min(wanted, math.ceil(policy.max_samples / rounds) * call_s)
    left = policy.budget_s / rounds - warmup  # the round's budget counts its warm-up
    return warmup + max(call_s, min(sampled, left))  # a warmed-up round takes one sample


def workload_s(call_s: float | None, policy: SamplingPolicy, rounds: int) -> float | None:
    """A workload's time over all its rounds; None where the slow-path guard skips it (its
    warm-up and one call exceed the budget); the whole budget where the call time is unknown."""
    if call_s is None:
        return policy.budget_s
    if call_s * (policy.warmup_calls + 1) > policy.budget_s:
        return None
    call_s = max(call_s, 1e-9)  # a zero-work call still costs a little
    total = 0.0
    for r in range(rounds):
        if total >= policy.budget_s:  # rounds.budget_spent: it sits out the later rounds
            break
        total += round_s(call_s, policy, rounds, first=r == 0)
    return total


def project(
    calls: Sequence[float | None], skipped: Sequence[bool], policy: SamplingPolicy, rounds: int
) -> Projection:
    """The projection of the workloads whose roofline call times are `calls` (None: unknown),
    those marked `skipped` (not fitting memory) costing nothing."""
    total, later, n_skipped, unknown = 0.0, 0.0, 0, 0
    for call_s, skip in zip(calls, skipped, strict=True):
        t = None if skip else workload_s(call_s, policy, rounds)
        if t is None:
            n_skipped += 1
            continue
        unknown += call_s is None
        phases = later_phases_s(call_s) if call_s is not None else 0.0
        total += t + phases
        later += phases
    measured = len(calls) - n_skipped
    return Projection(total, len(calls), n_skipped, unknown,
                      measured * policy.budget_s + later, later)  # fmt: skip
