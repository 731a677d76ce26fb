"""The packet's serving-load figure: every cited sweep's latency-throughput panels, drawn."""

from __future__ import annotations

from reviewkit.analysis.sla import matching_targets
from reviewkit.evidence import files as evidence
from reviewkit.evidence.sweep import Sweep, SweptLevel, SweptWorkload, read_sweep
from reviewkit.render.packet.cited import cited_records
from reviewkit.render.packet.labels import slice_name
from reviewkit.review.gate import Report

NO_SWEEP = (
    "no sweep is cited: run `reviewkit sweep --sla-p99-s S --out evidence/sweep.json` and cite "
    "it under [evidence].sweep"
)


def _sla_target(
    report: Report, workload_id: str, sweep: Sweep
) -> tuple[float | None, str, float | None]:
    """(p99 s, where it comes from, minimum throughput /s) a swept workload is held to: the
    review's target (one for the server scenario first: the curve is the server's), else the
    sweep's own --sla-p99-s."""
    key = slice_name({"id": workload_id, "dtype": workload_id.rsplit(".", 1)[-1]})
    matching = matching_targets(report.review.sla_targets, workload_id, key)
    matching.sort(key=lambda t: t.scenario != "server")
    for t in matching:
        if t.p99_s is not None:
            where = f"review target {t.workload}" + (
                "" if t.scenario == "server" else f", {t.scenario}"
            )
            return t.p99_s, where, t.min_throughput_per_s
    if sweep.sla_p99_s is not None:
        return sweep.sla_p99_s, "the sweep's --sla-p99-s", None
    return None, "", None


def _level(lv: SweptLevel) -> dict:
    return {
        "target_rate_per_s": lv.target_rate_per_s,
        "load_fraction": lv.load_fraction,
        "achieved_rate_per_s": lv.achieved_rate_per_s,
        "p50_s": lv.p50_s,
        "p99_s": lv.p99_s,
        "valid": lv.valid,
        "invalid_reasons": list(lv.invalid_reasons),
    }


def _panel(report: Report, w: SweptWorkload, sweep: Sweep, source: str) -> dict:
    levels = sorted((_level(lv) for lv in w.server), key=lambda lv: lv["target_rate_per_s"] or 0.0)
    knee = dict(w.knee)
    notes = []
    if knee.get("found"):
        at = next((lv for lv in levels if lv["target_rate_per_s"] == knee["rate_per_s"]), None)
        if at is not None:
            knee["point"] = {"achieved_rate_per_s": at["achieved_rate_per_s"], "p99_s": at["p99_s"]}
        notes.append(f"knee at {knee['rate_per_s']:.4g}/s offered ({knee.get('rule', '')})")
    elif knee.get("rule"):
        notes.append(f"no knee: {knee['rule']}")
    sla_s, sla_source, min_rate = _sla_target(report, w.id, sweep)
    met = w.sla
    if met.get("met") and sla_s is not None and met.get("p99_s") == sla_s:
        notes.append(
            f"p99 ≤ {sla_s * 1e3:.4g} ms met up to {met['max_rate_per_s']:.4g}/s offered "
            f"({met['achieved_rate_per_s']:.4g}/s achieved)"
        )
    invalid = [lv for lv in levels if not lv["valid"]]
    if invalid:
        notes.append(
            f"{len(invalid)} of {len(levels)} level(s) invalid, hollow and grey: not results "
            "(each one's reason in its tooltip)"
        )
        notes += _what_makes_valid(invalid, sweep.validity)
    return {
        "workload": w.id,
        "source": source,
        "levels": levels,
        "offline_rate_per_s": w.offline.achieved_rate_per_s if w.offline else None,
        "single_stream_p99_s": w.single_stream.p99_s if w.single_stream else None,
        "sla_p99_s": sla_s,
        "sla_source": sla_source,
        "sla_min_rate_per_s": min_rate,
        "knee": knee,
        "notes": notes,
    }


def _what_makes_valid(invalid: list[dict], rules: dict | None) -> list[str]:
    """What a level needs to be valid on this machine, worked out for the lightest invalid
    one: its queries arrive at the offered rate, so it needs min_queries / rate seconds."""
    rates = [lv["target_rate_per_s"] for lv in invalid if lv.get("target_rate_per_s")]
    if not rules or not rates:
        return []
    lightest = min(rates)
    need_s = max(rules["min_queries"] / lightest, rules["min_duration_s"])
    if need_s <= rules["max_level_s"]:
        return [
            f"a valid level needs {rules['min_queries']:.0f} queries and "
            f"{rules['min_duration_s']:.3g} s within {rules['max_level_s']:.3g} s"
        ]
    fits = int(lightest * rules["max_level_s"] * 0.9)
    return [
        f"to be valid a level needs {rules['min_queries']:.0f} queries within its "
        f"{rules['max_level_s']:.3g} s budget: at {lightest:.3g}/s offered that takes "
        f"{need_s:.3g} s; sweep again with --profile full (longer levels) or "
        f"--min-queries {max(fits, 1)} (fewer queries: a coarser p99)"
    ]


def sweep_input(report: Report) -> tuple[list[dict], list[str]]:
    """The latency-throughput panels of every cited sweep, and notes on what could not be drawn."""
    if not report.review.evidence.get("sweep"):
        return [], [NO_SWEEP]
    sweeps, notes = cited_records(report, evidence.SWEEP, "sweep", read_sweep)
    panels = []
    for source, sweep in sweeps:
        for w in sweep.workloads:
            if not w.measured:
                notes.append(f"{source}: {w.id}: {w.status} ({w.reason})")
                continue
            panels.append(_panel(report, w, sweep, source))
    if len(sweeps) > 1:
        for p in panels:
            p["workload"] = f"{p['workload']} ({p['source']})"
    return panels, notes


def sweep_charts(report: Report, charts) -> dict:
    """The section's chart specs, by the name its template partial places them under."""
    return {"latency_throughput": charts.latency_throughput(*sweep_input(report))}
