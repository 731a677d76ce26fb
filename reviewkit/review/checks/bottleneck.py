"""Checks on the mechanism: bottleneck class and MFU/memory-stall per layer type."""

from __future__ import annotations

from reviewkit.common.format import pct
from reviewkit.review.checks.registry import (
    FAIL,
    MISSING,
    PASS,
    CheckResult,
    Context,
    Evidence,
    check,
)


@check("bottleneck-per-layer")
def bottleneck_per_layer(ctx: Context) -> CheckResult:
    evidence = []
    for i, (_, cand) in enumerate(ctx.candidates):
        layers = cand.get("layer_types") or {}
        if not layers:
            return CheckResult(
                FAIL, f"candidate {i + 1} has no analysed workloads", tuple(ctx.run_artifacts())
            )
        for layer_type, agg in layers.items():
            slowest = max(
                (w for w in cand["workloads"] if w["layer_type"] == layer_type and w.get("stats")),
                key=lambda w: w["stats"]["p50_s"],
                default=None,
            )
            evidence.append(
                Evidence(
                    "workload",
                    f"candidate {i + 1} {layer_type}: {agg['bottleneck']} "
                    f"(MFU {pct(agg['mfu'])}, memory-stall {pct(agg['memory_stall_fraction'])}, "
                    f"overhead {pct(agg['overhead_fraction'])})",
                    value=slowest["id"] if slowest else "",
                    reproduce=slowest["reproduce"] if slowest else "",
                )
            )
    return CheckResult(
        PASS,
        "every layer type has a bottleneck class from the roofline "
        "fractions, with its slowest workload's reproduce command",
        tuple(ctx.run_artifacts() + evidence),
    )


@check("layer-metrics")
def layer_metrics(ctx: Context) -> CheckResult:
    runs = [("baseline", ctx.baseline)] + [
        (f"candidate {i + 1}", c) for i, (_, c) in enumerate(ctx.candidates)
    ]
    evidence = []
    for label, doc in runs:
        by_dtype = doc.get("layer_types_by_dtype") or {}
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
                        value=f"MFU {pct(agg['mfu'])}, memory-stall "
                        f"{pct(agg['memory_stall_fraction'])}",
                    )
                )
    return CheckResult(
        PASS,
        "MFU and memory-stall fraction are reported per layer type for "
        "the baseline and every candidate",
        tuple(ctx.run_artifacts() + evidence),
    )
