"""Each workload's device time t_device: many launches per timing window, a sample = window / N.

The per-call time t (measure/runner.py) is what eager code pays per call, host launch included;
a CUDA event pair around one 10-100 us call also catches the host's launch jitter. t_device
times the same call N times in one window, so one exposed launch and one timer read are spread
over N calls (triton's do_bench, nvbench): on a GPU the N launches are a CUDA graph replayed
(no host cost between them), else launched back to back; on a CPU the same batch is timed with
perf_counter, which still takes the per-call timer and synchronisation out. The optional L2
flush (knob l2_flush, CUDA only) writes a buffer twice the L2 before every call, outside the
timed region: then each call has its own event pair (the flush sits between calls), read after
one synchronisation for the whole sample, and the flush queued ahead of each call hides its
launch as a graph would.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from reviewkit.bundle.run import STATUS_OK
from reviewkit.measure import graphs
from reviewkit.measure.device import first_line, synchroniser
from reviewkit.measure.timing import SamplingPolicy, collect_samples
from reviewkit.suite.workloads import WorkloadSpec

BACK_TO_BACK, CUDA_GRAPH, NOT_MEASURED = "back-to-back", "cuda-graph", "not-measured"
# What timed the windows: CUDA events (whose per-call pairs also catch the host's launch
# jitter, the reason for t_device) or the host's perf_counter.
CUDA_EVENTS, HOST_CLOCK = "cuda-events", "host-clock"
# One sample's window at least this long. A CUDA event pair resolves about 0.5 us, and a window
# still exposes one launch (the graph's, 5-20 us host to device on the H200 sample): at 2 ms a
# 20 us launch is 1% of the window, the event's resolution 0.025%.
TARGET_WINDOW_S = 2e-3
# The most calls one captured graph holds: its nodes cost capture time and host memory, and at
# 2 ms a window needs more only for calls under 2 us, which replays of the graph then cover.
MAX_GRAPH_LAUNCHES = 1000
# The most units (calls, or graph replays) one sample runs: a 2 ms window of calls of 20 ns, far
# below any suite workload; it bounds a sample whose window reads as 0 on a coarse clock.
MAX_UNITS_PER_SAMPLE = 100_000
# Units timed alone to size a sample, the fastest taken: a thread descheduled mid-call (a
# busy 2-core host stalls for milliseconds) only lengthens a window, and one stalled probe
# sized whole samples at one call on the EPYC VM.
CALIBRATION_PROBES = 3
# The flush buffer is this many times the L2: writing it evicts every line the call left.
L2_FLUSH_L2_MULTIPLE = 2
# Ten windows per workload: a median and a quartile spread (noisy) that one slow window does not
# decide, at ~10 x 2 ms for a small call. The budget bounds a long call's phase (a 100 ms call
# gets its warm-up and four samples); the samples are never fewer than one.
DEVICE_TIME_POLICY = SamplingPolicy(warmup_calls=1, warmup_s=0.0, min_samples=10,
                                    min_time_s=0.0, max_samples=10, budget_s=0.5)  # fmt: skip
# The fewest windows a workload's budget holds, whatever its call: the warm-up and two samples
# (in a smoke run on the busy 2-core VM one workload's warm-up call used the whole 0.5 s).
MIN_BUDGET_WINDOWS = 3
SAMPLE_DIGITS = 12  # picoseconds: a window / N resolves below the per-call samples' nanosecond

CPU_FLUSH_NOT_APPLIED = (
    "not applied: the L2 flush is a CUDA measurement (a buffer written on the device between "
    "calls); on a {device} the caches are the host's and stay as the calls leave them"
)

# Runs `unit` n times back to back and returns the seconds of the window around the n calls.
Window = Callable[[Callable[[], object], int], float]
Capture = Callable[[Callable[[], object], torch.device], Callable[[], object]]


def host_window(sync: Callable[[], None], clock: Callable[[], float] = time.perf_counter) -> Window:
    """The host clock around n calls, the device synchronised before (earlier work out) and
    once after the last call (not after each)."""

    def window(unit: Callable[[], object], n: int) -> float:
        sync()
        start = clock()
        for _ in range(n):
            unit()
        sync()
        return clock() - start

    return window


def cuda_window() -> Window:
    """One CUDA event pair around n launches on the current stream; synchronised at the end."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)

    def window(unit: Callable[[], object], n: int) -> float:
        start.record()
        for _ in range(n):
            unit()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds

    return window


def flushed_cuda_window(flush: Callable[[], object]) -> Window:
    """n calls, each after `flush` and inside its own event pair; the flush is outside every
    pair. One synchronisation after the last call; the window is the sum of the n pairs."""
    pairs: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def window(unit: Callable[[], object], n: int) -> float:
        while len(pairs) < n:
            pairs.append((torch.cuda.Event(enable_timing=True),
                          torch.cuda.Event(enable_timing=True)))  # fmt: skip
        for start, end in pairs[:n]:
            flush()
            start.record()
            unit()
            end.record()
        pairs[n - 1][1].synchronize()
        return sum(start.elapsed_time(end) for start, end in pairs[:n]) / 1e3

    return window


def l2_flusher(device: torch.device) -> tuple[Callable[[], object], int]:
    """(a call writing a buffer L2_FLUSH_L2_MULTIPLE x the device's L2, its bytes)."""
    l2_bytes = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    if l2_bytes <= 0:
        raise RuntimeError("torch does not report this device's L2 size")
    buffer = torch.empty(L2_FLUSH_L2_MULTIPLE * l2_bytes, dtype=torch.int8, device=device)
    return buffer.zero_, buffer.numel()


def graph_launches(call_s: float) -> int:
    """Calls one graph holds: as many as fill TARGET_WINDOW_S at the per-call time t (t holds
    the launch too, so the graph's window is at most the target; replays make up the rest)."""
    if call_s <= 0:
        return 1
    return max(1, min(MAX_GRAPH_LAUNCHES, math.ceil(TARGET_WINDOW_S / call_s)))


def repeats(window_s: float, units: int = 1) -> int:
    """Units per sample so a sample's window is at least TARGET_WINDOW_S, from a window of
    `units` of them; at most MAX_UNITS_PER_SAMPLE."""
    if window_s <= 0:
        return MAX_UNITS_PER_SAMPLE  # below the clock
    return max(1, min(MAX_UNITS_PER_SAMPLE, math.ceil(units * TARGET_WINDOW_S / window_s)))


def calibrated_repeats(unit: Callable[[], object], window: Window) -> int:
    """Units per sample: one unit run once to warm up (a first call pays one-off costs), the
    fastest of CALIBRATION_PROBES timed alone, then a window of that many timed and, if it
    fell short of the target (the timed unit was slower than the rest), the count scaled up
    to it once."""
    window(unit, 1)
    reps = repeats(min(window(unit, 1) for _ in range(CALIBRATION_PROBES)))
    measured_s = window(unit, reps)
    return reps if measured_s >= TARGET_WINDOW_S else repeats(measured_s, reps)


def absent(reason: str, l2_flush: bool = False) -> dict:
    return {"available": False, "method": NOT_MEASURED, "l2_flush": l2_flush, "reason": reason}


def measure_device_time(
    fn: Callable[[], object],
    device: torch.device,
    call_s: float,
    policy: SamplingPolicy = DEVICE_TIME_POLICY,
    l2_flush: bool = False,
    *,
    capture: Capture = graphs.capture,
    window: Window | None = None,
    flusher: Callable[[torch.device], tuple[Callable[[], object], int]] = l2_flusher,
) -> dict:
    """The `device_time` record of one workload whose call is fn and per-call median call_s.

    On CUDA without the flush: a graph of graph_launches(call_s) calls, replayed R times per
    window, R from calibrated_repeats (falls back to plain back-to-back launches, with why,
    when the capture fails). With the flush, or on another device: the call itself, R per
    window (1 for a call of TARGET_WINDOW_S or more).
    Each sample is window / (R x calls per unit). `window` is a seam for tests (default: CUDA
    events on CUDA, the host clock elsewhere)."""
    record: dict = {"available": True, "method": BACK_TO_BACK, "timer": HOST_CLOCK,
                    "l2_flush": False}
    unit, per_unit = fn, 1
    if device.type == "cuda":
        record["timer"] = CUDA_EVENTS
        if l2_flush:
            flush, flush_bytes = flusher(device)
            window = window or flushed_cuda_window(flush)
            record.update(l2_flush=True, l2_flush_bytes=flush_bytes)
        else:
            per_unit = graph_launches(call_s)
            try:
                unit = capture(_calls(fn, per_unit), device)
                record["method"] = CUDA_GRAPH
            except Exception as exc:  # a failed capture is data: launch back to back instead
                unit, per_unit = fn, 1
                record["graph_capture_failed"] = _why(exc)
            window = window or cuda_window()
    else:
        window = window or host_window(synchroniser(device))
        if l2_flush:
            record["l2_flush_reason"] = CPU_FLUSH_NOT_APPLIED.format(device=device.type.upper())
    # a call that alone fills the window is its own sample: no probes (a 1 s call would spend
    # 5 s on them)
    reps = 1 if per_unit == 1 and call_s >= TARGET_WINDOW_S else calibrated_repeats(unit, window)
    launches = reps * per_unit
    # room for the warm-up and two samples of a call longer than a sixth of the budget
    budget_s = max(policy.budget_s, MIN_BUDGET_WINDOWS * max(call_s, TARGET_WINDOW_S))
    sampled = collect_samples(lambda: window(unit, reps) / launches,
                              dataclasses.replace(policy, budget_s=budget_s))  # fmt: skip
    if not sampled.samples_s:
        return absent("the device-time warm-up used its whole budget", record["l2_flush"])
    record["launches_per_sample"] = launches
    record["samples_s"] = [round(s, SAMPLE_DIGITS) for s in sampled.samples_s]
    return record


def _calls(fn: Callable[[], object], n: int) -> Callable[[], None]:
    """n calls of fn in a row, each output dropped before the next call: a graph of them reuses
    one output's memory instead of holding n."""

    def calls() -> None:
        for _ in range(n):
            fn()

    return calls


def _why(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, graphs.GraphCaptureError) else first_line(exc)


def measure_device_times(
    specs: Sequence[WorkloadSpec],
    records: list[dict],
    device: torch.device,
    build: Callable[[WorkloadSpec, torch.device], Callable[[], object]],
    progress: Callable[[str, int, int], None],
    l2_flush: bool = False,
    policy: SamplingPolicy = DEVICE_TIME_POLICY,
) -> None:
    """Each measured workload's `device_time` record, in place (a run's phase after the rounds);
    a workload that was not measured, or whose measurement fails, says why."""
    for i, (spec, record) in enumerate(zip(specs, records, strict=True)):
        progress(f"device time: {spec.id}", i, len(specs))
        if record["status"] != STATUS_OK or not record["samples_s"]:
            record["device_time"] = absent(
                f"not measured: the workload's status is {record['status']}", l2_flush)
            continue
        try:
            fn = build(spec, device)
            with torch.inference_mode():
                record["device_time"] = measure_device_time(
                    fn, device, statistics.median(record["samples_s"]), policy, l2_flush
                )
        except Exception as exc:  # a failure is data: the workload keeps its per-call samples
            record["device_time"] = absent(
                f"the device-time measurement failed: {first_line(exc)}", l2_flush)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    progress("device time: done", len(specs), len(specs))
