"""The packet's "Communication" section: a multi-rank run's link, scaling, stragglers, and
its collectives' times and skew across ranks (only a review with such a run has it)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from reviewkit.analysis.distributed import over_others
from reviewkit.render import charts
from reviewkit.render.packet.sections.base import Section

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun
    from reviewkit.render.packet.fields import Inputs


def _communication(label: str, run: AnalysedRun) -> dict:
    """A multi-rank run as the packet's "Communication" section shows it."""
    d = run.distributed or {}
    link = (run.ceilings or {}).get("interconnect") or {}
    s = run.stragglers
    return {
        "run": label,
        "world_size": d["world_size"],
        "backend": d.get("backend"),
        "hosts": {h: len(r) for h, r in (d.get("hosts") or {}).items()},
        "link_gb_per_s": link["peak"] / 1e9 if link.get("peak") else None,
        "link_method": link.get("measured_method") or link.get("reason") or "",
        "link_datasheet_gb_per_s": link["datasheet"] / 1e9 if link.get("datasheet") else None,
        "scaling": [x.to_json() for x in run.scaling],
        "stragglers": [asdict(f) for f in s.flagged] if s else [],
        "straggler_threshold": s.ratio_threshold if s else None,
        "worst_rank_ratio": (max(s.rank_ratio or [0.0]) or None) if s else None,
        "incomplete": d.get("incomplete"),
    }


def communication_fields(p: Inputs) -> dict:
    return {
        "communication": [_communication(label, run) for label, run in p.runs if run.distributed]
    }


def communication_charts(runs: list[tuple[str, AnalysedRun]]) -> dict:
    """Collective time against bytes on the wire, and the skew across ranks, for the runs
    measured on several ranks (none: no charts, and the section is left out)."""
    multi = [(label, run) for label, run in runs if run.distributed]
    if not multi:
        return {}
    collective_runs, skew_rows = [], []
    for label, run in multi:
        link = ((run.ceilings or {}).get("interconnect") or {}).get("peak")
        collective_runs.append({
            "label": label, "link_bytes_per_s": link,
            "collectives": [
                {"id": w.id, "op": w.collective.op, "wire_bytes": w.wire_bytes,
                 "p50_s": w.stats.p50_s, "p99_s": w.stats.p99_s,
                 "busbw_bytes_per_s": w.collective.busbw_p50_bytes_per_s,
                 "skew": w.skew.max_over_median if w.skew else None}
                for w in run.workloads if w.collective and w.stats
            ],
        })  # fmt: skip
        for w in run.workloads:
            if not w.skew:
                continue
            # each rank against the others' median, as stragglers are judged
            skew_rows += [
                {"run": label if len(multi) > 1 else "", "workload": w.id, "rank": rank,
                 "ratio": ratio}
                for rank, ratio in enumerate(over_others(list(w.skew.rank_median_s)))
            ]  # fmt: skip
    return {
        "collective_times": charts.collective_times(collective_runs),
        "rank_skew": charts.rank_skew(skew_rows),
    }


SECTION = Section(
    "communication", "Communication", after="layers", fields=("communication",),
    build=communication_fields, charts=("collective_times", "rank_skew"),
    draw=lambda p: communication_charts(p.runs),
    shown=lambda model: bool(model["communication"]),
)  # fmt: skip
