"""The packet's numerical-quality figure: relative error against float64 and the tolerances."""

from __future__ import annotations

from reviewkit.common import format as fmt
from reviewkit.render import charts
from reviewkit.review.gate import Report

NO_QUALITY = (
    "no quality evidence is cited: run `reviewkit quality --dtype <dtype> --out "
    "evidence/quality.json` and cite it under [evidence].quality"
)


PRECISION_CHECK = "precision-quality"


def quality_input(report: Report) -> tuple[list[dict], dict[str, float], list[str]]:
    """Measured rows of every cited quality result, the rubric's tolerances, and notes."""
    limits = report.cited.quality_limits  # the rubric's, as the review stage read them
    tolerances = dict(limits.tolerances)
    cited = report.cited.quality
    if not cited.cited:
        return [], tolerances, [NO_QUALITY]
    notes = cited.notes(report.review)
    rows, not_ok = [], []
    for quality in cited.records:
        for r in quality.rows:
            if r.applicable and not r.measured:
                not_ok.append(f"{r.workload_id} {r.dtype}: {r.status} ({r.reason})")
    judged = report.cited.quality_judged  # each row against the rubric, as the gate judged it
    for j in judged:
        r = j.row
        rows.append(
            {
                "workload": r.workload_id,
                "dtype": r.dtype,
                "rel_error": r.rel_error,
                "max_abs_error": r.max_abs_error,
                "top1_agreement": r.top1_agreement,
                "kl_divergence": r.kl_divergence,
                "source": report.review.relative(j.source),
                "over_tolerance": j.over_tolerance,
            }
        )
    if not_ok:
        notes.append(f"{len(not_ok)} result(s) not measured: {'; '.join(not_ok[:3])}")
    # Top-1 agreement and KL are in the tooltip on screen; the PDF has no tooltip, so the model
    # rows' figures are said in words against the rubric's limits.
    min_top1, max_kl = limits.min_top1_agreement, limits.max_kl_divergence
    for j in judged:
        top1, kl = j.row.top1_agreement, j.row.kl_divergence
        parts = []
        if top1 is not None:
            below = f" (BELOW the rubric's {min_top1:.0%})" if j.top1_below else ""
            parts.append(f"top-1 agreement {top1:.1%}{below}")
        if kl is not None:
            above = f" (ABOVE the rubric's {max_kl:g})" if j.kl_above else ""
            parts.append(f"KL {fmt.num(kl, 2)} nats{above}")
        if parts:
            # the suite decoder's weights are random: its figures are a smoke check that the
            # gate does not count, a team's exported model's (quality --model) are evidence
            smoke = "" if j.row.from_model else " (smoke check: the suite's random weights)"
            notes.append(f"{j.row.workload_id} {j.row.dtype}{smoke}: {', '.join(parts)}")
    if not limits.has_item:
        notes.append(f"the rubric has no `{PRECISION_CHECK}` item: no tolerances drawn")
    return rows, tolerances, notes


def quality_charts(report: Report) -> dict:
    """The section's chart specs, by the name its template partial places them under."""
    return {"quality_drift": charts.quality_drift(*quality_input(report))}
