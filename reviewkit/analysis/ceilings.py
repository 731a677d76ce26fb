"""Ceilings of runs: a compute ceiling no workload beats (raised to the best rate a run
sustained, said where), and how two runs' ceilings relate (shared, moved, shifted)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from reviewkit.bundle.run import STATUS_OK

if TYPE_CHECKING:
    from reviewkit.analysis.analysed import AnalysedRun
    from reviewkit.bundle.records import Run, Workload

# The workload flag of one whose median rate set its dtype's ceiling: calibration missed the
# peak for those settings (a kernel the screen did not try, a clock it did not see).
SET_THE_CEILING = "set-the-ceiling"


def best_rates(
    workloads: Iterable[Workload], p50_of: Callable[[Workload], float | None]
) -> dict[str, tuple[float, str]]:
    """The best median FLOP rate per dtype (the dtype a workload's GEMMs multiply in), and the
    workload that sustained it. `p50_of(w)` is the workload's median time in seconds (None when
    it has none). A sparse workload's dense FLOPs are more arithmetic than it does, so its rate
    raises no ceiling."""
    best: dict[str, tuple[float, str]] = {}
    for w in workloads:
        if w.status != STATUS_OK or not w.flops or w.wire_bytes or w.density is not None:
            continue
        p50 = p50_of(w)
        if not p50 or p50 <= 0:
            continue
        rate = w.flops / p50
        if rate > best.get(w.compute_dtype, (0.0, ""))[0]:
            best[w.compute_dtype] = (rate, w.id)
    return best


def raised(ceilings: dict, rates: dict[str, tuple[float, str]], whose: str = "") -> dict:
    """`ceilings` with each dtype's compute peak raised to the best rate a workload sustained
    where that is higher, the calibrated peak and the workload kept beside it; the same dict
    when nothing beats its ceiling. An MFU above 100% is a ceiling calibration missed, not a
    kernel beating the hardware: dividing by the best rate seen keeps every MFU at or under
    100% and says so."""
    compute = ceilings.get("compute") or {}
    changed = {}
    for dtype, (rate, workload) in rates.items():
        entry = compute.get(dtype) or {}
        peak = entry.get("peak")
        if not peak or rate <= peak:
            continue
        of = f"{whose} " if whose else ""
        changed[dtype] = {
            **entry,
            "peak": rate,
            "calibrated_peak": entry.get("calibrated_peak", peak),
            "raised_by": f"{of}{workload}",
            # how the calibrated peak was measured stays in its own fields (measured_method)
            "method": f"raised to the best median rate a workload sustained ({of}{workload}, "
            f"{rate / peak:.2f}x the calibrated {peak / 1e9:,.4g} GFLOP/s): calibration missed "
            "the peak at these settings",
        }
        if entry.get("method"):
            changed[dtype]["calibrated_method"] = entry.get("calibrated_method", entry["method"])
    if not changed:
        return ceilings
    return {**ceilings, "compute": {**compute, **changed}}


def setters(ceilings: dict) -> set[str]:
    """The workload ids (as `raised` named them) whose rate set a dtype's ceiling."""
    return {entry["raised_by"].rsplit(" ", 1)[-1]
            for entry in (ceilings.get("compute") or {}).values()
            if isinstance(entry, dict) and entry.get("raised_by")}  # fmt: skip


# The knobs that move a ceiling: a run divides by the ceilings of its own settings, so two runs
# that differ in one of these cannot share one denominator even on one device (a 2-thread run
# on a 1-thread ceiling read 134% MFU).
CEILING_SETTINGS = ("threads", "float32_matmul_precision")


def moved_settings(base: Run, cand: Run) -> list[str]:
    """The ceiling-moving knobs whose values differ between the two runs."""
    b, c = base.knobs or {}, cand.knobs or {}
    return [k for k in CEILING_SETTINGS if b.get(k) != c.get(k)]


def shared(base: AnalysedRun, cand: AnalysedRun) -> dict:
    """One denominator for two runs on one device at one setting: the baseline's ceilings,
    raised to the best rate either run's workloads sustained (so neither side's MFU passes
    100%)."""
    both = {}
    for side, run in (("baseline", base), ("candidate", cand)):
        rates = best_rates(run.workloads, lambda w: w.p50_s)
        for dtype, (rate, wid) in rates.items():
            if rate > both.get(dtype, (0.0, ""))[0]:
                both[dtype] = (rate, f"{side} {wid}")
    return raised(base.ceilings or {}, both)


def denominator_text(same_device: bool, moved: list[str], profile_hash: str | None) -> str:
    """Which ceilings a comparison's MFU and fractions are against, in words."""
    if not same_device:
        return "each run's own ceilings (different devices)"
    if moved:
        return (f"each run's own ceilings at its own settings (one device; {', '.join(moved)} "
                "differ, and they move the ceiling)")  # fmt: skip
    if profile_hash:
        return f"device profile {profile_hash}, shared by both runs (one device)"
    return "the baseline's ceilings for both runs (one device)"


def shifts(base: Run, cand: Run) -> dict[str, float]:
    """Relative change of each ceiling both runs measured (candidate / baseline - 1), by dtype
    for compute and `bandwidth` for memory."""
    cb, cc = base.ceilings or {}, cand.ceilings or {}
    out = {}
    for dtype, entry in (cb.get("compute") or {}).items():
        other = (cc.get("compute") or {}).get(dtype) or {}
        if entry.get("peak") and other.get("peak"):
            out[dtype] = other["peak"] / entry["peak"] - 1
    bw_b, bw_c = (cb.get("bandwidth") or {}).get("peak"), (cc.get("bandwidth") or {}).get("peak")
    if bw_b and bw_c:
        out["bandwidth"] = bw_c / bw_b - 1
    levels_c = {lv.get("level"): lv for lv in cc.get("memory") or []}
    for level in (cb.get("memory") or [])[:-1]:  # the last level is `bandwidth` above
        other = levels_c.get(level.get("level")) or {}
        if level.get("peak") and other.get("peak"):
            out[f"{level['level']} bandwidth"] = other["peak"] / level["peak"] - 1
    return out


def shared_profile(base: Run, cand: Run) -> str | None:
    """The device profile hash both runs divide by, when they share one."""
    hashes = [((r.ceilings or {}).get("profile") or {}).get("hash") for r in (base, cand)]
    return hashes[0] if hashes[0] and hashes[0] == hashes[1] else None
