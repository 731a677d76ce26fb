"""The lever a below-roof workload points at, with the evidence the run itself holds."""

from __future__ import annotations

import math

from reviewkit.analysis.bottleneck import BELOW_ROOF_LEVER, COMPUTE_BOUND

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


def _sibling(doc: dict, w: dict) -> dict | None:
    """The same attention at the same shape without the causal mask, measured in this run."""
    full_id = w["id"].replace("-causal.", "-full.")
    for other in doc["workloads"]:
        if other["id"] == full_id and other.get("stats"):
            return other
    p = w.get("params") or {}
    for other in doc["workloads"]:  # another model's pair at this shape and dtype
        q = other.get("params") or {}
        if (other.get("kernel") == "sdpa" and not q.get("causal") and other.get("stats")
                and other["dtype"] == w["dtype"] and q.get("seq") == p.get("seq")
                and q.get("batch") == p.get("batch")):  # fmt: skip
            causal_id = other["id"].replace("-full.", "-causal.")
            twin = next((x for x in doc["workloads"] if x["id"] == causal_id), None)
            if twin and twin.get("stats"):
                return {**other, "causal_twin": twin}
    return None


def causal_evidence(doc: dict, w: dict) -> str:
    full = _sibling(doc, w)
    if full is None:
        return ""
    causal = full.get("causal_twin") or w
    ratio = causal["stats"]["p50_s"] / full["stats"]["p50_s"]
    if ratio < CAUSAL_OVER_FULL_MASKED_WORK:
        return ""
    where = "" if causal is w else f" (measured on {causal['id']})"
    return (
        f"the causal call takes {ratio:.2f}x the full one's time at this shape{where}, where "
        "a kernel that skips the masked half takes about 0.5x: it computes the masked half"
    )


def gemm_evidence(doc: dict, w: dict) -> str:
    p = w.get("params") or {}
    m, n = p.get("m"), p.get("n")
    if not (m and n):
        return ""
    env, knobs = doc.get("environment") or {}, doc.get("knobs") or {}
    on_gpu = env.get("device_type") == "cuda"
    cores = env.get("device_multiprocessors") if on_gpu else knobs.get("threads")
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


def annotate(doc: dict) -> None:
    """Add the evidence to each compute-bound below-roof workload's lever, in place."""
    for w in doc["workloads"]:
        d = w.get("decomposition")
        if not d or not d.get("below_roof") or w.get("bottleneck") != COMPUTE_BOUND:
            continue
        evidence = ""
        if w.get("kernel") == "sdpa" and (w.get("params") or {}).get("causal"):
            evidence = causal_evidence(doc, w)
        elif w.get("kernel") == "linear":
            evidence = gemm_evidence(doc, w)
        if evidence:
            w["lever"] = f"{BELOW_ROOF_LEVER}: {evidence}"


def annotate_layers(doc: dict) -> None:
    """A below-roof layer type's lever names the evidence of its slowest workload that has some
    (the causal attention, the skinny GEMM), in place."""
    tables = [(None, doc.get("layer_types") or {})]
    tables += [(dtype, t) for dtype, t in (doc.get("layer_types_by_dtype") or {}).items()]
    for dtype, table in tables:
        for layer_type, agg in table.items():
            if not agg.get("below_roof") or agg.get("bottleneck") != COMPUTE_BOUND:
                continue
            with_evidence = [
                w for w in doc["workloads"]
                if w["layer_type"] == layer_type and w.get("stats")
                and (dtype is None or w["dtype"] == dtype)
                and (w.get("lever") or "").startswith(f"{BELOW_ROOF_LEVER}: ")
            ]  # fmt: skip
            if with_evidence:
                w = max(with_evidence, key=lambda x: x["stats"]["p50_s"])
                agg["lever"] = f"{w['lever']} ({w['id']}, the slowest with such evidence)"
