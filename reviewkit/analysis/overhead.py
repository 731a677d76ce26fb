"""A workload's measured exposed overhead, read from its bundle record (docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reviewkit.analysis.stats import SampleStats, summarise

if TYPE_CHECKING:
    from reviewkit.bundle.records import Workload

# How the runner measured a workload's exposed overhead (the record's `method`).
FLOOR_CALL = "floor-call"  # CPU: the smallest shape on the same kernels and parallel path
CUDA_GRAPH = "cuda-graph"  # GPU: eager minus the same call replayed from a CUDA graph
KERNEL_BUSY = "kernel-busy"  # GPU, capture failed: t minus the union of the call's kernels
FLOOR_UPPER_BOUND = "floor-call-upper-bound"  # GPU, neither worked: host issue cost, a bound
IN_COLLECTIVE_LATENCY = "in-collective-latency"  # collectives: host cost is inside alpha
NOT_MEASURED = "not-measured"
METHODS = (FLOOR_CALL, CUDA_GRAPH, KERNEL_BUSY, FLOOR_UPPER_BOUND, IN_COLLECTIVE_LATENCY,
           NOT_MEASURED)  # fmt: skip

@dataclass(frozen=True)
class Overhead:
    """t_o with the lower bound of its interval, or why there is none."""

    overhead_s: float | None
    overhead_low_s: float | None
    method: str
    reason: str = ""
    upper_bound: bool = False  # a floor alone, or a GPU floor: t_o is at most this


def read(w: Workload, stats: SampleStats) -> Overhead:
    """The workload's t_o from its `overhead` record, against its own median `stats`."""
    rec = w.overhead
    if not isinstance(rec, Mapping) or not rec.get("available"):
        reason = rec.get("reason", "") if isinstance(rec, Mapping) else ""
        return Overhead(None, None, NOT_MEASURED, reason or "overhead not measured")
    method = rec.get("method")
    if method == IN_COLLECTIVE_LATENCY:
        return Overhead(0.0, 0.0, method, rec.get("reason", ""))
    if method == KERNEL_BUSY:
        busy = float(rec["kernel_busy_s"])
        return Overhead(max(0.0, stats.p50_s - busy), max(0.0, stats.median_ci_low_s - busy),
                        method, rec.get("reason", ""))  # fmt: skip
    samples = rec.get("samples_s") or []
    if not samples:
        return Overhead(None, None, NOT_MEASURED, "the overhead record has no samples")
    own = summarise(samples)
    if method == CUDA_GRAPH:
        return Overhead(
            max(0.0, stats.p50_s - own.p50_s),
            max(0.0, stats.median_ci_low_s - own.median_ci_high_s),
            method, rec.get("reason", ""),
        )  # fmt: skip
    double = rec.get("double_samples_s") if method == FLOOR_CALL else None
    if double:
        # the line through the floor and its double (twice the work on the same path) at zero
        # work: 2 x floor - double, the fixed cost without the floor's own work
        two = summarise(double)
        return Overhead(
            max(0.0, 2 * own.p50_s - two.p50_s),
            max(0.0, 2 * own.median_ci_low_s - two.median_ci_high_s),
            method, rec.get("reason", ""),
        )  # fmt: skip
    # a floor alone (no double on its path), or a GPU floor: an upper bound, as its reason says
    return Overhead(own.p50_s, own.median_ci_low_s, method, rec.get("reason", ""),
                    upper_bound=method in (FLOOR_UPPER_BOUND, FLOOR_CALL))  # fmt: skip
