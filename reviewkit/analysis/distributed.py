"""A multi-rank run's own numbers: collective bandwidths, skew across ranks, stragglers and the
tensor-parallel scaling efficiency (torch-free, from the bundle's samples alone)."""

from __future__ import annotations

import math
import statistics

from reviewkit.suite import collectives as coll


def link_peak(doc: dict) -> float | None:
    """The interconnect ceiling t_comm divides by, or None when the run has none."""
    link = (doc.get("ceilings") or {}).get("interconnect") or {}
    peak = link.get("peak")
    return peak if isinstance(peak, (int, float)) and peak > 0 else None


def over_others(medians: list[float]) -> list[float]:
    """Each rank's median over the median of the other ranks' (leave-one-out, so at two ranks a
    rank is held against the other one, not against a median it is half of)."""
    if len(medians) < 2:
        return []
    return [m / statistics.median(medians[:k] + medians[k + 1 :]) for k, m in enumerate(medians)]


def rank_skew(rank_samples_s: list[list[float]]) -> dict | None:
    """Each rank's median and its ratio to the other ranks', the slowest over the median
    rank's (1.0: no skew), and which rank."""
    medians = [statistics.median(s) for s in rank_samples_s if s]
    if len(medians) != len(rank_samples_s) or not medians:
        return None
    middle = statistics.median(medians)
    slowest = max(range(len(medians)), key=medians.__getitem__)
    return {
        "rank_median_s": medians,
        "rank_over_others": over_others(medians),
        "max_over_median": medians[slowest] / middle if middle > 0 else None,
        "slowest_rank": slowest,
    }


def collective_bandwidth(w: dict, world_size: int, link_bytes_per_s: float | None) -> dict:
    """nccl-tests' algbw and busbw at the median and the p99 step (the slowest rank's time
    per call), and busbw over the link ceiling."""
    p = w["params"]
    size, op = p["message_bytes"], p["op"]
    out = {"op": op, "message_bytes": size, "world_size": world_size}
    for name, time_s in (("p50", w["stats"]["p50_s"]), ("p99", w["stats"]["p99_s"])):
        out[f"algbw_{name}_bytes_per_s"] = coll.algbw_bytes_per_s(size, time_s)
        out[f"busbw_{name}_bytes_per_s"] = coll.busbw_bytes_per_s(op, size, time_s, world_size)
    out["link_fraction"] = (
        out["busbw_p50_bytes_per_s"] / link_bytes_per_s if link_bytes_per_s else None
    )
    return out


def stragglers(workloads: list[dict], world_size: int, ratio: float = coll.STRAGGLER_RATIO):
    """Ranks whose straggler probes (compute workloads every rank runs alike) take `ratio` or
    more of the other ranks' median time: the geometric mean over the probes of each rank's
    median over the others' (`over_others`). Returns (per-rank ratios, flagged ranks)."""
    logs: list[list[float]] = [[] for _ in range(world_size)]
    for w in workloads:
        if w.get("params", {}).get("role") != coll.PROBE or not w.get("skew"):
            continue
        for rank, r in enumerate(over_others(w["skew"]["rank_median_s"])):
            logs[rank].append(math.log(r))
    if not all(logs):
        return [], []
    ratios = [math.exp(sum(values) / len(values)) for values in logs]
    flagged = [rank for rank, r in enumerate(ratios) if r >= ratio]
    return ratios, flagged


def scaling_efficiency(workloads: list[dict]) -> list[dict]:
    """Per dtype, the tensor-parallel decoder layer at tp = N against the same layer unsharded
    (tp = 1) on one rank of the same run: speed-up = t1 / tN, efficiency = speed-up / N (1.0:
    perfect; communication and replicated work pull it down)."""
    layers = {}
    for w in workloads:
        if w.get("kernel") == coll.TP_DECODER_KERNEL and w.get("stats"):
            layers[(w["dtype"], w["params"]["tp"])] = w
    out = []
    for (dtype, tp), w in sorted(layers.items()):
        one = layers.get((dtype, 1))
        if tp == 1 or one is None:
            continue
        speedup = one["stats"]["p50_s"] / w["stats"]["p50_s"]
        out.append({
            "dtype": dtype, "tp": tp, "workload": w["id"], "reference": one["id"],
            "speedup": speedup, "efficiency": speedup / tp,
            "communication_fraction": (w.get("fractions") or {}).get("communication"),
        })  # fmt: skip
    return out


def world_size(doc: dict) -> int:
    return ((doc.get("distributed") or {}).get("world_size")) or 1


def scaling_notes(base_doc: dict, cand_doc: dict) -> list[str]:
    """World sizes that differ, and each multi-rank run's scaling efficiency against one rank
    (its tensor-parallel layer at tp = N against the unsharded layer, measured in that run)."""
    worlds = (world_size(base_doc), world_size(cand_doc))
    if worlds == (1, 1):
        return []
    notes = []
    if worlds[0] != worlds[1]:
        notes.append(
            f"world size {worlds[0]} -> {worlds[1]}: workloads of the same id are compared per "
            "call (per rank for a multi-rank run: the slowest rank's time per call)"
        )
    for label, doc in (("baseline", base_doc), ("candidate", cand_doc)):
        for s in (doc.get("distributed") or {}).get("scaling") or []:
            comm = s.get("communication_fraction")
            notes.append(
                f"{label} scaling against world size 1: the tensor-parallel layer at tp "
                f"{s['tp']} ({s['dtype']}) runs {s['speedup']:.2f}x the unsharded layer, "
                f"efficiency {s['efficiency']:.0%}"
                + (f", communication {comm:.1%} of its time" if comm is not None else "")
            )
    return notes


def analyse(doc: dict) -> None:
    """Fill a distributed run's per-workload skew and bandwidths and its stragglers and
    scaling, in place; a one-process run is left as it is."""
    d = doc.get("distributed")
    if not d:
        return
    world = d["world_size"]
    link = link_peak(doc)
    for w in doc["workloads"]:
        w["skew"] = rank_skew(w["rank_samples_s"]) if w.get("rank_samples_s") else None
        w["collective"] = (
            collective_bandwidth(w, world, link)
            if w.get("layer_type") == "collective" and w.get("stats")
            else None
        )
    ratios, flagged = stragglers(doc["workloads"], world)
    hosts = {r["rank"]: r["host"] for r in d.get("ranks", [])}
    d["stragglers"] = {
        "ratio_threshold": coll.STRAGGLER_RATIO,
        "rank_ratio": ratios,
        "flagged": [{"rank": k, "host": hosts.get(k), "ratio": ratios[k]} for k in flagged],
        "reason": "" if ratios else "no straggler probe was measured on every rank",
    }
    d["scaling"] = scaling_efficiency(doc["workloads"])
