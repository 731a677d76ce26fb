"""Disproof criteria evaluated against the measured comparison."""

from __future__ import annotations

import fnmatch
import operator

from reviewkit.analysis.compare import Comparison
from reviewkit.review.checks.registry import (
    DISPROVED,
    FAIL,
    HOLDS,
    MISSING,
    NOT_EVALUABLE,
    PASS,
    WARN,
    CheckResult,
    Context,
    Evidence,
    check,
)
from reviewkit.review.reviewfile import Disproof

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_RATIO_METRICS = {"median_ratio", "mean_ratio", "p95_ratio", "p99_ratio"}


def _metric_values(d: Disproof, comp: Comparison, cand: dict) -> list[tuple[str, float]]:
    if d.metric in _RATIO_METRICS:
        return [
            (w.candidate_id, getattr(w, d.metric))
            for w in comp.workloads
            if getattr(w, d.metric) is not None
            and (
                fnmatch.fnmatchcase(w.candidate_id, d.workload)
                or fnmatch.fnmatchcase(w.key, d.workload)
            )
        ]
    out = []
    for w in cand["workloads"]:
        if not fnmatch.fnmatchcase(w["id"], d.workload) or not w.get("stats"):
            continue
        value = {
            "mfu": w.get("mfu"),
            "memory_stall_fraction": (w.get("fractions") or {}).get("memory_stall"),
            "p50_s": w["stats"]["p50_s"],
            "p99_s": w["stats"]["p99_s"],
        }[d.metric]
        if value is not None:
            out.append((w["id"], value))
    return out


def evaluate_disproof(d: Disproof, ctx: Context) -> tuple[str, str]:
    """(`holds` | `disproved` | `not evaluable`, why). The criterion names what disproves."""
    if not d.machine_checkable:
        return NOT_EVALUABLE, "stated in words only (no workload, metric, comparison, threshold)"
    hits, seen = [], 0
    for comp, (_, cand) in zip(ctx.comparisons, ctx.candidates, strict=True):
        values = _metric_values(d, comp, cand)
        seen += len(values)
        hits += [(wid, v) for wid, v in values if _OPS[d.comparison](v, d.threshold)]
    if not seen:
        return NOT_EVALUABLE, f"no measured workload matches {d.workload!r} for {d.metric}"
    if hits:
        shown = ", ".join(f"{wid} {d.metric}={v:.4g}" for wid, v in hits[:3])
        return (
            DISPROVED,
            f"{len(hits)} of {seen} workload(s) meet {d.metric} {d.comparison} "
            f"{d.threshold:g}: {shown}",
        )
    return HOLDS, f"none of {seen} workload(s) meets {d.metric} {d.comparison} {d.threshold:g}"


@check("disproof-evaluated")
def disproof_evaluated(ctx: Context) -> CheckResult:
    criteria = ctx.review.disproof
    if not criteria:
        return CheckResult(
            MISSING, "no [[disproof]] criteria: nothing says what would prove the claim wrong"
        )
    results = [(d, *evaluate_disproof(d, ctx)) for d in criteria]
    evidence = tuple(
        Evidence("text", f"{status}: {d.statement}", value=why) for d, status, why in results
    )
    disproved = [d for d, status, _ in results if status == DISPROVED]
    if disproved:
        return CheckResult(
            FAIL, f"{len(disproved)} disproof criterion(s) met: the claim is disproved", evidence
        )
    if all(status == NOT_EVALUABLE for _, status, _ in results):
        return CheckResult(
            WARN, "criteria are stated but none could be evaluated against the runs", evidence
        )
    return CheckResult(PASS, f"{len(results)} criterion(s) stated; none is met", evidence)
