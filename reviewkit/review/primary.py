"""The claim's one primary metric, judged once: the metric, its interval, whether it settles."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from reviewkit.analysis.compare import Comparison
from reviewkit.analysis.stats import three_way_verdict
from reviewkit.review.reviewfile import Review

IMPROVEMENT, NO_REGRESSION = "improvement", "no-regression"
# The quantile the primary-metric answer names ("p99 latency of ..."): p99 and p95 by name, the
# median otherwise (what "latency" alone means in the comparison).
QUANTILE_WORDS = (("p99", re.compile(r"\bp99\b", re.I)), ("p95", re.compile(r"\bp95\b", re.I)))
QUANTILE_NAMES = {"p50": "median", "p95": "p95", "p99": "p99"}


@dataclass(frozen=True)
class PrimaryMetric:
    """The metric the claim rests on, its interval and verdict, and what its hypothesis needs."""

    kind: str  # "workload" | "layer"
    key: str  # the workload's slice key, or the layer type
    quantile: str  # "p50" | "p95" | "p99"
    label: str
    ratio: float
    ci: tuple[float, float]
    verdict: str
    margin: float
    hypothesis: str
    settles: bool
    needs: str  # what settles the hypothesis, in words
    # the compared workload's ids on each side (a layer-type metric has none): the claim's slice,
    # whose dtype the brief's chart and the trade view keep to
    baseline_id: str = ""
    candidate_id: str = ""

    @property
    def dtype(self) -> str:
        """The candidate's dtype in the claim (its workload id's last part), "" for a layer."""
        return self.candidate_id.rsplit(".", 1)[-1] if self.candidate_id else ""

    def to_json(self) -> dict:
        return {**asdict(self), "dtype": self.dtype}


def _quantile(text: str) -> str:
    return next((q for q, pattern in QUANTILE_WORDS if pattern.search(text)), "p50")


def named_workloads(answer, compared: list) -> list:
    """The compared workloads a review answer points at: its evidence's #fragment first, then
    any whose id its text contains (longest id first, so b1s256 is not found inside b1s2560)."""
    if answer is None:
        return []
    ids = [{w.key, w.candidate_id, w.baseline_id} - {None} for w in compared]
    fragment = (answer.evidence or "").partition("#")[2]
    by_fragment = [w for w, names in zip(compared, ids, strict=True)
                   if fragment and fragment in names]  # fmt: skip
    if by_fragment:
        return by_fragment
    text = answer.answer or ""
    mentioned = [(max(len(n) for n in names if n in text), i) for i, names in enumerate(ids)
                 if any(n in text for n in names)]  # fmt: skip
    return [compared[i] for _, i in sorted(mentioned, key=lambda m: (-m[0], m[1]))]


def primary_metric(review: Review, comparison: Comparison | None) -> PrimaryMetric | None:
    """The workload the primary-metric answer names (its evidence's #fragment, else an id in
    its text), else the end-to-end model, else the layer type with the most workloads; the
    quantile the answer names; its verdict against the margin, and whether it settles the
    review's hypothesis: `faster` for an improvement, the interval's upper end within the
    margin for a no-regression claim."""
    if comparison is None:
        return None
    answer = review.answers.get("primary-metric")
    quantile = _quantile(answer.answer if answer else "")
    compared = [w for w in comparison.workloads if w.median_ratio]
    chosen = named_workloads(answer, compared) or [w for w in compared if w.layer_type == "model"]
    if chosen:
        w = chosen[0]
        ratio, ci = {
            "p50": (w.median_ratio, w.median_ratio_ci),
            "p95": (w.p95_ratio, w.p95_ratio_ci),
            "p99": (w.p99_ratio, w.p99_ratio_ci),
        }[quantile]
        kind, key, margin = "workload", w.key, w.margin or comparison.margins.min_effect
        label = f"{QUANTILE_NAMES[quantile]} latency of {w.key}"
        ids = (w.baseline_id, w.candidate_id)
    elif comparison.layer_types:
        layer = max(comparison.layer_types, key=lambda x: x.workloads)
        quantile, ratio, ci = "p50", layer.time_ratio, layer.time_ratio_ci
        kind, key, margin = "layer", layer.layer_type, layer.margin or 0.0
        label = f"summed median time of {layer.layer_type}"
        ids = ("", "")
    else:
        return None
    if ratio is None or ci is None:
        return None
    verdict = three_way_verdict(ci, margin)
    if review.hypothesis == NO_REGRESSION:
        settles = ci[1] <= 1 + margin
        needs = (f"a no-regression claim needs the interval's upper end within the margin "
                 f"(<= {1 + margin:.3g}); it is {ci[1]:.3g}")  # fmt: skip
    else:
        settles = verdict == "faster"
        needs = (f"an improvement needs `faster`: the whole interval under {1 - margin:.3g}; "
                 f"it is [{ci[0]:.3g}, {ci[1]:.3g}], {verdict}")  # fmt: skip
    return PrimaryMetric(kind, key, quantile, label, ratio, tuple(ci), verdict, margin,
                         review.hypothesis, settles, needs, *ids)  # fmt: skip
