"""Checks on the claim: one knob changed, production shapes behind it, closure, risk, rollback."""

from __future__ import annotations

from reviewkit.analysis.compare import Comparison
from reviewkit.analysis.knobs import (
    DIRTY,
    KERNELS,
    PROVENANCE,
    RUNTIME,
    EnvironmentChange,
    KnobChange,
    KnobPolicy,
    KnobReading,
    shown_value,
)
from reviewkit.analysis.pairing import INDEPENDENT, settle_hint
from reviewkit.common.format import pct
from reviewkit.review.checks.registry import NUMBER, CheckResult, Context, Evidence, check
from reviewkit.review.rubric import KNOB_LIST, KNOB_TABLE, Rubric
from reviewkit.review.status import FAIL, MISSING, PASS, STATUS_ORDER, WARN


@check(
    "single-knob-change",
    params={"ignore": KNOB_LIST, "implied_by_device": KNOB_LIST, "device_defaults": KNOB_TABLE},
)
def single_knob_change(ctx: Context) -> CheckResult:
    """One mapping knob changed and nothing else that could explain the result.

    A device change is one knob: the settings it implies (the rubric's implied_by_device, and
    settings of one device type at torch's default) and the libraries serving one side's device
    only are listed, not counted. The recorded environment counts too. A framework or
    kernel-library release that differs beyond its device build tag fails beside a knob: the
    measured kernels are then different code, and no reading of the result can say how much of
    it is the knob's. A driver, interpreter or commit difference, or a dirty tree, warns: they
    can move timings or leave the comparison impossible to rebuild, but do not by themselves
    swap the kernels, so a reviewer confirms them rather than re-measuring. With no knob changed,
    a release difference is what is under review (an upgrade): a warning asks to say so."""
    policy = knob_policy(ctx.params)
    worst, evidence, summaries = PASS, [], []
    for i, comp in enumerate(ctx.comparisons):
        status, summary, found = _one_knob(f"candidate {i + 1}", comp.knob_reading(policy), comp)
        worst = max(worst, status, key=STATUS_ORDER.get)
        summaries.append(summary)
        evidence += found
    return CheckResult(worst, "; ".join(summaries), tuple(evidence))


def knob_policy(params: dict) -> KnobPolicy:
    """The single-knob-change item's params as the comparison reads its knob diff."""
    return KnobPolicy(
        ignore=tuple(params.get("ignore", ())),
        implied_by_device=tuple(params.get("implied_by_device", ())),
        device_defaults=dict(params.get("device_defaults", {})),
    )


def knob_policy_of(rubric: Rubric) -> KnobPolicy:
    """The rubric's knob policy (its single-knob-change item's), for `compare`'s knob diff."""
    item = next((i for i in rubric.items if i.check == "single-knob-change"), None)
    return knob_policy(item.params) if item else KnobPolicy()


def _one_knob(label: str, reading: KnobReading, comp: Comparison) -> tuple[str, str, list]:
    counted, implied = reading.counted, reading.implied
    evidence = [Evidence("text", f"{label} knob {k.knob}",
                         value=f"{shown_value(k.baseline)} -> {shown_value(k.candidate)}")
                for k in counted]  # fmt: skip
    evidence += [Evidence("text", f"{label} knob {k.knob}, implied by the device change",
                          value=f"{shown_value(k.baseline)} -> {shown_value(k.candidate)}: {k.why}")
                 for k in implied]  # fmt: skip
    evidence += [Evidence("text", f"{label} environment {e.name} ({e.kind}), a confounder",
                          value=f"{shown_value(e.baseline)} -> {shown_value(e.candidate)}: {e.why}")
                 for e in comp.confounders]  # fmt: skip
    evidence += [Evidence("text", f"{label} environment {e.name}, implied by the device change",
                          value=f"{shown_value(e.baseline)} -> {shown_value(e.candidate)}: {e.why}")
                 for e in comp.device_environment]  # fmt: skip
    kernels = [e for e in comp.confounders if e.kind == KERNELS]
    if len(counted) > 1:
        knobs = ", ".join(k.knob for k in counted)
        status, text = FAIL, f"{label} changes {len(counted)} knobs at once ({knobs})"
    elif not counted:
        status = WARN
        text = f"{label} changes no mapping knob" + ("" if kernels else ": nothing to review")
    else:
        status, text = PASS, f"{label} changes one knob: {_knob(counted[0])}"
    if implied:
        text += (f"; the device brings {', '.join(k.knob for k in implied)} with it (listed, "
                 "not counted)")  # fmt: skip
    verb = "differs" if len(kernels) == 1 else "differ"
    names = ", ".join(e.name for e in kernels)
    if kernels and counted:
        status = FAIL
        blamed = f"the {counted[0].knob} change" if len(counted) == 1 else "the knobs"
        text += (f"; but {_listed(kernels)} {verb} too: the measured kernels are different code, "
                 f"so the result cannot be attributed to {blamed}; re-measure both runs on one "
                 f"release of {names}")  # fmt: skip
    elif kernels:
        text += (f"; {_listed(kernels)} {verb}: if that upgrade is the change under review, say "
                 f"so; else re-measure both runs on one release of {names}")  # fmt: skip
    runtime = [e for e in comp.confounders if e.kind == RUNTIME]
    provenance = [e for e in comp.confounders if e.kind == PROVENANCE]
    if runtime:
        text += (f"; also {_listed(runtime)}: a different driver or interpreter can move "
                 "timings; confirm on one")  # fmt: skip
    if provenance:
        text += (f"; {_listed(provenance)}: the code that measured is not one recorded commit; "
                 "re-run from a clean commit so the comparison can be rebuilt")  # fmt: skip
    if runtime or provenance:
        status = max(status, WARN, key=STATUS_ORDER.get)
    return status, text, evidence


def _knob(k: KnobChange) -> str:
    return f"{k.knob} ({shown_value(k.baseline)} → {shown_value(k.candidate)})"


def _listed(changes: list[EnvironmentChange]) -> str:
    """Each difference in a few words, e.g. "torch 2.13.0+cpu → 2.11.0+cu130" or "git commit
    d9d95e66799a+dirty on both runs (uncommitted changes)"."""
    out = []
    for e in changes:
        b, c = shown_value(e.baseline), shown_value(e.candidate)
        text = f"{e.name} {b} on both runs" if b == c else f"{e.name} {b} → {c}"
        if (b + c).count(DIRTY):
            text += " (uncommitted changes)"
        out.append(text)
    return ", ".join(out)


@check("production-shape-evidence", params={"min_coverage": NUMBER, "shape_range_factor": NUMBER})
def production_shape_evidence(ctx: Context) -> CheckResult:
    min_coverage = float(ctx.params["min_coverage"])
    factor = float(ctx.params["shape_range_factor"])
    production = ctx.cited.production(factor)
    notes = list(production.notes)
    evidence = [ctx.artifact("production trace summary", x.path)
                for x in ctx.cited.trace_files.records
                if isinstance(x.doc.get("traces"), list) and x.doc["traces"]]  # fmt: skip
    evidence += [Evidence("text", "unusable trace summary", value=n) for n in notes]
    traces = production.traces
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
    for i, (fit, exc) in enumerate(production.fits):
        if fit is None:  # a summary's shapes that do not add up
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


PARTS_SHOWN = 3  # the largest parts of production's time named in the finding's evidence


@check("production-weighted-verdict")
def production_weighted_verdict(ctx: Context) -> CheckResult:
    """The change weighted by production's own time (analysis/production_weighted.py): a loss
    there blocks, whatever the suite says; a suite win production does not show warns."""
    from reviewkit.analysis.production_weighted import (
        floor_call_ratio,
        mix_of,
        production_verdict,
    )

    factor = ctx.cited.fit_limits.shape_range_factor or 4.0
    traces = ctx.cited.production(factor).traces
    if not traces:
        return CheckResult(PASS, "no production trace cited: nothing to weigh by")
    mix = mix_of(traces)
    if mix is None:
        return CheckResult(WARN, "the cited traces cannot be weighed together (GPU and CPU "
                           "traces, or no time in them): cite one kind")  # fmt: skip
    worst, texts, evidence = PASS, [], []
    for i, (comp, (_, cand)) in enumerate(zip(ctx.comparisons, ctx.candidates, strict=True)):
        pairs = [(w.baseline_id, w.candidate_id) for w in comp.workloads if w.median_ratio]
        pv = production_verdict(
            comp.layer_draws, {lt.layer_type: lt.time_ratio for lt in comp.layer_types}, mix,
            floor_call_ratio(pairs, ctx.baseline, cand), comp.margins.min_effect,
            comp.run_to_run.variance if comp.run_to_run else 0.0)  # fmt: skip
        label = f"candidate {i + 1}" if len(ctx.candidates) > 1 else "the candidate"
        if pv is None:
            texts.append(f"{label}: the comparison measured none of production's layer types")
            worst = max(worst, WARN, key=STATUS_ORDER.get)
            continue
        suite_win = i == 0 and ctx.primary is not None and ctx.primary.verdict == "faster"
        status = FAIL if pv.verdict == "slower" else (
            WARN if suite_win and pv.verdict != "faster" else PASS)  # fmt: skip
        worst = max(worst, status, key=STATUS_ORDER.get)
        texts.append(
            f"{label}: x{pv.ratio:.3f} [{pv.ci[0]:.3f}, {pv.ci[1]:.3f}] on production's "
            f"{pv.basis} time, {pv.verdict}"
            + (" (the suite's primary metric: faster): a production loss"
               if suite_win and pv.verdict == "slower" else "")
            + f"; {pct(pv.carried_at_one)} carried at 1")  # fmt: skip
        # the parts in one line: a packet's rubric table is read in minutes, not pages
        evidence.append(Evidence("number", f"{label} production-weighted ratio",
                                 value=f"{pv.ratio:.3f} [{pv.ci[0]:.3f}, {pv.ci[1]:.3f}]: " +
                                 ", ".join(f"{p.name} {pct(p.share)} x{p.ratio:.2f}"
                                           for p in pv.parts[:PARTS_SHOWN])))  # fmt: skip
    return CheckResult(worst, "; ".join(texts), tuple(evidence))


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
    # an interleaved A/B is paired already: only more rounds narrow it further
    settle = settle_hint(all(c.design != INDEPENDENT for c in ctx.comparisons))
    if status == "go":
        return CheckResult(FAIL, f"a go whose primary metric does not settle its {p.hypothesis} "
                                 f"claim ({what}; {p.needs}): the decision reads needs-evidence "
                                 f"until it does; {settle}")  # fmt: skip
    return CheckResult(WARN, f"the primary metric does not settle the {p.hypothesis} claim yet "
                             f"({what}; {p.needs}); a go would need it: {settle}")  # fmt: skip
