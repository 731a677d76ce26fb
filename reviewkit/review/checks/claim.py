"""Checks on the claim: one knob changed, production shapes behind it, closure, risk, rollback."""

from __future__ import annotations

from reviewkit.common.format import pct
from reviewkit.evidence import files as evidence_files
from reviewkit.evidence.trace import fit as fitmatrix
from reviewkit.review.checks.registry import (
    FAIL,
    LIST,
    MISSING,
    NUMBER,
    PASS,
    STATUS_ORDER,
    WARN,
    CheckResult,
    Context,
    Evidence,
    check,
)


@check("single-knob-change", params={"ignore": LIST})
def single_knob_change(ctx: Context) -> CheckResult:
    ignore = tuple(ctx.params["ignore"])
    worst, evidence, summaries = PASS, [], []
    for i, comp in enumerate(ctx.comparisons):
        changed = comp.mapping_knob_changes(ignore)
        for k in changed:
            evidence.append(
                Evidence(
                    "text",
                    f"candidate {i + 1} knob {k.knob}",
                    value=f"{k.baseline!r} -> {k.candidate!r}",
                )
            )
        if len(changed) > 1:
            worst = FAIL
            summaries.append(
                f"candidate {i + 1} changes {len(changed)} knobs at once "
                f"({', '.join(k.knob for k in changed)})"
            )
        elif not changed:
            worst = max(worst, WARN, key=STATUS_ORDER.get)
            summaries.append(f"candidate {i + 1} changes no mapping knob: nothing to review")
        else:
            summaries.append(f"candidate {i + 1} changes one knob: {changed[0].knob}")
    return CheckResult(worst, "; ".join(summaries), tuple(evidence))


@check("production-shape-evidence", params={"min_coverage": NUMBER, "shape_range_factor": NUMBER})
def production_shape_evidence(ctx: Context) -> CheckResult:
    min_coverage = float(ctx.params["min_coverage"])
    factor = float(ctx.params["shape_range_factor"])
    cited = ctx.review.evidence.get("production_traces", ())
    loaded = evidence_files.read_all(cited, evidence_files.TRACE)
    notes = [f"{ctx.review.relative(x.path)}: not used: {x.reason}" for x in loaded if not x.ok]
    evidence = [ctx.artifact("production trace summary", x.path) for x in loaded
                if x.ok and isinstance(x.doc.get("traces"), list) and x.doc["traces"]]  # fmt: skip
    usable, left_out = fitmatrix.usable_traces(
        ((ctx.review.relative(x.path), x.doc) for x in loaded if x.ok), factor
    )
    for out in left_out:
        if out.why == fitmatrix.NO_TRACES:
            notes.append(f"{out.source}: not used: no traces in the summary")
        elif out.why == fitmatrix.DAMAGED:
            # Scored alone against an empty suite, as the packet does: a trace whose op mix or
            # shapes do not add up is left out, said so, and the rest still count.
            notes.append(
                f"{out.source}: trace {out.index} not used: a damaged trace summary "
                f"({type(out.error).__name__}: {str(out.error)[:80]}); re-run `reviewkit trace "
                "import`"
            )
    evidence += [Evidence("text", "unusable trace summary", value=n) for n in notes]
    traces = [t for _, t in usable]
    if not traces:
        models = [
            w.candidate_id
            for comp in ctx.comparisons
            for w in comp.workloads
            if w.layer_type == "model" and w.median_ratio
        ]
        why = "no usable trace summary under [evidence].production_traces" + (
            f" ({'; '.join(notes)})" if notes else ""
        )
        model_note = (
            f"; the suite's model workload ({models[0]}) is measured, but it is synthetic: it "
            "does not show production's op mix or shapes"
            if models
            else ""
        )
        return CheckResult(FAIL, why + model_note, tuple(evidence))
    worst, summaries = PASS, []
    for i, (_, cand) in enumerate(ctx.candidates):
        try:
            fit = fitmatrix.build(traces, cand, factor)
        except fitmatrix.MALFORMED as exc:  # a summary's shapes that do not add up
            return CheckResult(
                FAIL,
                f"the cited trace summaries cannot be scored ({type(exc).__name__}: "
                f"{str(exc)[:80]}); re-run `reviewkit trace import`",
                tuple(evidence),
            )
        label = f"candidate {i + 1}" if len(ctx.candidates) > 1 else "the candidate's suite"
        verdict = PASS if fit.score >= min_coverage else FAIL
        worst = max(worst, verdict, key=STATUS_ORDER.get)
        summaries.append(
            f"{label} covers {pct(fit.score)} of production time by layer type and shape "
            f"(threshold {pct(min_coverage)}; {pct(fit.layer_coverage)} by layer type alone, "
            f"shapes within {factor:g}x)"
        )
        evidence.append(
            Evidence("number", f"{label} representativeness score", value=pct(fit.score))
        )
        for layer in fit.layers[:6]:
            evidence.append(
                Evidence(
                    "number",
                    f"production {layer.layer_type}",
                    value=f"{pct(layer.share)} of time, {pct(layer.covered_share)} covered "
                    f"({layer.suite_workloads} suite workload(s))",
                )
            )
        for o in fit.outside[:3]:
            near = (
                f"nearest {o.nearest_workload} ({o.nearest_ratio:.3g}x its elements)"
                if o.nearest_workload
                else "no suite workload of this layer type"
            )
            evidence.append(
                Evidence(
                    "text",
                    f"production shape outside the suite: {o.layer_type} {o.dims}",
                    value=f"{pct(o.share)} of time; {near}",
                )
            )
    return CheckResult(worst, "; ".join(summaries), tuple(evidence))


@check("closure")
def closure(ctx: Context) -> CheckResult:
    r = ctx.review
    missing = [
        name
        for name, ok in (
            ("owner ([owner].name)", r.owner_name),
            ("rollback boundary ([rollback].boundary)", r.rollback.get("boundary")),
            ("disproof criteria ([[disproof]])", r.disproof),
        )
        if not ok
    ]
    if missing:
        return CheckResult(FAIL, f"the claim has no {', no '.join(missing)}")
    return CheckResult(
        PASS,
        f"owned by {r.owner_name}"
        + (f" ({r.owner_team})" if r.owner_team else "")
        + f"; rollback boundary and {len(r.disproof)} disproof "
        "criteria stated",
    )


@check("risk-map")
def risk_map(ctx: Context) -> CheckResult:
    risks = ctx.review.risks
    if not risks:
        return CheckResult(MISSING, "no [[risks]] recorded")
    incomplete = [r.description[:60] for r in risks if not (r.owner and r.mitigation)]
    evidence = tuple(
        Evidence(
            "text",
            f"risk ({r.level or '?'} impact, {r.likelihood or '?'} "
            f"likelihood), owner {r.owner or 'NONE'}",
            value=r.description,
        )
        for r in risks
    )
    if incomplete:
        return CheckResult(
            FAIL,
            f"{len(incomplete)} risk(s) without an owner or a mitigation: {'; '.join(incomplete)}",
            evidence,
        )
    return CheckResult(PASS, f"{len(risks)} risk(s), each with an owner and a mitigation", evidence)


@check("rollback-plan")
def rollback_plan(ctx: Context) -> CheckResult:
    rb = ctx.review.rollback
    if not rb:
        return CheckResult(MISSING, "no [rollback] table")
    missing = [k for k in ("boundary", "trigger", "procedure") if not rb.get(k)]
    evidence = tuple(Evidence("text", k, value=v) for k, v in rb.items() if v)
    if missing:
        return CheckResult(FAIL, f"[rollback] lacks {', '.join(missing)}", evidence)
    return CheckResult(PASS, "rollback boundary, trigger and procedure are stated", evidence)


@check("primary-metric-verdict")
def primary_metric_verdict(ctx: Context) -> CheckResult:
    """A `go` needs its primary metric to settle the claim's hypothesis; any other status is
    told what a `go` would need."""
    p = ctx.primary
    status = ctx.review.decision.get("status", "proposed")
    if p is None:
        return CheckResult(MISSING, "no primary metric: no workload or layer type was compared")
    what = (f"{p.label}: ratio {p.ratio:.3g} [{p.ci[0]:.3g}, {p.ci[1]:.3g}], {p.verdict} "
            f"against ±{p.margin:.0%}")  # fmt: skip
    if p.settles:
        return CheckResult(PASS, f"the primary metric settles the {p.hypothesis} claim: {what}")
    settle = ("re-measure interleaved with `reviewkit ab` (its pairing narrows the interval) "
              "or with more rounds")  # fmt: skip
    if status == "go":
        return CheckResult(FAIL, f"a go whose primary metric does not settle its {p.hypothesis} "
                                 f"claim ({what}; {p.needs}): the decision reads needs-evidence "
                                 f"until it does; {settle}")  # fmt: skip
    return CheckResult(WARN, f"the primary metric does not settle the {p.hypothesis} claim yet "
                             f"({what}; {p.needs}); a go would need it: {settle}")  # fmt: skip
