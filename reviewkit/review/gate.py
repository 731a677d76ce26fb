"""Fill a rubric from a review and its runs into findings, and give the gate verdict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reviewkit.analysis.analysed import AnalysedRun
from reviewkit.analysis.compare import STATISTICAL_ONLY, Comparison, Margins, compare
from reviewkit.analysis.knobs import KnobPolicy
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle import profile as profiles
from reviewkit.bundle.records import Run
from reviewkit.bundle.run import STATUS_OK, load_run
from reviewkit.common.errors import InputError
from reviewkit.common.hashing import sha256_file
from reviewkit.review.checks import (
    CHECKS,
    FAIL,
    MISSING,
    PASS,
    STATUS_ORDER,
    WARN,
    CheckResult,
    Context,
    Evidence,
    evaluate_disproof,
)
from reviewkit.review.checks.bottleneck import SENIOR_QUESTION, measured_classes
from reviewkit.review.checks.claim import knob_policy_of
from reviewkit.review.cited import CitedEvidence
from reviewkit.review.primary import PrimaryMetric, primary_metric
from reviewkit.review.reviewfile import Review, load_review
from reviewkit.review.rubric import Rubric, RubricItem, load_rubric

GATE_PASS, GATE_FAIL = "pass", "fail"


@dataclass(frozen=True)
class Finding:
    item: RubricItem
    status: str
    summary: str
    evidence: tuple[Evidence, ...]

    @property
    def raised(self) -> bool:
        """A red flag is raised when its check does not pass."""
        return self.item.red_flag and self.status != PASS

    @property
    def blocks(self) -> bool:
        return self.item.severity == "blocking" and self.status in (FAIL, MISSING)

    def to_json(self) -> dict:
        i = self.item
        return {
            "id": i.id,
            "section": i.section,
            "title": i.title,
            "question": i.question,
            "severity": i.severity,
            "check": i.check,
            "red_flag": i.red_flag,
            "status": self.status,
            "summary": self.summary,
            "clears_with": i.clears_with,
            "evidence": [e.to_json() for e in self.evidence],
        }


@dataclass(frozen=True)
class Report:
    review: Review
    rubric: Rubric
    findings: tuple[Finding, ...]
    disproof: tuple[dict, ...]
    comparisons: tuple[Comparison, ...]
    warnings: tuple[str, ...]
    baseline: AnalysedRun
    review_candidates: tuple[tuple[Path, AnalysedRun], ...]  # (bundle path, analysed run)
    primary: PrimaryMetric | None = None  # the claim's primary metric, judged once
    # The cited evidence as the checks read and judged it: what every display shows.
    cited: CitedEvidence | None = None

    @property
    def decision_reads(self) -> str:
        """The decision as its evidence lets it stand: a `go` whose primary metric does not
        settle its hypothesis reads `needs-evidence` until it does."""
        status = self.review.decision.get("status", "proposed")
        if status == "go" and self.primary is not None and not self.primary.settles:
            return "needs-evidence"
        return status

    @property
    def below_roof_share(self) -> float:
        """The share of roof under which the runs' workloads were flagged below-roof: the
        rubric's [roofline] below_roof_share, else the default rubric's."""
        from reviewkit.analysis.bottleneck import default_below_roof_share

        share = self.rubric.below_roof_share
        return default_below_roof_share() if share is None else share

    @property
    def engineering_risk(self) -> float | None:
        """The weighted share of the rubric's items not passing, by the rubric's [risk]
        severity_weights; None when the rubric sets none."""
        weights = self.rubric.severity_weights
        if weights is None:
            return None
        total = sum(weights[f.item.severity] for f in self.findings)
        failing = sum(weights[f.item.severity] for f in self.findings if f.status != PASS)
        return failing / total if total else 0.0

    @property
    def red_flags(self) -> list[Finding]:
        return sorted((f for f in self.findings if f.raised), key=lambda f: -STATUS_ORDER[f.status])

    @property
    def verdict(self) -> str:
        return GATE_FAIL if any(f.blocks for f in self.findings) else GATE_PASS

    def to_json(self) -> dict:
        r = self.review
        return {
            "review": str(r.path),
            "title": r.title,
            "decision": r.decision,
            "owner": {"name": r.owner_name, "team": r.owner_team},
            "rubric": {
                "name": self.rubric.name,
                "version": self.rubric.version,
                "path": self.rubric.path,
            },
            "verdict": self.verdict,
            "engineering_risk": self.engineering_risk,
            "decision_reads": self.decision_reads,
            "primary_metric": self.primary.to_json() if self.primary else None,
            "blocking_failures": [f.item.id for f in self.findings if f.blocks],
            "red_flags": [f.to_json() for f in self.red_flags],
            "findings": [f.to_json() for f in self.findings],
            "disproof": list(self.disproof),
            "comparisons": [c.to_json() for c in self.comparisons],
            "warnings": list(self.warnings),
        }


def _manual(item: RubricItem, review: Review, ctx: Context) -> CheckResult:
    answer = review.answers.get(item.id)
    if answer is None:
        return CheckResult(
            MISSING,
            f"not answered: add [answers.{item.id}] with `answer` and an "
            "`evidence` pointer (a path in the review folder)",
        )
    evidence = [Evidence("text", "answer", value=answer.answer)]
    if item.id == SENIOR_QUESTION:  # the answer beside the classes the runs measured
        evidence += measured_classes(ctx)
    if answer.evidence_path is None:
        return CheckResult(WARN, "answered without an evidence pointer", tuple(evidence))
    evidence.append(ctx.artifact(f"evidence {answer.evidence}", answer.evidence_path))
    return CheckResult(PASS, "answered, with evidence", tuple(evidence))


# A decisions log cites the same bundles from many reviews (a shared baseline, say): analysing
# a bundle and comparing two of them are memoised by content hash within one process.
MEMO_ENTRIES = 64
_analysed: dict[str, AnalysedRun] = {}
_compared: dict[tuple[str, str, str, str], Comparison] = {}


def _content_key(path: Path) -> str:
    try:
        return sha256_file(path)
    except OSError:
        return f"unreadable:{path}"  # load_run reports it properly


def _remember(memo: dict, key, value):
    if len(memo) >= MEMO_ENTRIES:
        memo.pop(next(iter(memo)))
    memo[key] = value
    return value


def load_analysed(
    path: Path,
    review_file: Path,
    key: str,
    device_profile: tuple[Path, dict] | None = None,
    below_roof_share: float | None = None,
) -> tuple[str, AnalysedRun]:
    """(content hash, analysed run), shared between callers.

    With `device_profile` (the review's `runs.device_profile`: its path and document), the run
    divides by that profile's ceilings instead of its own; a run measured on another device is
    refused."""
    digest = _content_key(path)
    if device_profile is not None:
        digest = f"{digest}+profile:{device_profile[1]['hash']}"
    if below_roof_share is not None:
        digest = f"{digest}+below-roof:{below_roof_share!r}"
    if digest in _analysed:
        return digest, _analysed[digest]
    try:
        run = load_run(path)
    except InputError as exc:
        raise InputError(f"{review_file}: key {key!r}: {exc}") from exc
    if device_profile is not None:
        run = _on_profile(run, path, review_file, key, *device_profile)
    return digest, _remember(_analysed, digest, analyse_run(run, below_roof_share))


def _on_profile(
    run: Run, path: Path, review_file: Path, key: str, where: Path, profile: dict
) -> Run:
    fingerprint = run.fingerprint
    theirs = fingerprint.get("hash")
    ours = profile["fingerprint"].get("hash")
    if theirs != ours:
        measured_on = fingerprint.get("label") or (
            "a device with no recorded fingerprint"
        )
        raise InputError(
            f"{review_file}: key {key!r}: {path} was measured on {measured_on}, but "
            f"runs.device_profile ({where}) was taken on {profile['fingerprint'].get('label')}: "
            "a profile's ceilings are one device's. Drop runs.device_profile, or cite runs "
            "from the profile's device"
        )
    knobs = run.knobs or {}
    kept = profiles.keyed_settings(str(profile.get("device")), profile.get("settings") or {})
    ran = {k: knobs.get(k) for k in kept if knobs.get(k) is not None}
    if any(kept[k] != v for k, v in ran.items()):
        raise InputError(
            f"{review_file}: key {key!r}: {path} ran at {profiles.settings_text(ran)}, but "
            f"runs.device_profile ({where}) was calibrated at {profiles.settings_text(kept)}: a "
            "ceiling belongs to the settings that move it. Drop runs.device_profile (each run "
            "then divides by the profile it was measured with), or calibrate one at the run's "
            "settings (`reviewkit calibrate --threads N --float32-matmul-precision P --out ...`)"
        )
    ceilings = profiles.ceilings_of(profile, "review", where)
    return run.with_values(ceilings=ceilings)


def _compare(
    base: tuple[str, AnalysedRun],
    cand: tuple[str, AnalysedRun],
    labels: tuple[str, str],
    margins: Margins,
    knob_policy: KnobPolicy,
):
    key = (base[0], cand[0], *labels, repr(margins), repr(knob_policy))
    if key not in _compared:
        _remember(_compared, key, compare(base[1], cand[1], *labels, margins=margins,
                                          knob_policy=knob_policy))  # fmt: skip
    return _compared[key]


def margins_of(rubric) -> Margins:
    """The rubric's [verdicts] margins, or statistical-only verdicts when it sets none."""
    return rubric.margins if rubric.margins is not None else STATISTICAL_ONLY


def run_check(
    review_path: Path | str, rubric_path: Path | str | None = None, allow_outside: bool = False
) -> Report:
    review = load_review(review_path, allow_outside=allow_outside)
    rubric = load_rubric(rubric_path, CHECKS)
    unknown = [k for k in review.answers if rubric.item(k) is None]
    if unknown:
        from reviewkit.common.tomlfile import closest

        ids = [i.id for i in rubric.items]
        raise InputError(
            f"{review.path}: [answers.{unknown[0]}] names no item of rubric {rubric.path}"
            f"{closest(unknown[0], ids)}"
        )
    pinned = None
    if review.device_profile is not None:
        try:
            pinned = (review.device_profile, profiles.load(review.device_profile))
        except InputError as exc:
            raise InputError(f"{review.path}: key 'runs.device_profile': {exc}") from exc
    roof = rubric.below_roof_share
    base_loaded = load_analysed(review.baseline, review.path, "runs.baseline", pinned, roof)
    cand_loaded = [
        (p, load_analysed(p, review.path, f"runs.candidates[{i}]", pinned, roof))
        for i, p in enumerate(review.candidates)
    ]
    baseline = base_loaded[1]
    candidates = [(p, loaded[1]) for p, loaded in cand_loaded]
    margins = margins_of(rubric)
    policy = knob_policy_of(rubric)  # one reading of the knob diff: the check's and the packet's
    comparisons = [
        _compare(
            base_loaded,
            loaded,
            (review.relative(review.baseline), review.relative(p)),
            margins,
            policy,
        )
        for p, loaded in cand_loaded
    ]
    warnings = [w for c in comparisons for w in c.warnings]
    if rubric.margins is None:
        warnings.append(
            f"{rubric.path}: no [verdicts] table, so verdicts are statistical only (no practical "
            "margin): add one as in rubrics/default.toml"
        )
    for label, doc in [("baseline", baseline)] + [(review.relative(p), d) for p, d in candidates]:
        failed = [w.id for w in doc.workloads if w.status != STATUS_OK]
        if failed:
            warnings.append(
                f"{label}: {len(failed)} workload(s) did not run normally "
                f"(e.g. {failed[0]}); see the stack-maturity finding"
            )
    primary = primary_metric(review, comparisons[0] if comparisons else None)
    cited = CitedEvidence(review, rubric, tuple(candidates))
    ctx = Context(review, baseline, candidates, comparisons, primary=primary, cited=cited)
    findings = []
    for item in rubric.items:
        ctx.params = item.params
        result = _manual(item, review, ctx) if item.manual else CHECKS[item.check](ctx)
        findings.append(Finding(item, result.status, result.summary, result.evidence))
    ctx.params = {}
    disproof = tuple(
        {
            "statement": d.statement,
            "machine_checkable": d.machine_checkable,
            "status": status,
            "why": why,
        }
        for d in review.disproof
        for status, why in [evaluate_disproof(d, ctx)]
    )
    return Report(
        review,
        rubric,
        tuple(findings),
        disproof,
        tuple(comparisons),
        tuple(warnings),
        baseline,
        tuple(candidates),
        primary,
        cited,
    )
