"""Checks on a precision or sparsity change: quality measured under the same knobs and within
tolerance (a real model's figures, not only the suite's smoke check), a fallback path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reviewkit.common.format import MISSING
from reviewkit.review.checks.registry import NUMBER, TABLE, CheckResult, Context, Evidence, check
from reviewkit.review.status import FAIL, PASS, WARN

if TYPE_CHECKING:
    from reviewkit.bundle.records import Run

# Bits of precision per dtype: a candidate whose narrowest dtype has fewer bits than the
# baseline's narrowest lowered precision.
DTYPE_BITS = {"fp64": 64, "fp32": 32, "tf32": 19, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8}
# torch.set_float32_matmul_precision: "high" and "medium" let fp32 matmuls run in TF32/bf16.
FP32_MATMUL_BITS = {"highest": 32, "high": 19, "medium": 16}


def _min_bits(knobs: Mapping[str, Any]) -> int:
    dtypes = knobs.get("dtypes") or []
    bits = min((DTYPE_BITS.get(d, 32) for d in dtypes), default=32)
    if knobs.get("quantization", "none") not in ("none", "", None):
        bits = min(bits, 8)
    if "fp32" in dtypes:
        bits = min(bits, FP32_MATMUL_BITS.get(knobs.get("float32_matmul_precision", "highest"), 32))
    return bits


def precision_lowered(base: Run, cand: Run) -> bool:
    return _min_bits(cand.knobs) < _min_bits(base.knobs)


def sparsity_changed(base: Run, cand: Run) -> bool:
    return base.knobs.get("sparsity", "dense") != cand.knobs.get("sparsity", "dense")


def lowered_dtypes(base: Run, cand: Run) -> set[str]:
    """The candidate's dtypes narrower than the baseline's narrowest (int8 for quantisation)."""
    floor = _min_bits(base.knobs)
    out = {d for d in cand.knobs.get("dtypes") or [] if DTYPE_BITS.get(d, 32) < floor}
    if cand.knobs.get("quantization", "none") not in ("none", "", None):
        out.add("int8")
    return out


def quality_needs(base: Run, cand: Run) -> list[tuple[str, str, str]]:
    """(label, knob, value) for each change of the candidate's that only quality evidence
    measured under the same knob can clear: a dtype narrower than the baseline's, fp32 matmuls
    in a lower precision, a quantization or a sparsity the baseline does not have."""
    b, c = base.knobs, cand.knobs
    floor = _min_bits(b)
    out = [(d, "dtype", d) for d in c.get("dtypes") or [] if DTYPE_BITS.get(d, 32) < floor]
    matmul = str(c.get("float32_matmul_precision", "highest"))
    was = str(b.get("float32_matmul_precision", "highest"))
    if "fp32" in (c.get("dtypes") or []) and FP32_MATMUL_BITS.get(
        matmul, 32
    ) < FP32_MATMUL_BITS.get(was, 32):
        out.append((f"float32_matmul_precision={matmul}", "float32_matmul_precision", matmul))
    for knob, none in (("quantization", "none"), ("sparsity", "dense")):
        value = str(c.get(knob) or none)
        if value != none and value != str(b.get(knob) or none):
            out.append((f"{knob}={value}", knob, value))
    if not out and precision_lowered(base, cand):
        out.append(("lower precision", "", ""))  # no knob names it: no result can match
    return out


def _rerun(label: str, knob: str) -> str:
    spelt = f"--dtype {label}" if knob == "dtype" else f"--knob {label}"
    return f"`reviewkit quality --model FILE.pt2 --inputs FILE {spelt}`"


@check(
    "precision-quality",
    params={"tolerances": TABLE, "min_top1_agreement": NUMBER, "max_kl_divergence": NUMBER},
)
def precision_quality(ctx: Context) -> CheckResult:
    needs: list[tuple[str, str, str]] = []
    for _, cand in ctx.candidates:
        needs += [n for n in quality_needs(ctx.baseline, cand) if n not in needs]
    if not needs:
        return CheckResult(PASS, "no candidate lowers precision or changes sparsity")
    labels = ", ".join(label for label, _, _ in needs)
    files = ctx.review.evidence.get("quality", ())
    if not files:
        return CheckResult(
            FAIL,
            f"the candidate changes precision or sparsity ({labels}) and no quality evidence is "
            "cited under [evidence].quality",
        )
    tolerances = ctx.params["tolerances"]
    min_top1 = float(ctx.params["min_top1_agreement"])
    max_kl = float(ctx.params["max_kl_divergence"])
    evidence = [ctx.artifact("quality evidence", p) for p in files]
    results, unusable = ctx.cited.quality.records, ctx.cited.quality.not_used
    not_used = "; ".join(f"{ctx.review.relative(path)}: {why}" for path, why in unusable)
    rows = [r for q in results for r in q.rows]
    if not rows:
        return CheckResult(
            WARN,
            "quality evidence is cited but holds no usable `reviewkit quality` result, so "
            f"its tolerances cannot be checked ({not_used or 'no results'})",
            tuple(evidence),
        )
    problems, smoke, without_model, judged = [], [], [], []
    for label, knob, value in needs:
        mine = [r for r in rows if knob and r.matches(knob, value)]
        if not mine:
            problems.append(f"no {label} results in the quality evidence")
            continue
        cleared = False
        for r in (r for r in mine if r.applicable):
            name = f"{r.workload_id} {label}"
            if not r.measured:
                problems.append(f"{name}: {r.status} ({r.reason})")
                continue
            judged.append(r)
            tol = tolerances.get(r.tolerance_key) if r.tolerance_key else None
            if tol is not None and r.rel_error > tol:
                problems.append(f"{name}: relative error {r.rel_error:.2e} > {tol:g}")
            figures = []
            if r.top1_agreement is not None and r.top1_agreement < min_top1:
                figures.append(f"top-1 agreement {r.top1_agreement:.3f} < {min_top1:g}")
            if r.kl_divergence is not None and r.kl_divergence > max_kl:
                figures.append(f"KL {r.kl_divergence:.2e} > {max_kl:g}")
            # Only a team's own model clears (or fails) on its figures: the suite decoder's
            # random weights give near-uniform logits, whose argmax any rounding flips.
            if r.from_model:
                problems += [f"{name}: {f}" for f in figures]
                limits = (tol, r.top1_agreement, r.kl_divergence)
                cleared = cleared or any(x is not None for x in limits)
            else:
                smoke += [f"{name}: {f}" for f in figures]
        if not cleared:
            without_model.append((label, knob))
    smoke_note = (f"; smoke check only (the suite's random-weight model, not counted): "
                  f"{'; '.join(smoke[:2])}" if smoke else "")  # fmt: skip
    if problems:
        return CheckResult(FAIL, f"{len(problems)} quality problem(s): "
                           f"{'; '.join(problems[:4])}{smoke_note}", tuple(evidence))  # fmt: skip
    worst = max(judged, key=lambda r: r.rel_error, default=None)
    evidence.append(
        Evidence(
            "number",
            "worst relative error",
            value=f"{worst.workload_id} {worst.dtype}: {worst.rel_error:.2e}" if worst else MISSING,
        )
    )
    within = (f"{len(judged)} result(s) for {labels} within the rubric's tolerances against "
              "float64")  # fmt: skip
    if without_model:
        missing = ", ".join(label for label, _ in without_model)
        return CheckResult(
            WARN,
            f"{within}, but no real model's figures for {missing}: run "
            f"{_rerun(*without_model[0])} on the team's exported model and cite it"
            f"{smoke_note}",
            tuple(evidence),
        )
    if not_used:  # a cited file the gate could not read is not silently dropped
        return CheckResult(WARN, f"{within}, but cited quality not used: {not_used}",
                           tuple(evidence))  # fmt: skip
    return CheckResult(PASS, f"{within}, a real model's among them", tuple(evidence))


@check("fallback-for-precision-or-sparsity")
def fallback(ctx: Context) -> CheckResult:
    risky = [
        i + 1
        for i, (_, c) in enumerate(ctx.candidates)
        if precision_lowered(ctx.baseline, c) or sparsity_changed(ctx.baseline, c)
    ]
    if not risky:
        return CheckResult(PASS, "no candidate lowers precision or changes sparsity")
    has_fallback = bool(ctx.review.rollback.get("fallback"))
    has_quality = bool(ctx.review.evidence.get("quality"))
    if has_fallback and has_quality:
        return CheckResult(
            PASS,
            "a fallback path ([rollback].fallback) and quality evidence are recorded",
            (Evidence("text", "fallback", value=ctx.review.rollback["fallback"]),),
        )
    missing = [
        name
        for name, ok in (
            ("a fallback path ([rollback].fallback)", has_fallback),
            ("quality evidence ([evidence].quality)", has_quality),
        )
        if not ok
    ]
    return CheckResult(
        FAIL,
        f"candidate(s) {', '.join(map(str, risky))} change precision or "
        f"sparsity without {' or '.join(missing)}",
    )
