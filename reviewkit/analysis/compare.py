"""Compare two analysed run bundles: knob diff, ratios with hierarchical bootstrap intervals,
three-way verdicts against the rubric's margin, p99 regressions under a false discovery rate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from reviewkit.analysis import ceilings, mechanism, run_to_run
from reviewkit.analysis.distributed import scaling_notes
from reviewkit.analysis.knobs import (
    DEVICE_KNOB,
    FOLLOWS_DEVICE,
    EnvironmentChange,
    KnobChange,
    KnobPolicy,
    KnobReading,
    device_type,
    environment_changes,
    knob_diff,
    read_knobs,
)
from reviewkit.analysis.pairing import (
    CALLS_PAIRED,
    INDEPENDENT,
    PAIRED,
    QUANTILES,
    calls_paired,
    inconclusive_reason,
    interval_of,
    paired_design,
    ratio_draws,
)
from reviewkit.analysis.run_to_run import Allowance
from reviewkit.analysis.stats import (
    EQUIVALENT,
    FASTER,
    INCONCLUSIVE,
    PERCENTILE,
    SLOWER,
    benjamini_hochberg,
    call_paired_interval,
    call_paired_log_ratios,
    p_beyond,
    split_rounds_in_order,
    three_way_verdict,
)
from reviewkit.bundle.run import device_name
from reviewkit.common.format import MISSING, pct

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload, LayerAggregate
    from reviewkit.bundle.records import Run, Workload

# 1000 resamples give a 95% interval whose ends move by under 1% between seeds for the sample
# sizes the suite collects, and keep a 90-workload comparison well under a second.
COMPARE_RESAMPLES = 1000
BASE_SEED, CAND_SEED = 0, 1  # independent resamples of the two runs, reproducible
NOT_COMPARABLE = "not comparable"
# Fewer samples than this on a side leave the bootstrap nothing to resample: one sample per
# side gave a zero-width interval ([1.013, 1.013]) and an "equivalent" verdict on a 1.3 s
# decoder whose budget allowed one call per side. Such a row is inconclusive, said why.
MIN_SAMPLES_FOR_VERDICT = 3
VERDICTS = (FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE, NOT_COMPARABLE)


@dataclass(frozen=True)
class Margins:
    """What a verdict needs beyond statistics, from the rubric's [verdicts] table: the
    practical margin on a ratio (per layer type where one is set), the false discovery rate
    across the p99 comparisons, and how far a ceiling may move between two runs on one device
    before that is a finding of its own; and the run-to-run variation every interval between
    two separate runs carries (an interleaved A/B cancels it): the log-scale standard deviation
    of a workload's median between separate runs beyond what their rounds show. Each run carries
    its device's measured figure, recorded in its bundle (analysis/run_to_run.py), never below
    `run_to_run_sd_floor`; `run_to_run_sd` is the default for a device never measured.
    `STATISTICAL_ONLY` (no margin, no run-to-run allowance, measured or not) is what a
    comparison without a rubric gets."""

    min_effect: float
    fdr: float
    max_ceiling_shift: float
    run_to_run_sd: float = 0.0
    min_effect_by_layer_type: dict = field(default_factory=dict)
    run_to_run_sd_floor: float = 0.0
    run_to_run_per_device: bool = True  # whether the bundles' measured figures apply

    def for_layer(self, layer_type: str) -> float:
        return float(self.min_effect_by_layer_type.get(layer_type, self.min_effect))

    def to_json(self) -> dict:
        return asdict(self)


# No practical margin: a verdict is directional as soon as the interval excludes 1 (the
# behaviour before margins), at the conventional 5% false discovery rate, with no run-to-run
# allowance.
STATISTICAL_ONLY = Margins(min_effect=0.0, fdr=0.05, max_ceiling_shift=0.05,
                           run_to_run_per_device=False)

# The median ratio's estimator, in words a table header can carry.
ROUND_MEANS = "mean over rounds of each round's median"
CALL_PAIRED_ESTIMATOR = "geometric mean of the call-paired ratios"
QUANTILE_NAMES = {0.5: "p50", 0.95: "p95", 0.99: "p99"}


@dataclass(frozen=True)
class WorkloadComparison:
    key: str
    layer_type: str
    baseline_id: str
    candidate_id: str
    verdict: str
    reason: str = ""
    median_ratio: float | None = None
    median_ratio_ci: tuple[float, float] | None = None
    mean_ratio: float | None = None
    p95_ratio: float | None = None
    p95_ratio_ci: tuple[float, float] | None = None
    p99_ratio: float | None = None
    p99_ratio_ci: tuple[float, float] | None = None
    p99_verdict: str | None = None
    # One-sided bootstrap p-value that p99 regressed beyond the margin, and whether it stays a
    # regression after Benjamini-Hochberg across every p99 comparison of the two runs.
    p99_p_value: float | None = None
    p99_regression: bool = False
    margin: float | None = None
    rounds: tuple[int, int] | None = None  # (baseline, candidate)
    # What each ratio divides, per quantile ("p50", ...): (baseline, candidate) means over rounds
    # of each round's quantile, in s (not the pooled quantile a table beside it may show)
    points_s: dict = field(default_factory=dict)
    median_estimator: str = ""  # ROUND_MEANS, or CALL_PAIRED_ESTIMATOR: then not a quotient
    mfu_baseline: float | None = None
    mfu_candidate: float | None = None
    mfu_delta: float | None = None
    # On one device (one denominator), the MFU change that the median ratio's interval allows:
    # the candidate's MFU scaled by point / high and point / low of the ratio. Between separate
    # runs it carries their run-to-run allowance, so timing noise is not read as an MFU change.
    mfu_delta_ci: tuple[float, float] | None = None
    memory_stall_delta: float | None = None
    bottleneck_baseline: str | None = None
    bottleneck_candidate: str | None = None
    params: dict = field(default_factory=dict)
    # candidate - baseline of each time fraction (compute, memory_stall, communication,
    # overhead, inefficiency; None where a side's overhead was not measured), in points of 1
    fraction_deltas: dict = field(default_factory=dict)
    roof_share_baseline: float | None = None
    roof_share_candidate: float | None = None
    below_roof_candidate: bool = False
    lever_candidate: str = ""

    @property
    def bottleneck_changed(self) -> bool:
        return self.bottleneck_baseline != self.bottleneck_candidate

    def to_json(self) -> dict:
        d = asdict(self)
        d["bottleneck_changed"] = self.bottleneck_changed
        return d


@dataclass(frozen=True)
class LayerComparison:
    layer_type: str
    workloads: int
    time_ratio: float
    time_ratio_ci: tuple[float, float]
    verdict: str
    mfu_baseline: float | None
    mfu_candidate: float | None
    memory_stall_baseline: float | None
    memory_stall_candidate: float | None
    bottleneck_baseline: str | None
    bottleneck_candidate: str | None
    margin: float | None = None
    reason: str = ""
    fraction_deltas: dict = field(default_factory=dict)
    overhead_baseline: float | None = None
    overhead_candidate: float | None = None
    inefficiency_baseline: float | None = None
    inefficiency_candidate: float | None = None
    roof_share_baseline: float | None = None
    roof_share_candidate: float | None = None
    below_roof_candidate: bool = False
    lever_candidate: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    baseline: str
    candidate: str
    knob_changes: tuple[KnobChange, ...]
    paired_by: str  # "id" | "shape (dtype differs)"
    warnings: tuple[str, ...]
    workloads: tuple[WorkloadComparison, ...]
    layer_types: tuple[LayerComparison, ...]
    margins: Margins = STATISTICAL_ONLY
    # "rounds paired (interleaved A/B)" or "independent runs": how the rounds were resampled.
    design: str = "independent runs"
    # The smallest ratio change this comparison resolves: the median half-width of the
    # workloads' 95% intervals of the median ratio (what an A/A would show as noise).
    noise_floor: float | None = None
    p99_comparisons: int = 0  # how many p99 tests the false discovery rate is controlled over
    # Which ceilings MFU and the stall fractions of both runs are computed against.
    denominator: str = "each run's own ceilings"
    # Whether both runs measured one device (fingerprints, else name and kind, agree).
    same_device: bool = False
    # The run-to-run part of every interval between two separate runs: each side's figure and
    # where it came from; and the one per-run figure of the same variance. None for the two
    # sides of one interleaved A/B (pairing cancels it).
    run_to_run: Allowance | None = None
    run_to_run_sd: float | None = None
    # Environment differences that confound the knob (framework and kernel-library versions
    # beyond the device build tag, driver, interpreter, commit), and those the device change
    # brings with it (a library serving one side's device only).
    confounders: tuple[EnvironmentChange, ...] = ()
    device_environment: tuple[EnvironmentChange, ...] = ()
    # How the knob diff is read (the rubric's single-knob-change params; none: only settings
    # of one device type follow a change of type).
    knob_policy: KnobPolicy = field(default_factory=KnobPolicy)
    # per layer type its workloads' bootstrap draws, medians, rounds and pairing: what a
    # production-weighted ratio resamples (analysis/production_weighted.py)
    layer_draws: Mapping = field(default_factory=dict, repr=False, compare=False)

    def knob_reading(self, policy: KnobPolicy | None = None) -> KnobReading:
        """The knob diff read under `policy` (default: the comparison's own): the changes a
        reviewer chose, and those that came with the device change."""
        return read_knobs(self.knob_changes, policy or self.knob_policy)

    def mapping_knob_changes(self, ignore: tuple[str, ...] = ()) -> list[KnobChange]:
        """The changes a reviewer chose, the comparison's policy ignoring `ignore` as well."""
        p = self.knob_policy
        policy = KnobPolicy(p.ignore + tuple(ignore), p.implied_by_device, p.device_defaults)
        return list(self.knob_reading(policy).counted)

    @property
    def p99_regressions(self) -> list[WorkloadComparison]:
        """p99 slower beyond the margin, and still so after controlling the false discovery
        rate across all `p99_comparisons` (one test per workload compared)."""
        return [w for w in self.workloads if w.p99_regression]

    def basis(self) -> str:
        """One sentence on what the verdicts rest on: design, margin, the measured noise floor,
        the false discovery rate and the denominators (terminal, packet and site alike)."""
        m = self.margins
        by_layer = ", ".join(
            f"{k} ±{pct(v, 0)}" for k, v in sorted(m.min_effect_by_layer_type.items())
        )
        floor = MISSING if self.noise_floor is None else f"±{pct(self.noise_floor)}"
        return (
            f"Verdicts: {self.design}; margin ±{pct(m.min_effect, 0)}"
            + (f" ({by_layer})" if by_layer else "")
            + (self.run_to_run.text() if self.run_to_run else "")
            + f"; measured noise floor {floor} (the median relative half-width of the "
            "workloads' 95% intervals, half the interval over its ratio: about what an A/A "
            "comparison shows)"
            + f"; p99 regressions at a {pct(m.fdr, 0)} false discovery rate over "
            f"{self.p99_comparisons} comparisons; MFU against {self.denominator}."
        )

    def to_json(self) -> dict:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "knob_changes": [asdict(k) for k in self.knob_changes],
            "knob_policy": asdict(self.knob_policy),
            "knob_reading": self.knob_reading().to_json(),
            "confounders": [c.to_json() for c in self.confounders],
            "device_environment": [c.to_json() for c in self.device_environment],
            "paired_by": self.paired_by,
            "warnings": list(self.warnings),
            "workloads": [w.to_json() for w in self.workloads],
            "layer_types": [layer.to_json() for layer in self.layer_types],
            "p99_regressions": [w.key for w in self.p99_regressions],
            "margins": self.margins.to_json(),
            "design": self.design,
            "noise_floor": self.noise_floor,
            "p99_comparisons": self.p99_comparisons,
            "denominator": self.denominator,
            "same_device": self.same_device,
            "run_to_run_sd": self.run_to_run_sd,
            "run_to_run": self.run_to_run.to_json() if self.run_to_run else None,
            "basis": self.basis(),
        }


def shape_key(workload_id: str, dtype: str) -> str:
    """The workload id without its trailing dtype: the same operator at the same shape."""
    suffix = "." + dtype
    return workload_id[: -len(suffix)] if workload_id.endswith(suffix) else workload_id


def slice_key(workload: Workload) -> str:
    """The workload's id without its dtype (shape_key)."""
    return shape_key(workload.id, workload.dtype)


def _pairs(
    base_run: AnalysedRun, cand_run: AnalysedRun
) -> tuple[list[tuple[str, AnalysedWorkload, AnalysedWorkload]], str, list[str]]:
    warnings = []
    b_dtypes = set(base_run.knobs.get("dtypes", []))
    c_dtypes = set(cand_run.knobs.get("dtypes", []))
    by_shape = b_dtypes != c_dtypes and len(b_dtypes) == len(c_dtypes) == 1
    key = slice_key if by_shape else (lambda w: w.id)
    base = {key(w): w for w in base_run.workloads}
    cand = {key(w): w for w in cand_run.workloads}
    common = [k for k in base if k in cand]
    b_hash, c_hash = base_run.suite.get("hash"), cand_run.suite.get("hash")
    if b_hash != c_hash:
        warnings.append(
            f"suite hashes differ ({b_hash} vs {c_hash}): compared on the {len(common)} "
            "workloads both runs share"
        )
    only_base = [k for k in base if k not in cand]
    only_cand = [k for k in cand if k not in base]
    if only_base or only_cand:
        warnings.append(
            f"{len(only_base)} workload(s) only in the baseline and {len(only_cand)} only in "
            f"the candidate are not compared (e.g. {(only_base + only_cand)[0]})"
        )
    mode = "shape (dtype differs)" if by_shape else "id"
    return [(k, base[k], cand[k]) for k in common], mode, warnings


def _fingerprint(run: Run) -> str | None:
    return run.fingerprint.get("hash")


def _same_device(base_run: Run, cand_run: Run) -> bool:
    """Both runs on one device: by the device fingerprint where both bundles record one (two
    machines of one name can differ in what decides their kernels), else by the recorded name
    and kind. Their ceilings then measure the same hardware, so one denominator serves both."""
    prints = _fingerprint(base_run), _fingerprint(cand_run)
    if None not in prints:
        return prints[0] == prints[1]
    kinds = [device_type((r.knobs or {}).get(DEVICE_KNOB)) for r in (base_run, cand_run)]
    name = device_name(base_run)
    return name != "unknown device" and name == device_name(cand_run) and kinds[0] == kinds[1]


def _fingerprint_warning(base_run: Run, cand_run: Run) -> str | None:
    """A warning when the names match but the fingerprints do not: different devices."""
    prints = _fingerprint(base_run), _fingerprint(cand_run)
    if None in prints or prints[0] == prints[1] or device_name(base_run) != device_name(cand_run):
        return None
    labels = [r.fingerprint.get("label", "?") for r in (base_run, cand_run)]
    return (
        f"different devices under one name: {labels[0]} against {labels[1]} (device "
        "fingerprints differ); each run's MFU is against its own ceilings"
    )


def _one_round_note(methods: list[str]) -> str:
    """How many workloads fell back to the percentile bootstrap (a side measured in one round):
    said as a count, since "one round" alone read as if the whole comparison had one."""
    n = methods.count(PERCENTILE)
    if not n:
        return ""
    which = "every workload" if n == len(methods) else f"{n} of {len(methods)} workloads"
    return f"; {which}: {PERCENTILE}"


def compare(
    base: AnalysedRun,
    cand: AnalysedRun,
    baseline_label: str = "baseline",
    candidate_label: str = "candidate",
    margins: Margins = STATISTICAL_ONLY,
    knob_policy: KnobPolicy | None = None,
) -> Comparison:
    """Both runs must be analysed (reviewkit.analysis.roofline.analyse_run).

    Each quantile compared is the mean over rounds of each round's quantile; its interval is a
    hierarchical bootstrap (rounds, then samples within them), with the rounds of an
    interleaved A/B resampled in pairs. A ratio is `faster`/`slower` only beyond the margin."""
    pairs, mode, warnings = _pairs(base, cand)
    paired = paired_design(base, cand)
    allowance = None if paired else run_to_run.choose(
        base, cand, margins.run_to_run_sd, margins.run_to_run_sd_floor,
        margins.run_to_run_per_device)  # fmt: skip
    known = allowance.variance if allowance else 0.0
    by_call = calls_paired(base, cand)
    same_device = _same_device(base, cand)
    # one denominator on one device at one setting; each run its own where a knob moved it
    moved = ceilings.moved_settings(base, cand) if same_device else []
    one_denominator = same_device and not moved
    denominator = ceilings.shared(base, cand) if one_denominator else {}
    different = _fingerprint_warning(base, cand)
    if different:
        warnings.append(different)
    warnings += scaling_notes(base, cand)
    shifts = ceilings.shifts(base, cand) if same_device else {}
    for what, shift in shifts.items():
        if abs(shift) > margins.max_ceiling_shift:
            warnings.append(
                f"the {what} ceiling moved {shift:+.1%} between the runs on this one device "
                f"(beyond {margins.max_ceiling_shift:.0%}): MFU and stall fractions of both runs "
                "are computed against the baseline's, so the move is not read as an MFU change; "
                "the move itself needs explaining (clocks, neighbours, calibration)"
            )
    rows: list[WorkloadComparison] = []
    methods: list[str] = []
    p_values: list[tuple[int, float]] = []
    layer_draws: dict[str, list[tuple[np.ndarray, np.ndarray, float, float]]] = {}
    half_widths = []
    for key, b, c in pairs:
        common = {
            "key": key,
            "layer_type": b.layer_type,
            "baseline_id": b.id,
            "candidate_id": c.id,
            "params": dict(b.params),
        }
        if not (b.measured and c.measured):
            failed = [
                f"{label} {w.status}"
                for label, w in (("baseline", b), ("candidate", c))
                if not w.measured
            ]
            rows.append(
                WorkloadComparison(**common, verdict=NOT_COMPARABLE, reason="; ".join(failed))
            )
            continue
        margin = margins.for_layer(b.layer_type)
        points, draws, rounds, in_pairs = ratio_draws(b, c, key, paired)
        ratio = {q: points[q][1] / points[q][0] for q in QUANTILES}
        intervals = {
            q: interval_of(ratio[q], *draws[q], rounds, in_pairs, known)
            for q in QUANTILES
        }
        estimator = ROUND_MEANS
        if by_call and in_pairs:
            log_ratios = call_paired_log_ratios(
                split_rounds_in_order(b.samples_s, b.round_sizes),
                split_rounds_in_order(c.samples_s, c.round_sizes),
            )
            if len(log_ratios) >= 2:
                ratio[0.5], intervals[0.5] = call_paired_interval(log_ratios)
                estimator = CALL_PAIRED_ESTIMATOR
        ci = {q: intervals[q].ci for q in QUANTILES}
        verdict = three_way_verdict(ci[0.5], margin)
        few = min(len(b.samples_s), len(c.samples_s)) < MIN_SAMPLES_FOR_VERDICT
        if few:
            verdict = INCONCLUSIVE
        # relative to the ratio: a 0.012 [0.008, 0.019] ratio is ±46%, not ±0.5%
        half_widths.append((ci[0.5][1] - ci[0.5][0]) / 2 / ratio[0.5])
        p99_draws = draws[0.99][1] / draws[0.99][0]
        p_values.append((len(rows), p_beyond(ratio[0.99], intervals[0.99], p99_draws, margin)))
        methods.append(intervals[0.5].method)
        bs, cs = b.stats, c.stats
        if one_denominator:
            mfu_c, fractions_c, bottleneck_c = mechanism.on_baseline_ceilings(c, denominator)
        else:
            mfu_c, fractions_c, bottleneck_c = c.mfu, c.fractions, c.bottleneck
        stall_c = (fractions_c or {}).get("memory_stall")
        rows.append(
            WorkloadComparison(
                **common,
                verdict=verdict,
                reason=(f"too few samples for an interval ({len(b.samples_s)} baseline, "
                        f"{len(c.samples_s)} candidate; at least {MIN_SAMPLES_FOR_VERDICT} a "
                        "side): give the workload a longer budget or more rounds") if few
                else inconclusive_reason(ci[0.5], margin, paired)
                if verdict == INCONCLUSIVE
                else "",
                median_ratio=ratio[0.5],
                median_ratio_ci=ci[0.5],
                mean_ratio=cs.mean_s / bs.mean_s,
                p95_ratio=ratio[0.95],
                p95_ratio_ci=ci[0.95],
                p99_ratio=ratio[0.99],
                p99_ratio_ci=ci[0.99],
                points_s={QUANTILE_NAMES[q]: points[q] for q in QUANTILES},
                median_estimator=estimator,
                p99_verdict=INCONCLUSIVE if few else three_way_verdict(ci[0.99], margin),
                p99_p_value=p_values[-1][1],
                margin=margin,
                rounds=rounds,
                mfu_baseline=b.mfu,
                mfu_candidate=mfu_c,
                mfu_delta=mechanism.delta(mfu_c, b.mfu),
                mfu_delta_ci=mechanism.mfu_delta_ci(mfu_c, b.mfu, ratio[0.5], ci[0.5])
                if one_denominator
                else None,
                memory_stall_delta=mechanism.delta(stall_c, mechanism.stall(b)),
                bottleneck_baseline=b.bottleneck,
                bottleneck_candidate=bottleneck_c,
                fraction_deltas=mechanism.fraction_deltas(fractions_c, b.fractions),
                roof_share_baseline=mechanism.share(b),
                roof_share_candidate=mechanism.share(c),
                below_roof_candidate=bool(c.decomposition and c.decomposition.below_roof),
                lever_candidate=c.lever or "",
            )
        )
        layer_draws.setdefault(b.layer_type, []).append(
            (draws[0.5][0], draws[0.5][1], points[0.5][0], points[0.5][1], rounds, in_pairs)
        )
    rejected = benjamini_hochberg([p for _, p in p_values], margins.fdr)
    for (index, _), reject in zip(p_values, rejected, strict=True):
        if reject and rows[index].p99_verdict == SLOWER:
            rows[index] = replace(rows[index], p99_regression=True)
    layers = _layer_comparisons(base, cand, mode, layer_draws, margins, paired, known)
    environment = environment_changes(base, cand)
    return Comparison(
        baseline=baseline_label,
        candidate=candidate_label,
        knob_changes=tuple(knob_diff(base.knobs, cand.knobs)),
        paired_by=mode,
        warnings=tuple(warnings),
        workloads=tuple(rows),
        layer_types=tuple(layers),
        margins=margins,
        design=(CALLS_PAIRED if by_call else PAIRED if paired else INDEPENDENT)
        + _one_round_note(methods),
        noise_floor=float(np.median(half_widths)) if half_widths else None,
        p99_comparisons=len(p_values),
        denominator=ceilings.denominator_text(
            same_device, moved, ceilings.shared_profile(base, cand)
        ),
        same_device=same_device,
        run_to_run=allowance,
        run_to_run_sd=allowance.per_run_sd if allowance else None,
        confounders=tuple(e for e in environment if e.kind != FOLLOWS_DEVICE),
        device_environment=tuple(e for e in environment if e.kind == FOLLOWS_DEVICE),
        knob_policy=knob_policy or KnobPolicy(), layer_draws=layer_draws,
    )


def _layer_comparisons(
    base: AnalysedRun, cand: AnalysedRun, mode: str, layer_draws: dict, margins: Margins,
    paired: bool, known: float,
) -> list[LayerComparison]:
    """Per layer type: the ratio of summed medians, its interval from the summed draws."""
    layers = []
    b_agg = _single(base.layer_types_by_dtype) if mode != "id" else base.layer_types
    c_agg = _single(cand.layer_types_by_dtype) if mode != "id" else cand.layer_types
    for layer_type, items in layer_draws.items():
        base_sum = sum(item[0] for item in items)
        cand_sum = sum(item[1] for item in items)
        ratio = sum(item[3] for item in items) / sum(item[2] for item in items)
        rounds = (min(item[4][0] for item in items), min(item[4][1] for item in items))
        # The run-to-run variance is added whole, not divided among the layer's workloads: a
        # machine state that lasts a run moves all of them at once (docs/benchmarks.md).
        in_pairs = all(item[5] for item in items)
        ci = interval_of(ratio, base_sum, cand_sum, rounds, in_pairs, known).ci
        margin = margins.for_layer(layer_type)
        verdict = three_way_verdict(ci, margin)
        ba, ca = b_agg.get(layer_type), c_agg.get(layer_type)
        layers.append(
            LayerComparison(
                layer_type=layer_type,
                workloads=len(items),
                time_ratio=ratio,
                time_ratio_ci=ci,
                verdict=verdict,
                margin=margin,
                reason=inconclusive_reason(ci, margin, paired) if verdict == INCONCLUSIVE else "",
                fraction_deltas=mechanism.fraction_deltas(
                    mechanism.layer_fractions(ca), mechanism.layer_fractions(ba)
                ),
                **_layer_sides(ba, ca),
            )
        )
    return layers


def _layer_sides(ba: LayerAggregate | None, ca: LayerAggregate | None) -> dict:
    """The LayerComparison fields read off each side's aggregate (None where a side has none)."""
    return {
        "mfu_baseline": ba.mfu if ba else None,
        "mfu_candidate": ca.mfu if ca else None,
        "memory_stall_baseline": ba.memory_stall_fraction if ba else None,
        "memory_stall_candidate": ca.memory_stall_fraction if ca else None,
        "bottleneck_baseline": ba.bottleneck if ba else None,
        "bottleneck_candidate": ca.bottleneck if ca else None,
        "overhead_baseline": ba.overhead_fraction if ba else None,
        "overhead_candidate": ca.overhead_fraction if ca else None,
        "inefficiency_baseline": ba.inefficiency_fraction if ba else None,
        "inefficiency_candidate": ca.inefficiency_fraction if ca else None,
        "roof_share_baseline": ba.roof_share if ba else None,
        "roof_share_candidate": ca.roof_share if ca else None,
        "below_roof_candidate": bool(ca and ca.below_roof),
        "lever_candidate": (ca.lever if ca else "") or "",
    }


def _single(
    by_dtype: Mapping[str, Mapping[str, LayerAggregate]],
) -> Mapping[str, LayerAggregate]:
    """The one dtype's layer aggregates of a single-dtype run."""
    return next(iter(by_dtype.values()), {}) if len(by_dtype) == 1 else {}
