"""The packet's long-window figure: every cited soak's throughput trend and sensors, drawn."""

from __future__ import annotations

from reviewkit.render import charts
from reviewkit.review.gate import Report

NO_SOAK = (
    "no long-window evidence is cited: run `reviewkit soak --out evidence/soak.json` on the "
    "candidate and cite it under [evidence].long_window"
)


def soak_input(report: Report) -> tuple[list[dict], list[str]]:
    """Sub-window throughput, the recorded analysis and the sensor series of every cited soak."""
    cited = report.cited.soaks
    if not cited.cited:
        return [], [NO_SOAK]
    several = len(cited.records) > 1
    return [
        one_soak(soak, report.review.relative(soak.path), several) for soak in cited.records
    ], cited.notes(report.review)


def one_soak(soak, source: str, several: bool) -> dict:
    """The stability chart's input of one soak, from its typed record."""
    subwindows = [
        {k: sw.get(k) for k in ("index", "start_s", "end_s", "calls_per_s", "partial")}
        for sw in soak.subwindows
    ]
    series: dict[str, list[dict]] = {"clocks": [], "temperatures": []}
    for sw in soak.subwindows:
        t = sw.get("end_s")  # a reading is taken at the end of its sub-window
        for reader, values in (sw.get("readings") or {}).items():
            kind = (
                "clocks"
                if reader.endswith("clocks_mhz")
                else "temperatures"
                if reader.endswith("temperatures_c")
                else None
            )
            if kind is None or not isinstance(values, dict):
                continue
            for sensor, value in values.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    series[kind].append(
                        {"time_s": t, "series": f"{reader}:{sensor}", "value": float(value)}
                    )
    sensor_notes = []
    for kind, suffix in (("clocks", "clocks_mhz"), ("temperatures", "temperatures_c")):
        if series[kind]:
            continue
        why = [
            f"{name}: {info.get('reason') or 'no reading'}"
            for name, info in sorted(soak.sensors.items())
            if name.endswith(suffix) and isinstance(info, dict)
        ]
        sensor_notes.append(f"{kind}: not available: {'; '.join(why) or 'no sensor recorded'}")
    trend = soak.trend
    workload = soak.workload_id
    return {
        "workload": f"{workload} ({source})" if several else str(workload),
        "source": source,
        "window_s": soak.window_s,
        "complete": soak.complete,
        "verdict": soak.verdict,
        "reasons": list(soak.reasons),
        "trend": {
            k: trend.get(k)
            for k in ("mean", "slope_per_s", "relative_change", "relative_change_ci", "reason")
        },
        "throttling": {"status": soak.throttling_status, "reason": soak.throttling_reason},
        "subwindows": subwindows,
        "clocks": series["clocks"],
        "temperatures": series["temperatures"],
        "sensor_notes": sensor_notes + ([] if soak.complete else ["the soak was interrupted"]),
    }


def soak_charts(soak: tuple[list[dict], list[str]]) -> dict:
    """The section's chart specs, by the name its template partial places them under (`soak`:
    soak_input's result, read once for the chart and the notes beside it)."""
    return {"stability": charts.stability(*soak)}


def soak_notes(soaks: list[dict]) -> list[str]:
    """Each soak's throttling reason and missing sensors, said beside the chart: in the
    chart's title they were a paragraph."""
    out = []
    for s in soaks:
        throttling = s.get("throttling") or {}
        if throttling.get("reason"):
            out.append(f"{s['workload']}: throttling {throttling.get('status')}: "
                       f"{throttling['reason']}")  # fmt: skip
        out += [f"{s['workload']}: {n}" for n in s.get("sensor_notes") or []]
    return out
