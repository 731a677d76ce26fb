"""The packet's shape-portability figure: does a win on one shape hold on the others?"""

from __future__ import annotations

from reviewkit.render import charts
from reviewkit.render.packet.labels import ms, run_label, slice_name
from reviewkit.review.gate import Report
from reviewkit.suite.workloads import DTYPES


def shape_input(report: Report, workload_rows: list[dict]) -> list[dict]:
    """One cell per (workload family, sequence length, batch) of each comparison; a run's MFU
    when there is nothing to compare."""
    n = len(report.comparisons)
    rows = []
    for i, comp in enumerate(report.comparisons):
        prefix = f"{run_label(i, n)}: " if n > 1 else ""
        p99 = {r["key"]: r["candidate_p99_ms"] for r in workload_rows[i]["rows"]}
        for w in comp.workloads:
            params = w.params or {}
            if "seq" not in params or "batch" not in params:
                continue
            rows.append(
                {
                    "panel": prefix + _family(w.key),
                    "workload": w.key,
                    "seq": params["seq"],
                    "batch": params["batch"],
                    "ratio": w.median_ratio,
                    "verdict": w.verdict,
                    "mfu": w.mfu_candidate,
                    "p99_ms": p99.get(w.key),
                }
            )
    if not report.comparisons:
        for w in report.baseline.workloads:
            params = w.params or {}
            if "seq" in params and "batch" in params and w.stats:
                key = slice_name(w)
                rows.append(
                    {
                        "panel": _family(key),
                        "workload": key,
                        "seq": params["seq"],
                        "batch": params["batch"],
                        "ratio": None,
                        "verdict": "",
                        "mfu": w.mfu,
                        "p99_ms": ms(w.stats.p99_s),
                    }
                )
    return rows


def _family(key: str) -> str:
    """A workload's kernel and source without its shape: `gemm.bert-base-ffn-up.b1s128` ->
    `gemm · bert-base-ffn-up`, so the shapes of one operator share a panel. A key that ends in
    a dtype keeps it (`... · fp32`): runs compared id by id over several dtypes would otherwise
    draw three cells, and their labels, on top of each other."""
    parts = key.split(".")
    if len(parts) < 3:
        return key
    dtype = [parts[-1]] if len(parts) >= 4 and parts[-1] in DTYPES else []
    return " · ".join(parts[:2] + dtype)


def shape_charts(report: Report, workload_rows: list[dict]) -> dict:
    """The section's chart specs, by the name its template partial places them under."""
    return {"shape_portability": charts.shape_heatmap(shape_input(report, workload_rows))}
