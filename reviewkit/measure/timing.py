"""The adaptive sampling loop: warm-up, then per-call samples within a time budget.

Torch-free: the clock and the device synchronisation are injected, so the loop is tested with
a fake clock and runs unchanged on CPU (perf_counter) and GPUs (events, synchronise per call).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from reviewkit.suite.profiles import SamplingPolicy  # a suite profile sets its windows

Clock = Callable[[], float]


@dataclass(frozen=True)
class SampleSet:
    samples_s: tuple[float, ...]
    warmup_samples_s: tuple[float, ...]
    stopped_by: str  # "target" | "max-samples" | "budget"
    wall_s: float
    # Wall time of the measured window alone (first measured call's start to last one's end,
    # on `clock`), loop bookkeeping included: what an energy counter read around it spans.
    # Not the sum of the samples. 0 when warm-up used the whole budget.
    window_s: float = 0.0


def _noop() -> None:
    return None


def timed_call(
    fn: Callable[[], object], clock: Clock = time.perf_counter, sync: Callable[[], None] = _noop
) -> Callable[[], float]:
    """Wrap fn so that each call returns its own duration, synchronising before the stop."""

    def call() -> float:
        start = clock()
        fn()
        sync()
        return clock() - start

    return call


def collect_samples(
    call: Callable[[], float],
    policy: SamplingPolicy,
    clock: Clock = time.perf_counter,
    on_window_start: Callable[[], None] = _noop,
    on_window_end: Callable[[], None] = _noop,
) -> SampleSet:
    """Warm up, then sample until the target (count and time) is met, the cap, or the budget.

    `call` runs the workload once and returns its duration in seconds (see `timed_call`);
    `clock` bounds the wall time. Raw samples are returned; statistics are computed elsewhere.

    `on_window_start` runs once after the warm-up, just before the first measured call, and
    `on_window_end` once just after the last one (an energy meter's start and stop), so they
    bracket exactly the measured window; the clock is read inside them, so `window_s` is the
    time between the two. Neither runs when the warm-up used the whole budget, nor
    `on_window_end` when a call raises. They add nothing to the per-sample loop.
    """
    begin = clock()
    deadline = begin + policy.budget_s
    warmup_limit = policy.budget_s if policy.warmup_budget_s is None else policy.warmup_budget_s
    warmup_deadline = begin + warmup_limit
    warmup: list[float] = []
    while True:
        warmup.append(call())
        if clock() >= warmup_deadline:
            return SampleSet((), tuple(warmup), "budget", clock() - begin)
        if len(warmup) >= policy.warmup_calls and clock() - begin >= policy.warmup_s:
            break
    samples: list[float] = []
    append = samples.append
    total = 0.0
    stopped_by = "target"
    on_window_start()
    window_begin = clock()
    while True:
        d = call()
        append(d)
        total += d
        n = len(samples)
        if n >= policy.min_samples and total >= policy.min_time_s:
            break
        if n >= policy.max_samples:
            stopped_by = "max-samples"
            break
        if clock() >= deadline:
            stopped_by = "budget"
            break
    window_s = clock() - window_begin
    on_window_end()
    return SampleSet(tuple(samples), tuple(warmup), stopped_by, clock() - begin, window_s)


def collect_alternating(
    calls: Sequence[Callable[[], float]],
    settings: Sequence[Callable[[], AbstractContextManager]],
    policy: SamplingPolicy,
    clock: Clock = time.perf_counter,
) -> list[SampleSet]:
    """Two workloads' samples taken turn about, call by call (A B, B A, A B, ...), so a change
    of the machine's state within the window reaches both alike; each call runs under its own
    settings (`settings[i]()` is entered around it, outside the timed region).

    Each side warms up first under the policy's warm-up rules. Sampling stops when both have
    met the target (count and time), either reaches the cap, or the budget runs out. A side
    whose warm-up used the whole warm-up budget gets no samples (the runner's timeout)."""
    begin = clock()
    deadline = begin + policy.budget_s
    warmup_limit = policy.budget_s if policy.warmup_budget_s is None else policy.warmup_budget_s
    warmups: list[list[float]] = [[], []]
    for side, call in enumerate(calls):
        start = clock()
        while True:
            with settings[side]():
                warmups[side].append(call())
            if clock() >= begin + warmup_limit:
                wall = clock() - begin
                return [SampleSet((), tuple(w), "budget", wall) for w in warmups]
            if len(warmups[side]) >= policy.warmup_calls and clock() - start >= policy.warmup_s:
                break
    samples: list[list[float]] = [[], []]
    totals = [0.0, 0.0]
    stopped_by = "target"
    window_begin = clock()
    turn = 0
    while True:
        for side in (0, 1) if turn % 2 == 0 else (1, 0):
            with settings[side]():
                d = calls[side]()
            samples[side].append(d)
            totals[side] += d
        turn += 1
        if all(len(s) >= policy.min_samples and t >= policy.min_time_s
               for s, t in zip(samples, totals, strict=True)):  # fmt: skip
            break
        if max(len(s) for s in samples) >= policy.max_samples:
            stopped_by = "max-samples"
            break
        if clock() >= deadline:
            stopped_by = "budget"
            break
    window_s = clock() - window_begin
    wall = clock() - begin
    return [
        SampleSet(tuple(s), tuple(w), stopped_by, wall, window_s)
        for s, w in zip(samples, warmups, strict=True)
    ]
