"""The decision brief: what a senior reviewer reads first, each item linked to its evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reviewkit.bundle.run import device_name
from reviewkit.render.packet.bottlenecks import brief_layers
from reviewkit.render.packet.labels import run_label
from reviewkit.review.checks import FAIL, MISSING, PASS
from reviewkit.review.gate import Report

if TYPE_CHECKING:
    from reviewkit.bundle.records import Run

RISK_RANK = {"high": 0, "medium": 1, "low": 2, "": 3}
TOP_RISKS = 3  # the brief names the worst few; the risk map shows them all
# The chart that carries a claim: the primary metric on the claim's own slice (its dtype and
# layer type), else per layer type the candidate's time against the baseline's with its
# interval (forest), else the roofline when nothing was compared.
CLAIM_CHARTS = ("forest_claim", "forest_layers", "roofline")


def _why_not_blocking(finding) -> str:
    """Why a raised red flag leaves the gate passing: a gate fails only on a blocking item
    that fails or lacks its evidence."""
    item = finding.item
    if finding.blocks:
        return "blocks the gate"
    if item.severity != "blocking":
        return "does not block: only blocking items fail the gate"
    return "does not block: a blocking item fails the gate only when it fails or lacks evidence"


def device_label(run: Run) -> str:
    """A run's device as the brief names it: its fingerprint's label, else torch's name."""
    return run.fingerprint.get("label") or device_name(run)


def devices_note(report: Report) -> str:
    """One sentence when a candidate ran on another device than the baseline, which changes
    what every ratio and MFU in the packet means; empty when all ran on one device."""
    others = [
        (i, run) for i, (_, run) in enumerate(report.review_candidates)
        if not report.comparisons[i].same_device
    ]  # fmt: skip
    if not others:
        return ""
    named = "; ".join(
        f"candidate{f' {i + 1}' if len(report.review_candidates) > 1 else ''} on "
        f"{device_label(run)}"
        for i, run in others
    )
    return (
        f"Runs from different devices: the baseline on {device_label(report.baseline)}; "
        f"{named}. Each ratio compares the devices as well as the mapping, and each run's MFU "
        "and memory-stall fraction are against its own device's ceilings."
    )


def _chart_caption(report: Report, chart: str | None) -> str:
    """What the brief's chart shows, in words: which slice, which quantile."""
    p = report.primary
    if chart == "forest_claim" and p is not None:
        return (f"The chart that carries the claim: {p.label} (first) and the other {p.dtype} "
                "workloads of its layer type, candidate over baseline with 95% intervals (below "
                "1 is faster). Other dtypes are in their own sections.")  # fmt: skip
    if chart == "forest_layers":
        return ("The chart that carries the claim: each layer type's time, candidate over "
                "baseline, with its 95% interval (below 1 is faster).")  # fmt: skip
    return "The chart that carries the claim."


def build_brief(report: Report, model: dict) -> dict:
    """The brief's values: the claim and decision, the primary metric, the senior question's
    answer with the artifact behind it, the red flags and what clears each, the disproof
    criteria as evaluated, the owner, the top risks, the rollback boundary and trigger, and the
    one chart that carries the claim. Each names the section that holds its evidence."""
    r = report.review
    senior = r.answers.get("senior-question")
    bottleneck = next((f for f in report.findings if f.item.check == "bottleneck-per-layer"), None)
    artifacts = [e for e in (bottleneck.evidence if bottleneck else ()) if e.kind == "artifact"]
    n = len(report.review_candidates)
    layers, more_layers = brief_layers(
        bottleneck, [(run_label(i, n), run) for i, (_, run) in enumerate(report.review_candidates)]
    )
    flags = [
        {
            "id": f.item.id,
            "title": f.item.title,
            "status": f.status,
            "severity": f.item.severity,
            "summary": f.summary,
            "clears_with": f.item.clears_with,
            "blocks": f.blocks,
            "why": _why_not_blocking(f),
        }
        for f in report.red_flags
    ]
    risks = sorted(
        r.risks, key=lambda k: (RISK_RANK.get(k.level, 3), RISK_RANK.get(k.likelihood, 3))
    )
    gate_note = ""
    if report.verdict == "pass" and flags:
        gate_note = (
            f"The gate passes with {len(flags)} red flag(s) raised: none of them is a blocking "
            "item that fails or lacks its evidence. Each says below why it does not block and "
            "what clears it; a decision to go accepts them."
        )
    elif report.verdict != "pass":
        blocking = [f.item.title for f in report.findings if f.blocks]
        gate_note = f"The gate fails on {len(blocking)} blocking item(s): {', '.join(blocking)}."
    chart = next((name for name in CLAIM_CHARTS if name in model["charts"]), None)
    # the SLA as the gate judged it (under load where a sweep is cited), shown as it is
    sla = next((f for f in report.findings if f.item.check == "sla-kpi"), None)
    # the change weighted by production's time, beside the primary metric where a trace is cited
    weighted = next((f for f in report.findings
                     if f.item.check == "production-weighted-verdict"
                     and report.review.evidence.get("production_traces")), None)  # fmt: skip
    return {
        "sla": {"status": sla.status, "summary": sla.summary} if sla else None,
        "production": {"status": weighted.status, "summary": weighted.summary} if weighted
        else None,
        "decision": model["decision"],
        "gate": {"verdict": report.verdict, "note": gate_note},
        "devices": devices_note(report),
        "headline": model["headline"],
        "senior": {
            "answer": senior.answer if senior else "",
            "evidence": senior.evidence if senior else "",
            "status": next(
                (f.status for f in report.findings if f.item.id == "senior-question"), MISSING
            ),
            "bottleneck": bottleneck.summary if bottleneck else "",
            "bottleneck_status": bottleneck.status if bottleneck else MISSING,
            # the layer types the finding names: class, share of roof and lever of each
            "layers": layers,
            "more_layers": more_layers,
            "several_candidates": n > 1,
            "artifacts": [e.to_json() for e in artifacts[:2]],
        },
        "red_flags": flags,
        "disproof": [
            {
                "statement": d.get("statement", ""),
                "status": d.get("status", ""),
                "why": d.get("why", ""),
            }
            for d in report.disproof
        ],
        "owner": model["owner"],
        "risks": [
            {
                "description": k.description,
                "level": k.level,
                "likelihood": k.likelihood,
                "owner": k.owner,
            }
            for k in risks[:TOP_RISKS]
        ],
        "more_risks": max(0, len(risks) - TOP_RISKS),
        "rollback": {k: r.rollback.get(k, "") for k in ("boundary", "trigger")},
        "chart": chart,
        "chart_caption": _chart_caption(report, chart),
        "passing": PASS,
        "failing": FAIL,
    }
