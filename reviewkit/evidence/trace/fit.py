"""The workload fit matrix: how much of a production trace's time the suite's workloads cover."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reviewkit.analysis.compare import slice_key
from reviewkit.bundle.records import Run
from reviewkit.bundle.run import STATUS_OK
from reviewkit.evidence.trace.layermap import COMPOSITE_LAYER_TYPES

UNMAPPED = "unmapped"
CHECK = "production-shape-evidence"  # the rubric check that scores the fit
# Its thresholds (min_coverage, shape_range_factor) live only in the rubric item, with the
# reasons beside them in rubrics/default.toml; the gate and the packet both read them there.
# A trace summary's numbers drive arithmetic: a damaged one may fail in any of these ways, and
# becomes a "not used" reason instead of a crash.
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError)
# Composite workloads (block, model) stand for many production ops at once, so they do not
# cover any single production operator's shape.
MAX_OUTSIDE_LISTED = 20
# The bands of time without an element count, in the order the heatmap draws them after the
# decades: ops on empty tensors, shapes not recorded, shapes past the summary's list, unmapped.
EMPTY_TENSOR = "empty tensor"
SHAPE_NOT_RECORDED = "shape not recorded"
OTHER_SHAPES = "other shapes"
NOT_MAPPED = "not mapped"
TAIL_BANDS = (EMPTY_TENSOR, SHAPE_NOT_RECORDED, OTHER_SHAPES, NOT_MAPPED)


@dataclass(frozen=True)
class FitRow:
    """One production layer type in one size band (decade of elements), or its remainder."""

    layer_type: str
    band: str  # "1e5-1e6 elements", "shape not recorded", "other shapes", "not mapped"
    numel_low: int | None
    numel_high: int | None
    share: float  # of all production time
    covered_share: float  # of all production time, covered by some suite workload
    workloads: tuple[str, ...]  # suite workloads covering at least one shape of the row


@dataclass(frozen=True)
class LayerFit:
    layer_type: str
    share: float
    covered_share: float
    suite_workloads: int  # op-level suite workloads of this layer type in the run


@dataclass(frozen=True)
class OutsideShape:
    layer_type: str
    dims: list
    numel: int | None
    share: float
    nearest_workload: str  # "" when the suite has no workload of this layer type
    nearest_ratio: float | None  # production elements / nearest workload's elements


@dataclass(frozen=True)
class FitMatrix:
    rows: tuple[FitRow, ...]
    layers: tuple[LayerFit, ...]
    score: float  # share of production time whose layer type and shape the suite covers
    layer_coverage: float  # share of production time whose layer type the suite measures
    outside: tuple[OutsideShape, ...]  # largest uncovered shapes first
    shape_range_factor: float
    time_basis: str
    traces: tuple[str, ...]

    def to_json(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


@dataclass(frozen=True)
class LeftOut:
    """A cited trace (or a whole summary) the fit does not count, and why."""

    source: str  # the summary file, as the review cites it
    name: str  # the trace's recorded path, else "trace k"; "" for the whole summary
    index: int  # 1-based position in the summary's traces; 0 for the whole summary
    why: str  # NO_TRACES | DAMAGED | DUPLICATE
    error: Exception | None = None  # what a damaged trace raised when scored alone


NO_TRACES, DAMAGED, DUPLICATE = "no traces", "damaged", "duplicate"


def usable_traces(
    summaries: Iterable[tuple[str, dict]], factor: float
) -> tuple[list[tuple[str, dict]], list[LeftOut]]:
    """The one reading of cited trace summaries, for the gate and the packet alike: each trace
    scored alone against an empty suite (its own fields must add up), each trace file once
    (same sha256: counted once), and a record of everything left out and why."""
    usable: list[tuple[str, dict]] = []
    left_out: list[LeftOut] = []
    for source, doc in summaries:
        listed = doc.get("traces")
        if not isinstance(listed, list) or not listed:
            left_out.append(LeftOut(source, "", 0, NO_TRACES))
            continue
        for k, t in enumerate(listed, 1):
            name = str(t.get("path", f"trace {k}")) if isinstance(t, dict) else f"trace {k}"
            try:
                json.dumps(_fit([t], {}, factor).to_json(), allow_nan=False)
            except MALFORMED as exc:
                left_out.append(LeftOut(source, name, k, DAMAGED, exc))
                continue
            if t.get("sha256") and any(t["sha256"] == u.get("sha256") for _, u in usable):
                left_out.append(LeftOut(source, name, k, DUPLICATE))
                continue
            usable.append((source, t))
    return usable, left_out


def _numel(shape) -> int | None:
    if not isinstance(shape, list) or not shape or not all(type(x) is int for x in shape):
        return None
    return math.prod(shape)


def suite_sizes(run: Run) -> dict[str, list[tuple[str, int]]]:
    """Op-level workloads measured ok in a run: layer type -> [(id, elements of input 0)].

    One per shape: a run measured in several dtypes has the same shape once per dtype, and a
    shape is covered by where it was measured, whichever dtype came first."""
    out: dict[str, list[tuple[str, int]]] = {}
    seen: set[str] = set()
    for w in run.workloads:
        if w.status != STATUS_OK or w.layer_type in COMPOSITE_LAYER_TYPES:
            continue
        shape_key = slice_key(w)
        if shape_key in seen:
            continue
        seen.add(shape_key)
        inputs = w.inputs
        n = _numel(inputs[0].get("shape")) if inputs and isinstance(inputs[0], Mapping) else None
        if n:
            out.setdefault(w.layer_type, []).append((w.id, n))
    return out


def band_of(numel: int) -> tuple[str, int, int]:
    k = math.floor(math.log10(numel)) if numel > 0 else 0
    return f"1e{k}-1e{k + 1} elements", 10**k, 10 ** (k + 1)


def _nearest(numel: int, sizes: list[tuple[str, int]]) -> tuple[str, float]:
    wid, n = min(sizes, key=lambda s: abs(math.log(numel / s[1])))
    return wid, numel / n


def _production_shapes(traces: list[dict]) -> tuple[dict, float]:
    """Per layer type [(dims, numel or None, time on the op-mix basis)], plus the total basis
    time. A shape's time is its layer's basis time split in proportion to host time, because
    shapes are recorded on host operators while the basis may be device time."""
    per_layer: dict[str, list] = {}
    total_s = 0.0
    for t in traces:
        mix = t["op_mix"]
        total_s += mix["time_s"]
        for layer, v in mix["layer_types"].items():
            layer_s = v["time_s"]
            sh = t.get("shapes", {}).get(layer)
            rows = per_layer.setdefault(layer, [])
            if not sh:
                rows.append((None, None, layer_s, SHAPE_NOT_RECORDED))
                continue
            host_s = sh["shaped_time_s"] + sh["unshaped_time_s"]
            if host_s <= 0:
                rows.append((None, None, layer_s, SHAPE_NOT_RECORDED))
                continue
            for x in sh["shapes"]:
                numel = x["numel"]
                # An op on an empty tensor (a 0 in its dims) has no size to match on a log
                # scale; it is kept apart, not dropped.
                label = "" if numel is None or numel > 0 else EMPTY_TENSOR
                rows.append(
                    (x["dims"], numel if not label else None, layer_s * x["time_s"] / host_s, label)
                )
            other = sh.get("other_shapes", {}).get("time_s", 0.0)
            if other:
                rows.append((None, None, layer_s * other / host_s, OTHER_SHAPES))
            if sh["unshaped_time_s"]:
                rows.append(
                    (None, None, layer_s * sh["unshaped_time_s"] / host_s, SHAPE_NOT_RECORDED)
                )
        unmapped = mix["unmapped"]["time_s"]
        if unmapped:
            per_layer.setdefault(UNMAPPED, []).append((None, None, unmapped, NOT_MAPPED))
    return per_layer, total_s


def build(traces: list[dict], run: Run, shape_range_factor: float) -> FitMatrix:
    """Fit production (the traces' op mix and shapes) against one run's suite workloads: a
    production shape is covered when a workload of its layer type has within
    `shape_range_factor` times as many (or as few) elements in its first input."""
    return _fit(traces, suite_sizes(run), shape_range_factor)


def _fit(traces: list[dict], sizes: dict[str, list[tuple[str, int]]],
         shape_range_factor: float) -> FitMatrix:  # fmt: skip
    per_layer, total_s = _production_shapes(traces)
    log_factor = math.log(shape_range_factor)
    rows: dict[tuple[str, str], dict] = {}
    outside: list[OutsideShape] = []
    layers = []
    score_s = 0.0
    layer_cov_s = 0.0

    def row(layer, band, lo, hi):
        return rows.setdefault(
            (layer, band),
            {"lo": lo, "hi": hi, "time_s": 0.0, "covered_s": 0.0, "workloads": set()},
        )

    for layer, shapes in per_layer.items():
        suite = sizes.get(layer, [])
        layer_s = sum(s[2] for s in shapes)
        covered_layer_s = 0.0
        if suite and layer != UNMAPPED:
            layer_cov_s += layer_s
        for dims, numel, time_s, label in shapes:
            if numel is None:
                r = row(layer, label or SHAPE_NOT_RECORDED, None, None)
                r["time_s"] += time_s
                continue
            band, lo, hi = band_of(numel)
            r = row(layer, band, lo, hi)
            r["time_s"] += time_s
            covering = [wid for wid, n in suite if abs(math.log(numel / n)) <= log_factor + 1e-12]
            if covering:
                r["covered_s"] += time_s
                r["workloads"].update(covering)
                covered_layer_s += time_s
            else:
                wid, ratio = _nearest(numel, suite) if suite else ("", None)
                outside.append(
                    OutsideShape(
                        layer, dims, numel, time_s / total_s if total_s else 0.0, wid, ratio
                    )
                )
        score_s += covered_layer_s
        layers.append(
            LayerFit(
                layer,
                layer_s / total_s if total_s else 0.0,
                covered_layer_s / total_s if total_s else 0.0,
                len(suite),
            )
        )
    fit_rows = tuple(
        FitRow(
            layer,
            band,
            r["lo"],
            r["hi"],
            r["time_s"] / total_s if total_s else 0.0,
            r["covered_s"] / total_s if total_s else 0.0,
            tuple(sorted(r["workloads"])),
        )
        for (layer, band), r in sorted(
            rows.items(), key=lambda kv: (kv[0][0], kv[1]["lo"] is None, kv[1]["lo"] or 0)
        )
    )
    outside.sort(key=lambda o: -o.share)
    bases = sorted({t["time_basis"] for t in traces})
    return FitMatrix(
        rows=fit_rows,
        layers=tuple(sorted(layers, key=lambda x: -x.share)),
        score=score_s / total_s if total_s else 0.0,
        layer_coverage=layer_cov_s / total_s if total_s else 0.0,
        outside=tuple(outside[:MAX_OUTSIDE_LISTED]),
        shape_range_factor=shape_range_factor,
        time_basis=bases[0] if len(bases) == 1 else "mixed",
        traces=tuple(t["path"] for t in traces),
    )
