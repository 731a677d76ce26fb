"""The check registry, its context and its result records."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reviewkit.analysis.compare import Comparison, WorkloadComparison
from reviewkit.common.hashing import sha256_file
from reviewkit.review.reviewfile import Review

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun


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
    baseline: AnalysedRun
    candidates: list[tuple[Path, AnalysedRun]]
    comparisons: list[Comparison]
    params: dict = field(default_factory=dict)
    primary: object = None  # review.primary.PrimaryMetric (the gate judges it once)
    # review.cited.CitedEvidence: the cited files, read once and shared with the packet; a
    # Context made without one (a check run on its own) reads them on first use.
    cited: object = None
    _sha: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cited is None:
            from reviewkit.review.cited import CitedEvidence

            self.cited = CitedEvidence(self.review, None, tuple(self.candidates))

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


# The kinds a rubric param may be declared as: a number is an int or a float, never a bool.
NUMBER, INTEGER, BOOLEAN, LIST, TABLE = "number", "integer", "boolean", "list", "table"


def check(name: str, params: dict[str, str] | None = None) -> Callable[[Check], Check]:
    """Register a check under its rubric name; `params` names the thresholds it reads from the
    rubric item (and their kinds). They live only in the rubric: the loader refuses an item
    that lacks one, so the check reads them without a fallback of its own."""

    def register(fn: Check) -> Check:
        fn.required_params = dict(params or {})  # type: ignore[attr-defined]
        CHECKS[name] = fn
        return fn

    return register


def workload_evidence(w: WorkloadComparison, cand: AnalysedRun, what: str) -> Evidence:
    rec = cand.workload_by_id.get(w.candidate_id)
    reproduce = rec.reproduce if rec is not None else None
    return Evidence("workload", what, value=w.candidate_id, reproduce=reproduce or "")
