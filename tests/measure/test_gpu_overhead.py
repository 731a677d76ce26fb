"""The GPU overhead record with fake timers, captures and profiles: each method, hand-worked."""

import pytest

torch = pytest.importorskip("torch")

from reviewkit.analysis import overhead  # noqa: E402
from reviewkit.analysis.stats import summarise  # noqa: E402
from reviewkit.measure import graphs  # noqa: E402
from reviewkit.measure.gpu_overhead import measure_gpu_overhead, union_seconds  # noqa: E402
from reviewkit.measure.timing import SamplingPolicy, collect_samples  # noqa: E402

US = 1e-6
# One warm-up call, then exactly five samples: the fakes take no wall time, so the count is
# what stops the loop.
POLICY = SamplingPolicy(warmup_calls=1, warmup_s=0.0, min_samples=5, min_time_s=0.0,
                        max_samples=5, budget_s=60.0)  # fmt: skip
DEVICE = torch.device("cuda")  # only named: no fake below touches a GPU
INTERVALS = [(0.0, 10 * US), (5 * US, 15 * US), (20 * US, 25 * US)]


def eager():
    return None


def replay():
    return None


def floor_call():
    return None


# What each call takes on the fake device: the eager call 30 us, its graph replay 18 us (12 us
# of host issue cost gone), the floor call 7 us.
DURATIONS_S = {eager: 30 * US, replay: 18 * US, floor_call: 7 * US}


def fake_timed(fn, device):
    assert device is DEVICE
    return lambda: DURATIONS_S[fn]


def captures(fn, device):
    assert fn is eager and device is DEVICE
    return replay


def capture_fails(fn, device):
    raise graphs.GraphCaptureError("RuntimeError: operation not permitted when stream is capturing")


def overlapping_intervals(fn, device):
    assert fn is eager
    return list(INTERVALS)


def profile_fails(fn, device):
    raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED\nmore detail")


def eager_stats():
    """The workload's own statistics, as the runner measures them: 30 us a call."""
    samples = collect_samples(fake_timed(eager, DEVICE), POLICY).samples_s
    assert samples == (30 * US,) * 5
    return summarise(samples)


def test_union_merges_overlaps_once():
    # [0, 10) and [5, 15) overlap over [5, 10): together 15 us, not 20; [20, 25) adds 5.
    assert union_seconds(INTERVALS) == pytest.approx(20 * US, rel=1e-12)
    assert union_seconds(reversed(INTERVALS)) == pytest.approx(20 * US, rel=1e-12)
    # nested, touching and empty intervals
    assert union_seconds([(0.0, 8.0), (2.0, 3.0), (8.0, 9.0), (5.0, 5.0)]) == 9.0
    assert union_seconds([]) == 0.0


def test_graph_replay_gives_eager_minus_replay():
    record = measure_gpu_overhead(eager, DEVICE, POLICY, capture=captures, timed=fake_timed,
                                  kernel_intervals=profile_fails)  # fmt: skip
    assert record["available"] is True
    assert record["method"] == overhead.CUDA_GRAPH
    assert record["samples_s"] == [18 * US] * 5  # the replay's samples, not the eager call's
    assert record["reason"].startswith("replayed from a CUDA graph: ")
    t_o = overhead.read({"overhead": record}, eager_stats())
    # 30 us eager - 18 us replay = 12 us of host issue cost
    assert t_o.method == overhead.CUDA_GRAPH
    assert t_o.overhead_s == pytest.approx(12 * US, rel=1e-12)
    assert t_o.overhead_low_s == pytest.approx(12 * US, rel=1e-12)  # constant samples
    assert not t_o.upper_bound


def test_failed_capture_falls_back_to_the_union_of_kernel_intervals():
    record = measure_gpu_overhead(eager, DEVICE, POLICY, capture=capture_fails, timed=fake_timed,
                                  kernel_intervals=overlapping_intervals)  # fmt: skip
    assert record["available"] is True
    assert record["method"] == overhead.KERNEL_BUSY
    assert record["kernel_busy_s"] == pytest.approx(20 * US, rel=1e-12)  # not 25: overlap once
    assert record["reason"] == (
        "graph capture failed (RuntimeError: operation not permitted when stream is capturing): "
        "t minus the union of the call's 3 kernel intervals from one profiled call"
    )
    t_o = overhead.read({"overhead": record}, eager_stats())
    assert t_o.overhead_s == pytest.approx(10 * US, rel=1e-12)  # 30 us - 20 us busy


def test_a_replay_that_fails_while_sampled_falls_back_too():
    def broken_replay():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    record = measure_gpu_overhead(eager, DEVICE, POLICY, capture=lambda fn, device: broken_replay,
                                  timed=lambda fn, device: fn,
                                  kernel_intervals=overlapping_intervals)  # fmt: skip
    assert record["method"] == overhead.KERNEL_BUSY
    assert record["reason"].startswith(
        "graph capture failed (RuntimeError: CUDA error: an illegal memory access"
    )


def test_neither_capture_nor_profile_gives_the_floor_as_an_upper_bound():
    built = []

    def floor():
        built.append(True)
        return floor_call

    record = measure_gpu_overhead(eager, DEVICE, POLICY, floor, capture=capture_fails,
                                  timed=fake_timed, kernel_intervals=profile_fails)  # fmt: skip
    assert built == [True]
    assert record == {
        "available": True,
        "method": overhead.FLOOR_UPPER_BOUND,
        "samples_s": [7 * US] * 5,
        "reason": "neither capture nor profiling worked (capture: RuntimeError: operation not "
                  "permitted when stream is capturing; profiling: RuntimeError: "
                  "CUPTI_ERROR_NOT_INITIALIZED): a floor call's host issue cost, an upper bound",
    }  # fmt: skip
    t_o = overhead.read({"overhead": record}, eager_stats())
    assert t_o.overhead_s == pytest.approx(7 * US, rel=1e-12)
    assert t_o.upper_bound


def test_a_profile_without_kernels_is_no_measurement():
    # 0 s busy would make the whole 30 us call overhead: the floor bound is used instead.
    record = measure_gpu_overhead(eager, DEVICE, POLICY, lambda: floor_call,
                                  capture=capture_fails, timed=fake_timed,
                                  kernel_intervals=lambda fn, device: [])  # fmt: skip
    assert record["method"] == overhead.FLOOR_UPPER_BOUND
    assert "profiling: RuntimeError: the profiled call showed no device kernels" in record["reason"]


def test_the_floor_is_built_only_when_both_fail():
    def floor():
        raise AssertionError("the floor must not be built when the capture works")

    record = measure_gpu_overhead(eager, DEVICE, POLICY, floor, capture=captures,
                                  timed=fake_timed, kernel_intervals=profile_fails)  # fmt: skip
    assert record["method"] == overhead.CUDA_GRAPH


def test_nothing_works_and_no_floor_is_not_measured_with_the_reasons():
    record = measure_gpu_overhead(eager, DEVICE, POLICY, None, capture=capture_fails,
                                  timed=fake_timed, kernel_intervals=profile_fails)  # fmt: skip
    assert record == {
        "available": False,
        "method": overhead.NOT_MEASURED,
        "reason": "neither capture nor profiling worked (capture: RuntimeError: operation not "
                  "permitted when stream is capturing; profiling: RuntimeError: "
                  "CUPTI_ERROR_NOT_INITIALIZED), and the workload has no floor call",
    }  # fmt: skip
    t_o = overhead.read({"overhead": record}, eager_stats())
    assert t_o.overhead_s is None and t_o.method == overhead.NOT_MEASURED
    assert t_o.reason == record["reason"]


def test_a_failing_floor_is_not_measured_with_its_cause():
    def floor():
        raise ValueError("no such shape")

    record = measure_gpu_overhead(eager, DEVICE, POLICY, floor, capture=capture_fails,
                                  timed=fake_timed, kernel_intervals=profile_fails)  # fmt: skip
    assert record["method"] == overhead.NOT_MEASURED
    assert record["reason"].endswith(", and the floor call failed (ValueError: no such shape)")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine can capture")
def test_capture_without_cuda_raises_the_capture_error():
    with pytest.raises(graphs.GraphCaptureError) as caught:
        graphs.capture(lambda: None)
    assert str(caught.value)  # names the cause: torch built without CUDA, or no device


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@needs_cuda
def test_capture_replays_the_same_work_on_the_same_buffers():
    device = torch.device("cuda")
    a = torch.randn(64, 64, device=device)
    out = torch.empty(64, 64, device=device)

    def fn():
        torch.matmul(a, a, out=out)

    replay = graphs.capture(fn, device)
    out.zero_()
    a.mul_(2)
    replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a @ a)  # the replay read the new a and wrote out


@needs_cuda
def test_a_call_that_synchronises_cannot_be_captured_and_eager_still_works():
    device = torch.device("cuda")
    x = torch.ones(8, device=device)
    with pytest.raises(graphs.GraphCaptureError):
        graphs.capture(lambda: x.sum().item(), device)
    assert x.sum().item() == 8.0


@needs_cuda
def test_on_a_gpu_the_graph_replay_is_measured():
    device = torch.device("cuda")
    a = torch.randn(256, 256, device=device)

    def fn():
        for _ in range(20):  # many small launches: host issue cost a graph removes
            torch.matmul(a, a)

    record = measure_gpu_overhead(fn, device, POLICY)
    assert record["method"] == overhead.CUDA_GRAPH and len(record["samples_s"]) == 5
    from reviewkit.measure.gpu_overhead import profiled_kernel_intervals

    intervals = profiled_kernel_intervals(fn, device)
    assert len(intervals) >= 20 and all(end > start for start, end in intervals)
