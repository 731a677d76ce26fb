"""Checks on production-like evidence: long-window stability, SLA under load, tail latency."""

from __future__ import annotations

from pathlib import Path

from reviewkit.analysis.compare import slice_key
from reviewkit.analysis.sla import calls_per_s, judge, matching_targets
from reviewkit.common.format import change as fmt_change
from reviewkit.evidence.drift import DRIFT, STABLE, THROTTLED
from reviewkit.evidence.drift import NOT_AVAILABLE as THROTTLING_NOT_AVAILABLE
from reviewkit.evidence.sweep import SweptWorkload, best_under_sla
from reviewkit.review.checks.registry import (
    BOOLEAN,
    NUMBER,
    CheckResult,
    Context,
    Evidence,
    check,
    workload_evidence,
)
from reviewkit.review.cited import key_of_id
from reviewkit.review.status import FAIL, MISSING, PASS, WARN


def _candidate_ids(ctx: Context) -> set[str]:
    return {w.id for _, cand in ctx.candidates for w in cand.workloads}


@check(
    "long-window-stability",
    params={"min_window_s": NUMBER, "require_throttling_evidence": BOOLEAN},
)
def long_window_stability(ctx: Context) -> CheckResult:
    files = ctx.review.evidence.get("long_window", ())
    if not files:
        return CheckResult(
            FAIL,
            "no long-window (thermal / soak) stability evidence for the "
            "candidate under [evidence].long_window",
        )
    min_window_s = float(ctx.params["min_window_s"])
    need_sensors = bool(ctx.params["require_throttling_evidence"])
    evidence = [ctx.artifact("long-window evidence", p) for p in files]
    soaks, unusable = ctx.cited.soaks.records, ctx.cited.soaks.not_used
    not_used = [f"{ctx.review.relative(path)}: {why}" for path, why in unusable]
    if not soaks:
        return CheckResult(
            WARN,
            "long-window evidence is cited but is not a `reviewkit soak` result, so its "
            f"drift and throttling cannot be checked ({'; '.join(not_used)})",
            tuple(evidence),
        )
    failures, gaps = [], []
    if not_used:
        gaps.append(f"not used: {'; '.join(not_used)}")
    candidate_ids = _candidate_ids(ctx)
    for soak in soaks:
        wid, window, change = soak.workload_id, soak.window_s, soak.trend.get("relative_change")
        evidence.append(
            Evidence(
                "number",
                f"soak of {wid} over {window:.3g} s",
                value=f"{soak.verdict}; throughput trend "
                + (fmt_change(change) if change is not None else "not computed")
                + f"; throttling: {soak.throttling_status}",
                reproduce=soak.reproduce,
            )
        )
        if soak.verdict == DRIFT:
            failures.append(f"{wid} drifts: {'; '.join(soak.reasons)}")
        elif soak.verdict != STABLE:
            gaps.append(f"{wid}: {soak.verdict}: {'; '.join(soak.reasons)}")
        if soak.throttling_status == THROTTLED:
            failures.append(f"{wid} throttled: {soak.throttling_reason}")
        elif soak.throttling_status == THROTTLING_NOT_AVAILABLE and need_sensors:
            gaps.append(
                f"throttling not judged (clocks and temperatures not available: "
                f"{soak.throttling_reason})"
            )
        if not soak.complete:
            gaps.append(f"the soak of {wid} was interrupted after {window:.3g} s")
        if window < min_window_s:
            gaps.append(
                f"the soak of {wid} lasted {window:.3g} s, shorter than the rubric's "
                f"{min_window_s:g} s (run `reviewkit soak --profile quick` or longer)"
            )
        if wid not in candidate_ids:
            gaps.append(f"{wid} is not a workload of the candidate run(s)")
    if failures:
        return CheckResult(FAIL, "; ".join(failures), tuple(evidence))
    if gaps:
        return CheckResult(WARN, "throughput is stable, but " + "; ".join(gaps), tuple(evidence))
    return CheckResult(
        PASS,
        f"stable over {min(soak.window_s for soak in soaks):.3g} s "
        "or more: no throughput drift beyond the threshold, no throttling",
        tuple(evidence),
    )


@check("tail-latency")
def tail_latency(ctx: Context) -> CheckResult:
    evidence, bad, tests = [], [], 0
    for i, comp in enumerate(ctx.comparisons):
        tests += comp.p99_comparisons
        for w in comp.workloads:
            if w.mean_ratio is None or w.mean_ratio >= 1 or not w.p99_regression:
                continue
            bad.append(w.key)
            evidence.append(
                workload_evidence(
                    w,
                    ctx.candidates[i][1],
                    f"candidate {i + 1}: mean x{w.mean_ratio:.3f} but "
                    f"p95 x{w.p95_ratio:.3f}, p99 x{w.p99_ratio:.3f} "
                    f"(95% CI of p99 ratio {w.p99_ratio_ci[0]:.3f}-{w.p99_ratio_ci[1]:.3f}, "
                    f"beyond the {w.margin:.0%} margin)",
                )
            )
    fdr = ctx.comparisons[0].margins.fdr if ctx.comparisons else None
    control = (f" (p99 regressions at a {fdr:.0%} false discovery rate over {tests} "
               "comparisons)") if fdr is not None else ""  # fmt: skip
    if bad:
        return CheckResult(
            FAIL,
            f"the mean improves while p99 regresses beyond the margin on "
            f"{len(bad)} workload(s): {', '.join(bad[:5])}{control}",
            tuple(evidence),
        )
    return CheckResult(
        PASS, f"no workload trades a better mean for a p99 regression beyond the margin{control}"
    )


def _swept_workloads(ctx: Context) -> tuple[list[tuple[Path, SweptWorkload]], str]:
    """(file, workload) for every measured workload in the cited sweeps; why others are not."""
    sweeps, unusable = ctx.cited.sweeps.records, ctx.cited.sweeps.not_used
    rows = [(sweep.path, w) for sweep in sweeps for w in sweep.workloads if w.measured]
    return rows, "; ".join(f"{ctx.review.relative(path)}: {why}" for path, why in unusable)


def _sla_phrase(t, offered: float | None, achieved: float | None) -> str:
    if t.p99_s is None:
        return f"highest valid load {achieved:.3g} queries/s" if achieved else "no valid level"
    target = f"p99 <= {t.p99_s * 1e3:.3g} ms"
    if achieved is None:
        return f"{target} at no valid load level"
    if t.scenario != "server":
        return f"{target} at {achieved:.3g} queries/s"
    return f"{target} up to {offered:.3g} queries/s offered ({achieved:.3g} achieved)"


def _under_load(ctx: Context, path: Path, w: SweptWorkload, t) -> tuple[bool, Evidence]:
    """Judge an SLA target on a sweep in its scenario; for server, the highest valid load
    whose p99 meets it (LoadGen's peak-performance answer)."""
    from reviewkit.evidence import loadgen

    if t.scenario == loadgen.SERVER:
        levels = w.server
    else:  # one back-to-back level: it meets the target or not
        level = w.offline if t.scenario == loadgen.OFFLINE else w.single_stream
        levels = (level,) if level is not None else ()
    if t.scenario == loadgen.SERVER and t.p99_s is not None:
        # p99 at the SLA's load (never interpolated), else the highest load meeting it, else
        # missed at every load: one judgement, which the brief shows as it is
        from reviewkit.evidence.sla_load import judge_under_load

        j = judge_under_load(levels, w.single_stream, t.p99_s, t.min_throughput_per_s)
        return j.met, Evidence(
            "artifact", f"on the sweep, server: {j.sentence()}", value=w.id,
            path=ctx.review.relative(path), sha256=ctx.sha256(path), reproduce=w.reproduce,
        )  # fmt: skip
    if t.p99_s is not None:
        best = best_under_sla(levels, t.p99_s)
        offered, achieved = best["max_rate_per_s"], best["achieved_rate_per_s"]
    else:
        top = max((lv for lv in levels if lv.valid),
                  key=lambda lv: lv.achieved_rate_per_s, default=None)  # fmt: skip
        offered = achieved = top.achieved_rate_per_s if top else None
    ok = achieved is not None and (
        t.min_throughput_per_s is None or achieved >= t.min_throughput_per_s
    )
    invalid = sum(1 for lv in levels if not lv.valid)
    parts = [f"{t.scenario}: {_sla_phrase(t, offered, achieved)}"]
    if t.min_throughput_per_s is not None:
        parts.append(f"target >= {t.min_throughput_per_s:.3g} queries/s")
    single = w.single_stream
    if single is not None and single.p99_s is not None and t.scenario != loadgen.SINGLE_STREAM:
        # one query at a time: what the SLA costs without queueing, for contrast
        parts.append(f"single-stream p99 {single.p99_s * 1e3:.3g} ms")
    if w.knee.get("found"):
        parts.append(f"knee at {w.knee['rate_per_s']:.3g} queries/s")
    if invalid:
        parts.append(f"{invalid} invalid level(s) not counted")
    return ok, Evidence(
        "artifact",
        f"on the sweep: {'; '.join(parts)}",
        value=w.id,
        path=ctx.review.relative(path),
        sha256=ctx.sha256(path),
        reproduce=w.reproduce,
    )


@check("sla-kpi")
def sla_kpi(ctx: Context) -> CheckResult:
    targets = ctx.review.sla_targets
    if not targets:
        return CheckResult(MISSING, "no [sla] targets: the KPI is not tied to a product SLA")
    evidence, failures, unmatched = [], [], []
    swept, not_used = _swept_workloads(ctx)
    candidate_ids = _candidate_ids(ctx)
    by_sweep = 0
    for t in targets:
        loaded = [
            (p, w)
            for p, w in swept
            if w.id in candidate_ids and matching_targets([t], w.id, key_of_id(w.id))
        ]
        if loaded:
            by_sweep += 1
            for path, w in loaded:
                ok, ev = _under_load(ctx, path, w, t)
                evidence.append(ev)
                if not ok:
                    failures.append(f"{w.id} {ev.label.removeprefix('on the sweep, ')}")
            continue
        for i, (_, cand) in enumerate(ctx.candidates):
            matched = [w for w in cand.workloads if matching_targets([t], w.id, slice_key(w))]
            if not matched:
                unmatched.append(t.workload)
            for w in matched:
                st = w.stats
                if not st:
                    failures.append(f"{w.id} not measured ({w.status})")
                    continue
                throughput = calls_per_s(st)
                judgement = judge(t, st.p99_s, throughput)
                evidence.append(
                    Evidence(
                        "workload",
                        f"candidate {i + 1}: p99 {st.p99_s * 1e3:.3g} ms"
                        + (f" (target {t.p99_s * 1e3:.3g} ms)" if t.p99_s is not None else "")
                        + f", {throughput:.3g} calls/s"
                        + (
                            f" (target >= {t.min_throughput_per_s:.3g})"
                            if t.min_throughput_per_s is not None
                            else ""
                        ),
                        value=w.id,
                        reproduce=w.reproduce,
                    )
                )
                if not judgement.met:
                    failures.append(w.id)
    load = f" at {ctx.review.sla_load}" if ctx.review.sla_load else ""
    notes = f" (cited sweep not used: {not_used})" if not_used else ""
    if unmatched:
        return CheckResult(
            FAIL,
            f"SLA target(s) {', '.join(sorted(set(unmatched)))} match no measured workload" + notes,
            tuple(evidence),
        )
    if failures:
        return CheckResult(
            FAIL,
            f"{len(failures)} workload(s) miss the SLA{load}: {'; '.join(failures[:3])}" + notes,
            tuple(evidence),
        )
    if by_sweep == len(targets):
        basis = (
            "judged on the cited sweep, each target in its scenario (default server: Poisson "
            "arrivals, queueing included)"
        )
    elif by_sweep:
        return CheckResult(WARN, (
            f"{len(targets) - by_sweep} of {len(targets)} SLA target(s) met only per call, one "
            f"query at a time: unjudged under load{load}; cite a `reviewkit sweep` of their "
            "workloads under [evidence].sweep") + notes, tuple(evidence))  # fmt: skip
    else:
        return CheckResult(WARN, (
            f"every SLA target is met per call, one query at a time (throughput = 1 / mean "
            f"latency), but unjudged under load{load}: cite a `reviewkit sweep` under "
            "[evidence].sweep (queueing included)") + notes, tuple(evidence))  # fmt: skip
    return CheckResult(PASS, f"every SLA target is met{load} ({basis}){notes}", tuple(evidence))
