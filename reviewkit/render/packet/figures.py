"""The run-level sections' charts (roofline, layers, communication, latency, comparison,
risks); the production-evidence sections' are in their own modules (sweep, soak, energy,
quality, shapes, fit)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reviewkit.analysis.platforms import PlatformMatrix
from reviewkit.analysis.sla import calls_per_s
from reviewkit.render import charts
from reviewkit.render.packet.brief import device_label
from reviewkit.render.packet.labels import LATENCY_CHART_WORKLOADS, run_label, slice_name
from reviewkit.review.gate import Report

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload


def roofline_charts(runs: list[tuple[str, AnalysedRun]]) -> dict:
    roofline_runs = []
    for label, run in runs:
        ceilings = run.ceilings or {}
        roofline_runs.append(
            {
                "label": label,
                "device": device_label(run),  # the roofline names its device
                "peak_flops_per_s": {
                    d: c["peak"]
                    for d, c in (ceilings.get("compute") or {}).items()
                    if c.get("peak")
                },
                "peak_bytes_per_s": (ceilings.get("bandwidth") or {}).get("peak") or 0.0,
                # cache levels only: main memory is `peak_bytes_per_s`
                "memory_levels": [
                    {"level": lv.get("level"), "peak_bytes_per_s": lv.get("peak")}
                    for lv in (ceilings.get("memory") or [])[:-1]
                ],
                "workloads": [
                    {
                        "id": w.id,
                        "layer_type": w.layer_type,
                        "dtype": w.dtype,
                        "arithmetic_intensity": w.arithmetic_intensity,
                        "achieved_flops_per_s": w.achieved_flops_per_s,
                        "memory_level": w.memory_level,
                    }
                    for w in run.workloads
                    if w.achieved_flops_per_s
                ],
            }
        )
    return {"roofline": charts.roofline(roofline_runs)}


def layer_charts(layer_rows: list[dict]) -> dict:
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
            # None where overhead was not measured: the chart then draws the rest as one
            # "overhead + inefficiency" segment, never as overhead
            "overhead": row.get("overhead_fraction"),
            "inefficiency": row.get("inefficiency_fraction"),
            "unattributed": row.get("unattributed_fraction"),
            "communication": row.get("communication_fraction") or 0.0,
        }
        for row in layer_rows
    ]
    return {
        "mfu_by_layer": charts.mfu_by_layer(layer_chart_rows),
        "stall_by_layer": charts.stall_by_layer(layer_chart_rows),
        "time_decomposition": charts.time_decomposition(decomposition),
    }


def latency_charts(runs: list[tuple[str, AnalysedRun]]) -> dict:
    latency = []
    for label, run in runs:
        for w in run.workloads:
            if w.stats:
                latency.append(
                    {
                        "run": label,
                        "workload": slice_name(w),
                        "samples_s": list(w.samples_s),
                        "p50_s": w.stats.p50_s,
                        "p95_s": w.stats.p95_s,
                        "p99_s": w.stats.p99_s,
                    }
                )
    return {"latency": charts.latency_distribution(latency, LATENCY_CHART_WORKLOADS)}


def comparison_charts(report: Report) -> dict:
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
    first = report.comparisons[0] if report.comparisons else None
    band = {
        "margin": first.margins.min_effect if first else None,
        "noise_floor": first.noise_floor if first else None,
        "run_to_run_sd": first.run_to_run_sd if first else None,
        # where that figure came from (measured for the device, the rubric's default or floor)
        "allowance_from": first.run_to_run.short() if first and first.run_to_run else None,
    }
    return {
        "forest_layers": charts.forest(forest_layers, item="layer type", **band),
        **_split_forest(forest_workloads, band),
        **_claim_forest(report, band),
    }


# ratio and interval of a WorkloadComparison at each quantile the primary metric may name
QUANTILE_FIELDS = {"p50": ("median_ratio", "median_ratio_ci"), "p95": ("p95_ratio", "p95_ratio_ci"),
                   "p99": ("p99_ratio", "p99_ratio_ci")}  # fmt: skip
QUANTILE_TITLES = {"p50": "Median", "p95": "p95", "p99": "p99"}


def _claim_forest(report: Report, band: dict) -> dict:
    """The chart that carries the claim: the primary metric's quantile on the claim's slice
    only (its dtype and layer type, the primary workload first), never other dtypes pooled in.
    None when the primary metric is a layer type (forest_layers carries it then)."""
    p = report.primary
    if p is None or p.kind != "workload" or not report.comparisons:
        return {}
    comp = report.comparisons[0]
    primary = next((w for w in comp.workloads if w.key == p.key), None)
    if primary is None:
        return {}
    ratio_field, ci_field = QUANTILE_FIELDS[p.quantile]

    def verdict_of(w) -> str:  # as the comparison judged that quantile (p95 has no verdict)
        return {"p50": w.verdict, "p99": w.p99_verdict or ""}.get(p.quantile, "")

    same = [w for w in comp.workloads
            if w.layer_type == primary.layer_type and getattr(w, ratio_field) is not None
            and w.candidate_id.rsplit(".", 1)[-1] == p.dtype]  # fmt: skip
    same.sort(key=lambda w: (w.key != p.key, w.key))
    rows = [{"workload": w.key + (" (primary)" if w.key == p.key else ""),
             "ratio": getattr(w, ratio_field), "low": getattr(w, ci_field)[0],
             "high": getattr(w, ci_field)[1], "verdict": verdict_of(w)}
            for w in same]  # fmt: skip
    item = f"{p.dtype} {primary.layer_type} workload"
    return {"forest_claim": charts.forest(rows, item=item, quantile=QUANTILE_TITLES[p.quantile],
                                          **band)}  # fmt: skip


# Rows of one per-workload forest: a chart of 96 (a CPU-to-H200 review, every workload
# compared) is taller than an A4 page, which cut off its last 40 rows and its axis.
FOREST_ROWS_PER_CHART = 48


def _split_forest(rows: list[dict], band: dict) -> dict:
    """The per-workload forest as `forest_workloads`, and over FOREST_ROWS_PER_CHART rows as
    parts (`forest_workloads_2`, ...) in ratio order that share one axis."""
    if len(rows) <= FOREST_ROWS_PER_CHART:
        return {"forest_workloads": charts.forest(rows, **band)}
    ordered = sorted(rows, key=lambda r: (r["ratio"], r["workload"]))
    values = [v for r in rows for v in (r["ratio"], r["low"], r["high"]) if v and v > 0]
    ends = (min(values), max(values))
    out = {}
    for start in range(0, len(ordered), FOREST_ROWS_PER_CHART):
        chunk = ordered[start : start + FOREST_ROWS_PER_CHART]
        part = (start + 1, start + len(chunk), len(ordered))
        name = "forest_workloads" + (f"_{start // FOREST_ROWS_PER_CHART + 1}" if start else "")
        out[name] = charts.forest(chunk, **band, part=part, axis_ends=ends)
    return out


def risk_charts(report: Report) -> dict:
    risks = [
        {"description": k.description, "level": k.level, "likelihood": k.likelihood,
         "owner": k.owner}
        for k in report.review.risks
    ]  # fmt: skip
    return {"risk_map": charts.risk_map(risks)}


def trade_charts(report: Report) -> dict:
    from reviewkit.analysis.platforms import device_name

    devices = {device_name(r) for r in [report.baseline, *(r for _, r in report.review_candidates)]}
    if len(report.comparisons) <= 1 and len(devices) <= 1:
        return {}
    # Across devices the baseline is one of the platforms on the shortlist: it is traded
    # against the candidates too, not only the candidates against each other.
    return {"trade_view": charts.trade_view(trade_rows(report, with_baseline=len(devices) > 1))}


# Staying on the baseline rolls nothing out: it carries no engineering risk of the change.
BASELINE_RISK = 0.0


def _claim_workload(report: Report, run: AnalysedRun, side: str, i: int) -> AnalysedWorkload | None:
    """The run's workload the claim rests on: the primary metric's, by its id on this side (the
    candidate's id in candidate i's comparison), else the run's first end-to-end model."""
    timed = [w for w in run.workloads if w.stats]
    p = report.primary
    if p is not None and p.kind == "workload":
        if side == "baseline":
            wanted = p.baseline_id
        else:
            comp = report.comparisons[i]
            wanted = next((w.candidate_id for w in comp.workloads if w.key == p.key), "")
        found = next((w for w in timed if w.id == wanted), None)
        if found is not None:
            return found
    return next((w for w in timed if w.layer_type == "model"), None)


def trade_rows(report: Report, with_baseline: bool = False) -> list[dict]:
    """Throughput and p99 of the claim's workload (the primary metric's, in the claim's dtype)
    per candidate (and the baseline, across devices), each labelled with its dtype; energy only
    if measured; engineering risk as the review stage weighed the findings (the rubric's [risk]
    severity_weights)."""
    from reviewkit.analysis.platforms import device_name, short_device

    rows = []
    risk = report.engineering_risk
    entries = [(run_label(i, len(report.comparisons)), run, risk, "candidate", i)
               for i, (_, run) in enumerate(report.review_candidates)]  # fmt: skip
    if with_baseline:
        entries = [("baseline", report.baseline, BASELINE_RISK, "baseline", 0), *entries]
        entries = [(f"{label} · {short_device(device_name(run))}", run, r, side, i)
                   for label, run, r, side, i in entries]  # fmt: skip
    for label, run, run_risk, side, i in entries:
        model = _claim_workload(report, run, side, i)
        energy = (model.energy if model else None) or {}
        rows.append(
            {
                "candidate": f"{label} · {model.dtype}" if model else label,
                "workload": model.id if model else None,
                "throughput_per_s": calls_per_s(model.stats) if model else None,
                "latency_p99_s": model.stats.p99_s if model else None,
                # joules over the metered window / calls in it; None (drawn "not available")
                # where the run metered no energy for the workload
                "energy_j_per_call": energy["joules"] / energy["calls"]
                if energy.get("available") and energy.get("calls")
                else None,
                "engineering_risk": run_risk,
            }
        )
    return rows


def platform_charts(matrix: PlatformMatrix, platforms: dict) -> dict:
    """The workloads x platforms matrix; with one device the section says so: no empty chart."""
    if not matrix.multi_device:
        return {}
    return {
        "platform_matrix": charts.platform_matrix(
            platforms["cells"], [p.label for p in matrix.platforms]
        )
    }
