"""The packet's serving-load figure: every cited sweep's latency-throughput panels, drawn."""

from __future__ import annotations

from reviewkit.render import charts
from reviewkit.review.gate import Report

NO_SWEEP = (
    "no sweep is cited: run `reviewkit sweep --sla-p99-s S --out evidence/sweep.json` and cite "
    "it under [evidence].sweep"
)


def _level(lv) -> dict:
    return {
        "target_rate_per_s": lv.target_rate_per_s,
        "load_fraction": lv.load_fraction,
        "achieved_rate_per_s": lv.achieved_rate_per_s,
        "p50_s": lv.p50_s,
        "p99_s": lv.p99_s,
        "valid": lv.valid,
        "invalid_reasons": list(lv.invalid_reasons),
    }


def _panel(report: Report, w, sweep, source: str) -> dict:
    """One swept workload's panel: its levels, knee, and the target the review stage judged."""
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
    target = report.cited.swept_target(w.id, sweep)
    sla_s, sla_source, min_rate = target.p99_s, target.where, target.min_rate_per_s
    if target.judgement is not None:  # the review stage's verdict under load, as the gate has it
        notes.append(target.judgement.sentence())
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
    cited = report.cited.sweeps
    if not cited.cited:
        return [], [NO_SWEEP]
    notes = cited.notes(report.review)
    sweeps = cited.records
    panels = []
    for sweep in sweeps:
        source = report.review.relative(sweep.path)
        for w in sweep.workloads:
            if not w.measured:
                notes.append(f"{source}: {w.id}: {w.status} ({w.reason})")
                continue
            panels.append(_panel(report, w, sweep, source))
    if len(sweeps) > 1:
        for p in panels:
            p["workload"] = f"{p['workload']} ({p['source']})"
    return panels, notes


def sweep_charts(report: Report) -> dict:
    """The section's chart specs, by the name its template partial places them under."""
    return {"latency_throughput": charts.latency_throughput(*sweep_input(report))}
