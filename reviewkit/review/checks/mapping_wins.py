"""Checks on a sparse or quantized candidate: slower than dense where the mapping applies is the
"win without fallback" that sinks a rollout."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reviewkit.analysis.stats import FASTER, SLOWER
from reviewkit.review.checks.registry import CheckResult, Context, Evidence, check
from reviewkit.review.status import FAIL, PASS

if TYPE_CHECKING:
    from reviewkit.bundle.records import Run

# The weight-mapping knobs and the setting that means "not mapped" (the dense, full-precision
# baseline a sparse or quantized kernel must beat).
WEIGHT_KNOBS = {"sparsity": "dense", "quantization": "none"}
SHOWN = 4  # slower workloads named in the summary; the evidence lists them all


def mapped_knobs(base: Run, cand: Run) -> dict[str, str]:
    """The weight knobs the candidate sets away from the baseline's (knob -> candidate value)."""
    return {
        knob: str(cand.knobs.get(knob, off))
        for knob, off in WEIGHT_KNOBS.items()
        if str(cand.knobs.get(knob, off)) not in (off, str(base.knobs.get(knob, off)))
    }


@check("sparse-or-quantized-not-slower")
def sparse_or_quantized_not_slower(ctx: Context) -> CheckResult:
    checked, slower, faster, evidence = 0, [], 0, []
    for i, ((_, cand), comp) in enumerate(zip(ctx.candidates, ctx.comparisons, strict=True)):
        knobs = mapped_knobs(ctx.baseline, cand)
        if not knobs:
            continue
        setting = ", ".join(f"{k}={v}" for k, v in knobs.items())
        by_id = {w.id: w for w in cand.workloads}
        for row in comp.workloads:
            w = by_id.get(row.candidate_id)
            # a workload the knob leaves alone is the dense kernel on both sides: not its test
            if w is None or set(knobs) <= set(w.knobs_not_applicable or {}):
                continue
            checked += 1
            faster += row.verdict == FASTER
            if row.verdict == SLOWER:
                ratio = (f" ({row.median_ratio:.2f} times the dense time)"
                         if row.median_ratio else "")  # fmt: skip
                slower.append(f"candidate {i + 1} {setting}: {row.candidate_id}{ratio}")
        evidence.append(Evidence("text", f"candidate {i + 1} weight mapping", value=setting))
    if not checked:
        return CheckResult(PASS, "no candidate runs a sparse or quantized mapping against dense")
    if slower:
        more = f" and {len(slower) - SHOWN} more" if len(slower) > SHOWN else ""
        evidence += [Evidence("text", "slower than dense", value=s) for s in slower]
        return CheckResult(
            FAIL,
            f"the sparse or quantized mapping is slower than dense on {len(slower)} of "
            f"{checked} workload(s) it changes: {'; '.join(slower[:SHOWN])}{more}. A mapping "
            "that loses where it applies is a win only with a fallback to dense there: narrow "
            "the rollout to the workloads it speeds up, or drop it",
            tuple(evidence),
        )
    return CheckResult(
        PASS,
        f"no workload the sparse or quantized mapping changes is slower than dense ({faster} of "
        f"{checked} faster)",
        tuple(evidence),
    )
