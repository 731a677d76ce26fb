"""Platforms side by side: a review's runs as workloads x platforms of MFU, p99, SLA, perf/W."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from reviewkit.analysis.compare import slice_key
from reviewkit.analysis.energy import energy_reason
from reviewkit.analysis.sla import Target, calls_per_s, judge, matching_targets
from reviewkit.bundle.run import STATUS_OK, device_name

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload
    from reviewkit.bundle.records import Run

MEASURED, NOT_MEASURED = "measured", "not measured"
SLA_MET, SLA_MISSED, NO_TARGET = "met", "missed", "no target"
NOT_IN_RUN = "not in this run"
# Knobs that name the platform itself (device, its name, its dtype) or the shapes the suite ran:
# they never tell two runs on the same device and dtype apart as a mapping choice would.
LABEL_IGNORED_KNOBS = ("device", "device_name", "dtypes", "seq_sweep", "batch_sweep")
# A column header of the matrix; long CPU model strings ("Intel(R) Xeon(R) Platinum 8480+ CPU @
# 2.00GHz") would take the width of three cells. The full name stays in the tooltip and table.
DEVICE_LABEL_CHARS = 28
LABEL_KNOBS = 2  # at most this many distinguishing knobs in a label; more would not stay short
# End-to-end rows first: the model and block workloads are what a platform choice is judged on;
# the operators below explain them. Layer types not listed follow, alphabetically.
ROW_ORDER = ("model", "block", "gemm", "attention", "conv", "norm", "softmax", "elementwise",
             "embedding", "reduction", "data-movement", "collective")  # fmt: skip


@dataclass(frozen=True)
class Platform:
    """One run's one dtype on its device: a column of the matrix."""

    label: str  # unique within the review and short: "A100-SXM4-80GB · bf16"
    run: str  # the packet's name of the run: "baseline", "candidate 2"
    device_type: str  # "cpu", "cuda", ... (the device knob without its index)
    device_name: str  # the full name the run recorded
    dtype: str
    peak_flops_per_s: float | None  # what MFU is measured against for this dtype
    peak_source: str  # "datasheet" | "measured" | "not available"

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Cell:
    """One workload slice on one platform. Times in seconds; None says not measured, with why."""

    workload: str  # slice key: the workload id without its dtype
    layer_type: str
    platform: str  # Platform.label
    workload_id: str | None  # the id in the run, None when the run lacks the slice
    status: str  # MEASURED | NOT_MEASURED
    reason: str  # why not measured ("" when measured)
    mfu: float | None  # the run's own: t_c / t against the platform's peak
    mfu_reason: str
    p50_s: float | None
    p99_s: float | None
    mean_s: float | None
    batch: int | None  # the workload's batch: throughput is calls/s at this batch
    throughput_calls_per_s: float | None  # 1 / mean_s, one call at a time
    sla: str  # SLA_MET | SLA_MISSED | NO_TARGET | NOT_MEASURED
    sla_target: str  # the matching target glob(s)
    sla_p99_s: float | None  # the tightest matching p99 target
    sla_min_throughput_per_s: float | None  # the highest matching throughput target
    sla_reason: str
    # Perf per watt: achieved FLOP/s per watt = (F / t) / (J / t) = FLOP per joule, over the
    # measured window; None where the run metered no energy, with the recorded reason.
    flops_per_joule: float | None
    avg_watts: float | None
    joules_per_call: float | None
    energy_confidence: str
    energy_reason: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PlatformMatrix:
    platforms: tuple[Platform, ...]
    workloads: tuple[str, ...]  # row order: slice keys, end-to-end first
    cells: tuple[Cell, ...]  # every (workload, platform), row by row
    devices: tuple[str, ...]  # distinct device names, in run order

    @property
    def multi_device(self) -> bool:
        return len(self.devices) >= 2

    def cell(self, workload: str, platform: str) -> Cell:
        return next(c for c in self.cells if c.workload == workload and c.platform == platform)

    def to_json(self) -> dict:
        return {
            "devices": list(self.devices),
            "multi_device": self.multi_device,
            "platforms": [p.to_json() for p in self.platforms],
            "workloads": list(self.workloads),
            "cells": [c.to_json() for c in self.cells],
        }


# --- platforms ---------------------------------------------------------------------------------


def device_type(run: Run) -> str:
    device = (run.knobs or {}).get("device") or run.device_type
    return str(device).split(":", 1)[0] if device else "unknown"


def short_device(name: str) -> str:
    """A column-header name: vendor marks, CPU clock suffixes and "NVIDIA " dropped, then cut."""
    s = re.sub(r"\((?:R|TM|C)\)", "", name, flags=re.IGNORECASE)
    s = re.sub(r"\s+CPU\s*@.*$", "", s)  # "Xeon Gold 6338 CPU @ 2.00GHz" -> "Xeon Gold 6338"
    s = re.sub(r"\s+\d+-Core Processor\b|\s+Processor\b", "", s)  # "EPYC 7763 64-Core Processor"
    s = re.sub(r"^NVIDIA\s+", "", s)  # every CUDA device is NVIDIA's: the model is the name
    s = " ".join(s.split()) or name
    return s if len(s) <= DEVICE_LABEL_CHARS else s[: DEVICE_LABEL_CHARS - 1] + "…"


def _dtypes(run: Run) -> list[str]:
    """The run's dtypes: its knob, else (an old or hand-made bundle) those its workloads ran."""
    listed = [str(d) for d in (run.knobs or {}).get("dtypes") or []]
    seen = [str(w.dtype) for w in run.workloads if w.dtype]
    return list(dict.fromkeys(listed + seen))


def _knob_text(value: object) -> str:
    return "/".join(map(str, value)) if isinstance(value, list) else str(value)


def _labels(entries: list[tuple[str, Run, str]]) -> list[str]:
    """Unique, short labels for (name, run, dtype): device and dtype, then the knobs that tell
    same-device runs apart, then the run's name if nothing else does."""
    base = [f"{short_device(device_name(run))} · {dtype}" for _, run, dtype in entries]
    labels = list(base)
    for label in sorted(set(base)):
        group = [i for i, x in enumerate(base) if x == label]
        if len(group) < 2:
            continue
        knob_sets = [entries[i][1].knobs or {} for i in group]
        keys = dict.fromkeys(k for knobs in knob_sets for k in knobs)
        differing = [k for k in keys if k not in LABEL_IGNORED_KNOBS
                     and len({repr(knobs.get(k)) for knobs in knob_sets}) > 1]  # fmt: skip
        for i, knobs in zip(group, knob_sets, strict=True):
            extra = ", ".join(f"{k}={_knob_text(knobs.get(k))}" for k in differing[:LABEL_KNOBS])
            if extra:
                labels[i] += f" · {extra}"
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    labels = [f"{x} ({entries[i][0]})" if counts[x] > 1 else x for i, x in enumerate(labels)]
    # Two runs of one name, device, dtype and knobs (only possible in a hand-made review):
    # number them rather than merge two columns into one.
    out, seen = [], set()
    for label in labels:
        unique, n = label, 2
        while unique in seen:
            unique, n = f"{label} #{n}", n + 1
        seen.add(unique)
        out.append(unique)
    return out


def _platforms(
    runs: Sequence[tuple[str, AnalysedRun]],
) -> list[tuple[Platform, AnalysedRun]]:
    entries = [(name, run, dtype) for name, run in runs for dtype in _dtypes(run)]
    out = []
    for (name, run, dtype), label in zip(entries, _labels(entries), strict=True):
        compute = ((run.ceilings or {}).get("compute") or {}).get(dtype) or {}
        peak = compute.get("peak")
        out.append((
            Platform(
                label=label, run=name, device_type=device_type(run),
                device_name=device_name(run),
                dtype=dtype, peak_flops_per_s=float(peak) if peak else None,
                peak_source=str(compute.get("source") or "not available") if peak
                else "not available",
            ),
            run,
        ))  # fmt: skip
    return out


# --- cells -------------------------------------------------------------------------------------


def judge_sla(
    targets: Sequence[Target], p99_s: float, throughput_calls_per_s: float
) -> tuple[str, str]:
    """(verdict, why) of one measured cell against every matching target, per call at the
    run's concurrency (the sla-kpi check's reading of a run): p99 at or under each p99 target,
    1 / mean at or over each throughput target. Missed when any target is."""
    judged = [t for t in targets if t.p99_s is not None or t.min_throughput_per_s is not None]
    if not judged:
        return NO_TARGET, ""
    misses, meets = [], []
    for t in judged:
        judgement = judge(t, p99_s, throughput_calls_per_s)
        if judgement.p99_ok is not None:
            ok = judgement.p99_ok
            (meets if ok else misses).append(
                f"p99 {p99_s * 1e3:.4g} ms {'<=' if ok else '>'} {t.p99_s * 1e3:.4g} ms "
                f"({t.workload})"
            )
        if judgement.throughput_ok is not None:
            ok = judgement.throughput_ok
            (meets if ok else misses).append(
                f"{throughput_calls_per_s:.4g} calls/s {'>=' if ok else '<'} "
                f"{t.min_throughput_per_s:.4g}/s ({t.workload})"
            )
    return (SLA_MISSED, "; ".join(misses)) if misses else (SLA_MET, "; ".join(meets))


def _cell(
    key: str,
    layer_type: str,
    platform: Platform,
    w: AnalysedWorkload | None,
    targets: Sequence[Target],
) -> Cell:
    matched = matching_targets(targets, w.id if w else key, key)
    p99_targets = [t.p99_s for t in matched if t.p99_s is not None]
    rate_targets = [t.min_throughput_per_s for t in matched if t.min_throughput_per_s is not None]
    common = {
        "workload": key,
        "layer_type": layer_type,
        "platform": platform.label,
        "workload_id": w.id if w else None,
        "sla_target": ", ".join(dict.fromkeys(t.workload for t in matched)),
        "sla_p99_s": min(p99_targets) if p99_targets else None,
        "sla_min_throughput_per_s": max(rate_targets) if rate_targets else None,
    }
    stats = w.stats if w else None
    if w is None or w.status != STATUS_OK or not stats:
        if w is None:
            why = NOT_IN_RUN
        else:
            why = w.status or "not run"
            why += f": {w.reason}" if w.reason else ""
        return Cell(
            **common, status=NOT_MEASURED, reason=why, mfu=None, mfu_reason=why, p50_s=None,
            p99_s=None, mean_s=None, batch=None, throughput_calls_per_s=None,
            sla=NOT_MEASURED if matched else NO_TARGET, sla_reason=why if matched else "",
            flops_per_joule=None, avg_watts=None, joules_per_call=None, energy_confidence="",
            energy_reason=why,
        )  # fmt: skip
    rate = calls_per_s(stats)
    verdict, why = judge_sla(matched, stats.p99_s, rate)
    mfu = w.mfu
    mfu_reason = "" if mfu is not None else (
        f"no compute ceiling for {platform.dtype} on this device" if "no-ceiling" in
        w.flags else "no MFU recorded"
    )  # fmt: skip
    no_energy = energy_reason(w)
    e = {} if no_energy else w.energy
    batch = (w.params or {}).get("batch")
    return Cell(
        **common, status=MEASURED, reason="", mfu=mfu, mfu_reason=mfu_reason,
        p50_s=stats.p50_s, p99_s=stats.p99_s, mean_s=stats.mean_s,
        batch=int(batch) if isinstance(batch, int) and not isinstance(batch, bool) else None,
        throughput_calls_per_s=rate, sla=verdict, sla_reason=why,
        flops_per_joule=e.get("flops_per_joule"), avg_watts=e.get("avg_watts"),
        joules_per_call=e["joules"] / e["calls"] if e else None,
        energy_confidence=str(e.get("confidence") or ""), energy_reason=no_energy,
    )  # fmt: skip


def _row_rank(layer_type: str) -> tuple[int, str]:
    return (ROW_ORDER.index(layer_type), "") if layer_type in ROW_ORDER else (
        len(ROW_ORDER), layer_type)  # fmt: skip


def build_matrix(
    runs: Sequence[tuple[str, AnalysedRun]], targets: Sequence[Target] = ()
) -> PlatformMatrix:
    """The matrix of analysed runs, (packet name, analysed run) with the baseline first.

    A platform is one run's one dtype: a run measured in three dtypes is three columns, so every
    cell holds one measurement. Rows are slice keys (reviewkit.analysis.compare.slice_key): the same
    operator at the same shape lines up across dtypes, as comparisons pair them.
    """
    platforms = _platforms(runs)
    layer_of: dict[str, str] = {}
    by_platform: list[dict[str, AnalysedWorkload]] = []
    for platform, run in platforms:
        found = {}
        for w in run.workloads:
            if w.dtype == platform.dtype:
                key = slice_key(w)
                found[key] = w
                layer_of.setdefault(key, str(w.layer_type or "unknown"))
        by_platform.append(found)
    keys = sorted(layer_of, key=lambda k: (_row_rank(layer_of[k]), k))
    cells = tuple(
        _cell(key, layer_of[key], platform, found.get(key), targets)
        for key in keys
        for (platform, _), found in zip(platforms, by_platform, strict=True)
    )
    devices = tuple(dict.fromkeys(p.device_name for p, _ in platforms))
    return PlatformMatrix(tuple(p for p, _ in platforms), tuple(keys), cells, devices)
