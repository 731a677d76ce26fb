"""The mechanism side of a comparison: MFU and time fractions on one denominator, and their
changes between two runs (the numbers the ratio of times alone does not say)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reviewkit.analysis.roofline import blended_peak, memory_level, per_op_terms, roofline

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedWorkload, LayerAggregate


def on_baseline_ceilings(
    c: AnalysedWorkload, ceilings: Mapping[str, Any]
) -> tuple[float | None, dict | None, str | None]:
    """The candidate workload's (MFU, time fractions, bottleneck) against `ceilings` (the
    baseline's), so both sides of a same-device comparison share one denominator."""
    from reviewkit.analysis import overhead as overhead_mod

    ceilings = ceilings or {}
    peak = ((ceilings.get("compute") or {}).get(c.compute_dtype) or {}).get("peak")
    peak = blended_peak(c, peak, ceilings)
    _, bw = memory_level(ceilings, c.bytes)
    st = c.stats
    if not peak or not bw or not st or c.wire_bytes:
        return c.mfu, c.fractions, c.bottleneck
    o = overhead_mod.read(c, st)
    r = roofline(c.flops, c.bytes, st.p50_s, peak, bw, 0.0, o.overhead_s,
                 time_high_s=st.median_ci_high_s, overhead_low_s=o.overhead_low_s,
                 per_op=per_op_terms(c, ceilings))  # fmt: skip
    return r.mfu, r.decomposition.fractions(), r.bottleneck


DELTA_FRACTIONS = ("compute", "memory_stall", "communication", "overhead", "inefficiency")


def fraction_deltas(candidate: Mapping | None, baseline: Mapping | None) -> dict:
    """candidate - baseline of each time fraction; None where either side has none."""
    c, b = candidate or {}, baseline or {}
    return {k: delta(c.get(k), b.get(k)) for k in DELTA_FRACTIONS}


def share(w: AnalysedWorkload) -> float | None:
    return w.decomposition.roof_share if w.decomposition else None


def layer_fractions(agg: LayerAggregate | None) -> dict:
    """A layer aggregate's time fractions by DELTA_FRACTIONS name (None without one)."""
    if agg is None:
        return dict.fromkeys(DELTA_FRACTIONS)
    return {"compute": agg.compute_fraction, "memory_stall": agg.memory_stall_fraction,
            "communication": agg.communication_fraction, "overhead": agg.overhead_fraction,
            "inefficiency": agg.inefficiency_fraction}  # fmt: skip


def stall(w: AnalysedWorkload) -> float | None:
    return w.decomposition.memory_stall_fraction if w.decomposition else None


def mfu_delta_ci(
    mfu_c: float | None, mfu_b: float | None, ratio: float, ci: tuple[float, float]
) -> tuple[float, float] | None:
    """MFU is work over time against one ceiling, so the candidate's moves as 1 / the time
    ratio: at the interval's high end its MFU is mfu_c * ratio / high, at the low end
    mfu_c * ratio / low."""
    if mfu_c is None or mfu_b is None or not ratio or ci[0] <= 0:
        return None
    return mfu_c * ratio / ci[1] - mfu_b, mfu_c * ratio / ci[0] - mfu_b


def delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b
