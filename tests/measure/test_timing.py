"""The sampling loop with an injected fake clock: no real hardware, exact expectations."""

from reviewkit.measure.timing import SamplingPolicy, collect_samples, timed_call


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


def test_window_hooks_bracket_exactly_the_measured_calls():
    clock = FakeClock()
    events = []
    durations = iter([1 / 64] * 1000)

    def fn():
        events.append("call")
        clock.now += next(durations)

    policy = SamplingPolicy(
        warmup_calls=2, warmup_s=0.0, min_samples=5, min_time_s=0.125, max_samples=1000,
        budget_s=100,
    )  # fmt: skip
    result = collect_samples(
        timed_call(fn, clock),
        policy,
        clock,
        on_window_start=lambda: events.append(("start", clock.now)),
        on_window_end=lambda: events.append(("end", clock.now)),
    )
    # As in the first test: 2 warm-up calls (to 2/64 s), then 8 measured calls (to 10/64 s).
    # The start hook fires once, after the 2 warm-up calls; the end hook once, after the 8th.
    assert events == ["call", "call", ("start", 2 / 64)] + ["call"] * 8 + [("end", 10 / 64)]
    # The window is 8 calls of 1/64 s = 0.125 s; the whole wall time includes the warm-up.
    assert result.window_s == 8 / 64
    assert result.wall_s == 10 / 64


def test_window_is_wall_time_not_the_sum_of_samples():
    # Every clock read costs 1/256 s (exact in binary). The workload itself takes 1/64 s.
    # Policy: 1 warm-up call, then exactly 2 samples (min_samples=2, min_time_s=0).
    clock = FakeClock(read_cost_s=1 / 256)
    fn = workload(clock, [1 / 64] * 10)
    policy = SamplingPolicy(
        warmup_calls=1, warmup_s=0.0, min_samples=2, min_time_s=0.0, max_samples=10, budget_s=100
    )
    result = collect_samples(timed_call(fn, clock), policy, clock)
    # Each sample reads the clock twice around the call: 1/64 + 1/256 = 5/256 s.
    assert result.samples_s == (5 / 256, 5 / 256)
    # Window clock reads: window_begin (read r0), then per measured call 2 reads in timed_call;
    # after call 1 the loop checks the deadline (1 read); after call 2 the target is met and
    # the loop breaks before any deadline read; then the closing read. Time from the first
    # read to the last: call 1 (2 reads + 1/64) + deadline read + call 2 (2 reads + 1/64)
    # + the closing read = 2/64 + 6/256 = 14/256 s, above the samples' sum of 10/256 s.
    assert result.window_s == 14 / 256
    assert sum(result.samples_s) == 10 / 256


def test_no_window_hooks_when_warmup_spends_the_budget():
    clock = FakeClock()
    fired = []
    fn = workload(clock, [10.0] * 10)
    policy = SamplingPolicy(warmup_calls=2, warmup_s=0.0, budget_s=5)
    result = collect_samples(
        timed_call(fn, clock), policy, clock, lambda: fired.append("start"),
        lambda: fired.append("end"),
    )  # fmt: skip
    assert fired == [] and result.samples_s == () and result.window_s == 0.0
