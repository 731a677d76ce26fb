"""The production fit section: cited trace summaries scored against each candidate's suite."""

from __future__ import annotations

import json

from reviewkit.common.format import elided
from reviewkit.evidence.trace import fit as fitmatrix
from reviewkit.render import charts
from reviewkit.render.packet.labels import number_or_none, run_label
from reviewkit.review.gate import Report

FIT_CHECK = fitmatrix.CHECK


TRACE_HOWTO = (
    "profile production with torch.profiler (record_shapes=True), run `reviewkit trace import "
    "TRACE --out evidence/` and cite evidence/trace_summary.json under "
    "[evidence].production_traces"
)


NO_TRACE = (
    "No production trace is cited, so nothing shows which share of production time the suite "
    f"covers: {TRACE_HOWTO}."
)


NO_FIT_ITEM = (
    f"The rubric has no `{FIT_CHECK}` item, which sets how near a suite workload's shape must "
    "be (shape_range_factor) and the score to reach (min_coverage): the fit is not scored."
)


NO_USABLE_TRACE = f"No cited file is a usable trace summary (see above): {TRACE_HOWTO}."


MAX_UNMAPPED_NAMES = 5  # the unmapped row names its largest operators; the summary lists more


DIMS_MAX_CHARS = 160  # a shape of hundreds of arguments is cut, not pasted whole into a cell


MAX_QUALITY_EXAMPLES = 3  # trace.MAX_EXAMPLES: a summary keeps no more per rule


def _fit_params(report: Report) -> tuple[float | None, float | None, list[str]]:
    """(min_coverage, shape_range_factor, notes): the rubric's production-shape thresholds as
    the review stage read them."""
    limits = report.cited.fit_limits
    if limits.shape_range_factor is None:
        return None, None, [NO_FIT_ITEM]
    return limits.min_coverage, limits.shape_range_factor, []


def _trace_provenance(source: str, t: dict) -> dict:
    """Where one trace came from and how far its data can be trusted, as the summary says."""
    clock = t.get("clock") if isinstance(t.get("clock"), dict) else {}
    events = t.get("events") if isinstance(t.get("events"), dict) else {}
    quality = []
    for q in t.get("quality") if isinstance(t.get("quality"), list) else []:
        if isinstance(q, dict):
            examples = q.get("examples") if isinstance(q.get("examples"), list) else []
            quality.append(
                {
                    "rule": str(q.get("rule", "?")),
                    "count": number_or_none(q.get("count")),
                    "description": str(q.get("description", "")),
                    "examples": [str(e) for e in examples[:MAX_QUALITY_EXAMPLES]],
                }
            )
    devices = t.get("devices") if isinstance(t.get("devices"), list) else []
    return {
        "summary": source,
        "path": str(t.get("path", "?")),
        "sha256": str(t.get("sha256") or ""),
        "size_bytes": number_or_none(t.get("size_bytes")),
        "gzip": bool(t.get("gzip")),
        "rank": number_or_none(t.get("rank")),
        "world_size": number_or_none(t.get("world_size")),
        "rank_source": str(t.get("rank_source") or ""),
        "devices": [str(d) for d in devices],
        "time_basis": str(t.get("time_basis") or ""),
        "window_s": number_or_none(t.get("window_s")),
        "events": number_or_none(events.get("total")),
        "record_shapes": bool(t.get("record_shapes")),
        "clock": {
            "resolution": str(clock.get("resolution") or "not recorded"),
            "ts_unit": str(clock.get("ts_unit") or ""),
            "display_time_unit": str(clock.get("display_time_unit") or ""),
            "base_time_ns": number_or_none(clock.get("base_time_ns")),
        },
        "quality": quality,
    }


def _usable_traces(report: Report, factor: float) -> tuple[list[dict], list[dict], list[str]]:
    """(traces the fit can use, their provenance, notes on every file or trace left out), as
    the review stage read them."""
    production = report.cited.production(factor)
    provenance = [_trace_provenance(source, t) for source, t in production.sources]
    return production.traces, provenance, list(production.notes)


def _unmapped_note(traces: list[dict]) -> str:
    """The largest operators no layer-map rule names, with their share of all production time."""
    total = sum(t["op_mix"]["time_s"] for t in traces) or 1.0
    by_name: dict[str, float] = {}
    for t in traces:
        for u in (t["op_mix"].get("unmapped") or {}).get("top") or []:
            if isinstance(u, dict) and number_or_none(u.get("time_s")) is not None:
                name = str(u.get("name"))
                by_name[name] = by_name.get(name, 0.0) + u["time_s"]
    top = sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_UNMAPPED_NAMES]
    listed = ", ".join(f"{n} ({100 * s / total:.1f}%)" for n, s in top)
    return "no layer-map rule names these operators" + (
        f"; the largest: {listed}" if listed else ""
    )


def _fit_candidate(fit, label: str, run: str, fit_verdict, unmapped: str) -> dict:
    from reviewkit.evidence.trace.fit import MAX_OUTSIDE_LISTED, UNMAPPED

    suite = {x.layer_type: x.suite_workloads for x in fit.layers}
    rows = []
    for r in fit.rows:
        row = {
            "layer_type": r.layer_type,
            "band": r.band,
            "numel_low": r.numel_low,
            "numel_high": r.numel_high,
            "share": r.share,
            "covered_share": r.covered_share,
            "workloads": list(r.workloads),
            "note": "",
        }
        if r.layer_type == UNMAPPED:
            row["note"] = unmapped
        elif r.numel_low is not None and r.covered_share < r.share:
            row["note"] = (
                "the suite has no operator-level workload of this layer type"
                if not suite.get(r.layer_type)
                else f"outside every suite workload's {fit.shape_range_factor:g}x window: see "
                "the shapes outside the suite"
            )
        rows.append(row)
    layers = []
    for x in fit.layers:
        covering = sorted(
            {w for r in fit.rows if r.layer_type == x.layer_type for w in r.workloads}
        )
        layers.append(
            {
                "layer_type": x.layer_type,
                "share": x.share,
                "covered_share": x.covered_share,
                "covered_of_layer": x.covered_share / x.share if x.share > 0 else None,
                "suite_workloads": x.suite_workloads,
                "covering": covering,
                "note": unmapped if x.layer_type == UNMAPPED else "",
            }
        )
    outside = []
    for o in fit.outside:
        dims = elided(json.dumps(o.dims), DIMS_MAX_CHARS)
        outside.append(
            {
                "layer_type": o.layer_type,
                "dims": o.dims,
                "dims_text": dims,
                "numel": o.numel,
                "share": o.share,
                "nearest_workload": o.nearest_workload,
                "nearest_ratio": o.nearest_ratio,
            }
        )
    verdict = fit_verdict(fit.score)
    return {
        "candidate": label,
        "run": run,
        "chart": "",
        "same_as": "",
        "score": fit.score,
        "layer_coverage": fit.layer_coverage,
        "verdict": verdict,
        "time_basis": fit.time_basis,
        "rows": rows,
        "layers": layers,
        "outside": outside,
        # fitmatrix lists at most this many: the table then says more may exist
        "outside_capped": len(fit.outside) >= MAX_OUTSIDE_LISTED,
    }


def fit_input(report: Report) -> tuple[dict, dict]:
    """The production-fit section (per candidate: score against the rubric's threshold, layer
    types, shapes outside the suite; per trace: provenance and data quality) and its charts."""
    from reviewkit.evidence.trace import fit as fitmatrix

    min_coverage, factor, notes = _fit_params(report)
    finding = next((f for f in report.findings if f.item.check == FIT_CHECK), None)
    section = {
        "available": False,
        "note": "",
        "notes": notes,
        "min_coverage": min_coverage,
        "shape_range_factor": factor,
        "finding": {"id": finding.item.id, "status": finding.status, "summary": finding.summary}
        if finding
        else None,
        "traces": [],
        "candidates": [],
        "outside_listed_max": fitmatrix.MAX_OUTSIDE_LISTED,
    }
    if not report.review.evidence.get("production_traces"):
        section["note"] = NO_TRACE
        return section, {}
    if factor is None:
        section["note"], section["notes"] = NO_FIT_ITEM, []
        return section, {}
    traces, provenance, not_used = _usable_traces(report, factor)
    section["notes"] = not_used + notes
    section["traces"] = provenance
    if not traces:
        section["note"] = NO_USABLE_TRACE
        return section, {}
    if not sum(t["op_mix"]["time_s"] for t in traces) > 0:
        section["note"] = "The cited traces record no operator time: " + TRACE_HOWTO + "."
        return section, {}
    unmapped = _unmapped_note(traces)
    n = len(report.review_candidates)
    specs, seen = {}, {}
    fits = report.cited.production(factor).fits
    for i, ((path, _), (fit, exc)) in enumerate(zip(report.review_candidates, fits, strict=True)):
        label, run = run_label(i, n), report.review.relative(path)
        if fit is None:
            section["notes"].append(f"{label}: not scored ({type(exc).__name__})")
            continue
        key = json.dumps(fit.to_json(), sort_keys=True, allow_nan=False)
        c = _fit_candidate(fit, label, run, report.cited.fit_verdict, unmapped)
        c["time_basis_text"] = charts.TIME_BASIS_WORDS.get(fit.time_basis, fit.time_basis)
        if key in seen:  # same suite, same fit: said once, not drawn twice
            c["same_as"] = seen[key]
        else:
            seen[key] = label
            c["chart"] = "fit_matrix" if not specs else f"fit_matrix_{i + 1}"
            chart_notes = [f"{label}: {run}"] if n > 1 else []
            names = ", ".join(p["path"] for p in provenance[:4])
            more = f" and {len(provenance) - 4} more" if len(provenance) > 4 else ""
            chart_notes.append(f"{len(traces)} trace{'' if len(traces) == 1 else 's'}: "
                               f"{names}{more}")  # fmt: skip
            specs[c["chart"]] = charts.fit_matrix(
                c["rows"],
                {
                    "score": fit.score,
                    "min_coverage": min_coverage,
                    "layer_coverage": fit.layer_coverage,
                    "time_basis": fit.time_basis,
                    "shape_range_factor": factor,
                },
                chart_notes,
            )
        section["candidates"].append(c)
    section["available"] = bool(section["candidates"])
    if not section["available"]:
        section["note"] = "No candidate run could be scored against the traces (see above)."
    return section, specs
