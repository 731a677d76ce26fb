"""Energy per workload and per layer type: work per joule over each workload's measured window
(or its energy-only loop), joules per call and per token; never an estimate."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reviewkit.bundle.records import Workload

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedWorkload

# --- energy: work per joule over each workload's measured window ------------------------------

# A counter read at an arbitrary moment is stale by up to one update, at each end of the window,
# so a reading is off by up to about 2 x update interval / window of its value (at steady
# power). With at least this many updates inside the window that is at most 2%: "high".
ENERGY_HIGH_CONFIDENCE_UPDATES = 100
NO_ENERGY_RECORDED = "no energy recorded for this workload"


def energy_absent(reason: str) -> dict:
    return {"available": False, "reason": reason}


def energy_confidence(window_s: float, update_interval_s: float) -> tuple[str, str]:
    """("high" | "low", why): high when the window spans >= 100 updates of the counter."""
    updates = window_s / update_interval_s
    every = f"about every {update_interval_s * 1e3:g} ms"
    if updates >= ENERGY_HIGH_CONFIDENCE_UPDATES:
        return "high", (
            f"the {window_s:.3g} s window spans ~{updates:.0f} counter updates ({every}): a "
            f"stale reading at either end is at most ~{200 / updates:.2g}% of the energy"
        )
    return "low", (
        f"the {window_s:.3g} s window is under {ENERGY_HIGH_CONFIDENCE_UPDATES}x the counter's "
        f"update interval ({every}; {updates:.3g} updates): a stale reading at either end can "
        f"be off by up to ~{200 / updates:.2g}% of the energy"
    )


def workload_energy(
    joules_by_domain: dict[str, float],
    total_of: Iterable[str],
    window_s: float,
    calls: int,
    flops: float,
    method: str,
    counter_update_s: float,
) -> dict:
    """The `energy` record of one workload from its counter readings over the measured window.

    joules = the sum over `total_of` (domains that do not overlap); avg_watts = joules /
    window_s (the window's wall time, not the sum of samples); flops_per_joule = flops x calls
    / joules; calls_per_joule = calls / joules. A counter that did not advance gives no value.
    """
    total_of = list(total_of)
    joules = sum(joules_by_domain[name] for name in total_of)
    if window_s <= 0 or calls <= 0:
        return energy_absent("no measured window to meter")
    if joules <= 0:
        return energy_absent(
            f"the energy counter did not advance over the {window_s:.3g} s measured window (it "
            f"updates about every {counter_update_s * 1e3:g} ms); no value is estimated"
        )
    confidence, why = energy_confidence(window_s, counter_update_s)
    return {
        "available": True,
        "joules": joules,
        "joules_by_domain": dict(joules_by_domain),
        "total_of": total_of,
        "window_s": window_s,
        "calls": calls,
        "avg_watts": joules / window_s,
        "flops_per_joule": flops * calls / joules,
        "calls_per_joule": calls / joules,
        "method": method,
        "counter_update_s": counter_update_s,
        "confidence": confidence,
        "confidence_reason": why,
    }


def refreshed_energy(w: Workload) -> Mapping[str, Any] | None:
    """A recorded energy reading with its numbers re-derived from its raw fields (joules,
    window); a reading that is not available as it was."""
    e = w.energy
    if not (isinstance(e, Mapping) and e.get("available")):
        return e
    # an energy-only loop (measure/energy_loop.py) counts its own calls, not the samples'
    looped = e.get("source") == "energy-loop"
    out = workload_energy(
        e["joules_by_domain"], e["total_of"], e["window_s"],
        int(e["calls"]) if looped else len(w.samples_s), w.flops,
        e["method"], e["counter_update_s"],
    )  # fmt: skip
    if looped:
        out = {**out, "source": e["source"], "source_reason": e.get("source_reason", "")}
    return with_per_token(out, tokens_per_call(w))


def tokens_per_call(w: Workload) -> int | None:
    """The tokens one call of a workload processes (a query's batch x sequence, or its
    `tokens`), for joules per token; None for a workload with no token count (a convolution)."""
    p = w.params or {}
    if isinstance(p.get("tokens"), int):
        return int(p["tokens"])
    if isinstance(p.get("batch"), int) and isinstance(p.get("seq"), int):
        return int(p["batch"]) * int(p["seq"])
    return None


def with_per_token(energy: dict, tokens: int | None) -> dict:
    """An available energy reading with joules per call (a query) and per token beside it."""
    if not energy.get("available"):
        return energy
    per_call = energy["joules"] / energy["calls"]
    return {**energy, "joules_per_call": per_call,
            "joules_per_token": per_call / tokens if tokens else None}  # fmt: skip


def energy_reason(w: Workload) -> str:
    """Why a workload has no energy reading ("" when it has one)."""
    e = w.energy
    if not isinstance(e, Mapping):
        return NO_ENERGY_RECORDED
    if e.get("available"):
        return ""
    return e.get("reason") or NO_ENERGY_RECORDED


def energy_aggregate(workloads: Sequence[Workload]) -> dict:
    """Perf per watt over measured workloads, only when every one of them has energy.

    flops_per_joule = sum(F_i x calls_i) / sum(J_i); avg_watts = sum(J_i) / sum(window_i),
    the window-time-weighted mean of the workloads' average watts. Low confidence when any
    workload's reading is.
    """
    if not workloads:
        return energy_absent("no measured workloads")
    missing = [w for w in workloads if energy_reason(w)]
    if missing:
        first = missing[0]
        return energy_absent(
            f"{len(missing)} of {len(workloads)} measured workload(s) have no energy reading "
            f"({first.id}: {energy_reason(first)})"
        )
    energies = [w.energy for w in workloads]
    joules = sum(e["joules"] for e in energies)
    # joules per token over the workloads that count tokens (all of them, or it is not said)
    tokens = [tokens_per_call(w) for w in workloads]
    per_token = (joules / sum(t * e["calls"] for t, e in zip(tokens, energies, strict=True))
                 if all(tokens) else None)  # fmt: skip
    window_s = sum(e["window_s"] for e in energies)
    work = sum(w.flops * e["calls"] for w, e in zip(workloads, energies, strict=True))
    low = [w.id for w, e in zip(workloads, energies, strict=True) if e["confidence"] != "high"]
    return {
        "available": True,
        "workloads": len(workloads),
        "joules": joules,
        "window_s": window_s,
        "flops": work,
        "calls": sum(e["calls"] for e in energies),
        "flops_per_joule": work / joules,
        "avg_watts": joules / window_s,
        "joules_per_token": per_token,
        "methods": sorted({e["method"] for e in energies}),
        "confidence": "low" if low else "high",
        "confidence_reason": (
            f"{len(low)} of {len(workloads)} workload reading(s) are low confidence "
            f"(first: {low[0]})"
            if low
            else "every workload's window spans enough counter updates"
        ),
    }


def energy_by_layer(workloads: Sequence[AnalysedWorkload]) -> dict[str, dict]:
    groups: dict[str, list[AnalysedWorkload]] = {}
    for w in workloads:
        groups.setdefault(w.layer_type, []).append(w)
    return {layer_type: energy_aggregate(ws) for layer_type, ws in groups.items()}
