"""The alternating sampler of `ab`: two workloads' calls turn about in one window."""

from __future__ import annotations

import contextlib

from reviewkit.measure.timing import SamplingPolicy, collect_alternating


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_calls_alternate_in_pairs_and_stop_when_both_meet_the_target():
    clock, order = FakeClock(), []

    def call(name, duration):
        def run():
            order.append(name)
            clock.now += duration
            return duration

        return run

    entered = []

    def settings(name):
        @contextlib.contextmanager
        def active():
            entered.append(name)
            yield

        return active

    policy = SamplingPolicy(warmup_calls=1, warmup_s=0.0, min_samples=3, min_time_s=0.0,
                            max_samples=100, budget_s=10.0)  # fmt: skip
    a, b = collect_alternating(
        [call("A", 0.01), call("B", 0.02)], [settings("A"), settings("B")], policy, clock
    )
    # One warm-up each, then A B, B A, A B: three samples each, the target met.
    assert order == ["A", "B", "A", "B", "B", "A", "A", "B"]
    assert entered == order  # every call under its own settings
    assert (a.samples_s, b.samples_s) == ((0.01,) * 3, (0.02,) * 3)
    assert a.warmup_samples_s == (0.01,) and a.stopped_by == b.stopped_by == "target"


def test_a_warm_up_past_its_budget_leaves_both_sides_without_samples():
    clock = FakeClock()

    def slow():
        clock.now += 5.0
        return 5.0

    policy = SamplingPolicy(warmup_calls=1, warmup_s=0.0, min_samples=3, min_time_s=0.0,
                            max_samples=100, budget_s=4.0)  # fmt: skip
    a, b = collect_alternating([slow, slow], [contextlib.nullcontext] * 2, policy, clock)
    assert a.samples_s == b.samples_s == () and a.stopped_by == "budget"
