"""Checks on multi-device runs: the communication share, scaling efficiency and stragglers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reviewkit.common.format import pct
from reviewkit.review.checks.registry import NUMBER, CheckResult, Context, Evidence, check
from reviewkit.review.status import FAIL, MISSING, PASS, WARN

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun


def _runs(ctx: Context) -> list[tuple[str, AnalysedRun, Path]]:
    runs = [("baseline", ctx.baseline, ctx.review.baseline)]
    runs += [(f"candidate {i + 1}", doc, p) for i, (p, doc) in enumerate(ctx.candidates)]
    return [(label, doc, path) for label, doc, path in runs if doc.distributed]


def _communication_share(doc: AnalysedRun) -> float | None:
    """The collective layer type's communication fraction (time-weighted over dtypes)."""
    rows = [
        (a.time_s, a.communication_fraction or 0.0)
        for by_layer in doc.layer_types_by_dtype.values()
        if (a := by_layer.get("collective"))
    ]
    total = sum(t for t, _ in rows)
    return sum(t * f for t, f in rows) / total if total else None


@check("multi-device", {"min_scaling_efficiency": NUMBER})
def multi_device(ctx: Context) -> CheckResult:
    """A run measured on several ranks states its communication share and its scaling
    efficiency (tensor-parallel layer at tp = N against the unsharded one), and has no
    straggler. Pass when every multi-rank run does, with efficiency at least the rubric's
    minimum; warn below it or with a straggler; missing when a run lacks the numbers; fail when
    a run is incomplete (a rank died or timed out). Runs of one process: not applicable."""
    runs = _runs(ctx)
    if not runs:
        return CheckResult(PASS, "not applicable: every run is one process")
    floor = ctx.params["min_scaling_efficiency"]
    parts, evidence, worst = [], [], PASS
    for label, doc, path in runs:
        d = doc.distributed
        evidence.append(ctx.artifact(f"{label} run ({d['world_size']} ranks)", path))
        if d.get("incomplete") or not doc.complete:
            parts.append(f"{label} is incomplete: {d.get('incomplete') or doc.interrupted}")
            worst = FAIL
            continue
        share, scaling = _communication_share(doc), doc.scaling
        if share is None or not scaling:
            lacking = "no collective was measured" if share is None else "no tensor-parallel pair"
            parts.append(
                f"{label}: {lacking}; run `run --distributed` without --only (or include "
                "collective.* and model.*-tp-decoder-layer.*)"
            )
            worst = MISSING if worst != FAIL else worst
            continue
        text = (
            f"{label}: {d['world_size']} ranks ({d['backend']}), communication "
            f"{pct(share)} of the collectives' time; "
            + "; ".join(
                f"scaling efficiency {pct(s.efficiency)} at tp {s.tp} ({s.dtype}, "
                f"communication {pct(s.communication_fraction)} of the layer's time)"
                for s in scaling
            )
        )
        evidence += [
            Evidence("number", f"{label} scaling efficiency, tp {s.tp} {s.dtype}",
                     value=f"{s.efficiency:.3f} ({s.speedup:.3f}x over tp 1)")
            for s in scaling
        ]  # fmt: skip
        low = [s for s in scaling if s.efficiency < floor]
        if low:
            text += f"; below the rubric's {pct(floor, 0)} minimum"
            worst = WARN if worst == PASS else worst
        flagged = doc.stragglers.flagged if doc.stragglers else ()
        if flagged:
            text += "; straggler " + ", ".join(
                f"rank {f.rank} ({f.ratio:.2f}x the other ranks' median)" for f in flagged
            )
            worst = WARN if worst == PASS else worst
        parts.append(text)
    return CheckResult(worst, "; ".join(parts), tuple(evidence))
