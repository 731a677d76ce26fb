"""A GPU workload's exposed-overhead record: graph replay, else kernel-busy time, else a bound.

On a GPU the exposed overhead of one call is t_o = max(0, t_eager - t_graph): the same call
replayed from a CUDA graph has no host issue cost, and both are timed alike (per call,
synchronised, on the same buffers). Where the capture fails, t_o is t minus the union of the
call's kernel intervals from one profiled call; where that fails too, a floor call's host issue
cost stands in as an upper bound. The analysis (analysis/overhead.py) reads the record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from reviewkit.analysis.overhead import CUDA_GRAPH, FLOOR_UPPER_BOUND, KERNEL_BUSY, NOT_MEASURED
from reviewkit.measure import graphs
from reviewkit.measure.device import device_timed, first_line, synchroniser
from reviewkit.measure.timing import SamplingPolicy, collect_samples

# The device work of a call, by the profiler's activity type: kernels, and the copies and fills
# the copy engines run. Not the GPU-side user annotations, whose spans cover the idle gaps
# between kernels and would count the host's issue time as busy.
DEVICE_ACTIVITIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
# Samples are written at nanosecond resolution, as the workload's own are.
SAMPLE_DIGITS = 9

Timed = Callable[[Callable[[], object], torch.device], Callable[[], float]]
Capture = Callable[[Callable[[], object], torch.device], Callable[[], object]]
KernelIntervals = Callable[[Callable[[], object], torch.device], list[tuple[float, float]]]


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of [start_s, end_s) intervals: where kernels on several streams
    overlap, the overlap counts once (a sum would count the device busy twice over)."""
    total_s = 0.0
    run_start_s = run_end_s = None
    for start_s, end_s in sorted(intervals):
        if end_s <= start_s:
            continue  # empty: no time on the device
        if run_end_s is None or start_s >= run_end_s:
            if run_end_s is not None:
                total_s += run_end_s - run_start_s
            run_start_s, run_end_s = start_s, end_s
        else:
            run_end_s = max(run_end_s, end_s)
    if run_end_s is not None:
        total_s += run_end_s - run_start_s
    return total_s


def profiled_kernel_intervals(
    fn: Callable[[], object], device: torch.device
) -> list[tuple[float, float]]:
    """Each device kernel, copy and fill of one call of fn, as (start_s, end_s) on the
    profiler's clock, from torch.profiler with CPU and CUDA activity. The device is synchronised
    before the call and inside the profiled region, so all of the call's work is recorded and
    none of the work before it. Raises where the profiler cannot run."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    sync = synchroniser(device)
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    return [
        (e.time_range.start / 1e6, e.time_range.end / 1e6)  # the profiler's times are in us
        for e in prof.events()
        if e.device_type == DeviceType.CUDA
        and not e.is_user_annotation
        # torch before FunctionEvent.activity_type (the H200 ran 2.11): every device event
        and getattr(e, "activity_type", None) in (*DEVICE_ACTIVITIES, None)
    ]


def _samples(result_samples_s: Iterable[float]) -> list[float]:
    return [round(s, SAMPLE_DIGITS) for s in result_samples_s]


def _why(exc: BaseException) -> str:
    # GraphCaptureError already carries its cause's first line; do not wrap it twice.
    return str(exc) if isinstance(exc, graphs.GraphCaptureError) else first_line(exc)


def measure_gpu_overhead(
    fn: Callable[[], object],
    device: torch.device,
    policy: SamplingPolicy,
    floor: Callable[[], Callable[[], object]] | None = None,
    *,
    capture: Capture = graphs.capture,
    timed: Timed = device_timed,
    kernel_intervals: KernelIntervals = profiled_kernel_intervals,
) -> dict:
    """The `overhead` record of one GPU workload whose call is fn, its samples under `policy`.

    The record carries what the analysis needs against the workload's own eager samples (taken
    elsewhere with `device_timed`): the graph replay's samples, or the kernel-busy seconds, or
    the floor call's samples (an upper bound), or why none could be measured. `floor` builds the
    floor call (the smallest shape on the same kernels); it is only built when both the capture
    and the profile fail. Every call runs under inference mode, as the workload is measured."""
    with torch.inference_mode():
        try:
            replay = capture(fn, device)
            replayed = collect_samples(timed(replay, device), policy)
            if not replayed.samples_s:
                raise graphs.GraphCaptureError(
                    "the replay's warm-up used the whole sampling budget"
                )
            return {
                "available": True,
                "method": CUDA_GRAPH,
                "samples_s": _samples(replayed.samples_s),
                "reason": "replayed from a CUDA graph: the same call on the same buffers, timed "
                          "per call like the eager samples; t_o = max(0, p50(eager) - "
                          "p50(replay))",
            }  # fmt: skip
        except Exception as exc:  # a failed capture is data: fall back to the profile
            capture_why = _why(exc)
        try:
            intervals = kernel_intervals(fn, device)
            if not intervals:
                # No device activity seen (CUPTI absent or refused): 0 s busy would call the
                # whole call overhead, so this profile measured nothing.
                raise RuntimeError("the profiled call showed no device kernels")
            return {
                "available": True,
                "method": KERNEL_BUSY,
                "kernel_busy_s": union_seconds(intervals),
                "reason": f"graph capture failed ({capture_why}): t minus the union of the "
                          f"call's {len(intervals)} kernel intervals from one profiled call",
            }  # fmt: skip
        except Exception as exc:
            profile_why = _why(exc)
        neither = (f"neither capture nor profiling worked (capture: {capture_why}; "
                   f"profiling: {profile_why})")  # fmt: skip
        if floor is None:
            return _absent(f"{neither}, and the workload has no floor call")
        try:
            floor_fn = floor()
            sampled = collect_samples(timed(floor_fn, device), policy)
        except Exception as exc:
            return _absent(f"{neither}, and the floor call failed ({_why(exc)})")
        if not sampled.samples_s:
            return _absent(f"{neither}, and the floor call's warm-up used its whole budget")
        return {
            "available": True,
            "method": FLOOR_UPPER_BOUND,
            "samples_s": _samples(sampled.samples_s),
            "reason": f"{neither}: a floor call's host issue cost, an upper bound",
        }


def _absent(reason: str) -> dict:
    return {"available": False, "method": NOT_MEASURED, "reason": reason}
