"""A multi-rank run's own numbers: collective bandwidths, skew across ranks, stragglers and the
tensor-parallel scaling efficiency (torch-free, from the bundle's samples alone)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from reviewkit.analysis.analysed import (
    AnalysedRun,
    AnalysedWorkload,
    CollectiveBandwidth,
    FlaggedRank,
    ScalingEfficiency,
    Skew,
    Stragglers,
)
from reviewkit.bundle.records import Run
from reviewkit.suite import collectives as coll


def link_peak(ceilings: Mapping[str, Any]) -> float | None:
    """The interconnect ceiling t_comm divides by, or None when the run has none."""
    link = (ceilings or {}).get("interconnect") or {}
    peak = link.get("peak")
    return peak if isinstance(peak, (int, float)) and peak > 0 else None


def over_others(medians: list[float]) -> list[float]:
    """Each rank's median over the median of the other ranks' (leave-one-out, so at two ranks a
    rank is held against the other one, not against a median it is half of)."""
    if len(medians) < 2:
        return []
    return [m / statistics.median(medians[:k] + medians[k + 1 :]) for k, m in enumerate(medians)]


def rank_skew(rank_samples_s: Sequence[Sequence[float]]) -> Skew | None:
    """Each rank's median and its ratio to the other ranks', the slowest over the median
    rank's (1.0: no skew), and which rank."""
    medians = [statistics.median(s) for s in rank_samples_s if s]
    if len(medians) != len(rank_samples_s) or not medians:
        return None
    middle = statistics.median(medians)
    slowest = max(range(len(medians)), key=medians.__getitem__)
    return Skew(
        rank_median_s=tuple(medians),
        rank_over_others=tuple(over_others(medians)),
        max_over_median=medians[slowest] / middle if middle > 0 else None,
        slowest_rank=slowest,
    )


def collective_bandwidth(
    w: AnalysedWorkload, world_size: int, link_bytes_per_s: float | None
) -> CollectiveBandwidth:
    """nccl-tests' algbw and busbw at the median and the p99 step (the slowest rank's time
    per call), and busbw over the link ceiling."""
    size, op = w.params["message_bytes"], w.params["op"]
    p50_s, p99_s = w.stats.p50_s, w.stats.p99_s
    busbw_p50 = coll.busbw_bytes_per_s(op, size, p50_s, world_size)
    return CollectiveBandwidth(
        op=op, message_bytes=size, world_size=world_size,
        algbw_p50_bytes_per_s=coll.algbw_bytes_per_s(size, p50_s),
        busbw_p50_bytes_per_s=busbw_p50,
        algbw_p99_bytes_per_s=coll.algbw_bytes_per_s(size, p99_s),
        busbw_p99_bytes_per_s=coll.busbw_bytes_per_s(op, size, p99_s, world_size),
        link_fraction=busbw_p50 / link_bytes_per_s if link_bytes_per_s else None,
    )  # fmt: skip


def stragglers(
    workloads: Sequence[AnalysedWorkload], world_size: int, ratio: float = coll.STRAGGLER_RATIO
) -> tuple[list[float], list[int]]:
    """Ranks whose straggler probes (compute workloads every rank runs alike) take `ratio` or
    more of the other ranks' median time: the geometric mean over the probes of each rank's
    median over the others' (`over_others`). Returns (per-rank ratios, flagged ranks)."""
    logs: list[list[float]] = [[] for _ in range(world_size)]
    for w in workloads:
        if (w.params or {}).get("role") != coll.PROBE or not w.skew:
            continue
        for rank, r in enumerate(over_others(list(w.skew.rank_median_s))):
            logs[rank].append(math.log(r))
    if not all(logs):
        return [], []
    ratios = [math.exp(sum(values) / len(values)) for values in logs]
    flagged = [rank for rank, r in enumerate(ratios) if r >= ratio]
    return ratios, flagged


def scaling_efficiency(workloads: Sequence[AnalysedWorkload]) -> tuple[ScalingEfficiency, ...]:
    """Per dtype, the tensor-parallel decoder layer at tp = N against the same layer unsharded
    (tp = 1) on one rank of the same run: speed-up = t1 / tN, efficiency = speed-up / N (1.0:
    perfect; communication and replicated work pull it down)."""
    layers = {}
    for w in workloads:
        if w.kernel == coll.TP_DECODER_KERNEL and w.stats:
            layers[(w.dtype, w.params["tp"])] = w
    out = []
    for (dtype, tp), w in sorted(layers.items()):
        one = layers.get((dtype, 1))
        if tp == 1 or one is None:
            continue
        speedup = one.stats.p50_s / w.stats.p50_s
        out.append(ScalingEfficiency(
            dtype=dtype, tp=tp, workload=w.id, reference=one.id,
            speedup=speedup, efficiency=speedup / tp,
            communication_fraction=(
                w.decomposition.communication_fraction if w.decomposition else None),
        ))  # fmt: skip
    return tuple(out)


def scaling_notes(base: AnalysedRun, cand: AnalysedRun) -> list[str]:
    """World sizes that differ, and each multi-rank run's scaling efficiency against one rank
    (its tensor-parallel layer at tp = N against the unsharded layer, measured in that run)."""
    worlds = (base.world_size, cand.world_size)
    if worlds == (1, 1):
        return []
    notes = []
    if worlds[0] != worlds[1]:
        notes.append(
            f"world size {worlds[0]} -> {worlds[1]}: workloads of the same id are compared per "
            "call (per rank for a multi-rank run: the slowest rank's time per call)"
        )
    for label, run in (("baseline", base), ("candidate", cand)):
        for s in run.scaling if run.distributed else ():
            comm = s.communication_fraction
            notes.append(
                f"{label} scaling against world size 1: the tensor-parallel layer at tp "
                f"{s.tp} ({s.dtype}) runs {s.speedup:.2f}x the unsharded layer, "
                f"efficiency {s.efficiency:.0%}"
                + (f", communication {comm:.1%} of its time" if comm is not None else "")
            )
    return notes


def with_rank_analysis(
    workloads: Sequence[AnalysedWorkload], world: int, link_bytes_per_s: float | None
) -> tuple[AnalysedWorkload, ...]:
    """A multi-rank run's workloads with each one's skew across ranks and, for a collective,
    its bandwidths."""
    return tuple(
        replace(
            w,
            skew=rank_skew(w.rank_samples_s) if w.rank_samples_s else None,
            collective=(
                collective_bandwidth(w, world, link_bytes_per_s)
                if w.layer_type == "collective" and w.stats
                else None
            ),
        )
        for w in workloads
    )


def straggler_report(workloads: Sequence[AnalysedWorkload], run: Run) -> Stragglers:
    """The ranks whose straggler probes ran slow, with their hosts."""
    world = run.world_size
    ratios, flagged = stragglers(workloads, world)
    hosts = {r["rank"]: r["host"] for r in (run.distributed or {}).get("ranks", [])}
    return Stragglers(
        ratio_threshold=coll.STRAGGLER_RATIO,
        rank_ratio=tuple(ratios),
        flagged=tuple(FlaggedRank(k, hosts.get(k), ratios[k]) for k in flagged),
        reason="" if ratios else "no straggler probe was measured on every rank",
    )
