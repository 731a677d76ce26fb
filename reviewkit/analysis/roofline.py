"""Roofline analysis with exactly the definitions of docs/metrics.md: MFU, fractions, classes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from reviewkit.analysis import levers
from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload, LayerAggregate
from reviewkit.analysis.bottleneck import (
    BOTTLENECKS,
    COMMUNICATION_BOUND,
    COMPUTE_BOUND,
    MEMORY_BOUND,
    OVERHEAD_BOUND,
    OVERHEAD_BOUND_FRACTION,
    UNCLASSIFIED,
    Decomposition,
    PerOpRoof,
    decompose,
    default_below_roof_share,
    lever,
    lever_for,
    per_op_roof,
    roof_class,
)
from reviewkit.analysis.ceilings import SET_THE_CEILING, best_rates
from reviewkit.analysis.ceilings import raised as raised_ceilings
from reviewkit.analysis.ceilings import setters as ceiling_setters
from reviewkit.analysis.energy import energy_by_layer, refreshed_energy
from reviewkit.analysis.stats import TAIL_RISK_P99_OVER_P50
from reviewkit.bundle.records import Run, Workload
from reviewkit.bundle.run import STATUS_OK

__all__ = ["BOTTLENECKS", "COMMUNICATION_BOUND", "COMPUTE_BOUND", "MEMORY_BOUND",
           "OVERHEAD_BOUND", "UNCLASSIFIED", "LayerAggregate"]  # fmt: skip

FASTER_THAN_ROOFLINE = "faster-than-roofline"
OVERHEAD_OVERESTIMATED = "overhead-overestimated"
BELOW_ROOF = "below-roof"
TAIL_RISK = "tail-risk"
# IQR / median above stats.NOISE_IQR_OVER_MEDIAN, of t_device where it judges noise
# (analysis/device_time.noisy), else of t
NOISY = "noisy"
# The level a bundle's single bandwidth ceiling was measured at, before device profiles.
MAIN_MEMORY = "main memory"
# Layer types whose call dispatches several ops: classified by their per-op roof.
COMPOSITE_LAYER_TYPES = ("block", "model")
# The share of a composite's analytic FLOPs its counted ops must carry for a per-op roof: under
# it, most of the work sits in ops the counter cannot see into.
PER_OP_MIN_FLOP_SHARE = 0.5


@dataclass(frozen=True)
class Roofline:
    """One workload against the device's ceilings, and its time decomposed. Times in seconds."""

    time_s: float  # median measured time t
    compute_time_s: float  # t_c = F / P
    memory_time_s: float  # t_m = B / W
    achieved_flops_per_s: float
    mfu: float
    bandwidth_util: float
    arithmetic_intensity: float  # FLOP per byte, F / B
    ridge_point: float  # P / W
    decomposition: Decomposition
    # A composite's per-op roof above its fused one, as a share of t (None: not a composite, or
    # its ops were not recorded): what fusing its ops could win at most.
    fusion_headroom_fraction: float | None = None

    @property
    def communication_time_s(self) -> float:
        return self.decomposition.communication_time_s

    @property
    def compute_fraction(self) -> float:
        return self.decomposition.compute_fraction

    @property
    def memory_stall_fraction(self) -> float:
        return self.decomposition.memory_stall_fraction

    @property
    def communication_fraction(self) -> float:
        return self.decomposition.communication_fraction

    @property
    def overhead_fraction(self) -> float | None:
        return self.decomposition.overhead_fraction

    @property
    def inefficiency_fraction(self) -> float | None:
        return self.decomposition.inefficiency_fraction

    @property
    def bottleneck(self) -> str:
        return self.decomposition.bottleneck

    @property
    def faster_than_roofline(self) -> bool:
        return self.decomposition.faster_than_roofline

    @property
    def stall_time_s(self) -> float:
        return self.memory_stall_fraction * self.time_s

    def to_json(self) -> dict:
        return asdict(self)


def roofline(
    flops: float,
    bytes_moved: float,
    time_s: float,
    peak_flops_per_s: float,
    peak_bytes_per_s: float,
    communication_time_s: float = 0.0,
    overhead_s: float | None = None,
    *,
    below_roof_share: float | None = None,
    time_high_s: float | None = None,
    overhead_low_s: float | None = None,
    per_op: PerOpRoof | None = None,
) -> Roofline:
    """docs/metrics.md's table, term by term. `overhead_s` is the measured exposed overhead
    (None: not measured); a composite's `per_op` roof (the ops it dispatches, each at its own
    roof) classifies it, and the gap to the fused roof is its fusion headroom."""
    if time_s <= 0:
        raise ValueError(f"measured time must be positive, got {time_s}")
    t = time_s
    t_c = flops / peak_flops_per_s
    t_m = bytes_moved / peak_bytes_per_s
    headroom = None
    if per_op is not None and per_op.ops:
        d = decompose(t, per_op.compute_time_s, per_op.compute_time_s + per_op.stall_time_s,
                      communication_time_s, overhead_s, below_roof_share, time_high_s,
                      overhead_low_s, roof_class_of=per_op.bottleneck)  # fmt: skip
        headroom = max(0.0, per_op.roof_time_s - max(t_c, t_m)) / t
    else:
        d = decompose(t, t_c, t_m, communication_time_s, overhead_s, below_roof_share,
                      time_high_s, overhead_low_s)  # fmt: skip
    return Roofline(
        time_s=t,
        compute_time_s=t_c,
        memory_time_s=t_m,
        achieved_flops_per_s=flops / t,
        mfu=t_c / t,
        bandwidth_util=t_m / t,
        arithmetic_intensity=flops / bytes_moved if bytes_moved else float("inf"),
        ridge_point=peak_flops_per_s / peak_bytes_per_s,
        decomposition=d,
        fusion_headroom_fraction=headroom,
    )


def flags(r: Roofline, tail_ratio: float, noisy: bool = False) -> list[str]:
    out = []
    d = r.decomposition
    if d.faster_than_roofline:
        out.append(FASTER_THAN_ROOFLINE)
    if d.overhead_overestimated:
        out.append(OVERHEAD_OVERESTIMATED)
    if d.below_roof:
        out.append(BELOW_ROOF)
    if tail_ratio >= TAIL_RISK_P99_OVER_P50:
        out.append(TAIL_RISK)
    if noisy:
        out.append(NOISY)
    return out


def _summed_terms(ds: list[Decomposition]) -> tuple[float, float, float]:
    """(sum t_c, sum t_m, sum t_comm) a layer type is classified by. A composite classified by
    its per-op roof (its class differs from what its own terms say) adds its whole roof time to
    the term of that class: its terms are per-op sums, not one op's."""
    t_c = t_m = t_comm = 0.0
    for d in ds:
        t_comm += d.communication_time_s
        if d.roof_class != roof_class(d.compute_time_s, d.memory_time_s, d.communication_time_s):
            on_wire = d.roof_class == COMMUNICATION_BOUND
            t_c += 0.0 if on_wire or d.roof_class == MEMORY_BOUND else d.roof_time_s
            t_m += d.roof_time_s if d.roof_class == MEMORY_BOUND else 0.0
        else:
            t_c += d.compute_time_s
            t_m += d.memory_time_s
    return t_c, t_m, t_comm


def aggregate(
    rows: Iterable[tuple[str, Roofline]], below_roof_share: float | None = None
) -> dict[str, LayerAggregate]:
    """Aggregate (layer_type, roofline) pairs, time-weighted; the class from the sums."""
    threshold = default_below_roof_share() if below_roof_share is None else below_roof_share
    groups: dict[str, list[Roofline]] = {}
    for layer_type, r in rows:
        groups.setdefault(layer_type, []).append(r)
    total_s = sum(r.time_s for rs in groups.values() for r in rs)
    out = {}
    for layer_type, rs in groups.items():
        ds = [r.decomposition for r in rs]
        t = sum(d.time_s for d in ds)

        def weighted(field: str, ds=ds, t=t) -> float:
            return sum(getattr(d, field) * d.time_s for d in ds) / t

        roof_s = sum(d.roof_time_s for d in ds)
        measured_all = all(d.overhead_time_s is not None for d in ds)
        roof = roof_class(*_summed_terms(ds))
        if measured_all:
            kernel_s = sum(d.kernel_time_s for d in ds)
            share = roof_s / kernel_s if kernel_s > 0 else None
            low = weighted("overhead_fraction_low")
            cls = OVERHEAD_BOUND if low >= OVERHEAD_BOUND_FRACTION else roof
            below = cls != OVERHEAD_BOUND and share is not None and share < threshold
        else:
            share, low = roof_s / t, None
            cls = UNCLASSIFIED if share < threshold else roof
            below = False
        out[layer_type] = LayerAggregate(
            workloads=len(rs),
            time_s=t,
            mfu=sum(r.compute_time_s for r in rs) / t,
            memory_stall_fraction=weighted("memory_stall_fraction"),
            overhead_fraction=weighted("overhead_fraction") if measured_all else None,
            compute_fraction=weighted("compute_fraction"),
            time_share=t / total_s,
            bottleneck=cls,
            faster_than_roofline=sum(d.faster_than_roofline for d in ds),
            communication_fraction=weighted("communication_fraction"),
            inefficiency_fraction=weighted("inefficiency_fraction") if measured_all else None,
            unattributed_fraction=weighted("unattributed_fraction"),
            roof_share=share,
            below_roof=below,
            overhead_fraction_low=low,
            lever=lever_for(cls, below),
        )
    return out


def measured(run: AnalysedRun) -> tuple[AnalysedWorkload, ...]:
    """The workloads that were measured normally (status ok, with samples)."""
    return run.measured_workloads


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
    """(level name, W) for a workload whose working set is `working_set_bytes` (docs/metrics.md:
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


def blended_peak(w: Workload, mapped_peak: float | None, ceilings_doc: Mapping[str, Any]
                 ) -> float | None:
    """The compute peak of a workload whose knob maps only part of its FLOPs to another dtype
    (an encoder layer's FFN quantized to int8, its attention projections left fp32): the rate
    at which its FLOPs would run with each part at its own ceiling, flops / (mapped / mapped
    peak + rest / own peak). A workload mapped whole, or not at all, keeps its one peak."""
    mapped = (w.weights or {}).get("mapped_flops")
    if mapped_peak is None or w.compute_dtype == w.dtype or mapped is None:
        return mapped_peak
    rest = max(0.0, w.flops - mapped)
    if rest <= 0 or mapped <= 0:
        return mapped_peak
    own = ((ceilings_doc.get("compute") or {}).get(w.dtype) or {}).get("peak")
    if not own:
        return None  # the unmapped part has no ceiling: no honest blend
    return w.flops / (mapped / mapped_peak + rest / own)


def per_op_terms(w: Workload, ceilings_doc: Mapping[str, Any]) -> PerOpRoof | None:
    """The per-op roof of a workload whose dispatched ops were recorded (`op_profile`): each op
    against the compute peak of its dtype and the bandwidth of the level its bytes fit in."""
    ops = (w.op_profile or {}).get("ops")
    if not ops or w.layer_type not in COMPOSITE_LAYER_TYPES:
        return None
    # A fused op (the encoder layer's fast path) is one op to the dispatch mode, with no FLOPs
    # the registry knows: its per-op roof would miss the work inside it. Then the fused roof.
    if sum(op["flops"] * op["calls"] for op in ops) < PER_OP_MIN_FLOP_SHARE * w.flops:
        return None
    terms = []
    for op in ops:
        peak, bw, _ = _peaks(ceilings_doc, op.get("dtype") or w.compute_dtype, op["bytes"])
        peak = peak or _peaks(ceilings_doc, w.compute_dtype, op["bytes"])[0]
        if not peak or not bw:
            return None
        terms.append((op["flops"] / peak, op["bytes"] / bw, op["calls"]))
    return per_op_roof(terms)


def communication_time(
    w: Workload, link_bytes_per_s: float | None, latency_s: Mapping[str, Any]
) -> float:
    """t_comm = alpha + wire bytes / beta: alpha the collective's smallest-message latency."""
    if not w.wire_bytes or not link_bytes_per_s:
        return 0.0
    params = w.params or {}
    if params.get("all_reduces"):  # a tensor-parallel layer: one alpha per all-reduce it makes
        alpha = params["all_reduces"] * (latency_s.get("all_reduce") or 0.0)
    else:
        alpha = latency_s.get(params.get("op") or w.kernel, 0.0) or 0.0
    return alpha + w.wire_bytes / link_bytes_per_s


def analyse_run(run: Run, below_roof_share: float | None = None) -> AnalysedRun:
    """Statistics, roofline metrics and layer aggregates from a run's raw samples.

    Statistics are always recomputed from the stored samples, so a bundle's numbers can be
    checked (and re-derived after a fix to this module) without re-measuring. `below_roof_share`
    is the rubric's (None: the default rubric's).
    """
    from reviewkit.analysis import device_time, distributed
    from reviewkit.analysis import overhead as overhead_mod
    from reviewkit.analysis.stats import summarise

    threshold = default_below_roof_share() if below_roof_share is None else below_roof_share
    summaries = {
        w.id: summarise(w.samples_s, w.round_sizes)
        for w in run.workloads
        if w.status == STATUS_OK and w.samples_s
    }
    # a workload faster than its dtype's calibrated peak raises that peak (said where), so no
    # MFU above 100% reaches a table, a chart or --json
    p50 = {wid: st.p50_s for wid, st in summaries.items()}
    rates = best_rates(run.workloads, lambda w: p50.get(w.id))
    ceilings_doc = raised_ceilings(run.ceilings or {}, rates)
    set_it = ceiling_setters(ceilings_doc)
    link = distributed.link_peak(ceilings_doc)
    latency = ((ceilings_doc.get("interconnect") or {}).get("latency_s")) or {}
    multi_rank = bool(run.distributed)
    by_dtype: dict[str, list[tuple[str, Roofline]]] = {}
    everything: list[tuple[str, Roofline]] = []
    analysed: list[AnalysedWorkload] = []
    for w in run.workloads:
        base = {f.name: getattr(w, f.name) for f in fields(Workload)}
        base["multi_rank"] = multi_rank
        st = summaries.get(w.id)
        if st is None:
            analysed.append(AnalysedWorkload(**base))
            continue
        base["energy"] = refreshed_energy(w)
        # the peak of the dtype its GEMMs multiply in (a quantization's int8 or fp8); the FLOPs
        # stay the dense definition's, so a sparse workload's MFU is on dense FLOPs
        peak, bw, level = _peaks(ceilings_doc, w.compute_dtype, w.bytes)
        peak = blended_peak(w, peak, ceilings_doc)
        if not peak or not bw:
            analysed.append(AnalysedWorkload(**base, stats=st, flags=("no-ceiling",)))
            continue
        o = overhead_mod.read(w, st)
        timing = device_time.read(w, st)  # t_device beside t; t stays the one divided by
        r = roofline(
            w.flops, w.bytes, st.p50_s, peak, bw,
            communication_time(w, link, latency), o.overhead_s,
            below_roof_share=threshold, time_high_s=st.median_ci_high_s,
            overhead_low_s=o.overhead_low_s, per_op=per_op_terms(w, ceilings_doc),
        )  # fmt: skip
        d = r.decomposition
        analysed.append(AnalysedWorkload(
            **base,
            stats=st,
            memory_level=level,
            mfu=r.mfu,
            bandwidth_util=r.bandwidth_util,
            achieved_flops_per_s=r.achieved_flops_per_s,
            arithmetic_intensity=r.arithmetic_intensity,
            compute_time_s=r.compute_time_s,
            memory_time_s=r.memory_time_s,
            decomposition=d,
            overhead_method=o.method,
            bottleneck=r.bottleneck,
            lever=lever(d),
            fusion_headroom_fraction=r.fusion_headroom_fraction,
            device_timing=timing,
            flags=tuple(flags(r, st.tail_ratio, device_time.noisy(st, timing))
                        + ([SET_THE_CEILING] if w.id in set_it else [])),
        ))  # fmt: skip
        by_dtype.setdefault(w.dtype, []).append((w.layer_type, r))
        everything.append((w.layer_type, r))
    workloads = levers.annotate(tuple(analysed), run)
    if multi_rank:
        workloads = distributed.with_rank_analysis(workloads, run.world_size, link)
    measured_ws = [w for w in workloads if w.measured]
    by_dtype_rows: dict[str, list[AnalysedWorkload]] = {}
    for w in measured_ws:
        by_dtype_rows.setdefault(w.dtype, []).append(w)
    layer_types = aggregate(everything, threshold)
    layer_types_by_dtype = {dtype: aggregate(rows, threshold) for dtype, rows in by_dtype.items()}
    layer_types, layer_types_by_dtype = levers.annotate_layers(
        workloads, layer_types, layer_types_by_dtype
    )
    values = {f.name: getattr(run, f.name) for f in fields(Run)}
    values.update(
        ceilings=ceilings_doc,
        workloads=workloads,
        layer_types=layer_types,
        layer_types_by_dtype=layer_types_by_dtype,
        layer_energy=energy_by_layer(measured_ws),
        layer_energy_by_dtype={
            dtype: energy_by_layer(rows) for dtype, rows in by_dtype_rows.items()
        },
    )
    if multi_rank:
        values["stragglers"] = distributed.straggler_report(workloads, run)
        values["scaling"] = distributed.scaling_efficiency(workloads)
    return AnalysedRun(**values)

