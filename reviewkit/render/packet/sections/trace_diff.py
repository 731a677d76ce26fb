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
            "shares": [{"name": n, "base": b, "cand": c} for n, b, c in d.shares],
            "notes": list(d.notes),
        }
        for d in cited.records
    ]
    return {"trace_diff": {"diffs": shown, "notes": cited.notes(p.report.review)}}


SECTION = Section(
    "trace-diff", "Production trace diff", after="production-fit", fields=("trace_diff",),
    build=trace_diff_fields,
    shown=lambda model: bool(model["trace_diff"]["diffs"] or model["trace_diff"]["notes"]),
)  # fmt: skip
