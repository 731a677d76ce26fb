"""Checks on the mechanism: bottleneck class, share of roof and lever; MFU/stall per layer type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reviewkit.analysis.bottleneck import LEVERS, UNCLASSIFIED, class_label
from reviewkit.common.format import pct
from reviewkit.review.checks.registry import CheckResult, Context, Evidence, check
from reviewkit.review.status import FAIL, MISSING, PASS, WARN

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import LayerAggregate


def layer_finding(label: str, layer_type: str, agg: LayerAggregate, with_lever: bool = True) -> str:
    """One layer type's class as the packet and the walk cite it: the class, the share of roof
    its kernels reach, each time fraction, and (`with_lever`) the lever the class points at."""
    cls = class_label(agg.bottleneck, bool(agg.below_roof))
    overhead = agg.overhead_fraction
    inefficiency = agg.inefficiency_fraction
    text = (
        f"{label} {layer_type}: {cls} (roof share {pct(agg.roof_share)}, MFU "
        f"{pct(agg.mfu)}, memory-stall {pct(agg.memory_stall_fraction)}, overhead "
        f"{'not measured' if overhead is None else pct(overhead)}, inefficiency "
        f"{'not measured' if inefficiency is None else pct(inefficiency)})"
    )
    if not with_lever:
        return text
    return f"{text}; lever: {agg.lever or LEVERS.get(agg.bottleneck, '')}"


# The manual item whose answer names a bottleneck class: its finding cites the measured ones.
SENIOR_QUESTION = "senior-question"
# How many of a candidate's layer types (largest share of its time first) the senior question's
# finding cites beside the answer: the few that decide the end-to-end time.
SENIOR_QUESTION_LAYERS = 3


def measured_classes(ctx: Context) -> list[Evidence]:
    """Each candidate's heaviest layer types with their measured class, share of roof and
    lever: what the answer to the senior question is read against."""
    out = []
    for i, (_, cand) in enumerate(ctx.candidates):
        layers = sorted(cand.layer_types.items(), key=lambda kv: -kv[1].time_share)
        for layer_type, agg in layers[:SENIOR_QUESTION_LAYERS]:
            finding = layer_finding(f"candidate {i + 1}", layer_type, agg)
            out.append(Evidence("number", f"measured, {pct(agg.time_share)} of the time",
                                value=finding))  # fmt: skip
    return out


@check("bottleneck-per-layer")
def bottleneck_per_layer(ctx: Context) -> CheckResult:
    evidence = []
    unclassified = []
    for i, (_, cand) in enumerate(ctx.candidates):
        layers = cand.layer_types
        if not layers:
            return CheckResult(
                FAIL, f"candidate {i + 1} has no analysed workloads", tuple(ctx.run_artifacts())
            )
        for layer_type, agg in layers.items():
            slowest = max(
                (w for w in cand.workloads if w.layer_type == layer_type and w.stats),
                key=lambda w: w.stats.p50_s,
                default=None,
            )
            if agg.bottleneck == UNCLASSIFIED:
                unclassified.append(f"candidate {i + 1} {layer_type}")
            evidence.append(
                Evidence(
                    "workload",
                    # each layer's lever is in the packet's roof table and the brief: the
                    # finding's list of every layer type stays short
                    layer_finding(f"candidate {i + 1}", layer_type, agg, with_lever=False),
                    value=slowest.id if slowest else "",
                    reproduce=slowest.reproduce if slowest else "",
                )
            )
    if unclassified:
        return CheckResult(
            WARN,
            f"{len(unclassified)} layer type(s) unclassified, their overhead not measured (a "
            f"bundle recorded before it was: {', '.join(unclassified[:4])}); re-measure the "
            "candidate with `reviewkit run` to tell overhead from kernel inefficiency",
            tuple(ctx.run_artifacts() + evidence),
        )
    return CheckResult(
        PASS,
        "every layer type has a bottleneck class from its measured overhead and the roofline, "
        "with its share of roof and its slowest workload's reproduce command",
        tuple(ctx.run_artifacts() + evidence),
    )


@check("layer-metrics")
def layer_metrics(ctx: Context) -> CheckResult:
    runs = [("baseline", ctx.baseline)] + [
        (f"candidate {i + 1}", c) for i, (_, c) in enumerate(ctx.candidates)
    ]
    evidence = []
    for label, doc in runs:
        by_dtype = doc.layer_types_by_dtype
        if not by_dtype:
            return CheckResult(
                MISSING,
                f"the {label} run has no per-layer-type aggregates",
                tuple(ctx.run_artifacts()),
            )
        for dtype, layers in by_dtype.items():
            for layer_type, agg in layers.items():
                evidence.append(
                    Evidence(
                        "number",
                        f"{label} {dtype} {layer_type}",
                        value=f"MFU {pct(agg.mfu)}, memory-stall {pct(agg.memory_stall_fraction)}",
                    )
                )
    return CheckResult(
        PASS,
        "MFU and memory-stall fraction are reported per layer type for "
        "the baseline and every candidate",
        tuple(ctx.run_artifacts() + evidence),
    )
