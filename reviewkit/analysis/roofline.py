"""Roofline analysis with exactly the definitions of design.md: MFU, time fractions, classes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from reviewkit.analysis.stats import TAIL_RISK_P99_OVER_P50
from reviewkit.bundle.run import STATUS_OK

# design.md: a workload is overhead-bound when at least half its time is neither compute nor
# memory traffic at the ceilings (runtime, launch, dispatch, Python).
OVERHEAD_BOUND_FRACTION = 0.5

COMPUTE_BOUND = "compute-bound"
MEMORY_BOUND = "memory-bound"
OVERHEAD_BOUND = "overhead-bound"
COMMUNICATION_BOUND = "communication-bound"
BOTTLENECKS = (COMPUTE_BOUND, MEMORY_BOUND, OVERHEAD_BOUND, COMMUNICATION_BOUND)
FASTER_THAN_ROOFLINE = "faster-than-roofline"
TAIL_RISK = "tail-risk"
NOISY = "noisy"  # IQR / median above stats.NOISE_IQR_OVER_MEDIAN
# The level a bundle's single bandwidth ceiling was measured at, before device profiles.
MAIN_MEMORY = "main memory"


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
    # design.md, "Communication": t_comm = bytes on the wire / interconnect bandwidth, on the
    # critical path after compute; zero for a single-process workload.
    communication_time_s: float = 0.0
    communication_fraction: float = 0.0

    @property
    def stall_time_s(self) -> float:
        return self.memory_stall_fraction * self.time_s

    def to_json(self) -> dict:
        return asdict(self)


def classify(
    compute_time_s: float,
    memory_time_s: float,
    overhead_fraction: float,
    communication_time_s: float = 0.0,
) -> str:
    if overhead_fraction >= OVERHEAD_BOUND_FRACTION:
        return OVERHEAD_BOUND
    if communication_time_s > max(compute_time_s, memory_time_s):
        return COMMUNICATION_BOUND
    if memory_time_s > compute_time_s:
        return MEMORY_BOUND
    return COMPUTE_BOUND


def roofline(
    flops: float,
    bytes_moved: float,
    time_s: float,
    peak_flops_per_s: float,
    peak_bytes_per_s: float,
    communication_time_s: float = 0.0,
) -> Roofline:
    """design.md's table, term by term. Fractions are clamped when t < max(t_c, t_m) (+ t_comm
    for a multi-rank workload, whose communication follows its compute on the critical path):
    compute, memory-stall, communication and overhead then still sum to 1."""
    if time_s <= 0:
        raise ValueError(f"measured time must be positive, got {time_s}")
    t = time_s
    t_c = flops / peak_flops_per_s
    t_m = bytes_moved / peak_bytes_per_s
    t_comm = communication_time_s
    compute = min(t_c, t) / t
    stall = max(0.0, min(t_m, t) - t_c) / t
    communication = max(0.0, min(t_comm, t - max(t_c, t_m))) / t
    overhead = max(0.0, t - max(t_c, t_m) - t_comm) / t
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
        bottleneck=classify(t_c, t_m, overhead, t_comm),
        faster_than_roofline=t < max(t_c, t_m) + t_comm,
        communication_time_s=t_comm,
        communication_fraction=communication,
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
    communication_fraction: float = 0.0

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
        communication = sum(r.communication_fraction * r.time_s for r in rs) / t
        t_comm = sum(r.communication_time_s for r in rs)
        out[layer_type] = LayerAggregate(
            workloads=len(rs),
            time_s=t,
            mfu=t_c / t,
            memory_stall_fraction=stall,
            overhead_fraction=overhead,
            compute_fraction=compute,
            time_share=t / total_s,
            bottleneck=classify(t_c, t_m, overhead, t_comm),
            faster_than_roofline=sum(r.faster_than_roofline for r in rs),
            communication_fraction=communication,
        )
    return out


# --- energy: work per joule over each workload's measured window ------------------------------

# A counter read at an arbitrary moment is stale by up to one update, at each end of the window,
# so a reading is off by up to about 2 x update interval / window of its value (at steady
# power). With at least this many updates inside the window that is at most 2%: "high".
ENERGY_HIGH_CONFIDENCE_UPDATES = 100
NO_ENERGY_RECORDED = "no energy recorded for this workload"


def energy_absent(reason: str) -> dict:
    return {"available": False, "reason": reason}


def energy_confidence(window_s: float, update_interval_s: float) -> tuple[str, str]:
    """("high" | "low", why): high when the window spans >= 100 updates of the counter."""
    updates = window_s / update_interval_s
    every = f"about every {update_interval_s * 1e3:g} ms"
    if updates >= ENERGY_HIGH_CONFIDENCE_UPDATES:
        return "high", (
            f"the {window_s:.3g} s window spans ~{updates:.0f} counter updates ({every}): a "
            f"stale reading at either end is at most ~{200 / updates:.2g}% of the energy"
        )
    return "low", (
        f"the {window_s:.3g} s window is under {ENERGY_HIGH_CONFIDENCE_UPDATES}x the counter's "
        f"update interval ({every}; {updates:.3g} updates): a stale reading at either end can "
        f"be off by up to ~{200 / updates:.2g}% of the energy"
    )


def workload_energy(
    joules_by_domain: dict[str, float],
    total_of: Iterable[str],
    window_s: float,
    calls: int,
    flops: float,
    method: str,
    counter_update_s: float,
) -> dict:
    """The `energy` record of one workload from its counter readings over the measured window.

    joules = the sum over `total_of` (domains that do not overlap); avg_watts = joules /
    window_s (the window's wall time, not the sum of samples); flops_per_joule = flops x calls
    / joules; calls_per_joule = calls / joules. A counter that did not advance gives no value.
    """
    total_of = list(total_of)
    joules = sum(joules_by_domain[name] for name in total_of)
    if window_s <= 0 or calls <= 0:
        return energy_absent("no measured window to meter")
    if joules <= 0:
        return energy_absent(
            f"the energy counter did not advance over the {window_s:.3g} s measured window (it "
            f"updates about every {counter_update_s * 1e3:g} ms); no value is estimated"
        )
    confidence, why = energy_confidence(window_s, counter_update_s)
    return {
        "available": True,
        "joules": joules,
        "joules_by_domain": dict(joules_by_domain),
        "total_of": total_of,
        "window_s": window_s,
        "calls": calls,
        "avg_watts": joules / window_s,
        "flops_per_joule": flops * calls / joules,
        "calls_per_joule": calls / joules,
        "method": method,
        "counter_update_s": counter_update_s,
        "confidence": confidence,
        "confidence_reason": why,
    }


def _refresh_energy(w: dict) -> None:
    """Re-derive a recorded energy reading's numbers from its raw fields (joules, window)."""
    e = w.get("energy")
    if not (isinstance(e, dict) and e.get("available")):
        return
    w["energy"] = workload_energy(
        e["joules_by_domain"], e["total_of"], e["window_s"], len(w["samples_s"]), w["flops"],
        e["method"], e["counter_update_s"],
    )  # fmt: skip


def energy_reason(w: dict) -> str:
    """Why a workload has no energy reading ("" when it has one)."""
    e = w.get("energy")
    if not isinstance(e, dict):
        return NO_ENERGY_RECORDED
    if e.get("available"):
        return ""
    return e.get("reason") or NO_ENERGY_RECORDED


def energy_aggregate(workloads: list[dict]) -> dict:
    """Perf per watt over measured workloads, only when every one of them has energy.

    flops_per_joule = sum(F_i x calls_i) / sum(J_i); avg_watts = sum(J_i) / sum(window_i),
    the window-time-weighted mean of the workloads' average watts. Low confidence when any
    workload's reading is.
    """
    if not workloads:
        return energy_absent("no measured workloads")
    missing = [w for w in workloads if energy_reason(w)]
    if missing:
        first = missing[0]
        return energy_absent(
            f"{len(missing)} of {len(workloads)} measured workload(s) have no energy reading "
            f"({first['id']}: {energy_reason(first)})"
        )
    energies = [w["energy"] for w in workloads]
    joules = sum(e["joules"] for e in energies)
    window_s = sum(e["window_s"] for e in energies)
    work = sum(w["flops"] * e["calls"] for w, e in zip(workloads, energies, strict=True))
    low = [w["id"] for w, e in zip(workloads, energies, strict=True) if e["confidence"] != "high"]
    return {
        "available": True,
        "workloads": len(workloads),
        "joules": joules,
        "window_s": window_s,
        "flops": work,
        "calls": sum(e["calls"] for e in energies),
        "flops_per_joule": work / joules,
        "avg_watts": joules / window_s,
        "methods": sorted({e["method"] for e in energies}),
        "confidence": "low" if low else "high",
        "confidence_reason": (
            f"{len(low)} of {len(workloads)} workload reading(s) are low confidence "
            f"(first: {low[0]})"
            if low
            else "every workload's window spans enough counter updates"
        ),
    }


def measured(doc: dict) -> list[dict]:
    """The workloads that were measured normally (status ok, with samples)."""
    return [
        w for w in doc.get("workloads", []) if w.get("status") == STATUS_OK and w.get("samples_s")
    ]


# --- a whole run: statistics and roofline for every measured workload ------------------------


def level_for(working_set_bytes: float, levels: list[dict]) -> dict:
    """The smallest level that holds the working set: the first, innermost first, whose
    capacity is at least it; main memory (capacity None) holds anything."""
    for level in levels:
        capacity = level.get("capacity_bytes")
        if capacity is None or working_set_bytes <= capacity:
            return level
    return levels[-1]


def memory_level(ceilings_doc: dict, working_set_bytes: float) -> tuple[str, float | None]:
    """(level name, W) for a workload whose working set is `working_set_bytes` (design.md:
    cache-aware W). Main memory's W is the `bandwidth` ceiling, so a GPU in the datasheet table
    keeps its datasheet figure; a bundle recorded before device profiles has only that one."""
    main = ceilings_doc.get("bandwidth") or {}
    levels = ceilings_doc.get("memory") or []
    if not levels:
        return main.get("level") or MAIN_MEMORY, main.get("peak")
    level = level_for(working_set_bytes, levels)
    if level is levels[-1]:
        return level["level"], main.get("peak")
    return level["level"], level.get("peak")


def _peaks(
    ceilings_doc: dict, dtype: str, working_set_bytes: float
) -> tuple[float | None, float | None, str]:
    compute = ceilings_doc.get("compute", {}).get(dtype, {}).get("peak")
    level, bandwidth = memory_level(ceilings_doc, working_set_bytes)
    return compute, bandwidth, level


def analyse_run(doc: dict) -> dict:
    """Fill stats, roofline metrics and layer aggregates from raw samples, in place; return doc.

    Statistics are always recomputed from the stored samples, so a bundle's numbers can be
    checked (and re-derived after a fix to this module) without re-measuring.
    """
    from reviewkit.analysis import distributed
    from reviewkit.analysis.stats import summarise

    ceilings_doc = doc.get("ceilings") or {}
    link = distributed.link_peak(doc)
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
            "memory_level",
        ):
            w[key] = None
        w["flags"] = []
        if w["status"] != STATUS_OK or not w["samples_s"]:
            continue
        st = summarise(w["samples_s"], w.get("round_sizes"))
        w["stats"] = st.to_json()
        peak, bw, level = _peaks(ceilings_doc, w["dtype"], w["bytes"])
        if not peak or not bw:
            w["flags"] = ["no-ceiling"]
            continue
        # design.md, "Communication": bytes on the wire / the link's bandwidth
        t_comm = w["wire_bytes"] / link if w.get("wire_bytes") and link else 0.0
        r = roofline(w["flops"], w["bytes"], st.p50_s, peak, bw, t_comm)
        w.update(
            memory_level=level,
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
                "communication": r.communication_fraction,
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
    for w in measured(doc):
        _refresh_energy(w)
    doc["layer_energy"] = _energy_by_layer(measured(doc))
    by_dtype_rows: dict[str, list[dict]] = {}
    for w in measured(doc):
        by_dtype_rows.setdefault(w["dtype"], []).append(w)
    doc["layer_energy_by_dtype"] = {
        dtype: _energy_by_layer(rows) for dtype, rows in by_dtype_rows.items()
    }
    distributed.analyse(doc)
    return doc


def _energy_by_layer(workloads: list[dict]) -> dict[str, dict]:
    groups: dict[str, list[dict]] = {}
    for w in workloads:
        groups.setdefault(w["layer_type"], []).append(w)
    return {layer_type: energy_aggregate(ws) for layer_type, ws in groups.items()}
