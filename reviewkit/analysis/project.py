"""Projection from measurements: target workloads on a target device, at the efficiency measured."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reviewkit.analysis.analysed import AnalysedRun
from reviewkit.analysis.causal_work import work_ratio
from reviewkit.analysis.efficiency_fit import (
    MIN_DTYPE_POINTS,
    NEIGHBOURS,
    OVERHEAD_UNMEASURED_WIDENING,
    TREND_POINTS,
    TREND_SPAN_MARGIN_DECADES,
    WEIGHT_SOFTENING_DECADES,
    WIDENING_PER_DECADE,
    EfficiencyPoint,
    TargetMemory,
    group,
    overhead_of,
    predict,
)
from reviewkit.common.errors import UsageError
from reviewkit.suite.platform_table import Platform

KIND = "reviewkit.projection"
VERSION = 1
MEASURED = "measured"
NOT_AVAILABLE = "not available"
OVERHEAD_NOT_MEASURED = "not measured (0 added)"
# A share of roof measured on another device says little about this one's kernels: the best
# published analytic models miss per operator by 4-10% with the device's microarchitecture in
# hand (issue 34), and a CPU's and a GPU's shares at one roof time differ by 2x and more. A
# borrowed efficiency's 80% interval is widened by this factor on each side: with it the
# committed H200 sample's 96 workloads projected from the EPYC quick run of 2026-12-04 fall in
# their intervals 76% of the time, and the reverse 65% (65% and 64% from and onto the EPYC's
# quick run of 2026-12-05); at 2.0, with the fit's intervals from the trend line's own
# leave-one-out error, 58% and 58% (benchmarks/projection_error.py --platform).
BORROWED_WIDENING = 3.0
# A target whose kernel variant (sdpa_gqa where only sdpa ran) or roof term (a memory-bound
# GEMV where every GEMM measured was compute-bound) no point of its layer type shares takes
# its share from kernels that are not its own, as a borrowed one does from another device: its
# interval is widened by the same factor, and its row says what was missing. On the 2-core
# EPYC a quick run of suite 1.3 (no decode step) read `serving`'s decode GEMMs, which stream
# their weights at 0.26-0.38 of main memory's roof, from its compute-bound GEMMs (share 0.87-0.94)
# 2-3x fast, and the GQA decode calls from its `sdpa` calls 11-18x fast; the note took its
# coverage of them from 32% to 44% (docs/benchmarks.md, "Projection error").
UNMEASURED_KERNEL_WIDENING = BORROWED_WIDENING
# The run-to-run standard deviation a run without its device's recorded figure is given: the
# default rubric's run_to_run_sd (this project's VM, docs/metrics.md).
DEFAULT_RUN_TO_RUN_SD = 0.08
# A recorded figure is never taken under the default rubric's run_to_run_sd_floor: a few runs
# cannot show less (docs/metrics.md, the run-to-run allowance).
RUN_TO_RUN_SD_FLOOR = 0.01
MAIN_MEMORY = "main memory"


@dataclass(frozen=True)
class MemoryLevel:
    name: str
    capacity_bytes: int | None  # None: main memory, holds anything
    bandwidth_bytes_per_s: float


@dataclass(frozen=True)
class TargetDevice:
    """What a projection divides by: peak FLOP/s per dtype and the memory levels, innermost
    first, main memory last."""

    name: str
    peak_flops_per_s: Mapping[str, float]
    levels: tuple[MemoryLevel, ...]
    fingerprint: str | None = None  # the device fingerprint hash where measured
    source: str = ""  # where its figures come from, in words
    kind: str = ""  # cpu, cuda, gpu, tpu...: what its kernels are (causal_work), "" unknown

    def level_for(self, working_set_bytes: float) -> MemoryLevel:
        """The smallest level that holds the working set (analysis/roofline.py's rule)."""
        for level in self.levels:
            if level.capacity_bytes is None or working_set_bytes <= level.capacity_bytes:
                return level
        return self.levels[-1]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "fingerprint": self.fingerprint, "source": self.source,
                "peak_flops_per_s": dict(self.peak_flops_per_s),
                "levels": [asdict(level) for level in self.levels]}  # fmt: skip


def target_device(
    name: str,
    peak_flops_per_s: Mapping[str, float | None],
    main_memory_bytes_per_s: float,
    caches: Iterable[tuple[str, int, float]] = (),
    *,
    fingerprint: str | None = None,
    source: str = "",
    kind: str = "",
) -> TargetDevice:
    """A target device from its figures: peak FLOP/s per dtype (a dtype left out, or None, has
    no peak and projects as "not available"), main memory's bandwidth, and any caches as
    (name, capacity bytes, bandwidth bytes/s) innermost first. A platform table (issue 34
    item 1) builds its devices through this."""
    if not (main_memory_bytes_per_s and main_memory_bytes_per_s > 0):
        raise UsageError(f"{name}: main-memory bandwidth {main_memory_bytes_per_s!r}; expected "
                         "a positive number of bytes/s")  # fmt: skip
    levels = tuple(MemoryLevel(n, int(c), float(b)) for n, c, b in caches)
    peaks = {d: float(p) for d, p in peak_flops_per_s.items() if p and p > 0}
    return TargetDevice(name, peaks, (*levels, MemoryLevel(MAIN_MEMORY, None,
                        float(main_memory_bytes_per_s))), fingerprint, source, kind)  # fmt: skip


def device_from_ceilings(
    name: str, ceilings: Mapping[str, Any], fingerprint: str | None, source: str, kind: str = ""
) -> TargetDevice:
    """A target device from a run's (or a device profile's) `ceilings`, read as the analysis
    reads them: main memory at the `bandwidth` ceiling, the cache levels of `memory` before it."""
    compute = ceilings.get("compute") or {}
    peaks = {dtype: (entry or {}).get("peak") for dtype, entry in compute.items()}
    main = (ceilings.get("bandwidth") or {}).get("peak")
    levels = list(ceilings.get("memory") or [])
    caches = [(lv["level"], lv["capacity_bytes"], lv["peak"]) for lv in levels[:-1]
              if lv.get("capacity_bytes") and lv.get("peak")]  # fmt: skip
    if not main:
        raise UsageError(f"{name}: its ceilings have no main-memory bandwidth; expected a "
                         "measured `bandwidth` ceiling: calibrate the device")  # fmt: skip
    dev = target_device(name, peaks, main, caches, fingerprint=fingerprint, source=source,
                        kind=kind)  # fmt: skip
    if levels:  # keep main memory's own name (dram, hbm)
        main_level = MemoryLevel(str(levels[-1].get("level") or MAIN_MEMORY), None, float(main))
        dev = TargetDevice(dev.name, dev.peak_flops_per_s, (*dev.levels[:-1], main_level),
                           dev.fingerprint, dev.source, kind)  # fmt: skip
    return dev


def device_of_run(run: AnalysedRun, path: str) -> TargetDevice:
    """A --from run's own device, at the ceilings its analysis divided by."""
    return device_from_ceilings(run.device_label, run.ceilings or {}, run.fingerprint.get("hash"),
                                f"the ceilings of {path}", run.device_type or "")  # fmt: skip


def device_of_platform(platform: Platform, fingerprint: str | None = None) -> TargetDevice:
    """A platform of the table (rubrics/platforms.toml) as a target device: its dense peaks
    (never the sparse ones) and its memory bandwidth. Its on-chip cache is left out: a datasheet
    gives the cache's size but not its bandwidth, so every working set is priced at memory's,
    the slower roof. `fingerprint` ties it to the runs measured on it (a measured platform's
    own, or that of the --from run whose device it is)."""
    bandwidth = platform.figures.get("memory_bytes_per_s")
    if bandwidth is None:
        why = platform.missing.get("memory_bytes_per_s", "the table gives none")
        raise UsageError(f"--platform {platform.key}: no memory bandwidth ({why}); a projection "
                         "needs one: add it to the platform table or pass --device-profile")
    peaks = {dtype: float(fig.value) for dtype, fig in platform.peak_dense_flops_per_s.items()
             if isinstance(fig.value, int | float)}  # fmt: skip
    kinds = sorted({fig.kind for fig in (*platform.peak_dense_flops_per_s.values(), bandwidth)})
    return target_device(platform.name, peaks, float(bandwidth.value),  # type: ignore[arg-type]
                         fingerprint=fingerprint or platform.fingerprint,
                         source=f"platform table: {platform.key} ({', '.join(kinds)})",
                         kind=platform.device)


def device_of_profile(path: Path) -> TargetDevice:
    """A device profile (`reviewkit calibrate`'s file) as a target device."""
    from reviewkit.bundle import profile

    doc = profile.load(path)
    name = str(doc.get("device_name") or doc["fingerprint"].get("label") or path.stem)
    ceilings = profile.ceilings_of(doc, "pinned", path)
    return device_from_ceilings(name, ceilings, doc["fingerprint"].get("hash"),
                                f"device profile {path}", str(doc.get("device") or ""))  # fmt: skip


def run_noise_sd(runs: Iterable[AnalysedRun]) -> float:
    """The largest run-to-run sd the runs recorded for their devices (never under the floor;
    the default where one recorded none): the least a projection's interval carries."""
    sds = []
    for run in runs:
        rec = run.run_to_run or {}
        sd = rec.get("sd") if rec.get("available") else None
        measured = isinstance(sd, (int, float)) and math.isfinite(sd) and sd >= 0
        sds.append(max(float(sd), RUN_TO_RUN_SD_FLOOR) if measured else DEFAULT_RUN_TO_RUN_SD)
    return max(sds, default=DEFAULT_RUN_TO_RUN_SD)


@dataclass(frozen=True)
class TargetWorkload:
    """What to project: a workload's identity, analytic FLOPs and bytes, and how many times a
    pass runs it (a model layer's workload: per layer x layers)."""

    id: str
    layer_type: str
    dtype: str
    flops: float
    bytes: float
    variant: str = ""  # efficiency_fit.variant_of its kernel and params
    count: int = 1
    phase: str = ""
    causal_seqs: tuple[int, int] | None = None  # causal_work.causal_seqs of its kernel, params


@dataclass(frozen=True)
class Projected:
    """One target workload on one device. Times in seconds per call; None: not available."""

    id: str
    layer_type: str
    dtype: str
    device: str
    phase: str
    count: int
    label: str  # MEASURED | "borrowed from <device>" | NOT_AVAILABLE
    reason: str = ""  # why not available, or what the fit pooled
    # what its kernel had that no point it was projected from had (kernel variant, roof term):
    # "" when they had both; its interval was widened UNMEASURED_KERNEL_WIDENING for it
    unmeasured: str = ""
    roof_s: float | None = None  # max(F / P, B / W) on the target device
    memory_level: str | None = None
    share: float | None = None  # predicted t_roof / t_kernel
    share_low: float | None = None
    share_high: float | None = None
    overhead_s: float | None = None
    overhead_label: str = ""
    projected_s: float | None = None  # t_roof / s + t_o
    low_s: float | None = None  # the 80% interval
    high_s: float | None = None
    nearest_decades: float | None = None  # to the nearest measured point of its fit
    neighbours: tuple[str, ...] = field(default=())
    device_fingerprint: str | None = None  # two devices of one name stay apart

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["neighbours"] = list(self.neighbours)
        return out


def _same_device(p: EfficiencyPoint, device: TargetDevice) -> bool:
    if p.fingerprint and device.fingerprint:
        return p.fingerprint == device.fingerprint
    return p.device == device.name


def _unmeasured(chosen: Sequence[EfficiencyPoint], t: TargetWorkload, memory_bound: bool) -> str:
    """What the target's kernel has that none of the points it is projected from had: its
    kernel variant, or its roof term (memory- or compute-bound); "" when they had both."""
    missing = []
    if all(p.variant != t.variant for p in chosen):
        ran = ", ".join(sorted({p.variant for p in chosen}))
        missing.append(f"its kernel ({t.variant}) was never measured: the share is {ran}'s")
    if all(p.memory_bound != memory_bound for p in chosen):
        bound = "memory" if memory_bound else "compute"
        other = "compute" if memory_bound else "memory"
        missing.append(f"no {bound}-bound {t.layer_type} was measured: the share is "
                       f"{other}-bound kernels'")  # fmt: skip
    if not missing:
        return ""
    return "; ".join(missing) + f" (interval widened {UNMEASURED_KERNEL_WIDENING:g}x)"


def project_one(
    t: TargetWorkload, device: TargetDevice, points: Sequence[EfficiencyPoint], noise_sd: float
) -> Projected:
    """One target on one device: from the device's own points where it has any for the layer
    type (measured), else from every run's (borrowed); not available without a peak for its
    dtype or a measured point of its layer type."""
    base = {"id": t.id, "layer_type": t.layer_type, "dtype": t.dtype, "device": device.name,
            "device_fingerprint": device.fingerprint, "phase": t.phase,
            "count": t.count}  # fmt: skip
    peak = device.peak_flops_per_s.get(t.dtype)
    if t.flops > 0 and not peak:
        have = ", ".join(sorted(device.peak_flops_per_s)) or "none"
        return Projected(**base, label=NOT_AVAILABLE, reason=(
            f"{device.name} has no {t.dtype} compute peak (it has: {have}); another dtype's "
            "peak is never used in its place"))  # fmt: skip
    own = [p for p in points if _same_device(p, device)]
    chosen, pooled, note = group(own, t.layer_type, t.dtype)
    label = MEASURED
    if not chosen:
        chosen, pooled, note = group(points, t.layer_type, t.dtype)
        label = "borrowed from " + ", ".join(sorted({p.device for p in chosen}))
    if not chosen:
        return Projected(**base, label=NOT_AVAILABLE, reason=note)
    level = device.level_for(t.bytes)
    # a causal kernel that computes whole blocks on this device is priced at what it computes
    ratio = work_ratio(t.causal_seqs, device.kind)
    compute_s = t.flops * ratio / peak if t.flops > 0 and peak else 0.0
    memory_s = t.bytes / level.bandwidth_bytes_per_s
    roof = max(compute_s, memory_s)
    memory_bound = memory_s >= compute_s
    extra = 0.0 if label == MEASURED else math.log(BORROWED_WIDENING)
    unmeasured = _unmeasured(chosen, t, memory_bound)
    if unmeasured:
        extra += math.log(UNMEASURED_KERNEL_WIDENING)
    # a level's achieved rate carries to another level of the same device only (share_at)
    memory = (TargetMemory(level.bandwidth_bytes_per_s, memory_bound, level.name)
              if label == MEASURED else None)  # fmt: skip
    # size is the roof time on the device it runs on (efficiency_fit's docstring says why)
    # a workload of no bytes (none in the suite) is taken as moving one: no infinite intensity
    pred = predict(chosen, t.flops * ratio / max(t.bytes, 1.0), roof, dtype=t.dtype,
                   variant=t.variant, noise_sd=noise_sd, extra_log_width=extra, pooled=pooled,
                   note=note, memory=memory)  # fmt: skip
    o = overhead_of(chosen, t.layer_type)
    o_label = OVERHEAD_NOT_MEASURED if not o.workloads else (
        MEASURED if label == MEASURED else label)  # fmt: skip
    projected_s = roof / pred.share + o.overhead_s
    high_s = roof / pred.share_low + o.high_s
    if label == MEASURED and not o.workloads:
        # no measured per-call cost to add on its own device: no call is taken faster than
        # the fastest the runs measured there, of any kind, which holds a launch (an H200
        # softmax of 2 elements came out at 0.04 ns from the H200 quick sample, which predates
        # the overhead phase)
        floor_s = min(p.time_s for p in own)
        if projected_s < floor_s:
            projected_s, high_s = floor_s, max(high_s, floor_s)
            o_label = (f"not measured: floored at the fastest call measured on {device.name} "
                       f"({floor_s:.3g} s)")  # fmt: skip
    return Projected(
        **base, label=label, reason=note, unmeasured=unmeasured, roof_s=roof,
        memory_level=level.name,
        share=pred.share, share_low=pred.share_low, share_high=pred.share_high,
        overhead_s=o.overhead_s, overhead_label=o_label, projected_s=projected_s,
        low_s=roof / pred.share_high + o.low_s, high_s=high_s,
        nearest_decades=pred.nearest_decades, neighbours=pred.neighbours,
    )  # fmt: skip


@dataclass(frozen=True)
class Total:
    """The sum of count x time over a group of projected workloads (a layer type, a phase):
    the interval sums the ends, as the workloads of one fit err together."""

    device: str
    phase: str
    layer_type: str  # "" for a phase's total
    workloads: int
    projected_s: float | None
    low_s: float | None
    high_s: float | None
    not_available: int  # workloads left out of the sums: no projection

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def totals(rows: Sequence[Projected], by_layer: bool) -> list[Total]:
    groups: dict[tuple[str, str | None, str, str], list[Projected]] = {}
    for r in rows:
        key = (r.device, r.device_fingerprint, r.phase, r.layer_type if by_layer else "")
        groups.setdefault(key, []).append(r)
    out = []
    for (device, _, phase, layer), rs in groups.items():
        ok = [r for r in rs if r.projected_s is not None]

        def summed(attr: str, ok=ok) -> float | None:
            return sum(getattr(r, attr) * r.count for r in ok) if ok else None

        out.append(Total(device, phase, layer, len(rs), summed("projected_s"), summed("low_s"),
                         summed("high_s"), len(rs) - len(ok)))  # fmt: skip
    return out


@dataclass(frozen=True)
class Projection:
    """A projection's whole result: its sources, target devices and rows."""

    sources: tuple[Mapping[str, Any], ...]
    target: Mapping[str, Any]
    devices: tuple[TargetDevice, ...]
    noise_sd: float
    workloads: tuple[Projected, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": KIND, "version": VERSION,
            "from": [dict(s) for s in self.sources],
            "target": dict(self.target),
            "devices": [d.to_json() for d in self.devices],
            "method": {
                "share_of_roof": "s = max(t_c, t_m) / (t - t_o) per measured workload; "
                "predicted by a weighted trend line of log s over (log10 F/B, log10 t_roof) "
                "through the nearest points of the target's dtype and kernel variant, else the "
                "distance-weighted mean of the nearest neighbours; t_roof on the device the "
                "work runs on; on the points' own device a memory-bound point keeps its "
                "achieved bytes/s up to the target level's bandwidth; a causal call on a CPU "
                "at the FLOPs its blocked kernel computes (causal_work); the line read no "
                "farther than its points' span plus trend_span_margin_decades",
                "interval_basis": "the trend line's leave-one-out residuals (the neighbours' "
                "spread without a line) and the run-to-run sd in quadrature, widened per "
                "decade to the nearest point, by overhead_unmeasured_widening where no point "
                "had a measured overhead, and by unmeasured_kernel_widening where no point "
                "shared the target's kernel variant or roof term (the row's `unmeasured` says "
                "which); a share above 1 only where memory-bound points of the target's level "
                "beat its copy-measured bandwidth",
                "neighbours": NEIGHBOURS, "trend_points": TREND_POINTS,
                "min_dtype_points": MIN_DTYPE_POINTS,
                "weight_softening_decades": WEIGHT_SOFTENING_DECADES,
                "widening_per_decade": WIDENING_PER_DECADE,
                "borrowed_widening": BORROWED_WIDENING,
                "unmeasured_kernel_widening": UNMEASURED_KERNEL_WIDENING,
                "overhead_unmeasured_widening": OVERHEAD_UNMEASURED_WIDENING,
                "trend_span_margin_decades": TREND_SPAN_MARGIN_DECADES,
                "run_to_run_sd": self.noise_sd,
                "interval": "80%",
            },
            "workloads": [w.to_json() for w in self.workloads],
            "layer_types": [t.to_json() for t in totals(self.workloads, by_layer=True)],
            "phases": [t.to_json() for t in totals(self.workloads, by_layer=False)
                       if t.phase],
        }  # fmt: skip


def project(
    targets: Sequence[TargetWorkload],
    devices: Sequence[TargetDevice],
    points: Sequence[EfficiencyPoint],
    noise_sd: float,
) -> tuple[Projected, ...]:
    """Every target on every device, in target order per device."""
    return tuple(project_one(t, d, points, noise_sd) for d in devices for t in targets)
