"""Checks on the software stack and energy: slow paths and failures, perf per watt."""

from __future__ import annotations

from reviewkit.analysis.hardware import support_notes
from reviewkit.bundle.run import STATUS_OK
from reviewkit.common.format import pct
from reviewkit.review.checks.registry import NUMBER, CheckResult, Context, Evidence, check
from reviewkit.review.status import FAIL, PASS, WARN


@check("stack-maturity", params={"slow_path_mfu": NUMBER})
def stack_maturity(ctx: Context) -> CheckResult:
    slow_mfu = float(ctx.params["slow_path_mfu"])
    runs = [("baseline", ctx.baseline)] + [
        (f"candidate {i + 1}", c) for i, (_, c) in enumerate(ctx.candidates)
    ]
    evidence, failed, slow, notes = [], [], [], []
    for label, doc in runs:
        env = doc.environment
        versions = {
            k: env.get(k)
            for k in ("torch_version", "blas", "onednn", "cuda", "cudnn")
            if env.get(k)
        }
        if "torch_version" not in versions:
            failed.append(f"{label}: software versions not recorded")
        evidence.append(
            Evidence(
                "text",
                f"{label} software stack",
                value=", ".join(f"{k} {v}" for k, v in versions.items()),
            )
        )
        if not doc.complete:
            why = "unknown reason" if doc.interrupted is None else doc.interrupted
            failed.append(f"{label}: run incomplete ({why})")
        for w in doc.workloads:
            if w.status != STATUS_OK:
                failed.append(f"{label}: {w.id} {w.status}")
                evidence.append(
                    Evidence(
                        "workload",
                        f"{label}: {w.status}: {w.reason}",
                        value=w.id,
                        reproduce=w.reproduce,
                    )
                )
            elif (
                w.matmul_flops
                and w.mfu is not None
                and w.mfu < slow_mfu
                and w.bottleneck == "overhead-bound"
            ):
                slow.append(f"{label}: {w.id}")
                evidence.append(
                    Evidence(
                        "workload",
                        f"{label}: possible slow path: MFU {pct(w.mfu)} on a "
                        "matmul-class workload, overhead-bound",
                        value=w.id,
                        reproduce=w.reproduce,
                    )
                )
            elif w.reason:
                notes.append(f"{label}: {w.id}")
    hardware = list(dict.fromkeys(n for _, doc in runs for n in support_notes(doc)))
    evidence += [Evidence("text", "hardware support", value=n) for n in hardware]
    said = f"; {'; '.join(hardware)}" if hardware else ""
    if failed:
        return CheckResult(
            FAIL, f"{len(failed)} problem(s): {'; '.join(failed[:4])}{said}", tuple(evidence)
        )
    if slow or notes:
        parts = []
        if slow:
            parts.append(
                f"{len(slow)} matmul-class workload(s) below {pct(slow_mfu)} MFU and "
                f"overhead-bound (a slow path?): {', '.join(slow[:4])}"
            )
        if notes:
            parts.append(f"{len(notes)} workload(s) measured with few samples")
        return CheckResult(WARN, "; ".join(parts) + said, tuple(evidence))
    return CheckResult(
        PASS, f"versions recorded; every workload ran normally{said}", tuple(evidence)
    )


@check("perf-per-watt")
def perf_per_watt(ctx: Context) -> CheckResult:
    """Work per joule of every run, from the energy metered over each workload's window.

    Pass when the baseline and every candidate carry energy for all their measured workloads
    (quoting each run's time-weighted total, and its model workload where there is one), or
    when [evidence].power is cited; else warn with the runs' reasons. Nothing is estimated.
    """
    from reviewkit.analysis.energy import energy_aggregate, energy_reason
    from reviewkit.analysis.roofline import measured

    runs = [("baseline", ctx.baseline)] + [
        (f"candidate {i + 1}", doc) for i, (_, doc) in enumerate(ctx.candidates)
    ]
    totals = {label: energy_aggregate(measured(doc)) for label, doc in runs}
    files = ctx.review.evidence.get("power", ())
    cited = tuple(ctx.artifact("power evidence", p) for p in files)
    if all(t["available"] for t in totals.values()):
        parts, evidence = [], []
        for label, doc in runs:
            t = totals[label]
            text = (
                f"{label} {t['flops_per_joule'] / 1e9:.3g} GFLOP/J at {t['avg_watts']:.3g} W "
                f"over its {t['workloads']} workload(s)"
            )
            model = [w for w in measured(doc) if w.layer_type == "model"]
            m = energy_aggregate(model) if model else {"available": False}
            if m["available"]:
                text += f", model {m['flops_per_joule'] / 1e9:.3g} GFLOP/J"
            if t["confidence"] != "high":
                text += f" (low confidence: {t['confidence_reason']})"
            parts.append(text)
            evidence.append(
                Evidence(
                    "number",
                    f"{label} work per joule ({t['confidence']} confidence)",
                    value=f"{t['flops_per_joule']:.4g} FLOP/J, {t['joules']:.4g} J over "
                    f"{t['window_s']:.4g} s; {'; '.join(t['methods'])}",
                )
            )
        methods = {tuple(t["methods"]) for t in totals.values()}
        note = (
            "; the runs were metered by different counters, so their joules cover different "
            "hardware"
            if len(methods) > 1
            else ""
        )
        return CheckResult(
            PASS,
            "work per joule over the measured windows (time-weighted over all workloads): "
            + "; ".join(parts)
            + note,
            tuple(ctx.run_artifacts()) + cited + tuple(evidence),
        )
    if files:
        return CheckResult(PASS, "power evidence is cited", cited)
    lacking: dict[str, list[str]] = {}  # reason -> the runs it applies to
    for label, doc in runs:
        if totals[label]["available"]:
            continue
        first = next((w for w in measured(doc) if energy_reason(w)), None)
        why = energy_reason(first) if first else totals[label]["reason"]
        lacking.setdefault(why, []).append(label)
    whys = "; ".join(f"{', '.join(labels)}: {why}" for why, labels in lacking.items())
    return CheckResult(
        WARN,
        f"perf-per-watt not available: the runs carry no complete energy measurement "
        f"({whys}) and [evidence].power is not set; no value is estimated",
    )
