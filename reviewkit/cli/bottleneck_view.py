"""Terminal tables of a run's bottleneck classes: per layer type, the slowest workloads, levers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from reviewkit.analysis.bottleneck import class_label
from reviewkit.cli.tables import SLOWEST_SHOWN, DataTable, rate_text, time_text
from reviewkit.common.format import MISSING, pct
from reviewkit.suite import workloads as suite

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun


def _overhead(value: float | None) -> str:
    return "not measured" if value is None else pct(value)


def layer_table(run: AnalysedRun, dtype: str) -> Table:
    rows = run.layer_types_by_dtype.get(dtype, {})
    t = DataTable(title=f"By layer type — {dtype}", title_justify="left")
    communicates = bool(run.distributed)
    columns = ["layer type", "workloads", "time share", "MFU", "memory-stall", "overhead",
               "inefficiency", "roof share"]  # fmt: skip
    columns += ["communication"] if communicates else []
    for col in (*columns, "bottleneck", "flags"):
        t.add_column(
            col, justify="left" if col in ("layer type", "bottleneck", "flags") else "right"
        )
    for layer_type in suite.LAYER_TYPES:
        a = rows.get(layer_type)
        if a is None:
            continue
        t.add_row(
            layer_type,
            str(a.workloads),
            pct(a.time_share),
            pct(a.mfu),
            pct(a.memory_stall_fraction),
            _overhead(a.overhead_fraction),
            _overhead(a.inefficiency_fraction),
            pct(a.roof_share),
            *([pct(a.communication_fraction)] if communicates else []),
            class_label(a.bottleneck, a.below_roof, MISSING),
            f"{n} faster-than-roofline" if (n := a.faster_than_roofline) else "",
        )
    return t


def levers_lines(run: AnalysedRun, dtype: str) -> list[str]:
    """One line per layer type: its class and the lever it points at."""
    rows = run.layer_types_by_dtype.get(dtype, {})
    out = []
    for layer_type in suite.LAYER_TYPES:
        a = rows.get(layer_type)
        if a and a.lever:
            out.append(f"  {escape(layer_type)}: {escape(a.lever)}")
    return (["Levers (what each class points at):", *out]) if out else []


def slowest_table(run: AnalysedRun, n: int = SLOWEST_SHOWN) -> Table:
    ok = [w for w in run.workloads if w.stats]
    ok.sort(key=lambda w: w.stats.p50_s, reverse=True)
    t = DataTable(title=f"Slowest {min(n, len(ok))} workloads", title_justify="left")
    columns = ("workload", "p50", "p99", "t_device", "round spread", "GFLOP/s", "MFU",
               "overhead", "roof share", "bottleneck", "flags")  # fmt: skip
    for col in columns:
        t.add_column(col, justify="left" if col in ("workload", "bottleneck", "flags") else "right")
    for w in ok[:n]:
        s, d = w.stats, w.decomposition
        t.add_row(
            w.id,
            time_text(s.p50_s),
            time_text(s.p99_s),
            time_text(w.device_timing.p50_s) if w.device_timing else MISSING,
            pct(s.round_spread),
            rate_text(w.achieved_flops_per_s),
            pct(w.mfu),
            _overhead(d.overhead_fraction if d else None),
            pct(d.roof_share if d else None),
            class_label(w.bottleneck, missing=MISSING),
            ", ".join(w.flags),
        )
    return t


def device_time_line(run: AnalysedRun) -> str | None:
    """One line on t_device: how many workloads have it, by what method, the median of
    t / t_device over them, and how many judge `noisy` on it (None: none has it)."""
    timed = [w for w in run.measured_workloads if w.device_timing]
    if not timed:
        return None
    methods = sorted({w.device_timing.method for w in timed})
    ratios = sorted(w.stats.p50_s / w.device_timing.p50_s for w in timed)
    judged = sum(w.device_timing.judges_noise for w in timed)
    flush = "on" if any(w.device_timing.l2_flush for w in timed) else "off"
    return (
        f"t_device (N launches per timed window, {'/'.join(methods)}, L2 flush {flush}): "
        f"{len(timed)} of {len(run.measured_workloads)} workload(s); median t / t_device "
        f"{ratios[len(ratios) // 2]:.2f}; noisy judged on t_device for {judged}"
    )
