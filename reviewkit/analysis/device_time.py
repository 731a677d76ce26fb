"""A workload's device time t_device beside its per-call t: exposed launch cost, kernel rate, noise.

t (the per-call median) stays what every fraction and the latency use: it is what eager code
pays per call. t_device (measure/device_time.py) is the same call timed N to a window, so
t - t_device estimates the launch cost a call exposes, and F / t_device the rate of the kernels
themselves. That estimate is kept apart from the measured overhead t_o (analysis/overhead.py):
t_o comes from its own method (graph replay of one call, kernel-busy time, a floor call) and is
what the decomposition uses; t - t_device is a second view of the same cost, not an input.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from reviewkit.analysis.stats import NOISE_IQR_OVER_MEDIAN, SampleStats
from reviewkit.bundle.records import Workload

# The fewest t_device samples whose quartiles judge noise (below it one window decides).
NOISE_MIN_SAMPLES = 5
# The timer whose per-call samples carry launch jitter (measure/device_time.CUDA_EVENTS). A
# CPU has no launch to jitter, and its ten t_device windows span some 20 ms of the machine
# where t's samples span every round: on the 2-core VM t_device's flag flipped either way from
# run to run, so a CPU keeps t's own judgement.
CUDA_EVENTS = "cuda-events"


@dataclass(frozen=True)
class DeviceTiming:
    """t_device's statistics and what it says beside t. Times in seconds."""

    method: str  # cuda-graph | back-to-back
    launches_per_sample: int
    n: int
    p50_s: float  # t_device
    iqr_s: float
    # Over NOISE_IQR_OVER_MEDIAN; what the workload's `noisy` flag says when `judges_noise`.
    noisy: bool
    # Whether the workload's noisy flag is judged on t_device: timed with CUDA events, more
    # than one launch per sample (the per-call launch jitter spread over many), and enough
    # samples for quartiles.
    judges_noise: bool
    launch_overhead_s: float  # max(0, t - t_device): the launch cost a call exposes
    launch_overhead_fraction: float  # of t
    kernel_flops_per_s: float  # F / t_device
    l2_flush: bool

    def to_json(self) -> dict:
        return asdict(self)


def read(w: Workload, per_call: SampleStats) -> DeviceTiming | None:
    """The device timing of a workload whose device_time record holds samples (else None)."""
    record = w.device_time or {}
    samples = record.get("samples_s") or []
    if not record.get("available") or not samples:
        return None
    p25, p50, p75 = (float(v) for v in np.percentile(np.asarray(samples, float), [25, 50, 75]))
    launches = int(record.get("launches_per_sample") or 1)
    judges = record.get("timer") == CUDA_EVENTS and launches > 1
    t = per_call.p50_s
    exposed = max(0.0, t - p50)
    return DeviceTiming(
        method=str(record.get("method")),
        launches_per_sample=launches,
        n=len(samples),
        p50_s=p50,
        iqr_s=p75 - p25,
        noisy=bool(p50 > 0 and (p75 - p25) / p50 > NOISE_IQR_OVER_MEDIAN),
        judges_noise=judges and len(samples) >= NOISE_MIN_SAMPLES,
        launch_overhead_s=exposed,
        launch_overhead_fraction=exposed / t if t > 0 else 0.0,
        kernel_flops_per_s=w.flops / p50 if p50 > 0 else float("inf"),
        l2_flush=bool(record.get("l2_flush")),
    )


def noisy(per_call: SampleStats, timing: DeviceTiming | None) -> bool:
    """The workload's noisy flag: t_device's spread where it judges noise, else t's. A per-call
    CUDA-event sample of a 10-100 us GPU call carries the host's launch jitter, which is no
    noise of the call; one launch per sample (a call of 2 ms or more) and a CPU leave t's own
    judgement, which sees across rounds as t_device's one stretch of windows cannot."""
    if timing is not None and timing.judges_noise:
        return timing.noisy
    return per_call.noisy
