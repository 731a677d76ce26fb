"""Disproof criteria evaluated against the measured comparison."""

from __future__ import annotations

import fnmatch
import operator
from typing import TYPE_CHECKING

from reviewkit.analysis.compare import Comparison
from reviewkit.review.checks.registry import CheckResult, Context, Evidence, check
from reviewkit.review.reviewfile import Disproof
from reviewkit.review.status import (
    CANNOT_RULE_OUT,
    DISPROVED,
    FAIL,
    HOLDS,
    MISSING,
    NOT_EVALUABLE,
    PASS,
    WARN,
)

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_RATIO_METRICS = {"median_ratio", "mean_ratio", "p95_ratio", "p99_ratio"}


# The interval beside each ratio metric (the mean has none: judged on its point, said so).
_INTERVALS = {"median_ratio": "median_ratio_ci", "p95_ratio": "p95_ratio_ci",
              "p99_ratio": "p99_ratio_ci"}  # fmt: skip


def _metric_values(d: Disproof, comp: Comparison, cand: AnalysedRun):
    """(workload id, value, interval or None) of every workload the criterion names."""
    if d.metric in _RATIO_METRICS:
        return [
            (w.candidate_id, getattr(w, d.metric),
             getattr(w, _INTERVALS[d.metric]) if d.metric in _INTERVALS else None)
            for w in comp.workloads
            if getattr(w, d.metric) is not None
            and (
                fnmatch.fnmatchcase(w.candidate_id, d.workload)
                or fnmatch.fnmatchcase(w.key, d.workload)
            )
        ]  # fmt: skip
    out = []
    for w in cand.workloads:
        if not fnmatch.fnmatchcase(w.id, d.workload) or not w.stats:
            continue
        stall = w.decomposition.memory_stall_fraction if w.decomposition else None
        value = {
            "mfu": w.mfu,
            "memory_stall_fraction": stall,
            "p50_s": w.stats.p50_s,
            "p99_s": w.stats.p99_s,
        }[d.metric]
        if value is not None:
            out.append((w.id, value, None))
    return out


def _outcome(d: Disproof, value: float, interval) -> str:
    """Disproved when the whole interval meets the criterion, not disproved when the whole
    interval is clear of it, cannot rule out when it straddles the threshold (a value without
    an interval is judged on its point)."""
    meets = _OPS[d.comparison]
    if interval is None:
        return DISPROVED if meets(value, d.threshold) else HOLDS
    low, high = interval
    if meets(low, d.threshold) and meets(high, d.threshold):
        return DISPROVED
    if not meets(low, d.threshold) and not meets(high, d.threshold):
        return HOLDS
    return CANNOT_RULE_OUT


def evaluate_disproof(d: Disproof, ctx: Context) -> tuple[str, str]:
    """(`disproved` | `not disproved` | `cannot rule out` | `not evaluable`, why), judged on
    each workload's interval where it has one. The criterion names what disproves."""
    if not d.machine_checkable:
        return NOT_EVALUABLE, "stated in words only (no workload, metric, comparison, threshold)"
    judged = []
    for comp, (_, cand) in zip(ctx.comparisons, ctx.candidates, strict=True):
        judged += [(wid, v, ci, _outcome(d, v, ci)) for wid, v, ci in _metric_values(d, comp, cand)]
    if not judged:
        return NOT_EVALUABLE, f"no measured workload matches {d.workload!r} for {d.metric}"

    def shown(rows) -> str:
        return ", ".join(f"{wid} {d.metric}={v:.4g}"
                         + (f" [{ci[0]:.4g}, {ci[1]:.4g}]" if ci else "")
                         for wid, v, ci, _ in rows[:3])  # fmt: skip

    crit = f"{d.metric} {d.comparison} {d.threshold:g}"
    hits = [r for r in judged if r[3] == DISPROVED]
    if hits:
        return DISPROVED, (f"{len(hits)} of {len(judged)} workload(s) meet {crit} across their "
                           f"interval: {shown(hits)}")  # fmt: skip
    open_ = [r for r in judged if r[3] == CANNOT_RULE_OUT]
    if open_:
        return CANNOT_RULE_OUT, (f"{len(open_)} of {len(judged)} workload(s) have an interval "
                                 f"that straddles {crit}: {shown(open_)}")  # fmt: skip
    basis = ("interval clear of the threshold" if all(r[2] for r in judged)
             else "point estimates: no interval")  # fmt: skip
    return HOLDS, f"none of {len(judged)} workload(s) meets {crit} ({basis})"


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
    unsure = [d for d, status, _ in results if status == CANNOT_RULE_OUT]
    if unsure:
        return CheckResult(WARN, f"{len(unsure)} disproof criterion(s) cannot be ruled out: the "
                                 "interval straddles the threshold", evidence)  # fmt: skip
    return CheckResult(PASS, f"{len(results)} criterion(s) stated; none is met (not disproved)",
                       evidence)  # fmt: skip
