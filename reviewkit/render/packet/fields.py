"""The packet sections' fields, one builder a section, from the inputs they share (`Inputs`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reviewkit import __version__
from reviewkit.analysis.knobs import diff_rows, shown_value
from reviewkit.analysis.platforms import MEASURED, PlatformMatrix, build_matrix
from reviewkit.bundle.profile import settings_text
from reviewkit.common import format as fmt
from reviewkit.common.hashing import sha256_file
from reviewkit.render.packet.bottlenecks import BOTTLENECK_FIELDS, class_text, layer_view
from reviewkit.render.packet.fit import fit_input
from reviewkit.render.packet.labels import (
    PACKET_SCHEMA_VERSION,
    PDF_MAX_WORKLOAD_ROWS,
    generated_stamp,
    ms,
    run_file,
    run_label,
)
from reviewkit.render.packet.markdown import markdown_html
from reviewkit.render.packet.soak import soak_input, soak_notes
from reviewkit.review.checks import STATUS_ORDER
from reviewkit.review.gate import Report

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun


def _workload_rows(baseline: AnalysedRun, cand: AnalysedRun, comparison) -> list[dict]:
    rows = []
    for c in comparison.workloads:
        cw = cand.workload_by_id.get(c.candidate_id)
        bw = baseline.workload_by_id.get(c.baseline_id)
        bs = bw.stats.to_json() if bw and bw.stats else {}
        cs = cw.stats.to_json() if cw and cw.stats else {}
        # base -> cand shows what each ratio divides (means over rounds of each round's
        # quantile); a workload not compared shows its runs' own quantiles
        pts = c.points_s or {}
        for q in ("p50", "p95", "p99"):
            if q in pts:
                bs, cs = {**bs, f"{q}_s": pts[q][0]}, {**cs, f"{q}_s": pts[q][1]}
        rows.append(
            {
                "median_estimator": c.median_estimator,
                "key": c.key,
                "layer_type": c.layer_type,
                "candidate_id": c.candidate_id,
                "dtype": c.candidate_id.rsplit(".", 1)[-1],
                "baseline_id": c.baseline_id,
                "baseline_p50_ms": ms(bs.get("p50_s")),
                "candidate_p50_ms": ms(cs.get("p50_s")),
                "baseline_p95_ms": ms(bs.get("p95_s")),
                "candidate_p95_ms": ms(cs.get("p95_s")),
                "baseline_p99_ms": ms(bs.get("p99_s")),
                "candidate_p99_ms": ms(cs.get("p99_s")),
                "median_ratio": c.median_ratio,
                "median_ratio_ci": c.median_ratio_ci,
                "p99_ratio": c.p99_ratio,
                "p99_ratio_ci": c.p99_ratio_ci,
                "verdict": c.verdict,
                "p99_verdict": c.p99_verdict,
                "p99_regression": c.p99_regression,
                "reason": c.reason,
                "baseline_mfu": c.mfu_baseline,
                "candidate_mfu": c.mfu_candidate,
                "memory_stall_delta": c.memory_stall_delta,
                "baseline_bottleneck": c.bottleneck_baseline,
                "candidate_bottleneck": c.bottleneck_candidate,
                "flags": list(cw.flags) if cw else [],
                "reproduce": cw.reproduce if cw else "",
            }
        )
    return rows


def _layer_rows(label: str, run: AnalysedRun) -> list[dict]:
    by_dtype = run.layer_types_by_dtype
    rows = []
    for dtype in sorted(by_dtype):
        for layer_type, a in by_dtype[dtype].items():
            rows.append({"run": label, "dtype": dtype, "layer_type": layer_type, **a.to_json()})
    return rows


def _headline(report: Report) -> dict:
    """The one primary metric trend as the gate judged it (review/primary.py): the workload
    the primary-metric answer names, at the quantile it names, else the end-to-end model, else
    the layer type with the most workloads."""
    cand = report.review.candidates[0]
    answer = report.review.answers.get("primary-metric")
    out = {"answer": answer.answer if answer else "", "candidate_run": report.review.relative(cand)}
    p = report.primary
    if p is not None:
        p99 = next((w.p99_ratio for w in report.comparisons[0].workloads if w.key == p.key),
                   None) if p.kind == "workload" and p.quantile != "p99" else None  # fmt: skip
        w = next((w for w in report.comparisons[0].workloads if w.key == p.key), None)
        point = (w.points_s or {}).get(p.quantile) if w and p.kind == "workload" else None
        # the values the ratio divides, and how it was estimated, shown beside it
        out["divides"] = {
            "baseline_ms": point[0] * 1e3, "candidate_ms": point[1] * 1e3,
            "estimator": w.median_estimator if p.quantile == "p50" else
            f"mean over rounds of each round's {p.quantile}",
        } if point else None  # fmt: skip
        out.update(kind=p.kind, label=p.label, ratio=p.ratio, ci=p.ci, verdict=p.verdict,
                   p99_ratio=p99, settles=p.settles, needs=p.needs,
                   hypothesis=p.hypothesis)  # fmt: skip
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
        for w in cand.workloads:
            key = w.id
            if key in seen or not any(fnmatch.fnmatchcase(key, g) for g in globs):
                continue
            seen.add(key)
            out.append(
                {
                    "run": report.review.relative(path),
                    "workload": key,
                    "suite_hash": cand.suite.get("hash"),
                    "knobs": changed,
                    "reproduce": w.reproduce,
                }
            )
    return out


def _artifacts(report: Report) -> list[dict]:
    r = report.review
    files = [("review file", r.path), ("baseline run", run_file(r.baseline))]
    files += [
        (f"{run_label(i, len(r.candidates))} run", run_file(p)) for i, p in enumerate(r.candidates)
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


def _profile_fact(profile: dict) -> str:
    """Which ceilings the run divides by: the profile's hash and where it came from."""
    if not profile.get("hash"):
        return profile.get("reason") or "ceilings calibrated inside the run"
    where = {
        "cached": "this device's cached profile",
        "calibrated": "calibrated for this run and cached",
        "pinned": "pinned with --device-profile",
        "review": "the review's runs.device_profile",
    }.get(str(profile.get("source")), str(profile.get("source")))
    at = settings_text(profile.get("settings"))
    at = f", at {at}" if at else ""
    return f"{profile['hash']} ({where}, {profile.get('calibration')} calibration{at})"


def _environment(label: str, run: AnalysedRun) -> dict:
    env, knobs = run.environment, run.knobs
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
    facts = [(k, str(env[k])) for k in keys if env.get(k) not in (None, "")]
    fingerprint = run.fingerprint
    if fingerprint.get("label"):
        facts.append(("device fingerprint", f"{fingerprint['label']} ({fingerprint.get('hash')})"))
    profile = (run.ceilings or {}).get("profile") or {}
    if profile:
        facts.append(("device profile", _profile_fact(profile)))
    conditions = profile.get("conditions") or {}
    if conditions.get("available") and conditions.get("power_limit_w"):
        # the board's enforced power limit: the power budget its ceilings and energy were under
        facts.append(("power budget", f"{conditions['power_limit_w']:.0f} W enforced power "
                                      "limit (NVML), the ceilings calibrated under it"))
    elif conditions.get("reason"):
        facts.append(("power budget", f"not available: {conditions['reason']}"))
    return {
        "run": label,
        "facts": facts,
        "knobs": [(k, fmt.setting(v)) for k, v in knobs.items()],
        "suite": run.suite,
        "profile": run.suite_profile,
        "complete": run.complete,
        "command": run.command,
    }


def _claim_dtypes(report: Report) -> list[str]:
    """The dtypes of the claim's workload on both sides (one when the dtype is not the knob)."""
    p = report.primary
    if p is None or not p.candidate_id:
        return []
    return sorted({p.dtype, p.baseline_id.rsplit(".", 1)[-1]})


def environment_diff(environments: list[dict]) -> dict:
    """The runs' facts and knobs as a diff: the entries that differ between runs (each run's
    value, — where a run lacks it), and those every run shares, said once."""
    kinds = [("fact", "facts"), ("knob", "knobs")]
    differs, same = [], []
    for kind, field in kinds:
        names = list(dict.fromkeys(k for e in environments for k, _ in e[field]))
        for name in names:
            values = [dict(e[field]).get(name, fmt.MISSING) for e in environments]
            if len(set(values)) > 1:
                differs.append({"kind": kind, "name": name, "values": values})
            else:
                same.append({"kind": kind, "name": name, "value": values[0]})
    return {"runs": [e["run"] for e in environments], "differs": differs, "same": same}


@dataclass(frozen=True)
class Inputs:
    """What the sections read from the report, each value worked out once on first use: the
    runs, the findings, the rows two sections share, and the evidence a section's fields and
    its charts both show (read once, not once for each)."""

    report: Report

    @functools.cached_property
    def runs(self) -> list[tuple[str, AnalysedRun]]:
        n = len(self.report.review.candidates)
        return [("baseline", self.report.baseline)] + [
            (run_label(i, n), d) for i, (_, d) in enumerate(self.report.review_candidates)
        ]

    @functools.cached_property
    def findings(self) -> list[dict]:
        return [f.to_json() for f in self.report.findings]

    @functools.cached_property
    def environments(self) -> list[dict]:
        return [_environment(label, run) for label, run in self.runs]

    @functools.cached_property
    def layer_rows(self) -> list[dict]:
        return [row for label, run in self.runs for row in _layer_rows(label, run)]

    @functools.cached_property
    def workload_rows(self) -> list[dict]:
        report, n = self.report, len(self.report.review.candidates)
        return [
            {"candidate": run_label(i, n),
             "rows": _workload_rows(report.baseline, d, report.comparisons[i])}
            for i, (_, d) in enumerate(report.review_candidates)
        ]  # fmt: skip

    @functools.cached_property
    def soak(self) -> tuple[list[dict], list[str]]:
        return soak_input(self.report)  # the stability chart and the notes beside it

    @functools.cached_property
    def production_fit(self) -> tuple[dict, dict]:
        return fit_input(self.report)  # the section's fields and its charts

    @functools.cached_property
    def matrix(self) -> PlatformMatrix:
        return build_matrix(self.runs, self.report.review.sla_targets)

    @functools.cached_property
    def platforms(self) -> dict:
        return _platforms_model(self.matrix)


def header_fields(p: Inputs) -> dict:
    """The packet's own fields: what it is, the review's title, owner and decision, and the
    gate's verdict (the running header, the brief and several sections show them)."""
    report, r = p.report, p.report.review
    return {
        "schema_version": PACKET_SCHEMA_VERSION,
        "kind": "reviewkit.packet",
        "generator": f"reviewkit {__version__}",
        "generated": generated_stamp(),
        "title": r.title,
        "summary_html": markdown_html(r.summary),
        "decision": {k: str(v) for k, v in sorted(r.decision.items())},
        "decision_reads": report.decision_reads,
        "owner": {"name": r.owner_name, "team": r.owner_team},
        "reviewers": list(r.reviewers),
        "rubric": {"name": report.rubric.name, "version": report.rubric.version},
        "gate": {
            "verdict": report.verdict,
            "blocking": [f.item.id for f in report.findings if f.blocks],
            "red_flags": len(report.red_flags),
            "counts": {
                s: sum(f["status"] == s for f in p.findings)
                for s in sorted(STATUS_ORDER, key=STATUS_ORDER.get)
            },
        },
        "headline": _headline(report),
        "runs": {
            "baseline": r.relative(r.baseline),
            "candidates": [r.relative(c) for c in r.candidates],
        },
        "warnings": list(report.warnings),
    }


def claim_fields(p: Inputs) -> dict:
    return {"slices": _slices(p.report)}


def knob_fields(p: Inputs) -> dict:
    n = len(p.report.review.candidates)
    return {
        "knob_diffs": [
            {
                "candidate": run_label(i, n),
                # every knob change and environment difference, with what the review reads it as
                # (the device change, a knob, implied by the device, a confounder)
                "changes": [
                    {
                        "knob": row.what,
                        "baseline": shown_value(row.baseline),
                        "candidate": shown_value(row.candidate),
                        "role": row.role,
                        "reads_as": row.reads_as,
                    }
                    for row in diff_rows(
                        c.knob_changes, c.knob_reading(), c.confounders + c.device_environment
                    )
                ],
                "confounders": [e.to_json() for e in c.confounders],
                "paired_by": c.paired_by,
                "warnings": list(c.warnings),
                "basis": c.basis(),
                # each side's run-to-run figure and where it came from (null: an A/B's sides)
                "run_to_run": c.run_to_run.to_json() if c.run_to_run else None,
            }
            for i, c in enumerate(p.report.comparisons)
        ]
    }


def bottleneck_fields(p: Inputs) -> dict:
    report, n = p.report, len(p.report.review.candidates)
    bottlenecks = []
    for i, comp in enumerate(report.comparisons):
        cand_layers = report.review_candidates[i][1].layer_types
        for layer in comp.layer_types:
            view = layer_view(cand_layers.get(layer.layer_type), layer)
            bottlenecks.append(
                {
                    "candidate": run_label(i, n),
                    "layer_type": layer.layer_type,
                    "baseline": layer.bottleneck_baseline,
                    "candidate_class": layer.bottleneck_candidate,
                    "baseline_class_text": class_text(layer.bottleneck_baseline),
                    "candidate_class_text": class_text(layer.bottleneck_candidate),
                    # the candidate's decomposition: share of roof, overhead, inefficiency, lever
                    **{k: view[k] for k in BOTTLENECK_FIELDS},
                    "mfu_baseline": layer.mfu_baseline,
                    "mfu_candidate": layer.mfu_candidate,
                    "stall_baseline": layer.memory_stall_baseline,
                    "stall_candidate": layer.memory_stall_candidate,
                    "time_ratio": layer.time_ratio,
                    "time_ratio_ci": layer.time_ratio_ci,
                    "verdict": layer.verdict,
                }
            )
    finding = next((f for f in p.findings if f["check"] == "bottleneck-per-layer"), None)
    return {
        "bottlenecks": bottlenecks,
        "below_roof_share": report.below_roof_share,
        "bottleneck_evidence": finding["evidence"] if finding else [],
    }


def layer_fields(p: Inputs) -> dict:
    return {
        "layers": p.layer_rows,
        # the claim's dtypes (the candidate's and the baseline's side of its workload): printed
        # tables keep to them when the runs hold more
        "claim_dtypes": _claim_dtypes(p.report),
        # a compute ceiling a workload beat, raised to its rate (analysis/ceilings.py)
        "raised_ceilings": [
            {"run": label, "dtype": dtype, "peak_gflops_per_s": e["peak"] / 1e9,
             "calibrated_gflops_per_s": e["calibrated_peak"] / 1e9, "raised_by": e["raised_by"]}
            for label, run in p.runs
            for dtype, e in ((run.ceilings or {}).get("compute") or {}).items()
            if isinstance(e, dict) and e.get("raised_by")
        ],
    }  # fmt: skip


def latency_fields(p: Inputs) -> dict:
    r = p.report.review
    return {
        "sla": {
            "load": r.sla_load,
            "targets": [
                {
                    "workload": t.workload,
                    "p99_ms": ms(t.p99_s),
                    "min_throughput_per_s": t.min_throughput_per_s,
                    "note": t.note,
                }
                for t in r.sla_targets
            ],
        }
    }


def workload_fields(p: Inputs) -> dict:
    return {"workloads": p.workload_rows, "pdf_max_workload_rows": PDF_MAX_WORKLOAD_ROWS}


def risk_fields(p: Inputs) -> dict:
    return {
        "risks": [
            {
                "description": k.description,
                "level": k.level,
                "likelihood": k.likelihood,
                "owner": k.owner,
                "mitigation": k.mitigation,
            }
            for k in p.report.review.risks
        ]
    }


def rollback_fields(p: Inputs) -> dict:
    rollback = p.report.review.rollback
    return {
        "rollback": {
            k: rollback.get(k, "") for k in ("boundary", "trigger", "procedure", "fallback")
        }
    }


def question_fields(p: Inputs) -> dict:
    answers = p.report.review.answers
    manual = [f for f in p.findings if f["check"] == "manual"]
    questions = []
    for f in sorted(manual, key=lambda f: f["id"] != "senior-question"):
        a = answers.get(f["id"])
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
    return {"questions": questions}


def environment_fields(p: Inputs) -> dict:
    return {"environment": p.environments, "environment_diff": environment_diff(p.environments)}


def red_flag_fields(p: Inputs) -> dict:
    return {"red_flags": [f.to_json() for f in p.report.red_flags]}


def finding_fields(p: Inputs) -> dict:
    return {"findings": p.findings}


def disproof_fields(p: Inputs) -> dict:
    return {"disproof": list(p.report.disproof)}


def platform_fields(p: Inputs) -> dict:
    return {"platforms": p.platforms}


def production_fit_fields(p: Inputs) -> dict:
    return {"production_fit": p.production_fit[0]}


def evidence_fields(p: Inputs) -> dict:
    return {"soak_notes": soak_notes(p.soak[0])}


def artifact_fields(p: Inputs) -> dict:
    return {"artifacts": _artifacts(p.report)}


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
                "p99_ms": ms(c.p99_s),
                "sla_p99_ms": ms(c.sla_p99_s),
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
