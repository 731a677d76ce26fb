"""The sampling loop with an injected fake clock: no real hardware, exact expectations."""

from reviewkit.timing import SamplingPolicy, collect_samples, timed_call


class FakeClock:
    """A clock that only moves when the fake workload runs (and by a fixed tick per read)."""

    def __init__(self, read_cost_s: float = 0.0):
        self.now = 0.0
        self.read_cost_s = read_cost_s

    def __call__(self) -> float:
        self.now += self.read_cost_s
        return self.now


def workload(clock: FakeClock, durations):
    it = iter(durations)

    def fn():
        clock.now += next(it)

    return fn


def test_stops_when_count_and_time_targets_are_met():
    clock = FakeClock()
    # Every call takes 1/64 s (exact in binary, so sums are exact). Policy: 2 warm-up calls,
    # then >= 5 samples and >= 0.125 s.
    fn = workload(clock, [1 / 64] * 1000)
    policy = SamplingPolicy(
        warmup_calls=2,
        warmup_s=0.0,
        min_samples=5,
        min_time_s=0.125,
        max_samples=1000,
        budget_s=100,
    )
    result = collect_samples(timed_call(fn, clock), policy, clock)
    assert len(result.warmup_samples_s) == 2
    assert len(result.samples_s) == 8  # 0.125 s / (1/64 s): time target dominates the count
    assert result.samples_s == (1 / 64,) * 8
    assert result.stopped_by == "target"
    assert result.wall_s == 10 / 64


def test_count_target_dominates_for_slow_calls():
    clock = FakeClock()
    fn = workload(clock, [0.5] * 100)
    policy = SamplingPolicy(
        warmup_calls=1, warmup_s=0.0, min_samples=4, min_time_s=0.1, max_samples=100, budget_s=100
    )
    result = collect_samples(timed_call(fn, clock), policy, clock)
    assert len(result.samples_s) == 4


def test_budget_stops_a_slow_path_with_few_samples():
    clock = FakeClock()
    # 1 s per call against a 3.5 s budget: 1 warm-up + samples until the clock passes 3.5 s.
    fn = workload(clock, [1.0] * 100)
    policy = SamplingPolicy(
        warmup_calls=1, warmup_s=0.0, min_samples=20, min_time_s=0.1, max_samples=100, budget_s=3.5
    )
    result = collect_samples(timed_call(fn, clock), policy, clock)
    assert len(result.warmup_samples_s) == 1
    assert len(result.samples_s) == 3  # calls end at 2, 3, 4 s; 4 >= 3.5 stops
    assert result.stopped_by == "budget"


def test_budget_spent_in_warmup_gives_no_samples():
    clock = FakeClock()
    fn = workload(clock, [10.0] * 10)
    policy = SamplingPolicy(warmup_calls=2, warmup_s=0.0, budget_s=5)
    result = collect_samples(timed_call(fn, clock), policy, clock)
    assert result.samples_s == ()
    assert result.warmup_samples_s == (10.0,)
    assert result.stopped_by == "budget"


def test_cap_on_sample_count():
    clock = FakeClock()
    fn = workload(clock, [1e-6] * 1000)
    policy = SamplingPolicy(
        warmup_calls=1, warmup_s=0.0, min_samples=5, min_time_s=10, max_samples=50, budget_s=100
    )
    result = collect_samples(timed_call(fn, clock), policy, clock)
    assert len(result.samples_s) == 50
    assert result.stopped_by == "max-samples"


def test_warmup_runs_for_its_minimum_time():
    clock = FakeClock()
    fn = workload(clock, [1 / 64] * 1000)
    policy = SamplingPolicy(
        warmup_calls=1, warmup_s=5 / 64, min_samples=1, min_time_s=0.0, max_samples=10, budget_s=100
    )
    result = collect_samples(timed_call(fn, clock), policy, clock)
    assert len(result.warmup_samples_s) == 5  # 5 calls of 1/64 s reach 5/64 s


def test_sync_runs_before_the_stop_reading():
    clock = FakeClock()
    events = []

    def fn():
        events.append("call")
        clock.now += 0.001

    def sync():
        events.append("sync")
        clock.now += 0.002  # the device finishing queued work counts in the sample

    call = timed_call(fn, clock, sync)
    assert abs(call() - 0.003) < 1e-12
    assert events == ["call", "sync"]
