"""The one reading of a cited sweep result: validated at load into typed records, or why not."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit.evidence import loadgen
from reviewkit.evidence.files import (
    STATUS_OK,
    SWEEP,
    EvidenceUnusable,
    Loaded,
    finite_number,
    need,
    row_status,
)


@dataclass(frozen=True)
class SweptLevel:
    """One load level of a sweep (a server rate, or the back-to-back offline/single-stream)."""

    target_rate_per_s: float | None
    load_fraction: float | None
    achieved_rate_per_s: float
    p50_s: float | None
    p99_s: float | None
    valid: bool
    invalid_reasons: tuple[str, ...] = ()
    queries: int | None = None  # how many queries the level's percentiles come from


@dataclass(frozen=True)
class SweptWorkload:
    """One workload of a sweep. Only a measured one (`status` ok) carries levels."""

    id: str
    status: str
    reason: str
    reproduce: str
    server: tuple[SweptLevel, ...] = ()
    offline: SweptLevel | None = None
    single_stream: SweptLevel | None = None
    knee: dict = field(default_factory=dict)  # found, rate_per_s, rule, ... as find_knee wrote it
    sla: dict = field(default_factory=dict)  # the sweep's own --sla-p99-s judgement

    @property
    def measured(self) -> bool:
        return self.status == STATUS_OK


@dataclass(frozen=True)
class Sweep:
    """A `reviewkit sweep` result as the gate and the packet read it."""

    path: Path
    sla_p99_s: float | None
    workloads: tuple[SweptWorkload, ...]
    # The rules a level had to meet to be valid (min_duration_s, min_queries, max_level_s),
    # where the file records them; None for a file without them.
    validity: dict | None = None


class SweepUnusable(EvidenceUnusable):
    """A sweep file of the right kind whose fields cannot be read; the message names the key
    (the caller names the file, as the review cites it)."""


_need = functools.partial(need, error=SweepUnusable, kind=SWEEP)


def _optional_number(table: dict, name: str, key: str) -> float | None:
    value = table.get(name)
    _need(value is None or finite_number(value), key, "a finite number or absent")
    return None if value is None else float(value)


def _level(raw: object, key: str) -> SweptLevel:
    _need(isinstance(raw, dict), key, "a table")
    valid = raw.get("valid")
    _need(isinstance(valid, bool), f"{key}.valid", "true or false")
    achieved = raw.get("achieved_rate_per_s")
    _need(finite_number(achieved) and achieved >= 0, f"{key}.achieved_rate_per_s",
          "a number >= 0")  # fmt: skip
    latency = raw.get("latency")
    _need(isinstance(latency, dict), f"{key}.latency", "a table")
    p99 = _optional_number(latency, "p99_s", f"{key}.latency.p99_s")
    # A valid level is judged on its p99: without one it cannot be a result.
    _need(p99 is not None or not valid, f"{key}.latency.p99_s", "a number on a valid level")
    reasons = raw.get("invalid_reasons", [])
    _need(isinstance(reasons, list), f"{key}.invalid_reasons", "a list")
    queries = raw.get("queries")
    _need(queries is None or (type(queries) is int and queries >= 0), f"{key}.queries",
          "a whole number >= 0 or absent")  # fmt: skip
    return SweptLevel(
        target_rate_per_s=_optional_number(raw, "target_rate_per_s", f"{key}.target_rate_per_s"),
        load_fraction=_optional_number(raw, "load_fraction", f"{key}.load_fraction"),
        achieved_rate_per_s=float(achieved),
        p50_s=_optional_number(latency, "p50_s", f"{key}.latency.p50_s"),
        p99_s=p99,
        valid=valid,
        invalid_reasons=tuple(str(r) for r in reasons),
        queries=queries,
    )


def _workload(raw: object, key: str) -> SweptWorkload:
    _need(isinstance(raw, dict), key, "a table")
    _need(isinstance(raw.get("id"), str) and bool(raw["id"]), f"{key}.id", "a workload id")
    status = row_status(raw)
    common = {
        "id": raw["id"],
        "status": status,
        "reason": str(raw.get("reason", "")),
        "reproduce": str(raw.get("reproduce", "")),
    }
    if status != STATUS_OK:
        return SweptWorkload(**common)
    server = raw.get(loadgen.SERVER)
    _need(isinstance(server, list), f"{key}.{loadgen.SERVER}", "a list of levels")
    back_to_back = {}
    for scenario in (loadgen.OFFLINE, loadgen.SINGLE_STREAM):
        value = raw.get(scenario)
        back_to_back[scenario] = None if value is None else _level(value, f"{key}.{scenario}")
    knee, sla = raw.get("knee", {}), raw.get("sla", {})
    _need(isinstance(knee, dict), f"{key}.knee", "a table")
    _need(isinstance(sla, dict), f"{key}.sla", "a table")
    if knee.get("found"):
        _need(finite_number(knee.get("rate_per_s")), f"{key}.knee.rate_per_s",
              "a number where a knee is found")  # fmt: skip
    if sla.get("met"):
        for name in ("p99_s", "max_rate_per_s", "achieved_rate_per_s"):
            _need(
                finite_number(sla.get(name)), f"{key}.sla.{name}", "a number where the SLA is met"
            )
    return SweptWorkload(
        **common,
        server=tuple(_level(lv, f"{key}.{loadgen.SERVER}[{i}]") for i, lv in enumerate(server)),
        offline=back_to_back[loadgen.OFFLINE],
        single_stream=back_to_back[loadgen.SINGLE_STREAM],
        knee=knee,
        sla=sla,
    )


def read_sweep(loaded: Loaded) -> Sweep:
    """The typed record of a loaded sweep document; SweepUnusable names the first bad key.

    Every field the gate and the packet read is checked here once, so neither needs `.get()`
    chains, and a damaged file is refused by both with the same reason."""
    doc = loaded.doc
    _need(doc is not None, "kind", f"a sweep result ({loaded.reason})")
    workloads = doc.get("workloads")
    _need(isinstance(workloads, list) and bool(workloads), "workloads",
          "a non-empty list")  # fmt: skip
    own = doc.get("sla_p99_s")
    _need(own is None or (finite_number(own) and own > 0), "sla_p99_s", "a number > 0 or absent")
    rules = doc.get("validity")
    keys = ("min_duration_s", "min_queries", "max_level_s")
    usable = isinstance(rules, dict) and all(
        finite_number(rules.get(k)) and rules[k] >= 0 for k in keys
    )
    return Sweep(
        path=loaded.path,
        sla_p99_s=None if own is None else float(own),
        workloads=tuple(_workload(w, f"workloads[{i}]") for i, w in enumerate(workloads)),
        validity={k: float(rules[k]) for k in keys} if usable else None,
    )


def best_under_sla(levels: tuple[SweptLevel, ...], p99_s: float) -> dict:
    """loadgen's peak-performance answer (the highest valid level whose p99 meets the SLA),
    on typed levels: one judgement for the sweep command, the gate and the packet."""
    return loadgen.best_under_sla(
        [
            {
                "valid": lv.valid,
                "latency": {"p99_s": lv.p99_s},
                "target_rate_per_s": lv.target_rate_per_s,
                "achieved_rate_per_s": lv.achieved_rate_per_s,
            }
            for lv in levels
        ],
        p99_s,
    )
