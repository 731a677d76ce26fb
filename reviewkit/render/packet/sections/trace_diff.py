"""The packet's "Production trace diff" section: a cited `reviewkit trace diff`, largest first."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from reviewkit.common.format import elided
from reviewkit.render.packet.sections.base import Section

if TYPE_CHECKING:
    from reviewkit.render.packet.fields import Inputs


# A device kernel's name is its C++ signature, thousands of characters for a templated one (an
# fbgemm embedding backward filled a page): the cell shows this much, the tooltip all of it.
OP_NAME_MAX_CHARS = 90


def trace_diff_fields(p: Inputs) -> dict:
    """Each cited trace diff as the review stage read it (report.cited), and why any was not
    used; empty when the review cites none (the section is then left out)."""
    cited = p.report.cited.trace_diffs
    if not cited.cited:
        return {"trace_diff": {"diffs": [], "notes": []}}
    shown = [
        {
            "source": p.report.review.relative(d.path),
            "base": d.base_path,
            "cand": d.cand_path,
            "time_basis": d.time_basis,
            "base_time_s": d.base_time_s,
            "cand_time_s": d.cand_time_s,
            "delta_s": d.delta_s,
            "layer_types": [asdict(r) for r in d.layer_types],
            "ops": [{**asdict(r), "name_text": elided(r.key, OP_NAME_MAX_CHARS)}
                    for r in d.ops],
            "shapes": [{**asdict(r), "name_text": elided(r.key, OP_NAME_MAX_CHARS)}
                       for r in d.shapes],
            "shares": [{"name": n, "base": b, "cand": c} for n, b, c in d.shares],
            "notes": list(d.notes),
        }
        for d in cited.records
    ]
    return {"trace_diff": {"diffs": shown, "notes": cited.notes(p.report.review)}}


def trace_diff_charts(p: Inputs) -> dict:
    """The first cited diff drawn: its layer types, then its op-and-shape rows (its op rows
    where the diff has none: summaries from before shapes named their op)."""
    from reviewkit.render import charts

    records = p.report.cited.trace_diffs.records
    if not records:
        return {}
    d = records[0]
    ops, title = (d.shapes, "op and shape") if d.shapes else (d.ops, "op")
    return {"trace_change": charts.trace_change([asdict(r) for r in d.layer_types],
                                                [asdict(r) for r in ops], title)}


SECTION = Section(
    "trace-diff", "Production trace diff", after="production-fit", fields=("trace_diff",),
    build=trace_diff_fields, optional_charts=("trace_change",), draw=trace_diff_charts,
    shown=lambda model: bool(model["trace_diff"]["diffs"] or model["trace_diff"]["notes"]),
)  # fmt: skip
