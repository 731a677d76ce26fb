"""The one reading of a cited soak result: validated at load into a typed record, or why not."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit.evidence.files import SOAK, EvidenceUnusable, Loaded, need


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


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


_need = functools.partial(need, error=SoakUnusable, kind=SOAK)


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
    _need(_number(doc.get("measured_window_s")), "measured_window_s", "a number")
    _need(isinstance(doc.get("complete"), bool), "complete", "true or false")
    _need(isinstance(analysis, dict), "analysis", "a table")
    _need(isinstance(analysis.get("verdict"), str), "analysis.verdict", "a string")
    reasons = analysis.get("reasons", [])
    _need(isinstance(reasons, list), "analysis.reasons", "a list")
    trend, throttling = analysis.get("trend", {}), analysis.get("throttling", {})
    _need(isinstance(trend, dict), "analysis.trend", "a table")
    _need(isinstance(throttling, dict), "analysis.throttling", "a table")
    subwindows = doc.get("subwindows")
    _need(isinstance(subwindows, list) and all(isinstance(s, dict) for s in subwindows),
          "subwindows", "a list of tables")  # fmt: skip
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
