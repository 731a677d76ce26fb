"""The packet's "Platform shortlist" section: a cited `reviewkit shortlist` and its chart."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from reviewkit.analysis.projection_accuracy import error_brief, error_note, kind_of
from reviewkit.render import charts
from reviewkit.render.packet.sections.base import Section

if TYPE_CHECKING:
    from reviewkit.render.packet.fields import Inputs


def shortlist_fields(p: Inputs) -> dict:
    """Each cited shortlist as the review stage read it (report.cited), and why any was not
    used; empty when the review cites none (the section is then left out)."""
    cited = p.report.cited.shortlists
    if not cited.cited:
        return {"shortlist": {"shortlists": [], "notes": []}}
    shown = []
    for s in cited.records:
        rows = []
        for r in s.rows:
            row = asdict(r)
            row["risk_items"] = [{"key": k, "weight": w, "reason": why}
                                 for k, w, why in r.risk_items]  # fmt: skip
            row["commands"] = list(r.commands)
            # issue 34: every projection shown beside its kind's measured error (the cases in
            # words once per kind, below the table)
            row["error_brief"] = error_brief(r.efficiency) if r.efficiency else ""
            row["error_kind"] = kind_of(r.efficiency)
            rows.append(row)
        kinds = sorted({row["error_kind"] for row in rows if row["error_brief"]})
        errors = [{"kind": k, "text": error_note(k)} for k in kinds]  # a kind is its own label
        shown.append({
            "errors": errors, "source": p.report.review.relative(s.path), "model": s.model,
            "batch": s.batch,
            "context": s.context, "dtype": s.dtype, "output_tokens": s.output_tokens,
            "sla_p99_s": s.sla_p99_s, "latency_note": s.latency_note,
            "summary": list(s.summary), "shortlisted": list(s.shortlisted), "rows": rows,
        })  # fmt: skip
    return {"shortlist": {"shortlists": shown, "notes": cited.notes(p.report.review)}}


def shortlist_charts(p: Inputs) -> dict:
    """The trade curve of the first cited shortlist that could be read (a review cites one)."""
    records = p.report.cited.shortlists.records
    if not records:
        return {}
    s = records[0]
    rows = [{"platform": r.key, "status": r.status, "rank": r.rank, "tp": r.tp,
             "latency_s": r.latency_s, "latency_low_s": r.latency_low_s,
             "latency_high_s": r.latency_high_s, "decode_tokens_per_s": r.decode_tokens_per_s,
             "energy_j": r.energy_j, "energy_low_j": r.energy_low_j,
             "energy_high_j": r.energy_high_j, "risk": r.risk}
            for r in s.rows]  # fmt: skip
    return {"trade_curve": charts.trade_curve(rows, s.sla_p99_s)}


SECTION = Section(
    "shortlist", "Platform shortlist", after="platforms", fields=("shortlist",),
    build=shortlist_fields, optional_charts=("trade_curve",), draw=shortlist_charts,
    shown=lambda model: bool(model["shortlist"]["shortlists"] or model["shortlist"]["notes"]),
)  # fmt: skip
