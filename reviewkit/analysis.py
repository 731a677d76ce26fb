"""Roofline analysis with exactly the definitions of design.md: MFU, time fractions, classes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from reviewkit.stats import TAIL_RISK_P99_OVER_P50

# design.md: a workload is overhead-bound when at least half its time is neither compute nor
# memory traffic at the ceilings (runtime, launch, dispatch, Python).
OVERHEAD_BOUND_FRACTION = 0.5

COMPUTE_BOUND = "compute-bound"
MEMORY_BOUND = "memory-bound"
OVERHEAD_BOUND = "overhead-bound"
BOTTLENECKS = (COMPUTE_BOUND, MEMORY_BOUND, OVERHEAD_BOUND)
FASTER_THAN_ROOFLINE = "faster-than-roofline"
TAIL_RISK = "tail-risk"
NOISY = "noisy"  # IQR / median above stats.NOISE_IQR_OVER_MEDIAN


@dataclass(frozen=True)
class Roofline:
    """One workload against the device's ceilings. Times in seconds."""

    time_s: float  # median measured time t
    compute_time_s: float  # t_c = F / P
    memory_time_s: float  # t_m = B / W
    achieved_flops_per_s: float
    mfu: float
    bandwidth_util: float
    arithmetic_intensity: float  # FLOP per byte, F / B
    ridge_point: float  # P / W
    compute_fraction: float
    memory_stall_fraction: float
    overhead_fraction: float
    bottleneck: str
    faster_than_roofline: bool

    @property
    def stall_time_s(self) -> float:
        return self.memory_stall_fraction * self.time_s

    def to_json(self) -> dict:
        return asdict(self)


def classify(compute_time_s: float, memory_time_s: float, overhead_fraction: float) -> str:
    if overhead_fraction >= OVERHEAD_BOUND_FRACTION:
        return OVERHEAD_BOUND
    if memory_time_s > compute_time_s:
        return MEMORY_BOUND
    return COMPUTE_BOUND


def roofline(
    flops: float,
    bytes_moved: float,
    time_s: float,
    peak_flops_per_s: float,
    peak_bytes_per_s: float,
) -> Roofline:
    """design.md's table, term by term. Fractions are clamped when t < max(t_c, t_m)."""
    if time_s <= 0:
        raise ValueError(f"measured time must be positive, got {time_s}")
    t = time_s
    t_c = flops / peak_flops_per_s
    t_m = bytes_moved / peak_bytes_per_s
    compute = min(t_c, t) / t
    stall = max(0.0, min(t_m, t) - t_c) / t
    overhead = max(0.0, t - max(t_c, t_m)) / t
    return Roofline(
        time_s=t,
        compute_time_s=t_c,
        memory_time_s=t_m,
        achieved_flops_per_s=flops / t,
        mfu=t_c / t,
        bandwidth_util=t_m / t,
        arithmetic_intensity=flops / bytes_moved if bytes_moved else float("inf"),
        ridge_point=peak_flops_per_s / peak_bytes_per_s,
        compute_fraction=compute,
        memory_stall_fraction=stall,
        overhead_fraction=overhead,
        bottleneck=classify(t_c, t_m, overhead),
        faster_than_roofline=t < max(t_c, t_m),
    )


def flags(r: Roofline, tail_ratio: float, noisy: bool = False) -> list[str]:
    out = []
    if r.faster_than_roofline:
        out.append(FASTER_THAN_ROOFLINE)
    if tail_ratio >= TAIL_RISK_P99_OVER_P50:
        out.append(TAIL_RISK)
    if noisy:
        out.append(NOISY)
    return out


@dataclass(frozen=True)
class LayerAggregate:
    """Time-weighted aggregate of one layer type (design.md: sums of t_c, stall and t)."""

    workloads: int
    time_s: float
    mfu: float
    memory_stall_fraction: float
    overhead_fraction: float
    compute_fraction: float
    time_share: float
    bottleneck: str
    # Workloads whose time beat the roofline: an MFU above 100% here comes from them.
    faster_than_roofline: int = 0

    def to_json(self) -> dict:
        return asdict(self)


def aggregate(rows: Iterable[tuple[str, Roofline]]) -> dict[str, LayerAggregate]:
    """Aggregate (layer_type, roofline) pairs: MFU = sum t_c / sum t, stall = sum stall / sum t."""
    groups: dict[str, list[Roofline]] = {}
    for layer_type, r in rows:
        groups.setdefault(layer_type, []).append(r)
    total_s = sum(r.time_s for rs in groups.values() for r in rs)
    out = {}
    for layer_type, rs in groups.items():
        t = sum(r.time_s for r in rs)
        t_c = sum(r.compute_time_s for r in rs)
        t_m = sum(r.memory_time_s for r in rs)
        compute = sum(r.compute_fraction * r.time_s for r in rs) / t
        stall = sum(r.stall_time_s for r in rs) / t
        overhead = sum(r.overhead_fraction * r.time_s for r in rs) / t
        out[layer_type] = LayerAggregate(
            workloads=len(rs),
            time_s=t,
            mfu=t_c / t,
            memory_stall_fraction=stall,
            overhead_fraction=overhead,
            compute_fraction=compute,
            time_share=t / total_s,
            bottleneck=classify(t_c, t_m, overhead),
            faster_than_roofline=sum(r.faster_than_roofline for r in rs),
        )
    return out


# --- a whole run: statistics and roofline for every measured workload ------------------------


def _peaks(ceilings_doc: dict, dtype: str) -> tuple[float | None, float | None]:
    compute = ceilings_doc.get("compute", {}).get(dtype, {}).get("peak")
    bandwidth = ceilings_doc.get("bandwidth", {}).get("peak")
    return compute, bandwidth


def analyse_run(doc: dict) -> dict:
    """Fill stats, roofline metrics and layer aggregates from raw samples, in place; return doc.

    Statistics are always recomputed from the stored samples, so a bundle's numbers can be
    checked (and re-derived after a fix to this module) without re-measuring.
    """
    from reviewkit.stats import summarise

    ceilings_doc = doc.get("ceilings") or {}
    by_dtype: dict[str, list[tuple[str, Roofline]]] = {}
    everything: list[tuple[str, Roofline]] = []
    for w in doc["workloads"]:
        for key in (
            "stats",
            "mfu",
            "bandwidth_util",
            "achieved_flops_per_s",
            "arithmetic_intensity",
            "compute_time_s",
            "memory_time_s",
            "fractions",
            "bottleneck",
        ):
            w[key] = None
        w["flags"] = []
        if w["status"] != "ok" or not w["samples_s"]:
            continue
        st = summarise(w["samples_s"])
        w["stats"] = st.to_json()
        peak, bw = _peaks(ceilings_doc, w["dtype"])
        if not peak or not bw:
            w["flags"] = ["no-ceiling"]
            continue
        r = roofline(w["flops"], w["bytes"], st.p50_s, peak, bw)
        w.update(
            mfu=r.mfu,
            bandwidth_util=r.bandwidth_util,
            achieved_flops_per_s=r.achieved_flops_per_s,
            arithmetic_intensity=r.arithmetic_intensity,
            compute_time_s=r.compute_time_s,
            memory_time_s=r.memory_time_s,
            fractions={
                "compute": r.compute_fraction,
                "memory_stall": r.memory_stall_fraction,
                "overhead": r.overhead_fraction,
            },
            bottleneck=r.bottleneck,
            flags=flags(r, st.tail_ratio, st.noisy),
        )
        by_dtype.setdefault(w["dtype"], []).append((w["layer_type"], r))
        everything.append((w["layer_type"], r))
    doc["layer_types"] = {k: v.to_json() for k, v in aggregate(everything).items()}
    doc["layer_types_by_dtype"] = {
        dtype: {k: v.to_json() for k, v in aggregate(rows).items()}
        for dtype, rows in by_dtype.items()
    }
    return doc
