"""The packet's "Compilation" section: a compiled run's cold-start cost per workload (compile
time cold and warm, graphs, breaks, fallbacks), apart from its steady-state samples."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reviewkit.render.packet.sections.base import Section

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun
    from reviewkit.render.packet.fields import Inputs

# The slowest compiles listed by name: the rest are in the run's bundle.
SLOWEST_SHOWN = 5


def _compilation(label: str, run: AnalysedRun) -> dict | None:
    rows = [(w.id, w.compile) for w in run.workloads if w.compile]
    if not rows:
        return None
    warm = [c["warm_s"] for _, c in rows if c.get("warm_s") is not None]
    slowest = sorted(rows, key=lambda r: -r[1]["cold_s"])[:SLOWEST_SHOWN]
    return {
        "run": label,
        "mode": rows[0][1]["mode"],
        "workloads": len(rows),
        "cold_s": sum(c["cold_s"] for _, c in rows),
        "warm_s": sum(warm) if warm else None,
        "warm_workloads": len(warm),
        "graphs": sum(c["graphs"] for _, c in rows),
        "graph_breaks": sum(c["graph_breaks"] for _, c in rows),
        "ran_eager": [i for i, c in rows if c["fell_back_to_eager"]],
        "reused": [i for i, c in rows if c.get("reused")],
        "slowest": [
            {"id": i, "cold_s": c["cold_s"], "warm_s": c.get("warm_s"), "graphs": c["graphs"],
             "graph_breaks": c["graph_breaks"]}
            for i, c in slowest
        ],
    }


def compilation_fields(p: Inputs) -> dict:
    return {"compilation": [c for label, run in p.runs if (c := _compilation(label, run))]}


SECTION = Section(
    "compilation", "Compilation", after="knobs", fields=("compilation",),
    build=compilation_fields, shown=lambda model: bool(model["compilation"]),
)  # fmt: skip
