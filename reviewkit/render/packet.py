"""Build the review packet: one model of every value shown, rendered to HTML and PDF, atomically."""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reviewkit import __version__, templates
from reviewkit.analysis.platforms import MEASURED, PlatformMatrix, build_matrix
from reviewkit.common.errors import InputError, ReviewkitError
from reviewkit.common.hashing import sha256_file
from reviewkit.evidence.trace import fit as fitmatrix
from reviewkit.review.checks import FAIL, PASS, STATUS_ORDER
from reviewkit.review.gate import Report, run_check

PACKET_SCHEMA_VERSION = 1
TEMPLATES = templates.FOLDER
STYLESHEETS = ("packet.css", "screen.css", "print.css")
SCRIPTS = ("packet.js", "site.js")
VEGA_BUNDLE = "vega-bundle.js"
# The PDF keeps the tables a meeting reads; the full per-workload data travels as the
# embedded run.json files (WeasyPrint takes ~8 s for a 2,000-row table).
PDF_MAX_WORKLOAD_ROWS = 120
LATENCY_CHART_WORKLOADS = 12
MARKDOWN_TAGS = {
    "p",
    "br",
    "hr",
    "em",
    "strong",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "del",
    "sup",
    "sub",
}

Progress = Callable[[str], None]


class PacketError(ReviewkitError):
    """The packet could not be rendered (a template, chart or PDF step failed)."""


# --- markdown, sanitised -----------------------------------------------------------------------


def markdown_html(text: str) -> str:
    """Markdown to HTML with no raw HTML, no script, and no URL that leaves the machine.

    Raw HTML in the input is dropped by the sanitiser (ammonia via nh3); links keep only
    relative targets, so `javascript:`, `data:` and off-machine `https:` hrefs lose their href
    and stay as text.
    """
    import markdown
    import nh3

    html = markdown.markdown(text or "", extensions=["tables", "fenced_code"])
    return nh3.clean(
        html,
        tags=MARKDOWN_TAGS,
        attributes={"a": {"href", "title"}, "th": {"align"}, "td": {"align"}},
        url_schemes=set(),
        link_rel="noopener noreferrer",
    )


# --- the model ---------------------------------------------------------------------------------


def _run_label(i: int, n: int) -> str:
    return "candidate" if n == 1 else f"candidate {i + 1}"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _workload_rows(baseline: dict, cand: dict, comparison) -> list[dict]:
    by_id = {w["id"]: w for w in cand["workloads"]}
    base_by_id = {w["id"]: w for w in baseline["workloads"]}
    rows = []
    for c in comparison.workloads:
        cw, bw = by_id.get(c.candidate_id, {}), base_by_id.get(c.baseline_id, {})
        bs, cs = bw.get("stats") or {}, cw.get("stats") or {}
        rows.append(
            {
                "key": c.key,
                "layer_type": c.layer_type,
                "candidate_id": c.candidate_id,
                "baseline_id": c.baseline_id,
                "baseline_p50_ms": _ms(bs.get("p50_s")),
                "candidate_p50_ms": _ms(cs.get("p50_s")),
                "baseline_p95_ms": _ms(bs.get("p95_s")),
                "candidate_p95_ms": _ms(cs.get("p95_s")),
                "baseline_p99_ms": _ms(bs.get("p99_s")),
                "candidate_p99_ms": _ms(cs.get("p99_s")),
                "median_ratio": c.median_ratio,
                "median_ratio_ci": c.median_ratio_ci,
                "p99_ratio": c.p99_ratio,
                "p99_ratio_ci": c.p99_ratio_ci,
                "verdict": c.verdict,
                "p99_verdict": c.p99_verdict,
                "reason": c.reason,
                "baseline_mfu": c.mfu_baseline,
                "candidate_mfu": c.mfu_candidate,
                "memory_stall_delta": c.memory_stall_delta,
                "baseline_bottleneck": c.bottleneck_baseline,
                "candidate_bottleneck": c.bottleneck_candidate,
                "flags": cw.get("flags") or [],
                "reproduce": cw.get("reproduce", ""),
            }
        )
    return rows


def _layer_rows(label: str, doc: dict) -> list[dict]:
    by_dtype = doc.get("layer_types_by_dtype") or {}
    rows = []
    for dtype in sorted(by_dtype):
        for layer_type, a in by_dtype[dtype].items():
            rows.append({"run": label, "dtype": dtype, "layer_type": layer_type, **a})
    return rows


def _headline(report: Report) -> dict:
    """The one primary metric trend: the end-to-end model's latency if measured, else the
    layer type with the largest time share."""
    comp = report.comparisons[0]
    cand = report.review.candidates[0]
    models = [w for w in comp.workloads if w.layer_type == "model" and w.median_ratio]
    answer = report.review.answers.get("primary-metric")
    out = {"answer": answer.answer if answer else "", "candidate_run": report.review.relative(cand)}
    if models:
        w = models[0]
        out.update(
            kind="workload",
            label=f"median latency of {w.key}",
            ratio=w.median_ratio,
            ci=w.median_ratio_ci,
            verdict=w.verdict,
            p99_ratio=w.p99_ratio,
        )
    elif comp.layer_types:
        layer = max(comp.layer_types, key=lambda x: x.workloads)
        out.update(
            kind="layer",
            label=f"summed median time of {layer.layer_type}",
            ratio=layer.time_ratio,
            ci=layer.time_ratio_ci,
            verdict=layer.verdict,
            p99_ratio=None,
        )
    return out


def _slices(report: Report) -> list[dict]:
    """The reproducible workload slices the claim cites: model, SLA and disproof workloads."""
    import fnmatch

    globs = ["model.*"] + [t.workload for t in report.review.sla_targets]
    globs += [d.workload for d in report.review.disproof if d.workload]
    out, seen = [], set()
    for i, (path, cand) in enumerate(report.review_candidates):
        comp = report.comparisons[i]
        changed = {k.knob: k.candidate for k in comp.knob_changes}
        for w in cand["workloads"]:
            key = w["id"]
            if key in seen or not any(fnmatch.fnmatchcase(key, g) for g in globs):
                continue
            seen.add(key)
            out.append(
                {
                    "run": report.review.relative(path),
                    "workload": key,
                    "suite_hash": cand["suite"].get("hash"),
                    "knobs": changed,
                    "reproduce": w.get("reproduce", ""),
                }
            )
    return out


def _artifacts(report: Report) -> list[dict]:
    r = report.review
    files = [("review file", r.path), ("baseline run", _run_file(r.baseline))]
    files += [
        (f"{_run_label(i, len(r.candidates))} run", _run_file(p))
        for i, p in enumerate(r.candidates)
    ]
    for kind in sorted(r.evidence):
        files += [(f"evidence: {kind}", p) for p in r.evidence[kind]]
    for item_id in sorted(r.answers):
        a = r.answers[item_id]
        if a.evidence_path is not None and a.evidence_path.is_file():
            files.append((f"answer evidence: {item_id}", a.evidence_path))
    out, seen = [], set()
    for label, path in files:
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        out.append(
            {
                "label": label,
                "path": r.relative(path),
                "bytes": path.stat().st_size,
                "sha256": sha256_file(path),
            }
        )
    return out


def _run_file(path: Path) -> Path:
    return path / "run.json" if path.is_dir() else path


def _environment(label: str, doc: dict) -> dict:
    env, knobs = doc.get("environment", {}), doc.get("knobs", {})
    keys = (
        "host",
        "os",
        "cpu_model",
        "cpu_logical_cores",
        "python",
        "torch_version",
        "blas",
        "mkl",
        "onednn",
        "cpu_capability",
        "cuda",
        "cudnn",
        "device_name",
        "driver",
        "git_commit",
    )
    return {
        "run": label,
        "facts": [(k, str(env[k])) for k in keys if env.get(k) not in (None, "")],
        "knobs": [
            (k, json.dumps(v) if isinstance(v, list | dict) else str(v)) for k, v in knobs.items()
        ],
        "suite": doc.get("suite", {}),
        "profile": doc.get("profile"),
        "complete": doc.get("complete"),
        "command": doc.get("command"),
    }


def build_model(report: Report) -> dict:
    """Every value the templates show, JSON-serialisable and in a stable order."""
    from reviewkit.render import charts

    r = report.review
    n = len(r.candidates)
    base = report.baseline
    runs = [("baseline", base)] + [
        (_run_label(i, n), d) for i, (_, d) in enumerate(report.review_candidates)
    ]
    findings = [f.to_json() for f in report.findings]
    red_flags = [f.to_json() for f in report.red_flags]
    workload_rows = [
        {"candidate": _run_label(i, n), "rows": _workload_rows(base, d, report.comparisons[i])}
        for i, (_, d) in enumerate(report.review_candidates)
    ]
    layer_rows = [row for label, doc in runs for row in _layer_rows(label, doc)]
    bottlenecks = []
    for i, comp in enumerate(report.comparisons):
        for layer in comp.layer_types:
            bottlenecks.append(
                {
                    "candidate": _run_label(i, n),
                    "layer_type": layer.layer_type,
                    "baseline": layer.bottleneck_baseline,
                    "candidate_class": layer.bottleneck_candidate,
                    "mfu_baseline": layer.mfu_baseline,
                    "mfu_candidate": layer.mfu_candidate,
                    "stall_baseline": layer.memory_stall_baseline,
                    "stall_candidate": layer.memory_stall_candidate,
                    "time_ratio": layer.time_ratio,
                    "time_ratio_ci": layer.time_ratio_ci,
                    "verdict": layer.verdict,
                }
            )
    bottleneck_finding = next((f for f in findings if f["check"] == "bottleneck-per-layer"), None)
    manual = [f for f in findings if f["check"] == "manual"]
    questions = []
    for f in sorted(manual, key=lambda f: f["id"] != "senior-question"):
        a = r.answers.get(f["id"])
        questions.append(
            {
                "id": f["id"],
                "title": f["title"],
                "question": f["question"],
                "status": f["status"],
                "answer": a.answer if a else "",
                "evidence": a.evidence if a else "",
            }
        )
    model = {
        "schema_version": PACKET_SCHEMA_VERSION,
        "kind": "reviewkit.packet",
        "generator": f"reviewkit {__version__}",
        "generated": _generated(),
        "title": r.title,
        "summary_html": markdown_html(r.summary),
        "decision": {k: str(v) for k, v in sorted(r.decision.items())},
        "owner": {"name": r.owner_name, "team": r.owner_team},
        "reviewers": list(r.reviewers),
        "rubric": {"name": report.rubric.name, "version": report.rubric.version},
        "gate": {
            "verdict": report.verdict,
            "blocking": [f.item.id for f in report.findings if f.blocks],
            "red_flags": len(red_flags),
            "counts": {
                s: sum(f["status"] == s for f in findings)
                for s in sorted(STATUS_ORDER, key=STATUS_ORDER.get)
            },
        },
        "headline": _headline(report),
        "runs": {
            "baseline": r.relative(r.baseline),
            "candidates": [r.relative(p) for p in r.candidates],
        },
        "slices": _slices(report),
        "knob_diffs": [
            {
                "candidate": _run_label(i, n),
                "changes": [
                    {
                        "knob": k.knob,
                        "baseline": json.dumps(k.baseline),
                        "candidate": json.dumps(k.candidate),
                    }
                    for k in c.knob_changes
                ],
                "paired_by": c.paired_by,
                "warnings": list(c.warnings),
            }
            for i, c in enumerate(report.comparisons)
        ],
        "bottlenecks": bottlenecks,
        "bottleneck_evidence": bottleneck_finding["evidence"] if bottleneck_finding else [],
        "layers": layer_rows,
        "workloads": workload_rows,
        "pdf_max_workload_rows": PDF_MAX_WORKLOAD_ROWS,
        "red_flags": red_flags,
        "findings": findings,
        "sla": {
            "load": r.sla_load,
            "targets": [
                {
                    "workload": t.workload,
                    "p99_ms": _ms(t.p99_s),
                    "min_throughput_per_s": t.min_throughput_per_s,
                    "note": t.note,
                }
                for t in r.sla_targets
            ],
        },
        "risks": [
            {
                "description": k.description,
                "level": k.level,
                "likelihood": k.likelihood,
                "owner": k.owner,
                "mitigation": k.mitigation,
            }
            for k in r.risks
        ],
        "rollback": {
            k: r.rollback.get(k, "") for k in ("boundary", "trigger", "procedure", "fallback")
        },
        "disproof": list(report.disproof),
        "questions": questions,
        "environment": [_environment(label, doc) for label, doc in runs],
        "artifacts": _artifacts(report),
        "warnings": list(report.warnings),
    }
    matrix = build_matrix(runs, r.sla_targets)
    model["platforms"] = _platforms_model(matrix)
    model["charts"] = _charts(report, runs, layer_rows, workload_rows, charts)
    model["production_fit"], fit_specs = _fit_input(report, charts)
    model["charts"].update(fit_specs)
    if matrix.multi_device:  # with one device the section says so: no empty chart
        model["charts"]["platform_matrix"] = charts.platform_matrix(
            model["platforms"]["cells"], [p.label for p in matrix.platforms]
        )
    return model


def _platforms_model(matrix: PlatformMatrix) -> dict:
    """The matrix as the packet shows it: every cell with its platform's device facts beside it,
    and the line said instead of a chart when every run is on one device."""
    by_label = {p.label: p for p in matrix.platforms}
    cells = []
    for c in matrix.cells:
        p = by_label[c.platform]
        cells.append(
            {
                **c.to_json(),
                "device_name": p.device_name,
                "dtype": p.dtype,
                "peak_source": p.peak_source,
                "p99_ms": _ms(c.p99_s),
                "sla_p99_ms": _ms(c.sla_p99_s),
            }
        )
    platforms = []
    for p in matrix.platforms:
        measured = [c for c in matrix.cells if c.platform == p.label and c.status == MEASURED]
        metered = [c for c in measured if c.flops_per_joule is not None]
        missing = next((c.energy_reason for c in measured if c.flops_per_joule is None), "")
        if metered:
            energy = f"metered for {len(metered)} of {len(measured)} measured workload(s)"
            energy += f"; not for the others: {missing}" if missing else ""
        else:  # one reason for the platform instead of the same one on every row
            energy = f"not measured: {missing or 'no measured workload'}"
        platforms.append({**p.to_json(), "energy": energy})
    note = ""
    if not matrix.multi_device:
        device = matrix.devices[0] if matrix.devices else "one device"
        note = (
            f"All runs are on one device, {device}: the comparison above is the platform view. "
            "A workloads x platforms matrix is drawn when the review names runs from two or "
            "more devices (another machine, or CPU beside GPU)."
        )
    return {**matrix.to_json(), "platforms": platforms, "cells": cells, "note": note}


def _charts(
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
                        "workload": _slice(w),
                        "samples_s": w["samples_s"],
                        "p50_s": w["stats"]["p50_s"],
                        "p95_s": w["stats"]["p95_s"],
                        "p99_s": w["stats"]["p99_s"],
                    }
                )
    forest_layers, forest_workloads = [], []
    multi = len(report.comparisons) > 1
    for i, comp in enumerate(report.comparisons):
        prefix = f"{_run_label(i, len(report.comparisons))}: " if multi else ""
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
            _trade_rows(report, with_baseline=len(devices) > 1)
        )
    specs["shape_portability"] = charts.shape_heatmap(_shape_input(report, workload_rows))
    specs["latency_throughput"] = charts.latency_throughput(*_sweep_input(report))
    specs["stability"] = charts.stability(*_soak_input(report))
    specs["perf_per_watt"] = charts.perf_per_watt(*_energy_input(runs))
    specs["quality_drift"] = charts.quality_drift(*_quality_input(report))
    return specs


def _slice(w: dict) -> str:
    from reviewkit.analysis.compare import slice_key

    return slice_key(w)


# Staying on the baseline rolls nothing out: it carries no engineering risk of the change.
BASELINE_RISK = 0.0


def _trade_rows(report: Report, with_baseline: bool = False) -> list[dict]:
    """Throughput and p99 of the end-to-end model per candidate (and the baseline, across
    devices); energy only if measured; engineering risk from the rubric's findings (share of
    non-passing blocking and major items)."""
    from reviewkit.analysis.platforms import device_name, short_device

    rows = []
    weights = {"blocking": 1.0, "major": 0.5, "minor": 0.0}
    total = sum(weights[f.item.severity] for f in report.findings) or 1.0
    risk = sum(weights[f.item.severity] for f in report.findings if f.status != PASS) / total
    entries = [(_run_label(i, len(report.comparisons)), doc, risk)
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
                "throughput_per_s": 1 / model["stats"]["mean_s"] if model else None,
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


# --- production-like evidence: what the cited files and the runs' energy say ------------------

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


def _loaded(report: Report, kind: str, key: str) -> tuple[list, list[str]]:
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
    import fnmatch

    key = _slice({"id": workload_id, "dtype": workload_id.rsplit(".", 1)[-1]})
    matching = [
        t
        for t in report.review.sla_targets
        if fnmatch.fnmatchcase(workload_id, t.workload) or fnmatch.fnmatchcase(key, t.workload)
    ]
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


def _sweep_input(report: Report) -> tuple[list[dict], list[str]]:
    """The latency-throughput panels of every cited sweep, and notes on what could not be drawn."""
    from reviewkit.evidence import files as evidence

    if not report.review.evidence.get("sweep"):
        return [], [NO_SWEEP]
    docs, notes = _loaded(report, evidence.SWEEP, "sweep")
    panels = []
    for source, doc in docs:
        workloads = doc.get("workloads")
        if not isinstance(workloads, list) or not workloads:
            notes.append(f"{source}: no workloads in the sweep")
            continue
        for w in workloads:
            wid = str(w.get("id", "?")) if isinstance(w, dict) else "?"
            try:
                if w.get("status", "ok") != "ok":
                    notes.append(f"{source}: {wid}: {w.get('status')} ({w.get('reason', '')})")
                    continue
                panels.append(_sweep_panel_input(report, w, doc, source))
            except MALFORMED as exc:
                notes.append(f"{source}: {wid}: not a usable sweep entry ({type(exc).__name__})")
    if len(docs) > 1:
        for p in panels:
            p["workload"] = f"{p['workload']} ({p['source']})"
    return panels, notes


def _shape_input(report: Report, workload_rows: list[dict]) -> list[dict]:
    """One cell per (workload family, sequence length, batch) of each comparison; a run's MFU
    when there is nothing to compare."""
    n = len(report.comparisons)
    rows = []
    for i, comp in enumerate(report.comparisons):
        prefix = f"{_run_label(i, n)}: " if n > 1 else ""
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
                key = _slice(w)
                rows.append(
                    {
                        "panel": _family(key),
                        "workload": key,
                        "seq": params["seq"],
                        "batch": params["batch"],
                        "ratio": None,
                        "verdict": "",
                        "mfu": w.get("mfu"),
                        "p99_ms": _ms(w["stats"]["p99_s"]),
                    }
                )
    return rows


def _family(key: str) -> str:
    """A workload's kernel and source without its shape: `gemm.bert-base-ffn-up.b1s128` ->
    `gemm · bert-base-ffn-up`, so the shapes of one operator share a panel."""
    parts = key.split(".")
    return " · ".join(parts[:2]) if len(parts) >= 3 else key


def _soak_input(report: Report) -> tuple[list[dict], list[str]]:
    """Sub-window throughput, the recorded analysis and the sensor series of every cited soak."""
    from reviewkit.evidence import files as evidence

    if not report.review.evidence.get("long_window"):
        return [], [NO_SOAK]
    docs, notes = _loaded(report, evidence.SOAK, "long_window")
    soaks = []
    for source, doc in docs:
        try:
            soaks.append(_one_soak(doc, source, several=len(docs) > 1))
        except MALFORMED as exc:
            notes.append(f"{source}: not a usable soak result ({type(exc).__name__})")
    return soaks, notes


def _one_soak(doc: dict, source: str, several: bool) -> dict:
    a = doc.get("analysis") or {}
    subwindows = [
        {k: sw.get(k) for k in ("index", "start_s", "end_s", "calls_per_s", "partial")}
        for sw in doc["subwindows"]
    ]
    series: dict[str, list[dict]] = {"clocks": [], "temperatures": []}
    for sw in doc["subwindows"]:
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
            for name, info in sorted((doc.get("sensors") or {}).items())
            if name.endswith(suffix) and isinstance(info, dict)
        ]
        sensor_notes.append(f"{kind}: not available: {'; '.join(why) or 'no sensor recorded'}")
    trend = a.get("trend") or {}
    workload = (doc.get("workload") or {}).get("id", "?")
    return {
        "workload": f"{workload} ({source})" if several else str(workload),
        "source": source,
        "window_s": doc.get("measured_window_s"),
        "complete": bool(doc.get("complete")),
        "verdict": a.get("verdict"),
        "reasons": [str(x) for x in a.get("reasons") or []],
        "trend": {
            k: trend.get(k)
            for k in ("mean", "slope_per_s", "relative_change", "relative_change_ci", "reason")
        },
        "throttling": {k: (a.get("throttling") or {}).get(k) for k in ("status", "reason")},
        "subwindows": subwindows,
        "clocks": series["clocks"],
        "temperatures": series["temperatures"],
        "sensor_notes": sensor_notes
        + ([] if doc.get("complete", True) else ["the soak was interrupted"]),
    }


def _energy_input(runs: list[tuple[str, dict]]) -> tuple[list[dict], list[str]]:
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


def _quality_input(report: Report) -> tuple[list[dict], dict[str, float], list[str]]:
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
    docs, notes = _loaded(report, evidence.QUALITY, "quality")
    rows, not_ok = [], []
    for source, doc in docs:
        results = doc.get("results")
        if not isinstance(results, list):
            notes.append(f"{source}: no results list")
            continue
        for r in results:
            if not isinstance(r, dict):
                continue
            status = r.get("status", "ok")
            if status == "not applicable":
                continue
            if status != "ok":
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


# --- production fit: the cited trace summaries against each candidate's suite ------------------

FIT_CHECK = fitmatrix.CHECK
DEFAULT_MIN_COVERAGE = fitmatrix.DEFAULT_MIN_COVERAGE
DEFAULT_SHAPE_RANGE_FACTOR = fitmatrix.DEFAULT_SHAPE_RANGE_FACTOR
TRACE_HOWTO = (
    "profile production with torch.profiler (record_shapes=True), run `reviewkit trace import "
    "TRACE --out evidence/` and cite evidence/trace_summary.json under "
    "[evidence].production_traces"
)
NO_TRACE = (
    "No production trace is cited, so nothing shows which share of production time the suite "
    f"covers: {TRACE_HOWTO}."
)
NO_USABLE_TRACE = f"No cited file is a usable trace summary (see above): {TRACE_HOWTO}."
FIT_MALFORMED = fitmatrix.MALFORMED
MAX_UNMAPPED_NAMES = 5  # the unmapped row names its largest operators; the summary lists more
DIMS_MAX_CHARS = 160  # a shape of hundreds of arguments is cut, not pasted whole into a cell
MAX_QUALITY_EXAMPLES = 3  # trace.MAX_EXAMPLES: a summary keeps no more per rule


def _num(x: object) -> float | int | None:
    """A finite number read from a file, else None (JSON from disk may hold NaN or a string)."""
    import math

    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return x if math.isfinite(x) else None


def _fit_params(report: Report) -> tuple[float | None, float, list[str]]:
    """(min_coverage, shape_range_factor, notes) of the rubric's production-shape item."""
    item = next((i for i in report.rubric.items if i.check == FIT_CHECK), None)
    if item is None:
        why = (
            f"the rubric has no `{FIT_CHECK}` item: shapes are matched within "
            f"{DEFAULT_SHAPE_RANGE_FACTOR:g}x and no threshold is drawn"
        )
        return None, DEFAULT_SHAPE_RANGE_FACTOR, [why]
    return (
        float(item.params.get("min_coverage", DEFAULT_MIN_COVERAGE)),
        float(item.params.get("shape_range_factor", DEFAULT_SHAPE_RANGE_FACTOR)),
        [],
    )


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
                    "count": _num(q.get("count")),
                    "description": str(q.get("description", "")),
                    "examples": [str(e) for e in examples[:MAX_QUALITY_EXAMPLES]],
                }
            )
    devices = t.get("devices") if isinstance(t.get("devices"), list) else []
    return {
        "summary": source,
        "path": str(t.get("path", "?")),
        "sha256": str(t.get("sha256") or ""),
        "size_bytes": _num(t.get("size_bytes")),
        "gzip": bool(t.get("gzip")),
        "rank": _num(t.get("rank")),
        "world_size": _num(t.get("world_size")),
        "rank_source": str(t.get("rank_source") or ""),
        "devices": [str(d) for d in devices],
        "time_basis": str(t.get("time_basis") or ""),
        "window_s": _num(t.get("window_s")),
        "events": _num(events.get("total")),
        "record_shapes": bool(t.get("record_shapes")),
        "clock": {
            "resolution": str(clock.get("resolution") or "not recorded"),
            "ts_unit": str(clock.get("ts_unit") or ""),
            "display_time_unit": str(clock.get("display_time_unit") or ""),
            "base_time_ns": _num(clock.get("base_time_ns")),
        },
        "quality": quality,
    }


def _usable_traces(report: Report, factor: float) -> tuple[list[dict], list[dict], list[str]]:
    """(traces the fit can use, their provenance, notes on every file or trace left out)."""
    from reviewkit.evidence import files as evidence

    docs, notes = _loaded(report, evidence.TRACE, "production_traces")
    traces, provenance = [], []
    for source, doc in docs:
        listed = doc.get("traces")
        if not isinstance(listed, list) or not listed:
            notes.append(f"{source}: not used: no traces in the summary")
            continue
        for k, t in enumerate(listed):
            name = str(t.get("path", f"trace {k + 1}")) if isinstance(t, dict) else f"trace {k + 1}"
            try:  # scored alone against an empty suite: the trace's own fields must add up
                alone = fitmatrix.build([t], {"workloads": []}, factor).to_json()
                json.dumps(alone, allow_nan=False)
            except FIT_MALFORMED as exc:
                notes.append(f"{source}: {name}: not a usable trace ({type(exc).__name__})")
                continue
            if t.get("sha256") and any(t["sha256"] == u.get("sha256") for u in traces):
                notes.append(f"{source}: {name}: cited again (same sha256): counted once")
                continue
            traces.append(t)
            provenance.append(_trace_provenance(source, t))
    return traces, provenance, notes


def _unmapped_note(traces: list[dict]) -> str:
    """The largest operators no layer-map rule names, with their share of all production time."""
    total = sum(t["op_mix"]["time_s"] for t in traces) or 1.0
    by_name: dict[str, float] = {}
    for t in traces:
        for u in (t["op_mix"].get("unmapped") or {}).get("top") or []:
            if isinstance(u, dict) and _num(u.get("time_s")) is not None:
                name = str(u.get("name"))
                by_name[name] = by_name.get(name, 0.0) + u["time_s"]
    top = sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_UNMAPPED_NAMES]
    listed = ", ".join(f"{n} ({100 * s / total:.1f}%)" for n, s in top)
    return "no layer-map rule names these operators" + (
        f"; the largest: {listed}" if listed else ""
    )


def _fit_candidate(fit, label: str, run: str, min_coverage: float | None, unmapped: str) -> dict:
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
        dims = json.dumps(o.dims)
        if len(dims) > DIMS_MAX_CHARS:
            dims = dims[: DIMS_MAX_CHARS - 1] + "…"
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
    verdict = "" if min_coverage is None else (PASS if fit.score >= min_coverage else FAIL)
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


def _fit_input(report: Report, charts) -> tuple[dict, dict]:
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
    for i, (path, doc) in enumerate(report.review_candidates):
        label, run = _run_label(i, n), report.review.relative(path)
        try:
            fit = fitmatrix.build(traces, doc, factor)
            # This suite lists other shapes outside it than the empty-suite check did: the
            # model must still serialise.
            key = json.dumps(fit.to_json(), sort_keys=True, allow_nan=False)
        except FIT_MALFORMED as exc:
            section["notes"].append(f"{label}: not scored ({type(exc).__name__})")
            continue
        c = _fit_candidate(fit, label, run, min_coverage, unmapped)
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


def _generated() -> str | None:
    """Wall-clock time only when SOURCE_DATE_EPOCH asks for it: same inputs, same bytes."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch:
        return None
    try:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(int(epoch)))
    except ValueError as exc:
        raise InputError(f"SOURCE_DATE_EPOCH={epoch!r}: expected an integer") from exc


# --- rendering ---------------------------------------------------------------------------------


@functools.cache
def _environment_jinja():
    """One environment per process: it compiles each template once (~75 ms a page)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["pct"] = lambda x, d=1: "—" if x is None else f"{100 * x:.{d}f}%"
    env.filters["num"] = lambda x, d=3: "—" if x is None else f"{x:.{d}g}"
    env.filters["ms"] = lambda x: "—" if x is None else (f"{x:.3g}" if x < 1000 else f"{x:,.0f}")
    env.filters["ratio"] = lambda x: "—" if x is None else f"{x:.3f}"
    env.filters["ci"] = lambda ci: "" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
    return env


def render_html(
    model: dict,
    svgs: dict[str, str],
    mode: str,
    asset_base: str = "assets/",
    nav: dict | None = None,
) -> str:
    """mode "screen": interactive charts with the SVG fallback; "print": SVG images for PDF."""
    from markupsafe import Markup

    env = _environment_jinja()
    template = env.get_template("packet.html.j2")
    # The specs embedded in the page drop "$schema": a URL off the machine that nothing needs
    # (packet.js tells vega-embed the mode); the files under assets/charts keep it.
    specs = {
        k: {f: v for f, v in spec.items() if f != "$schema"} for k, spec in model["charts"].items()
    }
    return template.render(
        m=model,
        mode=mode,
        specs=specs,
        svgs={k: Markup(v) for k, v in svgs.items()},
        asset_base=asset_base,
        nav=nav or {},
    )


@dataclass(frozen=True)
class PacketResult:
    out_dir: Path
    html: Path
    json: Path
    pdf: Path | None
    timings_s: dict

    def to_json(self) -> dict:
        return {
            "out": str(self.out_dir),
            "html": str(self.html),
            "json": str(self.json),
            "pdf": str(self.pdf) if self.pdf else None,
            "timings_s": self.timings_s,
        }


def _write_pdf(html_text: str, base: Path, report: Report, target: Path) -> None:
    import weasyprint
    from weasyprint.urls import URLFetcher

    fetcher = URLFetcher(allowed_protocols={"file", "data"}, fail_on_errors=True)
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                records.append(record)

    handler = Collect()
    logger = logging.getLogger("weasyprint")
    logger.addHandler(handler)
    try:
        document = weasyprint.HTML(string=html_text, base_url=str(base) + "/", url_fetcher=fetcher)
        r = report.review
        attachments = [
            weasyprint.Attachment(
                filename=str(r.path), name="review.toml", description="the review file"
            )
        ]
        attachments += [
            weasyprint.Attachment(
                filename=str(_run_file(p)),
                name=f"{label.replace(' ', '-')}-run.json",
                description=f"{label} run bundle ({r.relative(p)})",
            )
            for label, p in [("baseline", r.baseline)]
            + [(_run_label(i, len(r.candidates)), p) for i, p in enumerate(r.candidates)]
        ]
        document.write_pdf(
            target,
            attachments=attachments,
            pdf_identifier=b"reviewkit-packet",
            uncompressed_pdf=False,
        )
    except BaseException as exc:  # WeasyPrint's fatal fetch error is a BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise PacketError(f"PDF rendering failed: {type(exc).__name__}: {exc}") from exc
    finally:
        logger.removeHandler(handler)
    if records:
        raise PacketError(
            f"PDF rendering reported {len(records)} problem(s); first: {records[0].getMessage()}"
        )


def write_shared_assets(assets: Path) -> None:
    """Stylesheets, the page script and the Vega bundle: one copy per packet or per site."""
    from reviewkit.render import charts

    assets.mkdir(parents=True, exist_ok=True)
    for name in STYLESHEETS + SCRIPTS:
        shutil.copyfile(TEMPLATES / name, assets / name)
    (assets / VEGA_BUNDLE).write_text(charts.javascript_bundle(), encoding="utf-8")


def render_into(
    report: Report,
    folder: Path,
    pdf: bool = True,
    asset_base: str = "assets/",
    nav: dict | None = None,
    progress: Progress | None = None,
) -> tuple[dict, dict]:
    """Render a checked review's packet into an existing folder; return (model, timings).

    Shared assets are not written here (see write_shared_assets): a site keeps one copy.
    """
    from reviewkit.render import charts

    say = progress or (lambda _msg: None)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    say("building the packet model")
    model = build_model(report)
    timings["model_s"] = time.perf_counter() - t
    t = time.perf_counter()
    say("converting charts to SVG")
    svgs = {name: charts.to_svg(spec) for name, spec in model["charts"].items()}
    timings["charts_s"] = time.perf_counter() - t
    t = time.perf_counter()
    say("rendering HTML")
    screen = render_html(model, svgs, "screen", asset_base, nav)
    printed = render_html(model, svgs, "print", asset_base, nav) if pdf else None
    timings["html_s"] = time.perf_counter() - t
    chart_dir = folder / "assets" / "charts"
    chart_dir.mkdir(parents=True, exist_ok=True)
    for name, spec in model["charts"].items():
        (chart_dir / f"{name}.vl.json").write_text(
            json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
        (chart_dir / f"{name}.svg").write_text(svgs[name], encoding="utf-8")
    (folder / "packet.html").write_text(screen, encoding="utf-8")
    (folder / "packet.json").write_text(
        json.dumps(model, indent=1, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8"
    )
    if printed is not None:
        t = time.perf_counter()
        say("rendering PDF")
        _write_pdf(printed, folder, report, folder / "packet.pdf")
        timings["pdf_s"] = time.perf_counter() - t
    return model, timings


def write_packet(
    review_path: Path | str,
    out_dir: Path | str,
    rubric: Path | str | None = None,
    allow_outside: bool = False,
    pdf: bool = True,
    progress: Progress | None = None,
) -> PacketResult:
    """Gather everything in memory, write into a temporary folder beside DIR, then swap it in."""
    say = progress or (lambda _msg: None)
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    say("checking the review")
    report = run_check(review_path, rubric, allow_outside=allow_outside)
    review_dir = report.review.folder
    if out_dir.resolve() == review_dir or review_dir.is_relative_to(out_dir.resolve()):
        raise InputError(f"--out {out_dir}: would replace the review's own folder; pick another")
    check_s = time.perf_counter() - t0
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        write_shared_assets(tmp / "assets")
        _, timings = render_into(report, tmp, pdf=pdf, progress=say)
        os.chmod(tmp, 0o755)
        _swap_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    timings = {"check_s": check_s, **timings, "total_s": time.perf_counter() - t0}
    return PacketResult(
        out_dir,
        out_dir / "packet.html",
        out_dir / "packet.json",
        out_dir / "packet.pdf" if pdf else None,
        {k: round(v, 3) for k, v in timings.items()},
    )


def _swap_into_place(tmp: Path, out_dir: Path) -> None:
    """Replace DIR by the new folder; the old one is removed only once the new one is in place."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: exists and is not a folder; pick another path")
    if not out_dir.exists():
        os.replace(tmp, out_dir)
        return
    old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
    os.replace(out_dir, old)
    try:
        os.replace(tmp, out_dir)
    except BaseException:
        os.replace(old, out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)
