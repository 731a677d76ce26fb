"""The packet's charts: each section's inputs drawn through render.charts, once per packet."""

from __future__ import annotations

from reviewkit.analysis.sla import calls_per_s
from reviewkit.render.packet.evidence import (
    energy_input,
    quality_input,
    shape_input,
    soak_input,
    sweep_input,
)
from reviewkit.render.packet.labels import LATENCY_CHART_WORKLOADS, run_label, slice_name
from reviewkit.review.checks import PASS
from reviewkit.review.gate import Report


def draw_charts(
    report: Report,
    runs: list[tuple[str, dict]],
    layer_rows: list[dict],
    workload_rows: list[dict],
    charts,
) -> dict:
    roofline_runs = []
    for label, doc in runs:
        ceilings = doc.get("ceilings") or {}
        roofline_runs.append(
            {
                "label": label,
                "peak_flops_per_s": {
                    d: c["peak"]
                    for d, c in (ceilings.get("compute") or {}).items()
                    if c.get("peak")
                },
                "peak_bytes_per_s": (ceilings.get("bandwidth") or {}).get("peak") or 0.0,
                "workloads": [
                    {
                        k: w.get(k)
                        for k in (
                            "id",
                            "layer_type",
                            "dtype",
                            "arithmetic_intensity",
                            "achieved_flops_per_s",
                        )
                    }
                    for w in doc["workloads"]
                    if w.get("achieved_flops_per_s")
                ],
            }
        )
    layer_chart_rows = [
        {
            "run": f"{row['run']} {row['dtype']}",
            "layer_type": row["layer_type"],
            "mfu": row["mfu"],
            "memory_stall_fraction": row["memory_stall_fraction"],
        }
        for row in layer_rows
    ]
    decomposition = [
        {
            "run": f"{row['run']} {row['dtype']}",
            "layer_type": row["layer_type"],
            "compute": row["compute_fraction"],
            "memory_stall": row["memory_stall_fraction"],
            "overhead": row["overhead_fraction"],
        }
        for row in layer_rows
    ]
    latency = []
    for label, doc in runs:
        for w in doc["workloads"]:
            if w.get("stats"):
                latency.append(
                    {
                        "run": label,
                        "workload": slice_name(w),
                        "samples_s": w["samples_s"],
                        "p50_s": w["stats"]["p50_s"],
                        "p95_s": w["stats"]["p95_s"],
                        "p99_s": w["stats"]["p99_s"],
                    }
                )
    forest_layers, forest_workloads = [], []
    multi = len(report.comparisons) > 1
    for i, comp in enumerate(report.comparisons):
        prefix = f"{run_label(i, len(report.comparisons))}: " if multi else ""
        forest_layers += [
            {
                "workload": prefix + x.layer_type,
                "ratio": x.time_ratio,
                "low": x.time_ratio_ci[0],
                "high": x.time_ratio_ci[1],
                "verdict": x.verdict,
            }
            for x in comp.layer_types
        ]
        forest_workloads += [
            {
                "workload": prefix + w.key,
                "ratio": w.median_ratio,
                "low": w.median_ratio_ci[0],
                "high": w.median_ratio_ci[1],
                "verdict": w.verdict,
            }
            for w in comp.workloads
            if w.median_ratio is not None
        ]
    specs = {
        "roofline": charts.roofline(roofline_runs),
        "mfu_by_layer": charts.mfu_by_layer(layer_chart_rows),
        "stall_by_layer": charts.stall_by_layer(layer_chart_rows),
        "time_decomposition": charts.time_decomposition(decomposition),
        "latency": charts.latency_distribution(latency, LATENCY_CHART_WORKLOADS),
        "forest_layers": charts.forest(forest_layers, item="layer type"),
        "forest_workloads": charts.forest(forest_workloads),
        "risk_map": charts.risk_map(
            [
                {
                    "description": k.description,
                    "level": k.level,
                    "likelihood": k.likelihood,
                    "owner": k.owner,
                }
                for k in report.review.risks
            ]
        ),
    }
    from reviewkit.analysis.platforms import device_name

    devices = {device_name(d) for d in [report.baseline, *(d for _, d in report.review_candidates)]}
    if len(report.comparisons) > 1 or len(devices) > 1:
        # Across devices the baseline is one of the platforms on the shortlist: it is traded
        # against the candidates too, not only the candidates against each other.
        specs["trade_view"] = charts.trade_view(
            trade_rows(report, with_baseline=len(devices) > 1)
        )
    specs["shape_portability"] = charts.shape_heatmap(shape_input(report, workload_rows))
    specs["latency_throughput"] = charts.latency_throughput(*sweep_input(report))
    specs["stability"] = charts.stability(*soak_input(report))
    specs["perf_per_watt"] = charts.perf_per_watt(*energy_input(runs))
    specs["quality_drift"] = charts.quality_drift(*quality_input(report))
    return specs


# Staying on the baseline rolls nothing out: it carries no engineering risk of the change.
BASELINE_RISK = 0.0


def trade_rows(report: Report, with_baseline: bool = False) -> list[dict]:
    """Throughput and p99 of the end-to-end model per candidate (and the baseline, across
    devices); energy only if measured; engineering risk from the rubric's findings (share of
    non-passing blocking and major items)."""
    from reviewkit.analysis.platforms import device_name, short_device

    rows = []
    weights = {"blocking": 1.0, "major": 0.5, "minor": 0.0}
    total = sum(weights[f.item.severity] for f in report.findings) or 1.0
    risk = sum(weights[f.item.severity] for f in report.findings if f.status != PASS) / total
    entries = [(run_label(i, len(report.comparisons)), doc, risk)
               for i, (_, doc) in enumerate(report.review_candidates)]  # fmt: skip
    if with_baseline:
        entries = [("baseline", report.baseline, BASELINE_RISK), *entries]
        entries = [(f"{label} · {short_device(device_name(doc))}", doc, r)
                   for label, doc, r in entries]  # fmt: skip
    for label, doc, run_risk in entries:
        model = next(
            (w for w in doc["workloads"] if w["layer_type"] == "model" and w.get("stats")), None
        )
        energy = (model or {}).get("energy") or {}
        rows.append(
            {
                "candidate": label,
                "throughput_per_s": calls_per_s(model["stats"]) if model else None,
                "latency_p99_s": model["stats"]["p99_s"] if model else None,
                # joules over the metered window / calls in it; None (drawn "not available")
                # where the run metered no energy for the model
                "energy_j_per_call": energy["joules"] / energy["calls"]
                if energy.get("available") and energy.get("calls")
                else None,
                "engineering_risk": run_risk,
            }
        )
    return rows
