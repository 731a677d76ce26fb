"""Production-like evidence for the packet: sweep, shape portability, soak, energy, quality."""

from __future__ import annotations

from pathlib import Path

from reviewkit.evidence.files import STATUS_NOT_APPLICABLE, STATUS_OK, row_status
from reviewkit.evidence.soak import Soak, SoakUnusable, read_soak
from reviewkit.render.packet.labels import ms, run_label, slice_name
from reviewkit.review.gate import Report

NO_SWEEP = (
    "no sweep is cited: run `reviewkit sweep --sla-p99-s S --out evidence/sweep.json` and cite "
    "it under [evidence].sweep"
)


NO_SOAK = (
    "no long-window evidence is cited: run `reviewkit soak --out evidence/soak.json` on the "
    "candidate and cite it under [evidence].long_window"
)


NO_QUALITY = (
    "no quality evidence is cited: run `reviewkit quality --dtype <dtype> --out "
    "evidence/quality.json` and cite it under [evidence].quality"
)


PRECISION_CHECK = "precision-quality"


# The files' fields are read defensively: a cited file of the right kind but a damaged body
# becomes a note on its chart, never a failed packet.
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def loaded_evidence(report: Report, kind: str, key: str) -> tuple[list, list[str]]:
    """(usable documents with their review-relative path, notes on the files not used)."""
    from reviewkit.evidence import files as evidence

    r = report.review
    docs, notes = [], []
    for x in evidence.read_all(r.evidence.get(key, ()), kind):
        if x.ok:
            docs.append((r.relative(x.path), x.doc))
        else:
            notes.append(f"{r.relative(x.path)}: not used: {x.reason}")
    return docs, notes


def _sla_target(
    report: Report, workload_id: str, doc: dict
) -> tuple[float | None, str, float | None]:
    """(p99 s, where it comes from, minimum throughput /s) a swept workload is held to: the
    review's target (one for the server scenario first: the curve is the server's), else the
    sweep's own --sla-p99-s."""
    from reviewkit.analysis.sla import matching_targets

    key = slice_name({"id": workload_id, "dtype": workload_id.rsplit(".", 1)[-1]})
    matching = matching_targets(report.review.sla_targets, workload_id, key)
    matching.sort(key=lambda t: getattr(t, "scenario", "server") != "server")
    for t in matching:
        if t.p99_s is not None:
            scenario = getattr(t, "scenario", "server")
            where = f"review target {t.workload}" + (
                "" if scenario == "server" else f", {scenario}"
            )
            return t.p99_s, where, t.min_throughput_per_s
    own = doc.get("sla_p99_s")
    if isinstance(own, int | float) and not isinstance(own, bool) and own > 0:
        return float(own), "the sweep's --sla-p99-s", None
    return None, "", None


def _sweep_panel_input(report: Report, w: dict, doc: dict, source: str) -> dict:
    from reviewkit.evidence import loadgen

    levels = []
    for lv in w[loadgen.SERVER]:
        lat = lv.get("latency") or {}
        levels.append(
            {
                "target_rate_per_s": lv.get("target_rate_per_s"),
                "load_fraction": lv.get("load_fraction"),
                "achieved_rate_per_s": lv.get("achieved_rate_per_s"),
                "p50_s": lat.get("p50_s"),
                "p99_s": lat.get("p99_s"),
                "valid": bool(lv.get("valid")),
                "invalid_reasons": [str(x) for x in lv.get("invalid_reasons") or []],
            }
        )
    levels.sort(key=lambda lv: lv["target_rate_per_s"] or 0.0)
    knee = dict(w.get("knee") or {})
    notes = []
    if knee.get("found"):
        at = next((lv for lv in levels if lv["target_rate_per_s"] == knee.get("rate_per_s")), None)
        if at is not None:
            knee["point"] = {"achieved_rate_per_s": at["achieved_rate_per_s"], "p99_s": at["p99_s"]}
        notes.append(f"knee at {knee['rate_per_s']:.4g}/s offered ({knee.get('rule', '')})")
    elif knee.get("rule"):
        notes.append(f"no knee: {knee['rule']}")
    sla_s, sla_source, min_rate = _sla_target(report, str(w["id"]), doc)
    met = w.get("sla") or {}
    if met.get("met") and sla_s is not None and met.get("p99_s") == sla_s:
        notes.append(
            f"p99 ≤ {sla_s * 1e3:.4g} ms met up to {met['max_rate_per_s']:.4g}/s offered "
            f"({met['achieved_rate_per_s']:.4g}/s achieved)"
        )
    invalid = sum(not lv["valid"] for lv in levels)
    if invalid:
        notes.append(f"{invalid} invalid level(s), hollow and grey: not results (see tooltips)")
    offline = (w.get(loadgen.OFFLINE) or {}).get("achieved_rate_per_s")
    return {
        "workload": str(w["id"]),
        "source": source,
        "levels": levels,
        "offline_rate_per_s": offline,
        "single_stream_p99_s": ((w.get(loadgen.SINGLE_STREAM) or {}).get("latency") or {}).get(
            "p99_s"
        ),
        "sla_p99_s": sla_s,
        "sla_source": sla_source,
        "sla_min_rate_per_s": min_rate,
        "knee": knee,
        "notes": notes,
    }


def sweep_input(report: Report) -> tuple[list[dict], list[str]]:
    """The latency-throughput panels of every cited sweep, and notes on what could not be drawn."""
    from reviewkit.evidence import files as evidence

    if not report.review.evidence.get("sweep"):
        return [], [NO_SWEEP]
    docs, notes = loaded_evidence(report, evidence.SWEEP, "sweep")
    panels = []
    for source, doc in docs:
        workloads = doc.get("workloads")
        if not isinstance(workloads, list) or not workloads:
            notes.append(f"{source}: no workloads in the sweep")
            continue
        for w in workloads:
            wid = str(w.get("id", "?")) if isinstance(w, dict) else "?"
            try:
                if row_status(w) != STATUS_OK:
                    notes.append(f"{source}: {wid}: {row_status(w)} ({w.get('reason', '')})")
                    continue
                panels.append(_sweep_panel_input(report, w, doc, source))
            except MALFORMED as exc:
                notes.append(f"{source}: {wid}: not a usable sweep entry ({type(exc).__name__})")
    if len(docs) > 1:
        for p in panels:
            p["workload"] = f"{p['workload']} ({p['source']})"
    return panels, notes


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
        for w in report.baseline["workloads"]:
            params = w.get("params") or {}
            if "seq" in params and "batch" in params and w.get("stats"):
                key = slice_name(w)
                rows.append(
                    {
                        "panel": _family(key),
                        "workload": key,
                        "seq": params["seq"],
                        "batch": params["batch"],
                        "ratio": None,
                        "verdict": "",
                        "mfu": w.get("mfu"),
                        "p99_ms": ms(w["stats"]["p99_s"]),
                    }
                )
    return rows


def _family(key: str) -> str:
    """A workload's kernel and source without its shape: `gemm.bert-base-ffn-up.b1s128` ->
    `gemm · bert-base-ffn-up`, so the shapes of one operator share a panel."""
    parts = key.split(".")
    return " · ".join(parts[:2]) if len(parts) >= 3 else key


def soak_input(report: Report) -> tuple[list[dict], list[str]]:
    """Sub-window throughput, the recorded analysis and the sensor series of every cited soak."""
    from reviewkit.evidence import files as evidence

    if not report.review.evidence.get("long_window"):
        return [], [NO_SOAK]
    docs, notes = loaded_evidence(report, evidence.SOAK, "long_window")
    soaks = []
    for source, doc in docs:
        try:
            soak = read_soak(evidence.Loaded(Path(source), doc))
        except SoakUnusable as exc:
            notes.append(f"{source}: not a usable soak result: {exc}")
            continue
        soaks.append(one_soak(soak, source, several=len(docs) > 1))
    return soaks, notes


def one_soak(soak: Soak, source: str, several: bool) -> dict:
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
        "sensor_notes": sensor_notes
        + ([] if soak.complete else ["the soak was interrupted"]),
    }


def energy_input(runs: list[tuple[str, dict]]) -> tuple[list[dict], list[str]]:
    """Work per joule and average watts per run, dtype and layer type, from the runs' energy;
    the recorded reason for every run (or layer type) that has none."""
    from reviewkit.analysis.roofline import energy_aggregate, energy_reason, measured

    rows: list[dict] = []
    missing: dict[str, list[str]] = {}  # reason -> where it applies
    for label, doc in runs:
        by_dtype = doc.get("layer_energy_by_dtype") or {}
        none = not any(e.get("available") for d in by_dtype.values() for e in d.values())
        if none:  # one line for the whole run: the reason its first workload recorded
            first = next((w for w in measured(doc) if energy_reason(w)), None)
            why = energy_reason(first) if first else energy_aggregate(measured(doc))["reason"]
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
                    ws = [w for w in measured(doc)
                          if w["dtype"] == dtype and w["layer_type"] == layer_type]  # fmt: skip
                    first = next((w for w in ws if energy_reason(w)), None)
                    why = energy_reason(first) if first else str(e.get("reason", ""))
                    missing.setdefault(why, []).append(f"{label} {dtype} {layer_type}")
    notes = []
    for why, where in missing.items():
        shown = ", ".join(where[:4]) + (f" and {len(where) - 4} more" if len(where) > 4 else "")
        notes.append(f"energy not available ({shown}): {why}")
    return rows, notes


def quality_input(report: Report) -> tuple[list[dict], dict[str, float], list[str]]:
    """Measured rows of every cited quality result, the rubric's tolerances, and notes."""
    from reviewkit.evidence import files as evidence

    item = next((i for i in report.rubric.items if i.check == PRECISION_CHECK), None)
    raw = (item.params.get("tolerances") if item else None) or {}
    tolerances = {
        str(k): float(v)
        for k, v in raw.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    if not report.review.evidence.get("quality"):
        return [], tolerances, [NO_QUALITY]
    docs, notes = loaded_evidence(report, evidence.QUALITY, "quality")
    rows, not_ok = [], []
    for source, doc in docs:
        results = doc.get("results")
        if not isinstance(results, list):
            notes.append(f"{source}: no results list")
            continue
        for r in results:
            if not isinstance(r, dict):
                continue
            status = row_status(r)
            if status == STATUS_NOT_APPLICABLE:
                continue
            if status != STATUS_OK:
                not_ok.append(f"{r.get('id')} {r.get('dtype')}: {status} ({r.get('reason', '')})")
                continue
            rows.append(
                {
                    "workload": str(r.get("id")),
                    "dtype": str(r.get("dtype")),
                    "rel_error": r.get("rel_error"),
                    "max_abs_error": r.get("max_abs_error"),
                    "top1_agreement": r.get("top1_agreement"),
                    "kl_divergence": r.get("kl_divergence"),
                    "source": source,
                }
            )
    if not_ok:
        notes.append(f"{len(not_ok)} result(s) not measured: {'; '.join(not_ok[:3])}")
    # Top-1 agreement and KL are in the tooltip on screen; the PDF has no tooltip, so the model
    # rows' figures are said in words against the rubric's limits.
    params = item.params if item else {}
    min_top1 = params.get("min_top1_agreement")
    max_kl = params.get("max_kl_divergence")
    for r in rows:
        top1, kl = r.get("top1_agreement"), r.get("kl_divergence")
        if not isinstance(top1, int | float) and not isinstance(kl, int | float):
            continue
        parts = []
        if isinstance(top1, int | float):
            low = isinstance(min_top1, int | float) and top1 < min_top1
            parts.append(
                f"top-1 agreement {top1:.1%}"
                + (f" (BELOW the rubric's {min_top1:.0%})" if low else "")
            )
        if isinstance(kl, int | float):
            high = isinstance(max_kl, int | float) and kl > max_kl
            parts.append(
                f"KL {kl:.2g} nats" + (f" (ABOVE the rubric's {max_kl:g})" if high else "")
            )
        notes.append(f"{r['workload']} {r['dtype']}: {', '.join(parts)}")
    if not item:
        notes.append(f"the rubric has no `{PRECISION_CHECK}` item: no tolerances drawn")
    return rows, tolerances, notes
