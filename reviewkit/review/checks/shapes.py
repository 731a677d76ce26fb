"""Checks that a win holds across shapes (batch x sequence cells)."""

from __future__ import annotations

import re

from reviewkit.analysis.compare import FASTER, SLOWER, Comparison, WorkloadComparison
from reviewkit.review.checks.registry import INTEGER, NUMBER, CheckResult, Context, Evidence, check
from reviewkit.review.status import FAIL, PASS

_SHAPE_PART = re.compile(r"^b\d+s\d+$")


def shape_family(workload_key: str) -> str:
    """A workload key without its batch x sequence part: the cells of one shape sweep."""
    return ".".join(p for p in workload_key.split(".") if not _SHAPE_PART.match(p))


def _cell(w: WorkloadComparison) -> str:
    return f"b{w.params['batch']}s{w.params['seq']} x{w.median_ratio:.2f}"


def _portability(comp: Comparison, min_effect: float) -> tuple[list[str], list[str]]:
    """Per shape family with 2+ cells: (families faster on some shapes and slower on others,
    summaries). A family slower on every shape is said so in its summary: a consistent loss.

    A cell counts as faster or slower when its interval excludes 1 and its ratio is at least
    min_effect away from 1."""
    families: dict[str, list[WorkloadComparison]] = {}
    for w in comp.workloads:
        if w.median_ratio is not None and {"seq", "batch"} <= set(w.params):
            families.setdefault(shape_family(w.key), []).append(w)
    broken, summaries = [], []
    for family, cells in sorted(families.items()):
        if len(cells) < 2:
            continue
        faster = [w for w in cells if w.verdict == FASTER and w.median_ratio <= 1 - min_effect]
        slower = [w for w in cells if w.verdict == SLOWER and w.median_ratio >= 1 + min_effect]
        summaries.append(
            f"{family}: {len(faster)} of {len(cells)} shapes faster, {len(slower)} slower "
            f"(by {min_effect:.0%} or more)"
            + ("; slower on every shape: a consistent loss, no win" if slower == cells else "")
        )
        if faster and slower:
            # the wording follows the effect: a family mostly slower has no win to carry
            if len(slower) > len(faster):
                broken.append(
                    f"{family} is slower at {', '.join(_cell(w) for w in slower[:3])} and "
                    f"faster only at {', '.join(_cell(w) for w in faster[:3])}"
                )
            else:
                broken.append(
                    f"{family} is faster at {', '.join(_cell(w) for w in faster[:3])} but "
                    f"slower at {', '.join(_cell(w) for w in slower[:3])}"
                )
    return broken, summaries


@check("shape-coverage", params={"min_levels": INTEGER, "min_effect": NUMBER})
def shape_coverage(ctx: Context) -> CheckResult:
    min_levels = int(ctx.params["min_levels"])
    min_effect = float(ctx.params["min_effect"])
    summaries, thin, broken, evidence = [], False, [], []
    faster_cells = slower_cells = 0
    for i, comp in enumerate(ctx.comparisons):
        seqs = {w.params.get("seq") for w in comp.workloads if w.median_ratio} - {None}
        batches = {w.params.get("batch") for w in comp.workloads if w.median_ratio} - {None}
        summaries.append(
            f"candidate {i + 1}: sequence lengths {sorted(seqs)}, batch "
            f"(concurrency) levels {sorted(batches)}"
        )
        if len(seqs) < min_levels or len(batches) < min_levels:
            thin = True
        mixed, families = _portability(comp, min_effect)
        for w in comp.workloads:
            if w.median_ratio is not None and {"seq", "batch"} <= set(w.params):
                faster_cells += w.verdict == FASTER and w.median_ratio <= 1 - min_effect
                slower_cells += w.verdict == SLOWER and w.median_ratio >= 1 + min_effect
        broken += [f"candidate {i + 1}: {m}" for m in mixed]
        label = f"candidate {i + 1} shape cells"
        evidence += [Evidence("number", label, value=f) for f in families]
    if thin:
        return CheckResult(
            FAIL,
            f"evidence covers fewer than {min_levels} sequence lengths or "
            f"concurrency levels: {'; '.join(summaries)}",
            tuple(evidence),
        )
    if broken:
        # the wording follows the effect: mostly slower cells are no win to carry
        lead = (
            "the candidate is slower on most shapes and faster only on some: there is no win "
            "to carry across shapes"
            if slower_cells > faster_cells
            else "the win does not hold across shapes"
        )
        return CheckResult(
            FAIL,
            f"{lead} (faster by {min_effect:.0%} or more on some, slower by as much on "
            f"others, each beyond noise): {'; '.join(broken[:3])}",
            tuple(evidence),
        )
    return CheckResult(
        PASS,
        "; ".join(summaries) + "; no shape family is faster on some shapes and slower on others",
        tuple(evidence),
    )
