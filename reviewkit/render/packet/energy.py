"""The packet's energy figure: work per joule by run and layer type, or why not metered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reviewkit.render import charts

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun


def energy_input(runs: list[tuple[str, AnalysedRun]]) -> tuple[list[dict], list[str]]:
    """Work per joule and average watts per run, dtype and layer type, from the runs' energy;
    the recorded reason for every run (or layer type) that has none."""
    from reviewkit.analysis.energy import energy_aggregate, energy_reason
    from reviewkit.analysis.roofline import measured

    rows: list[dict] = []
    missing: dict[str, list[str]] = {}  # reason -> where it applies
    for label, run in runs:
        by_dtype = run.layer_energy_by_dtype
        none = not any(e.get("available") for d in by_dtype.values() for e in d.values())
        if none:  # one line for the whole run: the reason its first workload recorded
            first = next((w for w in measured(run) if energy_reason(w)), None)
            why = energy_reason(first) if first else energy_aggregate(measured(run))["reason"]
            missing.setdefault(why, []).append(label)
            continue
        for dtype in sorted(by_dtype):
            for layer_type, e in sorted(by_dtype[dtype].items()):
                if e.get("available"):
                    rows.append(
                        {
                            "run": f"{label} {dtype}",
                            "layer_type": layer_type,
                            **{
                                k: e.get(k)
                                for k in (
                                    "flops_per_joule",
                                    "avg_watts",
                                    "joules",
                                    "window_s",
                                    "confidence",
                                )
                            },
                        }
                    )
                else:
                    ws = [w for w in measured(run)
                          if w.dtype == dtype and w.layer_type == layer_type]  # fmt: skip
                    first = next((w for w in ws if energy_reason(w)), None)
                    why = energy_reason(first) if first else str(e.get("reason", ""))
                    missing.setdefault(why, []).append(f"{label} {dtype} {layer_type}")
    notes = []
    for why, where in missing.items():
        shown = ", ".join(where[:4]) + (f" and {len(where) - 4} more" if len(where) > 4 else "")
        notes.append(f"energy not available ({shown}): {why}")
    return rows, notes


def energy_charts(runs: list[tuple[str, AnalysedRun]]) -> dict:
    """The section's chart specs, by the name its template partial places them under."""
    return {"perf_per_watt": charts.perf_per_watt(*energy_input(runs))}
