"""The automatic rubric checks: each turns the runs and the review file into one finding."""

from __future__ import annotations

import fnmatch
import math
import operator
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from reviewkit.analysis.compare import FASTER, SLOWER, Comparison, WorkloadComparison
from reviewkit.common.hashing import sha256_file
from reviewkit.evidence import files as evidence_files
from reviewkit.evidence.drift import DRIFT, STABLE, THROTTLED
from reviewkit.evidence.drift import NOT_AVAILABLE as THROTTLING_NOT_AVAILABLE
from reviewkit.evidence.trace import fit as fitmatrix
from reviewkit.review.reviewfile import Disproof, Review

PASS, WARN, FAIL, MISSING = "pass", "warn", "fail", "missing"
STATUS_ORDER = {PASS: 0, WARN: 1, MISSING: 2, FAIL: 3}
HOLDS, DISPROVED, NOT_EVALUABLE = "holds", "disproved", "not evaluable"
# Bits of precision per dtype: a candidate whose narrowest dtype has fewer bits than the
# baseline's narrowest lowered precision.
DTYPE_BITS = {"fp64": 64, "fp32": 32, "tf32": 19, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8}
# torch.set_float32_matmul_precision: "high" and "medium" let fp32 matmuls run in TF32/bf16.
FP32_MATMUL_BITS = {"highest": 32, "high": 19, "medium": 16}


@dataclass(frozen=True)
class Evidence:
    kind: str  # "artifact" | "workload" | "number" | "text"
    label: str
    value: str = ""
    path: str = ""
    sha256: str = ""
    reproduce: str = ""

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v != ""}


@dataclass(frozen=True)
class CheckResult:
    status: str
    summary: str
    evidence: tuple[Evidence, ...] = ()


@dataclass
class Context:
    """Everything a check may read: the review, the analysed runs and their comparisons."""

    review: Review
    baseline: dict
    candidates: list[tuple[Path, dict]]
    comparisons: list[Comparison]
    params: dict = field(default_factory=dict)
    _sha: dict = field(default_factory=dict)

    def sha256(self, path: Path) -> str:
        if path not in self._sha:
            self._sha[path] = sha256_file(path)
        return self._sha[path]

    def artifact(self, label: str, path: Path) -> Evidence:
        file = path / "run.json" if path.is_dir() else path
        return Evidence(
            "artifact", label, path=self.review.relative(file), sha256=self.sha256(path)
        )

    def run_artifacts(self) -> list[Evidence]:
        out = [self.artifact("baseline run", self.review.baseline)]
        out += [
            self.artifact(f"candidate run {i + 1}", p) for i, (p, _) in enumerate(self.candidates)
        ]
        return out


Check = Callable[[Context], CheckResult]
CHECKS: dict[str, Check] = {}


def check(name: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        CHECKS[name] = fn
        return fn

    return register


def _workload_evidence(w: WorkloadComparison, cand: dict, what: str) -> Evidence:
    rec = next((x for x in cand["workloads"] if x["id"] == w.candidate_id), {})
    return Evidence("workload", what, value=w.candidate_id, reproduce=rec.get("reproduce", ""))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


# --- the senior review question and the anchor metrics ----------------------------------------


@check("bottleneck-per-layer")
def bottleneck_per_layer(ctx: Context) -> CheckResult:
    evidence = []
    for i, (_, cand) in enumerate(ctx.candidates):
        layers = cand.get("layer_types") or {}
        if not layers:
            return CheckResult(
                FAIL, f"candidate {i + 1} has no analysed workloads", tuple(ctx.run_artifacts())
            )
        for layer_type, agg in layers.items():
            slowest = max(
                (w for w in cand["workloads"] if w["layer_type"] == layer_type and w.get("stats")),
                key=lambda w: w["stats"]["p50_s"],
                default=None,
            )
            evidence.append(
                Evidence(
                    "workload",
                    f"candidate {i + 1} {layer_type}: {agg['bottleneck']} "
                    f"(MFU {_pct(agg['mfu'])}, memory-stall {_pct(agg['memory_stall_fraction'])}, "
                    f"overhead {_pct(agg['overhead_fraction'])})",
                    value=slowest["id"] if slowest else "",
                    reproduce=slowest["reproduce"] if slowest else "",
                )
            )
    return CheckResult(
        PASS,
        "every layer type has a bottleneck class from the roofline "
        "fractions, with its slowest workload's reproduce command",
        tuple(ctx.run_artifacts() + evidence),
    )


@check("layer-metrics")
def layer_metrics(ctx: Context) -> CheckResult:
    runs = [("baseline", ctx.baseline)] + [
        (f"candidate {i + 1}", c) for i, (_, c) in enumerate(ctx.candidates)
    ]
    evidence = []
    for label, doc in runs:
        by_dtype = doc.get("layer_types_by_dtype") or {}
        if not by_dtype:
            return CheckResult(
                MISSING,
                f"the {label} run has no per-layer-type aggregates",
                tuple(ctx.run_artifacts()),
            )
        for dtype, layers in by_dtype.items():
            for layer_type, agg in layers.items():
                evidence.append(
                    Evidence(
                        "number",
                        f"{label} {dtype} {layer_type}",
                        value=f"MFU {_pct(agg['mfu'])}, memory-stall "
                        f"{_pct(agg['memory_stall_fraction'])}",
                    )
                )
    return CheckResult(
        PASS,
        "MFU and memory-stall fraction are reported per layer type for "
        "the baseline and every candidate",
        tuple(ctx.run_artifacts() + evidence),
    )


# --- the red flags of design.md ---------------------------------------------------------------


@check("single-knob-change")
def single_knob_change(ctx: Context) -> CheckResult:
    ignore = tuple(ctx.params.get("ignore", ()))
    worst, evidence, summaries = PASS, [], []
    for i, comp in enumerate(ctx.comparisons):
        changed = comp.mapping_knob_changes(ignore)
        for k in changed:
            evidence.append(
                Evidence(
                    "text",
                    f"candidate {i + 1} knob {k.knob}",
                    value=f"{k.baseline!r} -> {k.candidate!r}",
                )
            )
        if len(changed) > 1:
            worst = FAIL
            summaries.append(
                f"candidate {i + 1} changes {len(changed)} knobs at once "
                f"({', '.join(k.knob for k in changed)})"
            )
        elif not changed:
            worst = max(worst, WARN, key=STATUS_ORDER.get)
            summaries.append(f"candidate {i + 1} changes no mapping knob: nothing to review")
        else:
            summaries.append(f"candidate {i + 1} changes one knob: {changed[0].knob}")
    return CheckResult(worst, "; ".join(summaries), tuple(evidence))


@check("production-shape-evidence")
def production_shape_evidence(ctx: Context) -> CheckResult:
    min_coverage = float(ctx.params.get("min_coverage", fitmatrix.DEFAULT_MIN_COVERAGE))
    factor = float(ctx.params.get("shape_range_factor", fitmatrix.DEFAULT_SHAPE_RANGE_FACTOR))
    cited = ctx.review.evidence.get("production_traces", ())
    loaded = evidence_files.read_all(cited, evidence_files.TRACE)
    notes = [f"{ctx.review.relative(x.path)}: not used: {x.reason}" for x in loaded if not x.ok]
    evidence, traces = [], []
    for x in loaded:
        if not x.ok:
            continue
        where = ctx.review.relative(x.path)
        listed = x.doc.get("traces")
        if not isinstance(listed, list) or not listed:
            notes.append(f"{where}: not used: no traces in the summary")
            continue
        evidence.append(ctx.artifact("production trace summary", x.path))
        for k, t in enumerate(listed):
            try:
                # Scored alone against an empty suite, as the packet does: a trace whose op
                # mix or shapes do not add up is left out, said so, and the rest still count.
                fitmatrix.build([t], {"workloads": []}, factor)
            except fitmatrix.MALFORMED as exc:
                notes.append(
                    f"{where}: trace {k + 1} not used: a damaged trace summary "
                    f"({type(exc).__name__}: {str(exc)[:80]}); re-run `reviewkit trace import`"
                )
                continue
            traces.append(t)
    evidence += [Evidence("text", "unusable trace summary", value=n) for n in notes]
    traces = fitmatrix.unique_traces(traces)
    if not traces:
        models = [
            w.candidate_id
            for comp in ctx.comparisons
            for w in comp.workloads
            if w.layer_type == "model" and w.median_ratio
        ]
        why = "no usable trace summary under [evidence].production_traces" + (
            f" ({'; '.join(notes)})" if notes else ""
        )
        model_note = (
            f"; the suite's model workload ({models[0]}) is measured, but it is synthetic: it "
            "does not show production's op mix or shapes"
            if models
            else ""
        )
        return CheckResult(FAIL, why + model_note, tuple(evidence))
    worst, summaries = PASS, []
    for i, (_, cand) in enumerate(ctx.candidates):
        try:
            fit = fitmatrix.build(traces, cand, factor)
        except fitmatrix.MALFORMED as exc:  # a summary's shapes that do not add up
            return CheckResult(
                FAIL,
                f"the cited trace summaries cannot be scored ({type(exc).__name__}: "
                f"{str(exc)[:80]}); re-run `reviewkit trace import`",
                tuple(evidence),
            )
        label = f"candidate {i + 1}" if len(ctx.candidates) > 1 else "the candidate's suite"
        verdict = PASS if fit.score >= min_coverage else FAIL
        worst = max(worst, verdict, key=STATUS_ORDER.get)
        summaries.append(
            f"{label} covers {_pct(fit.score)} of production time by layer type and shape "
            f"(threshold {_pct(min_coverage)}; {_pct(fit.layer_coverage)} by layer type alone, "
            f"shapes within {factor:g}x)"
        )
        evidence.append(
            Evidence("number", f"{label} representativeness score", value=_pct(fit.score))
        )
        for layer in fit.layers[:6]:
            evidence.append(
                Evidence(
                    "number",
                    f"production {layer.layer_type}",
                    value=f"{_pct(layer.share)} of time, {_pct(layer.covered_share)} covered "
                    f"({layer.suite_workloads} suite workload(s))",
                )
            )
        for o in fit.outside[:3]:
            near = (
                f"nearest {o.nearest_workload} ({o.nearest_ratio:.3g}x its elements)"
                if o.nearest_workload
                else "no suite workload of this layer type"
            )
            evidence.append(
                Evidence(
                    "text",
                    f"production shape outside the suite: {o.layer_type} {o.dims}",
                    value=f"{_pct(o.share)} of time; {near}",
                )
            )
    return CheckResult(worst, "; ".join(summaries), tuple(evidence))


def _min_bits(knobs: dict) -> int:
    dtypes = knobs.get("dtypes") or []
    bits = min((DTYPE_BITS.get(d, 32) for d in dtypes), default=32)
    if knobs.get("quantization", "none") not in ("none", "", None):
        bits = min(bits, 8)
    if "fp32" in dtypes:
        bits = min(bits, FP32_MATMUL_BITS.get(knobs.get("float32_matmul_precision", "highest"), 32))
    return bits


def precision_lowered(base: dict, cand: dict) -> bool:
    return _min_bits(cand["knobs"]) < _min_bits(base["knobs"])


def sparsity_changed(base: dict, cand: dict) -> bool:
    return base["knobs"].get("sparsity", "dense") != cand["knobs"].get("sparsity", "dense")


def lowered_dtypes(base: dict, cand: dict) -> set[str]:
    """The candidate's dtypes narrower than the baseline's narrowest (int8 for quantisation)."""
    floor = _min_bits(base["knobs"])
    out = {d for d in cand["knobs"].get("dtypes") or [] if DTYPE_BITS.get(d, 32) < floor}
    if cand["knobs"].get("quantization", "none") not in ("none", "", None):
        out.add("int8")
    return out


def _quality_rows(path: Path) -> list[dict] | None:
    """Rows of a `reviewkit quality` result, or None for a file of another kind."""
    loaded = evidence_files.read(path, evidence_files.QUALITY)
    rows = loaded.doc.get("results") if loaded.ok else None
    return rows if isinstance(rows, list) else None


@check("precision-quality")
def precision_quality(ctx: Context) -> CheckResult:
    lowered = set()
    for _, cand in ctx.candidates:
        if precision_lowered(ctx.baseline, cand):
            lowered |= lowered_dtypes(ctx.baseline, cand) or {"lower precision"}
    if not lowered:
        return CheckResult(PASS, "no candidate lowers precision")
    files = ctx.review.evidence.get("quality", ())
    if not files:
        return CheckResult(
            FAIL,
            f"precision is lowered ({', '.join(sorted(lowered))}) and no "
            "quality evidence is cited under [evidence].quality",
        )
    tolerances = ctx.params.get("tolerances", {})
    min_top1 = float(ctx.params.get("min_top1_agreement", 0.99))
    max_kl = float(ctx.params.get("max_kl_divergence", 1e-3))
    evidence = [ctx.artifact("quality evidence", p) for p in files]
    rows = [r for p in files for r in (_quality_rows(p) or [])]
    if not rows:
        return CheckResult(
            WARN,
            "quality evidence is cited but is not a `reviewkit quality` "
            "result, so its tolerances cannot be checked",
            tuple(evidence),
        )
    problems, checked = [], 0
    for dtype in sorted(lowered):
        mine = [r for r in rows if isinstance(r, dict) and r.get("dtype") == dtype]
        if not mine:
            problems.append(f"no {dtype} results in the quality evidence")
            continue
        tol = tolerances.get(dtype)
        for r in mine:
            if r.get("status") == "not applicable":
                continue
            checked += 1
            if r.get("status") != "ok":
                problems.append(f"{r.get('id')} {dtype}: {r.get('status')} ({r.get('reason', '')})")
                continue
            if tol is not None and r.get("rel_error", math.inf) > tol:
                problems.append(f"{r['id']} {dtype}: relative error {r['rel_error']:.2e} > {tol:g}")
            if "top1_agreement" in r and r["top1_agreement"] < min_top1:
                problems.append(
                    f"{r['id']} {dtype}: top-1 agreement {r['top1_agreement']:.3f} < {min_top1:g}"
                )
            if "kl_divergence" in r and r["kl_divergence"] > max_kl:
                problems.append(f"{r['id']} {dtype}: KL {r['kl_divergence']:.2e} > {max_kl:g}")
    if problems:
        return CheckResult(
            FAIL, f"{len(problems)} quality problem(s): {'; '.join(problems[:4])}", tuple(evidence)
        )
    worst = max(
        (r for r in rows if r.get("dtype") in lowered and r.get("status") == "ok"),
        key=lambda r: r.get("rel_error", 0),
        default=None,
    )
    evidence.append(
        Evidence(
            "number",
            "worst relative error",
            value=(f"{worst['id']} {worst['dtype']}: {worst['rel_error']:.2e}" if worst else "n/a"),
        )
    )
    return CheckResult(
        PASS,
        f"{checked} result(s) in {', '.join(sorted(lowered))} within the "
        "rubric's tolerances against float64",
        tuple(evidence),
    )


def _candidate_ids(ctx: Context) -> set[str]:
    return {w["id"] for _, cand in ctx.candidates for w in cand["workloads"]}


def _unusable(loaded: list[evidence_files.Loaded], ctx: Context) -> str:
    return "; ".join(f"{ctx.review.relative(x.path)}: {x.reason}" for x in loaded if not x.ok)


@check("long-window-stability")
def long_window_stability(ctx: Context) -> CheckResult:
    files = ctx.review.evidence.get("long_window", ())
    if not files:
        return CheckResult(
            FAIL,
            "no long-window (thermal / soak) stability evidence for the "
            "candidate under [evidence].long_window",
        )
    min_window_s = float(ctx.params.get("min_window_s", 60.0))
    need_sensors = bool(ctx.params.get("require_throttling_evidence", True))
    evidence = [ctx.artifact("long-window evidence", p) for p in files]
    loaded = evidence_files.read_all(files, evidence_files.SOAK)
    soaks = [x for x in loaded if x.ok]
    if not soaks:
        return CheckResult(
            WARN,
            "long-window evidence is cited but is not a `reviewkit soak` result, so its "
            f"drift and throttling cannot be checked ({_unusable(loaded, ctx)})",
            tuple(evidence),
        )
    failures, gaps = [], []
    if len(soaks) < len(loaded):
        gaps.append(f"not used: {_unusable(loaded, ctx)}")
    candidate_ids = _candidate_ids(ctx)
    for x in soaks:
        doc, a = x.doc, x.doc.get("analysis", {})
        wid = doc.get("workload", {}).get("id", "?")
        verdict, throttling = a.get("verdict"), a.get("throttling", {})
        window = float(doc.get("measured_window_s") or 0.0)
        trend = a.get("trend", {})
        change = trend.get("relative_change")
        evidence.append(
            Evidence(
                "number",
                f"soak of {wid} over {window:.3g} s",
                value=f"{verdict}; throughput trend "
                + (f"{change:+.1%}" if change is not None else "not computed")
                + f"; throttling: {throttling.get('status', '?')}",
                reproduce=doc.get("workload", {}).get("reproduce", ""),
            )
        )
        if verdict == DRIFT:
            failures.append(f"{wid} drifts: {'; '.join(a.get('reasons', []))}")
        elif verdict != STABLE:
            gaps.append(f"{wid}: {verdict}: {'; '.join(a.get('reasons', []))}")
        if throttling.get("status") == THROTTLED:
            failures.append(f"{wid} throttled: {throttling.get('reason', '')}")
        elif throttling.get("status") == THROTTLING_NOT_AVAILABLE and need_sensors:
            gaps.append(
                f"throttling not judged (clocks and temperatures not available: "
                f"{throttling.get('reason', '')})"
            )
        if not doc.get("complete", False):
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
        f"stable over {min(float(x.doc.get('measured_window_s') or 0) for x in soaks):.3g} s "
        "or more: no throughput drift beyond the threshold, no throttling",
        tuple(evidence),
    )


@check("tail-latency")
def tail_latency(ctx: Context) -> CheckResult:
    evidence, bad = [], []
    for i, comp in enumerate(ctx.comparisons):
        for w in comp.workloads:
            if w.mean_ratio is None or w.mean_ratio >= 1:
                continue
            p95_slower = w.p95_ratio_ci is not None and w.p95_ratio_ci[0] > 1
            if p95_slower or w.p99_verdict == SLOWER:
                bad.append(w.key)
                evidence.append(
                    _workload_evidence(
                        w,
                        ctx.candidates[i][1],
                        f"candidate {i + 1}: mean x{w.mean_ratio:.3f} but "
                        f"p95 x{w.p95_ratio:.3f}, p99 x{w.p99_ratio:.3f} "
                        f"(95% CI of p99 ratio {w.p99_ratio_ci[0]:.3f}-{w.p99_ratio_ci[1]:.3f})",
                    )
                )
    if bad:
        return CheckResult(
            FAIL,
            f"the mean improves while p95 or p99 regresses beyond noise on "
            f"{len(bad)} workload(s): {', '.join(bad[:5])}",
            tuple(evidence),
        )
    return CheckResult(
        PASS, "no workload trades a better mean for a significantly worse p95 or p99"
    )


_SHAPE_PART = re.compile(r"^b\d+s\d+$")


def shape_family(workload_key: str) -> str:
    """A workload key without its batch x sequence part: the cells of one shape sweep."""
    return ".".join(p for p in workload_key.split(".") if not _SHAPE_PART.match(p))


def _cell(w: WorkloadComparison) -> str:
    return f"b{w.params['batch']}s{w.params['seq']} x{w.median_ratio:.2f}"


def _portability(comp: Comparison, min_effect: float) -> tuple[list[str], list[str]]:
    """Per shape family with 2+ cells: (families whose win breaks on some shape, summaries).

    A cell counts as faster or slower when its interval excludes 1 and its ratio is at least
    min_effect away from 1."""
    families: dict[str, list[WorkloadComparison]] = {}
    for w in comp.workloads:
        if w.median_ratio is not None and {"seq", "batch"} <= set(w.params):
            families.setdefault(shape_family(w.key), []).append(w)
    broken, summaries = [], []
    for family, cells in sorted(families.items()):
        if len(cells) < 2:
            continue
        faster = [w for w in cells if w.verdict == FASTER and w.median_ratio <= 1 - min_effect]
        slower = [w for w in cells if w.verdict == SLOWER and w.median_ratio >= 1 + min_effect]
        summaries.append(
            f"{family}: {len(faster)} of {len(cells)} shapes faster, {len(slower)} slower "
            f"(by {min_effect:.0%} or more)"
        )
        if faster and slower:
            broken.append(
                f"{family} is faster at {', '.join(_cell(w) for w in faster[:3])} but slower at "
                f"{', '.join(_cell(w) for w in slower[:3])}"
            )
    return broken, summaries


@check("shape-coverage")
def shape_coverage(ctx: Context) -> CheckResult:
    min_levels = int(ctx.params.get("min_levels", 2))
    min_effect = float(ctx.params.get("min_effect", 0.05))
    summaries, thin, broken, evidence = [], False, [], []
    for i, comp in enumerate(ctx.comparisons):
        seqs = {w.params.get("seq") for w in comp.workloads if w.median_ratio} - {None}
        batches = {w.params.get("batch") for w in comp.workloads if w.median_ratio} - {None}
        summaries.append(
            f"candidate {i + 1}: sequence lengths {sorted(seqs)}, batch "
            f"(concurrency) levels {sorted(batches)}"
        )
        if len(seqs) < min_levels or len(batches) < min_levels:
            thin = True
        mixed, families = _portability(comp, min_effect)
        broken += [f"candidate {i + 1}: {m}" for m in mixed]
        label = f"candidate {i + 1} shape cells"
        evidence += [Evidence("number", label, value=f) for f in families]
    if thin:
        return CheckResult(
            FAIL,
            f"evidence covers fewer than {min_levels} sequence lengths or "
            f"concurrency levels: {'; '.join(summaries)}",
            tuple(evidence),
        )
    if broken:
        return CheckResult(
            FAIL,
            f"the win does not hold across shapes (faster by {min_effect:.0%} or more on some, "
            f"slower by as much on others, each beyond noise): {'; '.join(broken[:3])}",
            tuple(evidence),
        )
    return CheckResult(
        PASS,
        "; ".join(summaries) + "; no shape family is faster on some shapes and slower on others",
        tuple(evidence),
    )


@check("fallback-for-precision-or-sparsity")
def fallback(ctx: Context) -> CheckResult:
    risky = [
        i + 1
        for i, (_, c) in enumerate(ctx.candidates)
        if precision_lowered(ctx.baseline, c) or sparsity_changed(ctx.baseline, c)
    ]
    if not risky:
        return CheckResult(PASS, "no candidate lowers precision or changes sparsity")
    has_fallback = bool(ctx.review.rollback.get("fallback"))
    has_quality = bool(ctx.review.evidence.get("quality"))
    if has_fallback and has_quality:
        return CheckResult(
            PASS,
            "a fallback path ([rollback].fallback) and quality evidence are recorded",
            (Evidence("text", "fallback", value=ctx.review.rollback["fallback"]),),
        )
    missing = [
        name
        for name, ok in (
            ("a fallback path ([rollback].fallback)", has_fallback),
            ("quality evidence ([evidence].quality)", has_quality),
        )
        if not ok
    ]
    return CheckResult(
        FAIL,
        f"candidate(s) {', '.join(map(str, risky))} change precision or "
        f"sparsity without {' or '.join(missing)}",
    )


@check("closure")
def closure(ctx: Context) -> CheckResult:
    r = ctx.review
    missing = [
        name
        for name, ok in (
            ("owner ([owner].name)", r.owner_name),
            ("rollback boundary ([rollback].boundary)", r.rollback.get("boundary")),
            ("disproof criteria ([[disproof]])", r.disproof),
        )
        if not ok
    ]
    if missing:
        return CheckResult(FAIL, f"the claim has no {', no '.join(missing)}")
    return CheckResult(
        PASS,
        f"owned by {r.owner_name}"
        + (f" ({r.owner_team})" if r.owner_team else "")
        + f"; rollback boundary and {len(r.disproof)} disproof "
        "criteria stated",
    )


# --- SLA, stack, power, risk, rollback, disproof ----------------------------------------------


def _swept_workloads(ctx: Context) -> tuple[list[tuple[Path, dict]], str]:
    """(file, workload) for every measured workload in the cited sweeps; why others are not."""
    loaded = evidence_files.read_all(ctx.review.evidence.get("sweep", ()), evidence_files.SWEEP)
    rows = [
        (x.path, w)
        for x in loaded
        if x.ok
        for w in x.doc.get("workloads", [])
        if isinstance(w, dict) and w.get("status") == "ok" and isinstance(w.get("id"), str)
    ]
    return rows, _unusable(loaded, ctx)


def _sla_phrase(t, offered: float | None, achieved: float | None) -> str:
    if t.p99_s is None:
        return f"highest valid load {achieved:.3g} queries/s" if achieved else "no valid level"
    target = f"p99 <= {t.p99_s * 1e3:.3g} ms"
    if achieved is None:
        return f"{target} at no valid load level"
    if t.scenario != "server":
        return f"{target} at {achieved:.3g} queries/s"
    return f"{target} up to {offered:.3g} queries/s offered ({achieved:.3g} achieved)"


def _under_load(ctx: Context, path: Path, w: dict, t) -> tuple[bool, Evidence]:
    """Judge an SLA target on a sweep in its scenario; for server, the highest valid load
    whose p99 meets it (LoadGen's peak-performance answer)."""
    from reviewkit.evidence import loadgen

    if t.scenario == loadgen.SERVER:
        levels = [lv for lv in w.get(loadgen.SERVER, []) if isinstance(lv, dict)]
    else:  # one back-to-back level: it meets the target or not
        levels = [w[t.scenario]] if isinstance(w.get(t.scenario), dict) else []
    try:
        if t.p99_s is not None:
            best = loadgen.best_under_sla(levels, t.p99_s)
            offered, achieved = best["max_rate_per_s"], best["achieved_rate_per_s"]
        else:
            top = max((lv for lv in levels if lv["valid"]),
                      key=lambda lv: lv["achieved_rate_per_s"], default=None)  # fmt: skip
            offered = achieved = top["achieved_rate_per_s"] if top else None
    except (KeyError, TypeError):
        return False, Evidence(
            "artifact", f"sweep {w['id']}: levels without latency or validity fields",
            path=ctx.review.relative(path),
        )  # fmt: skip
    ok = achieved is not None and (
        t.min_throughput_per_s is None or achieved >= t.min_throughput_per_s
    )
    invalid = sum(1 for lv in levels if not lv.get("valid"))
    knee = w.get("knee") or {}
    parts = [f"{t.scenario}: {_sla_phrase(t, offered, achieved)}"]
    if t.min_throughput_per_s is not None:
        parts.append(f"target >= {t.min_throughput_per_s:.3g} queries/s")
    single = (w.get(loadgen.SINGLE_STREAM) or {}).get("latency") or {}
    if "p99_s" in single and t.scenario != loadgen.SINGLE_STREAM:
        # one query at a time: what the SLA costs without queueing, for contrast
        parts.append(f"single-stream p99 {single['p99_s'] * 1e3:.3g} ms")
    if knee.get("found"):
        parts.append(f"knee at {knee['rate_per_s']:.3g} queries/s")
    if invalid:
        parts.append(f"{invalid} invalid level(s) not counted")
    return ok, Evidence(
        "artifact",
        f"on the sweep: {'; '.join(parts)}",
        value=w["id"],
        path=ctx.review.relative(path),
        sha256=ctx.sha256(path),
        reproduce=w.get("reproduce", ""),
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
            if fnmatch.fnmatchcase(w["id"], t.workload) and w["id"] in candidate_ids
        ]
        if loaded:
            by_sweep += 1
            for path, w in loaded:
                ok, ev = _under_load(ctx, path, w, t)
                evidence.append(ev)
                if not ok:
                    failures.append(f"{w['id']} ({t.scenario} on the sweep)")
            continue
        for i, (_, cand) in enumerate(ctx.candidates):
            matched = [w for w in cand["workloads"] if fnmatch.fnmatchcase(w["id"], t.workload)]
            if not matched:
                unmatched.append(t.workload)
            for w in matched:
                st = w.get("stats")
                if not st:
                    failures.append(f"{w['id']} not measured ({w['status']})")
                    continue
                throughput = 1 / st["mean_s"]
                ok_p99 = t.p99_s is None or st["p99_s"] <= t.p99_s
                ok_tp = t.min_throughput_per_s is None or throughput >= t.min_throughput_per_s
                evidence.append(
                    Evidence(
                        "workload",
                        f"candidate {i + 1}: p99 {st['p99_s'] * 1e3:.3g} ms"
                        + (f" (target {t.p99_s * 1e3:.3g} ms)" if t.p99_s is not None else "")
                        + f", {throughput:.3g} calls/s"
                        + (
                            f" (target >= {t.min_throughput_per_s:.3g})"
                            if t.min_throughput_per_s is not None
                            else ""
                        ),
                        value=w["id"],
                        reproduce=w["reproduce"],
                    )
                )
                if not (ok_p99 and ok_tp):
                    failures.append(w["id"])
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
            f"{len(failures)} workload(s) miss the SLA{load}: {', '.join(failures[:5])}" + notes,
            tuple(evidence),
        )
    if by_sweep == len(targets):
        basis = (
            "judged on the cited sweep, each target in its scenario (default server: Poisson "
            "arrivals, queueing included)"
        )
    elif by_sweep:
        basis = (f"{by_sweep} of {len(targets)} target(s) judged under load on the cited "
                 "sweep, the others per call at the run's concurrency")  # fmt: skip
    else:
        basis = ("p99 per call; throughput = 1 / mean latency at the run's concurrency; cite "
                 "a `reviewkit sweep` under [evidence].sweep to judge it under load")  # fmt: skip
    return CheckResult(PASS, f"every SLA target is met{load} ({basis}){notes}", tuple(evidence))


@check("stack-maturity")
def stack_maturity(ctx: Context) -> CheckResult:
    slow_mfu = float(ctx.params.get("slow_path_mfu", 0.1))
    runs = [("baseline", ctx.baseline)] + [
        (f"candidate {i + 1}", c) for i, (_, c) in enumerate(ctx.candidates)
    ]
    evidence, failed, slow, notes = [], [], [], []
    for label, doc in runs:
        env = doc.get("environment", {})
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
        if not doc.get("complete", False):
            failed.append(f"{label}: run incomplete ({doc.get('interrupted', 'unknown reason')})")
        for w in doc["workloads"]:
            if w["status"] != "ok":
                failed.append(f"{label}: {w['id']} {w['status']}")
                evidence.append(
                    Evidence(
                        "workload",
                        f"{label}: {w['status']}: {w['reason']}",
                        value=w["id"],
                        reproduce=w["reproduce"],
                    )
                )
            elif (
                w.get("matmul_flops")
                and w.get("mfu") is not None
                and w["mfu"] < slow_mfu
                and w.get("bottleneck") == "overhead-bound"
            ):
                slow.append(f"{label}: {w['id']}")
                evidence.append(
                    Evidence(
                        "workload",
                        f"{label}: possible slow path: MFU {_pct(w['mfu'])} on a "
                        "matmul-class workload, overhead-bound",
                        value=w["id"],
                        reproduce=w["reproduce"],
                    )
                )
            elif w.get("reason"):
                notes.append(f"{label}: {w['id']}")
    if failed:
        return CheckResult(
            FAIL, f"{len(failed)} problem(s): {'; '.join(failed[:4])}", tuple(evidence)
        )
    if slow or notes:
        parts = []
        if slow:
            parts.append(
                f"{len(slow)} matmul-class workload(s) below {_pct(slow_mfu)} MFU and "
                f"overhead-bound (a slow path?): {', '.join(slow[:4])}"
            )
        if notes:
            parts.append(f"{len(notes)} workload(s) measured with few samples")
        return CheckResult(WARN, "; ".join(parts), tuple(evidence))
    return CheckResult(PASS, "versions recorded; every workload ran normally", tuple(evidence))


@check("perf-per-watt")
def perf_per_watt(ctx: Context) -> CheckResult:
    """Work per joule of every run, from the energy metered over each workload's window.

    Pass when the baseline and every candidate carry energy for all their measured workloads
    (quoting each run's time-weighted total, and its model workload where there is one), or
    when [evidence].power is cited; else warn with the runs' reasons. Nothing is estimated.
    """
    from reviewkit.analysis.roofline import energy_aggregate, energy_reason, measured

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
            model = [w for w in measured(doc) if w["layer_type"] == "model"]
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


@check("risk-map")
def risk_map(ctx: Context) -> CheckResult:
    risks = ctx.review.risks
    if not risks:
        return CheckResult(MISSING, "no [[risks]] recorded")
    incomplete = [r.description[:60] for r in risks if not (r.owner and r.mitigation)]
    evidence = tuple(
        Evidence(
            "text",
            f"risk ({r.level or '?'} impact, {r.likelihood or '?'} "
            f"likelihood), owner {r.owner or 'NONE'}",
            value=r.description,
        )
        for r in risks
    )
    if incomplete:
        return CheckResult(
            FAIL,
            f"{len(incomplete)} risk(s) without an owner or a mitigation: {'; '.join(incomplete)}",
            evidence,
        )
    return CheckResult(PASS, f"{len(risks)} risk(s), each with an owner and a mitigation", evidence)


@check("rollback-plan")
def rollback_plan(ctx: Context) -> CheckResult:
    rb = ctx.review.rollback
    if not rb:
        return CheckResult(MISSING, "no [rollback] table")
    missing = [k for k in ("boundary", "trigger", "procedure") if not rb.get(k)]
    evidence = tuple(Evidence("text", k, value=v) for k, v in rb.items() if v)
    if missing:
        return CheckResult(FAIL, f"[rollback] lacks {', '.join(missing)}", evidence)
    return CheckResult(PASS, "rollback boundary, trigger and procedure are stated", evidence)


_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_RATIO_METRICS = {"median_ratio", "mean_ratio", "p95_ratio", "p99_ratio"}


def _metric_values(d: Disproof, comp: Comparison, cand: dict) -> list[tuple[str, float]]:
    if d.metric in _RATIO_METRICS:
        return [
            (w.candidate_id, getattr(w, d.metric))
            for w in comp.workloads
            if getattr(w, d.metric) is not None
            and (
                fnmatch.fnmatchcase(w.candidate_id, d.workload)
                or fnmatch.fnmatchcase(w.key, d.workload)
            )
        ]
    out = []
    for w in cand["workloads"]:
        if not fnmatch.fnmatchcase(w["id"], d.workload) or not w.get("stats"):
            continue
        value = {
            "mfu": w.get("mfu"),
            "memory_stall_fraction": (w.get("fractions") or {}).get("memory_stall"),
            "p50_s": w["stats"]["p50_s"],
            "p99_s": w["stats"]["p99_s"],
        }[d.metric]
        if value is not None:
            out.append((w["id"], value))
    return out


def evaluate_disproof(d: Disproof, ctx: Context) -> tuple[str, str]:
    """(`holds` | `disproved` | `not evaluable`, why). The criterion names what disproves."""
    if not d.machine_checkable:
        return NOT_EVALUABLE, "stated in words only (no workload, metric, comparison, threshold)"
    hits, seen = [], 0
    for comp, (_, cand) in zip(ctx.comparisons, ctx.candidates, strict=True):
        values = _metric_values(d, comp, cand)
        seen += len(values)
        hits += [(wid, v) for wid, v in values if _OPS[d.comparison](v, d.threshold)]
    if not seen:
        return NOT_EVALUABLE, f"no measured workload matches {d.workload!r} for {d.metric}"
    if hits:
        shown = ", ".join(f"{wid} {d.metric}={v:.4g}" for wid, v in hits[:3])
        return (
            DISPROVED,
            f"{len(hits)} of {seen} workload(s) meet {d.metric} {d.comparison} "
            f"{d.threshold:g}: {shown}",
        )
    return HOLDS, f"none of {seen} workload(s) meets {d.metric} {d.comparison} {d.threshold:g}"


@check("disproof-evaluated")
def disproof_evaluated(ctx: Context) -> CheckResult:
    criteria = ctx.review.disproof
    if not criteria:
        return CheckResult(
            MISSING, "no [[disproof]] criteria: nothing says what would prove the claim wrong"
        )
    results = [(d, *evaluate_disproof(d, ctx)) for d in criteria]
    evidence = tuple(
        Evidence("text", f"{status}: {d.statement}", value=why) for d, status, why in results
    )
    disproved = [d for d, status, _ in results if status == DISPROVED]
    if disproved:
        return CheckResult(
            FAIL, f"{len(disproved)} disproof criterion(s) met: the claim is disproved", evidence
        )
    if all(status == NOT_EVALUABLE for _, status, _ in results):
        return CheckResult(
            WARN, "criteria are stated but none could be evaluated against the runs", evidence
        )
    return CheckResult(PASS, f"{len(results)} criterion(s) stated; none is met", evidence)
