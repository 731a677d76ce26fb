"""The lever a below-roof workload points at, with the evidence the run itself holds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from reviewkit.analysis.analysed import AnalysedWorkload, LayerAggregate
from reviewkit.analysis.bottleneck import BELOW_ROOF_LEVER, COMPUTE_BOUND
from reviewkit.bundle.records import Run, Workload

# A causal kernel that skips the masked half does about (S+1)/2S of the full square's work: at
# S = 128 and up, just over half. Taking at least this share of the full call's time means it
# computes most of the masked half anyway.
CAUSAL_OVER_FULL_MASKED_WORK = 0.75
# Output tiles a GEMM kernel hands to a core (CPU: a oneDNN/MKL block of about 64 x 64 in fp32;
# GPU: a CTA tile of 128 x 128, CUTLASS's and cuBLAS's common large tile). A stated assumption:
# the library picks its own, so this is what the evidence sentence says it assumed.
GEMM_TILE = {"cpu": 64, "cuda": 128}
# Under this share of the last wave filled, or fewer tiles than cores, the GEMM cannot keep
# every core busy for its whole time: its shape, not its kernel, holds it below the roof.
WAVE_FILL_SHORTFALL = 0.9


def _sibling(
    workloads: Sequence[AnalysedWorkload], w: AnalysedWorkload
) -> tuple[AnalysedWorkload, AnalysedWorkload] | None:
    """(the causal call, the full one): the same attention at the same shape without the
    causal mask measured in this run, else another model's causal/full pair at this shape."""
    by_id = {x.id: x for x in workloads}
    full = by_id.get(w.id.replace("-causal.", "-full."))
    if full is not None and full.stats:
        return w, full
    p = w.params or {}
    for other in workloads:  # another model's pair at this shape and dtype
        q = other.params or {}
        if (other.kernel == "sdpa" and not q.get("causal") and other.stats
                and other.dtype == w.dtype and q.get("seq") == p.get("seq")
                and q.get("batch") == p.get("batch")):  # fmt: skip
            twin = by_id.get(other.id.replace("-full.", "-causal."))
            if twin is not None and twin.stats:
                return twin, other
    return None


def causal_evidence(workloads: Sequence[AnalysedWorkload], w: AnalysedWorkload) -> str:
    pair = _sibling(workloads, w)
    if pair is None:
        return ""
    causal, full = pair
    ratio = causal.stats.p50_s / full.stats.p50_s
    if ratio < CAUSAL_OVER_FULL_MASKED_WORK:
        return ""
    where = "" if causal is w else f" (measured on {causal.id})"
    return (
        f"the causal call takes {ratio:.2f}x the full one's time at this shape{where}, where "
        "a kernel that skips the masked half takes about 0.5x: it computes the masked half"
    )


def gemm_evidence(run: Run, w: Workload) -> str:
    p = w.params or {}
    m, n = p.get("m"), p.get("n")
    if not (m and n):
        return ""
    on_gpu = run.device_type == "cuda"
    cores = run.environment.get("device_multiprocessors") if on_gpu else run.knobs.get("threads")
    if not cores:
        return ""
    tile = GEMM_TILE["cuda" if on_gpu else "cpu"]
    tiles = math.ceil(m / tile) * math.ceil(n / tile)
    waves = tiles / cores
    fill = waves / math.ceil(waves)
    unit = "SMs" if on_gpu else "threads"
    if tiles < cores:
        return (
            f"{tiles} output tiles of {tile}x{tile} for {cores} {unit}: fewer tiles than "
            f"{unit}, so {cores - tiles} sit idle (assumed tile size)"
        )
    if fill < WAVE_FILL_SHORTFALL:
        return (
            f"{tiles} output tiles of {tile}x{tile} over {cores} {unit}: {waves:.2f} waves, "
            f"the last {100 * (waves - math.floor(waves)):.0f}% full (assumed tile size)"
        )
    return ""


def annotate(
    workloads: tuple[AnalysedWorkload, ...], run: Run
) -> tuple[AnalysedWorkload, ...]:
    """Each compute-bound below-roof workload with the evidence added to its lever."""
    out = []
    for w in workloads:
        d = w.decomposition
        evidence = ""
        if d is not None and d.below_roof and w.bottleneck == COMPUTE_BOUND:
            if w.kernel == "sdpa" and (w.params or {}).get("causal"):
                evidence = causal_evidence(workloads, w)
            elif w.kernel == "linear":
                evidence = gemm_evidence(run, w)
        out.append(replace(w, lever=f"{BELOW_ROOF_LEVER}: {evidence}") if evidence else w)
    return tuple(out)


def annotate_layers(
    workloads: Sequence[AnalysedWorkload],
    layer_types: dict[str, LayerAggregate],
    layer_types_by_dtype: dict[str, dict[str, LayerAggregate]],
) -> tuple[dict[str, LayerAggregate], dict[str, dict[str, LayerAggregate]]]:
    """A below-roof layer type's lever names the evidence of its slowest workload that has some
    (the causal attention, the skinny GEMM)."""

    def annotated(table: dict[str, LayerAggregate], dtype: str | None) -> dict:
        out = {}
        for layer_type, agg in table.items():
            with_evidence = [
                w for w in workloads
                if w.layer_type == layer_type and w.stats
                and (dtype is None or w.dtype == dtype)
                and (w.lever or "").startswith(f"{BELOW_ROOF_LEVER}: ")
            ]  # fmt: skip
            if agg.below_roof and agg.bottleneck == COMPUTE_BOUND and with_evidence:
                w = max(with_evidence, key=lambda x: x.stats.p50_s)
                agg = replace(agg, lever=f"{w.lever} ({w.id}, the slowest with such evidence)")
            out[layer_type] = agg
        return out

    return annotated(layer_types, None), {
        dtype: annotated(table, dtype) for dtype, table in layer_types_by_dtype.items()
    }
