"""The one reading of a cited soak result: validated at load into a typed record, or why not."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit.evidence.files import SOAK, EvidenceUnusable, Loaded, finite_number, need


@dataclass(frozen=True)
class Soak:
    """A `reviewkit soak` result as the gate and the packet read it."""

    path: Path
    workload_id: str
    reproduce: str
    window_s: float
    complete: bool
    verdict: str
    reasons: tuple[str, ...]
    trend: dict  # mean, slope_per_s, relative_change, relative_change_ci, reason, ...
    throttling_status: str
    throttling_reason: str
    subwindows: tuple[dict, ...]
    sensors: dict = field(default_factory=dict)  # reader -> {"available", "reason"}


class SoakUnusable(EvidenceUnusable):
    """A soak file of the right kind whose fields cannot be read; the message names the key
    (the caller names the file, as the review cites it)."""


_need = functools.partial(need, error=SoakUnusable, kind=SOAK)
# What the gate, the packet and the chart read of the trend and of each sub-window: a number
# there is a finite number or absent (null), a text is text.
TREND_NUMBERS = ("mean", "slope_per_s", "relative_change", "span_s")
SUBWINDOW_NUMBERS = ("start_s", "end_s", "calls_per_s")


def _optional_finite(table: dict, name: str, key: str) -> None:
    value = table.get(name)
    _need(value is None or finite_number(value), f"{key}.{name}", "a finite number or null")


def _check_trend(trend: dict) -> None:
    for name in TREND_NUMBERS:
        _optional_finite(trend, name, "analysis.trend")
    ci = trend.get("relative_change_ci")
    pair = isinstance(ci, list | tuple) and len(ci) == 2 and all(map(finite_number, ci))
    _need(ci is None or pair, "analysis.trend.relative_change_ci", "null or two finite numbers")
    reason = trend.get("reason")
    _need(reason is None or isinstance(reason, str), "analysis.trend.reason", "text or null")


def _check_subwindows(subwindows: list) -> None:
    for i, sw in enumerate(subwindows):
        _need(isinstance(sw, dict), f"subwindows[{i}]", "a table")
        for name in SUBWINDOW_NUMBERS:
            _optional_finite(sw, name, f"subwindows[{i}]")
        index = sw.get("index")
        _need(index is None or (type(index) is int and index >= 0), f"subwindows[{i}].index",
              "a whole number, 0 or more, or null")  # fmt: skip
        readings = sw.get("readings")
        _need(readings is None or isinstance(readings, dict), f"subwindows[{i}].readings",
              "a table of sensor readings or null")  # fmt: skip


def read_soak(loaded: Loaded) -> Soak:
    """The typed record of a loaded soak document; SoakUnusable names the first bad key.

    Every field a consumer reads is checked here once, so the gate and the packet need no
    `.get()` chains, and both see a missing `complete` the same way: not usable (the gate read
    it as interrupted, the packet as complete)."""
    path, doc = loaded.path, loaded.doc
    _need(doc is not None, "kind", f"a soak result ({loaded.reason})")
    workload, analysis = doc.get("workload"), doc.get("analysis")
    _need(isinstance(workload, dict) and isinstance(workload.get("id"), str), "workload.id",
          "a string")  # fmt: skip
    _need(finite_number(doc.get("measured_window_s")) and doc["measured_window_s"] >= 0,
          "measured_window_s", "a finite number of seconds, 0 or more")  # fmt: skip
    _need(isinstance(doc.get("complete"), bool), "complete", "true or false")
    _need(isinstance(analysis, dict), "analysis", "a table")
    _need(isinstance(analysis.get("verdict"), str), "analysis.verdict", "a string")
    reasons = analysis.get("reasons", [])
    _need(isinstance(reasons, list), "analysis.reasons", "a list")
    trend, throttling = analysis.get("trend", {}), analysis.get("throttling", {})
    _need(isinstance(trend, dict), "analysis.trend", "a table")
    _check_trend(trend)
    _need(isinstance(throttling, dict), "analysis.throttling", "a table")
    subwindows = doc.get("subwindows")
    _need(isinstance(subwindows, list), "subwindows", "a list of tables")
    _check_subwindows(subwindows)
    sensors = doc.get("sensors", {})
    _need(isinstance(sensors, dict), "sensors", "a table")
    return Soak(
        path=path,
        workload_id=workload["id"],
        reproduce=str(workload.get("reproduce", "")),
        window_s=float(doc["measured_window_s"]),
        complete=doc["complete"],
        verdict=analysis["verdict"],
        reasons=tuple(str(r) for r in reasons),
        trend=trend,
        throttling_status=str(throttling.get("status", "?")),
        throttling_reason=str(throttling.get("reason", "")),
        subwindows=tuple(subwindows),
        sensors=sensors,
    )
