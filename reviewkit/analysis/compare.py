"""Compare two analysed run bundles: knob diff, ratios with bootstrap intervals, verdicts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from reviewkit.analysis.stats import bootstrap_quantiles, interval
from reviewkit.bundle.run import STATUS_OK

# 1000 resamples give a 95% interval whose ends move by under 1% between seeds for the sample
# sizes the suite collects, and keep a 90-workload comparison well under a second.
COMPARE_RESAMPLES = 1000
BASE_SEED, CAND_SEED = 0, 1  # independent resamples of the two runs, reproducible
QUANTILES = (0.5, 0.95, 0.99)
FASTER, SLOWER, NO_DIFFERENCE = "faster", "slower", "no significant difference"
NOT_COMPARABLE = "not comparable"
# Knobs that follow from others rather than being mapping choices of their own.
DERIVED_KNOBS = ("device_name",)
DEVICE_KNOB = "device"


@dataclass(frozen=True)
class KnobChange:
    knob: str
    baseline: object
    candidate: object


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
    mfu_baseline: float | None = None
    mfu_candidate: float | None = None
    mfu_delta: float | None = None
    memory_stall_delta: float | None = None
    bottleneck_baseline: str | None = None
    bottleneck_candidate: str | None = None
    params: dict = field(default_factory=dict)

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

    def mapping_knob_changes(self, ignore: tuple[str, ...] = ()) -> list[KnobChange]:
        """The changes a reviewer chose. When the device type changes (CPU to CUDA, say), a knob
        only one of the runs records is a setting of one device that the other does not have
        (CUDA's TF32 switches): it follows from the device change, not a second change."""
        device = next((k for k in self.knob_changes if k.knob == DEVICE_KNOB), None)
        cross = device is not None and _device_type(device.baseline) != _device_type(
            device.candidate
        )
        return [
            k
            for k in self.knob_changes
            if k.knob not in ignore + DERIVED_KNOBS
            and not (cross and (k.baseline is None or k.candidate is None))
        ]

    @property
    def p99_regressions(self) -> list[WorkloadComparison]:
        return [w for w in self.workloads if w.p99_verdict == SLOWER]

    def to_json(self) -> dict:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "knob_changes": [asdict(k) for k in self.knob_changes],
            "paired_by": self.paired_by,
            "warnings": list(self.warnings),
            "workloads": [w.to_json() for w in self.workloads],
            "layer_types": [layer.to_json() for layer in self.layer_types],
            "p99_regressions": [w.key for w in self.p99_regressions],
        }


def _device_type(device: object) -> str:
    """The kind of device, whatever its index: "cuda:0" -> "cuda"."""
    return str(device).split(":", 1)[0] if device else ""


def knob_diff(base: dict, cand: dict) -> list[KnobChange]:
    keys = list(base) + [k for k in cand if k not in base]
    return [KnobChange(k, base.get(k), cand.get(k)) for k in keys if base.get(k) != cand.get(k)]


def slice_key(workload: dict) -> str:
    """The workload id without its dtype: the same operator at the same shape."""
    suffix = "." + workload["dtype"]
    wid = workload["id"]
    return wid[: -len(suffix)] if wid.endswith(suffix) else wid


def _verdict(ci: tuple[float, float]) -> str:
    low, high = ci
    if high < 1:
        return FASTER
    if low > 1:
        return SLOWER
    return NO_DIFFERENCE


def ratio_ci(cand_draws: np.ndarray, base_draws: np.ndarray) -> tuple[float, float]:
    return interval(cand_draws / base_draws)


def _pairs(base_doc: dict, cand_doc: dict) -> tuple[list[tuple[str, dict, dict]], str, list[str]]:
    warnings = []
    b_dtypes = set(base_doc["knobs"].get("dtypes", []))
    c_dtypes = set(cand_doc["knobs"].get("dtypes", []))
    by_shape = b_dtypes != c_dtypes and len(b_dtypes) == len(c_dtypes) == 1
    key = slice_key if by_shape else (lambda w: w["id"])
    base = {key(w): w for w in base_doc["workloads"]}
    cand = {key(w): w for w in cand_doc["workloads"]}
    common = [k for k in base if k in cand]
    if base_doc["suite"].get("hash") != cand_doc["suite"].get("hash"):
        warnings.append(
            f"suite hashes differ ({base_doc['suite'].get('hash')} vs "
            f"{cand_doc['suite'].get('hash')}): compared on the {len(common)} workloads "
            "both runs share"
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


def compare(
    base_doc: dict,
    cand_doc: dict,
    baseline_label: str = "baseline",
    candidate_label: str = "candidate",
) -> Comparison:
    """Both documents must be analysed (reviewkit.analysis.roofline.analyse_run)."""
    pairs, mode, warnings = _pairs(base_doc, cand_doc)
    rows: list[WorkloadComparison] = []
    layer_draws: dict[str, list[tuple[np.ndarray, np.ndarray, dict, dict]]] = {}
    for key, b, c in pairs:
        common = {
            "key": key,
            "layer_type": b["layer_type"],
            "baseline_id": b["id"],
            "candidate_id": c["id"],
            "params": b.get("params", {}),
        }
        if (
            b["status"] != STATUS_OK
            or c["status"] != STATUS_OK
            or not b["samples_s"]
            or not c["samples_s"]
        ):
            failed = [
                f"{label} {w['status']}"
                for label, w in (("baseline", b), ("candidate", c))
                if w["status"] != STATUS_OK or not w["samples_s"]
            ]
            rows.append(
                WorkloadComparison(**common, verdict=NOT_COMPARABLE, reason="; ".join(failed))
            )
            continue
        bd = bootstrap_quantiles(b["samples_s"], QUANTILES, COMPARE_RESAMPLES, BASE_SEED)
        cd = bootstrap_quantiles(c["samples_s"], QUANTILES, COMPARE_RESAMPLES, CAND_SEED)
        bs, cs = b["stats"], c["stats"]
        median_ci = ratio_ci(cd[:, 0], bd[:, 0])
        p95_ci = ratio_ci(cd[:, 1], bd[:, 1])
        p99_ci = ratio_ci(cd[:, 2], bd[:, 2])
        rows.append(
            WorkloadComparison(
                **common,
                verdict=_verdict(median_ci),
                median_ratio=cs["p50_s"] / bs["p50_s"],
                median_ratio_ci=median_ci,
                mean_ratio=cs["mean_s"] / bs["mean_s"],
                p95_ratio=cs["p95_s"] / bs["p95_s"],
                p95_ratio_ci=p95_ci,
                p99_ratio=cs["p99_s"] / bs["p99_s"],
                p99_ratio_ci=p99_ci,
                p99_verdict=_verdict(p99_ci),
                mfu_baseline=b.get("mfu"),
                mfu_candidate=c.get("mfu"),
                mfu_delta=_delta(c.get("mfu"), b.get("mfu")),
                memory_stall_delta=_delta(_stall(c), _stall(b)),
                bottleneck_baseline=b.get("bottleneck"),
                bottleneck_candidate=c.get("bottleneck"),
            )
        )
        layer_draws.setdefault(b["layer_type"], []).append((bd[:, 0], cd[:, 0], b, c))
    layers = []
    b_layers = base_doc.get("layer_types_by_dtype", {})
    c_layers = cand_doc.get("layer_types_by_dtype", {})
    b_agg = _single(b_layers) if mode != "id" else base_doc.get("layer_types", {})
    c_agg = _single(c_layers) if mode != "id" else cand_doc.get("layer_types", {})
    for layer_type, items in layer_draws.items():
        base_sum = sum(d for d, _, _, _ in items)
        cand_sum = sum(d for _, d, _, _ in items)
        ratio = sum(c["stats"]["p50_s"] for *_, c in items) / sum(
            b["stats"]["p50_s"] for *_, b, _ in items
        )
        ci = interval(cand_sum / base_sum)
        ba, ca = b_agg.get(layer_type, {}), c_agg.get(layer_type, {})
        layers.append(
            LayerComparison(
                layer_type=layer_type,
                workloads=len(items),
                time_ratio=ratio,
                time_ratio_ci=ci,
                verdict=_verdict(ci),
                mfu_baseline=ba.get("mfu"),
                mfu_candidate=ca.get("mfu"),
                memory_stall_baseline=ba.get("memory_stall_fraction"),
                memory_stall_candidate=ca.get("memory_stall_fraction"),
                bottleneck_baseline=ba.get("bottleneck"),
                bottleneck_candidate=ca.get("bottleneck"),
            )
        )
    return Comparison(
        baseline=baseline_label,
        candidate=candidate_label,
        knob_changes=tuple(knob_diff(base_doc["knobs"], cand_doc["knobs"])),
        paired_by=mode,
        warnings=tuple(warnings),
        workloads=tuple(rows),
        layer_types=tuple(layers),
    )


def _single(by_dtype: dict) -> dict:
    """The one dtype's layer aggregates of a single-dtype run."""
    return next(iter(by_dtype.values()), {}) if len(by_dtype) == 1 else {}


def _stall(w: dict) -> float | None:
    f = w.get("fractions")
    return f["memory_stall"] if f else None


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b
