"""Every file a review cites, read and judged once: the checks, the packet and the site share it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reviewkit.evidence import files as evidence_files
from reviewkit.evidence import loadgen
from reviewkit.evidence.quality import read_quality
from reviewkit.evidence.shortlist import read_shortlist
from reviewkit.evidence.sla_load import LoadJudgement, judge_under_load
from reviewkit.evidence.soak import read_soak
from reviewkit.evidence.sweep import Sweep, SweptWorkload, read_sweep
from reviewkit.evidence.trace import fit as fitmatrix
from reviewkit.evidence.trace.diff import read_trace_diff
from reviewkit.review.reviewfile import Review
from reviewkit.review.rubric import Rubric
from reviewkit.review.status import FAIL, PASS

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun

PRECISION_CHECK = "precision-quality"  # the rubric item whose params are the quality limits
FIT_CHECK = fitmatrix.CHECK


@dataclass(frozen=True)
class CitedFiles:
    """The files cited under one [evidence] key: their typed records and why others are not used."""

    cited: bool  # the review cites at least one file under the key
    records: tuple[Any, ...]  # typed records (Sweep, Soak, Quality), each with its .path
    not_used: tuple[tuple[Path, str], ...]

    def notes(self, review: Review) -> list[str]:
        """One line per file not used, naming it as the review cites it, with the reason."""
        return [f"{review.relative(path)}: not used: {why}" for path, why in self.not_used]


@dataclass(frozen=True)
class QualityLimits:
    """The rubric's quality thresholds (its precision-quality item), or none without the item."""

    tolerances: dict[str, float]  # relative error against float64, by dtype
    min_top1_agreement: float | None
    max_kl_divergence: float | None
    has_item: bool


@dataclass(frozen=True)
class JudgedQualityRow:
    """One measured quality result against the rubric's limits (None: no limit for it)."""

    source: Path
    row: Any  # evidence.quality.QualityRow
    over_tolerance: bool | None
    top1_below: bool | None
    kl_above: bool | None


@dataclass(frozen=True)
class FitLimits:
    """The rubric's production-fit thresholds, None when the rubric has no such item."""

    min_coverage: float | None
    shape_range_factor: float | None


@dataclass(frozen=True)
class SweptTarget:
    """The p99 target one swept workload is held to, where it comes from, and the verdict under
    load (server levels; None when no p99 target applies)."""

    p99_s: float | None
    where: str  # "review target <workload>[, scenario]" | "the sweep's --sla-p99-s" | ""
    min_rate_per_s: float | None
    judgement: LoadJudgement | None


@dataclass(frozen=True)
class ProductionTraces:
    """Usable production traces and what was left out, scored against each candidate."""

    sources: tuple[tuple[str, dict], ...]  # (review-relative summary, trace)
    notes: tuple[str, ...]
    fits: tuple[tuple[Any, Exception | None], ...]  # per candidate: (FitMatrix | None, error)

    @property
    def traces(self) -> list[dict]:
        return [t for _, t in self.sources]


@dataclass(frozen=True)
class CitedEvidence:
    """The review's cited evidence, each kind read on first use and never again, with the
    rubric's thresholds it is judged against. A frozen record: cached_property writes the
    instance's __dict__ directly, so each kind is read once and then shared."""

    review: Review
    rubric: Rubric | None  # None: a check run on its own (it reads its thresholds itself)
    candidates: tuple[tuple[Path, AnalysedRun], ...]

    def _item(self, check: str):
        items = self.rubric.items if self.rubric is not None else ()
        return next((i for i in items if i.check == check), None)

    def _read(self, key: str, kind: str, parse) -> CitedFiles:
        paths = self.review.evidence.get(key, ())
        records, not_used = evidence_files.read_cited(paths, kind, parse)
        return CitedFiles(bool(paths), tuple(records), tuple(not_used))

    @cached_property
    def sweeps(self) -> CitedFiles:
        return self._read("sweep", evidence_files.SWEEP, read_sweep)

    @cached_property
    def soaks(self) -> CitedFiles:
        return self._read("long_window", evidence_files.SOAK, read_soak)

    @cached_property
    def shortlists(self) -> CitedFiles:
        """Cited `reviewkit shortlist` results: shown in the packet, judged by no check."""
        return self._read("shortlist", evidence_files.SHORTLIST, read_shortlist)

    @cached_property
    def trace_diffs(self) -> CitedFiles:
        """Cited `reviewkit trace diff` results: shown in the packet, judged by no check."""
        return self._read("trace_diff", evidence_files.TRACE_DIFF, read_trace_diff)

    @cached_property
    def quality(self) -> CitedFiles:
        return self._read("quality", evidence_files.QUALITY, read_quality)

    @cached_property
    def quality_limits(self) -> QualityLimits:
        item = self._item(PRECISION_CHECK)
        params = item.params if item else {}
        raw = params.get("tolerances") or {}
        tolerances = {str(k): float(v) for k, v in raw.items()
                      if isinstance(v, int | float) and not isinstance(v, bool)}  # fmt: skip

        def number(key: str) -> float | None:
            v = params.get(key)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        return QualityLimits(tolerances, number("min_top1_agreement"),
                             number("max_kl_divergence"), item is not None)  # fmt: skip

    @cached_property
    def quality_judged(self) -> tuple[JudgedQualityRow, ...]:
        """Every applicable, measured quality row of the cited files, judged against the
        rubric's tolerance for its dtype, its top-1 minimum and its KL maximum (the suite
        decoder's top-1 and KL too: the row says it is a smoke check, `from_model` False)."""
        limits, out = self.quality_limits, []
        for quality in self.quality.records:
            for r in quality.rows:
                if not (r.applicable and r.measured):
                    continue
                tol = limits.tolerances.get(r.tolerance_key) if r.tolerance_key else None
                top1, kl = r.top1_agreement, r.kl_divergence
                out.append(JudgedQualityRow(
                    quality.path, r,
                    None if tol is None else r.rel_error > tol,
                    None if top1 is None or limits.min_top1_agreement is None
                    else top1 < limits.min_top1_agreement,
                    None if kl is None or limits.max_kl_divergence is None
                    else kl > limits.max_kl_divergence,
                ))  # fmt: skip
        return tuple(out)

    def fit_verdict(self, score: float) -> str:
        """pass or fail against the rubric's min_coverage; "" when the rubric sets none."""
        minimum = self.fit_limits.min_coverage
        return "" if minimum is None else (PASS if score >= minimum else FAIL)

    @cached_property
    def fit_limits(self) -> FitLimits:
        item = self._item(FIT_CHECK)
        if item is None:
            return FitLimits(None, None)
        # the rubric loader makes sure the item has both, as numbers
        return FitLimits(float(item.params["min_coverage"]),
                         float(item.params["shape_range_factor"]))  # fmt: skip

    @cached_property
    def trace_files(self) -> CitedFiles:
        """Cited trace summaries as loaded documents (Loaded: .path, .doc)."""
        loaded = evidence_files.read_all(
            self.review.evidence.get("production_traces", ()), evidence_files.TRACE
        )
        return CitedFiles(
            bool(loaded),
            tuple(x for x in loaded if x.ok),
            tuple((x.path, x.reason) for x in loaded if not x.ok),
        )

    def production(self, factor: float) -> ProductionTraces:
        """The usable traces at `factor` (the rubric's shape window), each candidate's fit."""
        key = f"_production_{factor!r}"
        if key not in self.__dict__:
            self.__dict__[key] = self._production(factor)
        return self.__dict__[key]

    def _production(self, factor: float) -> ProductionTraces:
        files = self.trace_files
        notes = files.notes(self.review)
        docs = [(self.review.relative(x.path), x.doc) for x in files.records]
        usable, left_out = fitmatrix.usable_traces(docs, factor)
        for out in left_out:
            if out.why == fitmatrix.NO_TRACES:
                notes.append(f"{out.source}: not used: no traces in the summary")
            elif out.why == fitmatrix.DAMAGED:
                notes.append(
                    f"{out.source}: {out.name or f'trace {out.index}'}: not used: a damaged "
                    f"trace ({type(out.error).__name__}: {str(out.error)[:80]}); re-run "
                    "`reviewkit trace import`"
                )
            else:
                notes.append(f"{out.source}: {out.name}: cited again (same sha256): counted once")
        traces = [t for _, t in usable]
        fits = []
        for _, run in self.candidates:
            if not traces:
                fits.append((None, None))
                continue
            try:
                fit = fitmatrix.build(traces, run, factor)
                # the model serialises it: a fit that cannot is not scored, here as there
                json.dumps(fit.to_json(), allow_nan=False)
                fits.append((fit, None))
            except fitmatrix.MALFORMED as exc:
                fits.append((None, exc))
        return ProductionTraces(tuple(usable), tuple(notes), tuple(fits))

    def swept_target(self, workload_id: str, sweep: Sweep) -> SweptTarget:
        """The review's target for a swept workload (the server scenario's first: the curve is
        the server's), else the sweep's own --sla-p99-s; judged under load on its server levels."""
        from reviewkit.analysis.sla import matching_targets

        matching = matching_targets(self.review.sla_targets, workload_id, key_of_id(workload_id))
        matching.sort(key=lambda t: t.scenario != loadgen.SERVER)
        w = next(x for x in sweep.workloads if x.id == workload_id)
        for t in matching:
            if t.p99_s is not None:
                where = f"review target {t.workload}" + (
                    "" if t.scenario == loadgen.SERVER else f", {t.scenario}"
                )
                return SweptTarget(t.p99_s, where, t.min_throughput_per_s,
                                   _judged(w, t.p99_s, t.min_throughput_per_s))  # fmt: skip
        if sweep.sla_p99_s is not None:
            return SweptTarget(sweep.sla_p99_s, "the sweep's --sla-p99-s", None,
                               _judged(w, sweep.sla_p99_s, None))  # fmt: skip
        return SweptTarget(None, "", None, None)


def _judged(w: SweptWorkload, p99_s: float, load_per_s: float | None) -> LoadJudgement | None:
    if not w.server:
        return None
    return judge_under_load(w.server, w.single_stream, p99_s, load_per_s)


def key_of_id(workload_id: str) -> str:
    """A swept workload's slice key: its id without the trailing dtype (sweeps record the id,
    not the dtype), as compare.slice_key gives it for a run's workload."""
    return workload_id.rsplit(".", 1)[0]
