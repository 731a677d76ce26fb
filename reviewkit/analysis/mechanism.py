"""The mechanism side of a comparison: MFU and time fractions on one denominator, and their
changes between two runs (the numbers the ratio of times alone does not say)."""

from __future__ import annotations

from reviewkit.analysis.roofline import memory_level, per_op_terms, roofline


def on_baseline_ceilings(c: dict, base_doc: dict) -> tuple[float | None, dict | None, str | None]:
    """The candidate workload's (MFU, time fractions, bottleneck) against the baseline's
    ceilings, so both sides of a same-device comparison share one denominator."""
    from reviewkit.analysis import overhead as overhead_mod
    from reviewkit.analysis.stats import SampleStats

    ceilings = base_doc.get("ceilings") or {}
    peak = ((ceilings.get("compute") or {}).get(c["dtype"]) or {}).get("peak")
    _, bw = memory_level(ceilings, c["bytes"])
    if not peak or not bw or not c.get("stats") or c.get("wire_bytes"):
        return c.get("mfu"), c.get("fractions"), c.get("bottleneck")
    st = SampleStats(**c["stats"])
    o = overhead_mod.read(c, st)
    r = roofline(c["flops"], c["bytes"], st.p50_s, peak, bw, 0.0, o.overhead_s,
                 time_high_s=st.median_ci_high_s, overhead_low_s=o.overhead_low_s,
                 per_op=per_op_terms(c, ceilings))  # fmt: skip
    return r.mfu, r.decomposition.fractions(), r.bottleneck


DELTA_FRACTIONS = ("compute", "memory_stall", "communication", "overhead", "inefficiency")


def fraction_deltas(candidate: dict | None, baseline: dict | None) -> dict:
    """candidate - baseline of each time fraction; None where either side has none."""
    c, b = candidate or {}, baseline or {}
    return {k: delta(c.get(k), b.get(k)) for k in DELTA_FRACTIONS}


def share(w: dict) -> float | None:
    return (w.get("decomposition") or {}).get("roof_share")


def layer_fractions(agg: dict) -> dict:
    return {k: agg.get(f"{k}_fraction") for k in DELTA_FRACTIONS}


def stall(w: dict) -> float | None:
    f = w.get("fractions")
    return f["memory_stall"] if f else None


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
