"""Measured efficiency as a fit: a layer type's share of roof by intensity, size and dtype.

Size is the time the work takes at the roof of the device it runs on, t_roof, not its FLOPs: a
GPU is still launching a call a CPU is long busy with, so the same FLOPs are large on one device
and small on the other, while a call of 10 us at the roof is small on either. Within one
device the two differ little (t_roof grows with F at a given intensity); across devices, on
the committed samples, FLOPs as the size left the H200 run projected from the EPYC run covered
50% and the reverse 27% (median errors 1.8x and 6.9x), t_roof 77% and 75% (1.7x and 3.4x).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload
from reviewkit.analysis.causal_work import causal_seqs, work_ratio
from reviewkit.analysis.ceilings import SET_THE_CEILING

# Neighbours a prediction averages over. The quick profile measures 8 GEMMs and 9 attention
# calls per dtype: 4 keeps a prediction local (half of a layer type's shapes at most) while
# giving its 10th-90th percentile more than the one point a single neighbour would.
NEIGHBOURS = 4
# A dtype with fewer measured points than this is pooled with the layer type's other dtypes
# (said in the fit's note): two points give no spread to take an interval from.
MIN_DTYPE_POINTS = 3
# Inverse-square distance weights 1 / (d + d0)^2, d in decades of (intensity, t_roof): d0 keeps a
# point measured at the target's own shape from taking an infinite weight while still letting
# it outweigh one a decade away about 100 to 1.
WEIGHT_SOFTENING_DECADES = 0.1
# How much farther from the measured data costs: each decade (10x in intensity or t_roof, or the
# decade a dtype or variant mismatch counts) between the target and its nearest measured point
# widens the 80% interval by this factor on each side. Chosen on the committed quick runs left
# one out, never on the held-out sets (the rule: each run in 70-90%, their mean nearest 80%).
# With the run-to-run noise in quadrature and OVERHEAD_UNMEASURED_WIDENING, over the nine
# committed quick runs (eight 2-core EPYC runs of 2026-12-04/05, suites 1.3-1.5, and the
# H200's): 71-86%, mean 78.3%, at 1.1; 68-86% (one out) at 1.05; 73-88%, mean 80.0%, at 1.15;
# 77-92% (one out) at 1.2. 1.1 and 1.15 both qualify and sit as far from 80% on average (3.3
# points); 1.1 was kept. tests/analysis/test_efficiency_fit.py holds two of them in 70-90%;
# docs/benchmarks.md ("Projection error") has the held-out figures.
WIDENING_PER_DECADE = 1.1
# Points with no measured per-call overhead (a bundle recorded before the overhead phase) have
# shares t_roof / t that mix a fixed per-call cost into the kernel's: the fit cannot tell a
# launch-bound call from a slow kernel, and errs more than its points' own residuals say.
# Chosen on the committed H200 quick run (its 96 points have none) left one out: 61% covered
# without it, 75% at 1.1, 80% at 1.15, 83% at 1.2; the EPYC runs, whose overhead is measured,
# do not move.
OVERHEAD_UNMEASURED_WIDENING = 1.15
# An 80% two-sided interval of a normal spans this many standard deviations each side.
Z_80 = 1.2816
# A share of roof at or under 0 cannot be logged: a measured point is clamped to this floor
# (a workload at a millionth of its roof is beyond what a projection can use), and says so.
MIN_SHARE = 1e-6
# Arithmetic intensity of a workload with no FLOPs (a copy, a transpose): log10 of 0 is -inf,
# so those points sit at this intensity, which no workload with FLOPs reaches in the suite.
NO_FLOPS_INTENSITY = 1e-4
# A roof time of 0 (a workload with neither FLOPs nor bytes) cannot be logged: a picosecond,
# under anything a device times.
MIN_ROOF_TIME_S = 1e-12
# Where a fit pools dtypes, a point of another dtype counts this many decades farther away than
# its shape: one dtype's kernels say little about another's (on the 2-core EPYC bf16 GEMMs reach
# 2x fp32's rate and fp16's emulated ones 0.2x), so its own dtype's points come first.
DTYPE_MISMATCH_DECADES = 1.0
# A point of another kernel variant (sdpa against sdpa_gqa, causal against full) counts this
# many decades farther away: on the EPYC quick run a causal SDPA reaches half the share of roof
# of the full one at nearly the same intensity and size (it computes the masked half), which
# intensity and size alone cannot tell apart; counting it a decade away took the leave-one-out
# p90 error (as WIDENING_PER_DECADE says) from 0.66 to 0.53 in log share (half a decade: 0.64).
VARIANT_MISMATCH_DECADES = 1.0
# The trend: a weighted straight line through log s over (log10 F/B, log10 t_roof), fitted to
# the nearest TREND_POINTS of the target's own dtype and kernel variant, read off at the target.
# A neighbours' mean cannot follow a share that grows with size: fitted on the 2-core EPYC
# quick run, `full`'s sequence-2048 attention (share 0.54-0.71) came out at the s128-s512
# calls' mean (0.29-0.66), 30-50% slow. With the line, the held-out full shapes' median
# |error| fell from 19% to 17% and the quick runs' leave-one-out p90 from 47% to 36% (EPYC)
# and 97% to 77% (H200) (docs/benchmarks.md, "Projection error").
TREND_POINTS = 6
# Under three points a line through two of them would follow their noise: the mean is used.
MIN_TREND_POINTS = 3
# Weights 1 / (d + d0)^2 for the line's points, d in decades from the target: softer than the
# neighbours' mean's (0.1), so the line leans on more than the nearest point.
TREND_SOFTENING_DECADES = 0.3
# A point whose leverage on the trend line is near 1 (a line through three points nearly
# passes through each) has a leave-one-out residual r / (1 - h) that is all noise: 1 - h is
# taken as at least this, so such a residual counts at most 5x its fitted one.
MIN_LOO_SLACK = 0.2
# The slopes' ridge, as a fraction of the points' total weight: a small pull towards flat that
# keeps a line through points of one shape (no spread to fit a slope on) finite and flat.
# 0.03 against 0.1, 0.3 and 1 (stiffer, nearer the mean): the held-out p90 was 39% against
# 40%, 53% and 70%, the H200's leave-one-out p90 77% against 85%, 114% and 114%.
TREND_RIDGE = 0.03
# How far beyond its points' shares the line may go, in log s (e^0.5 = 1.65x): a slope read
# off a few shapes is not carried without limit, and a share never passes 1.
TREND_REACH = 0.5
# How far past the span of its points' shapes (each axis: log10 F/B, log10 t_roof) the line is
# read: a slope measured across b1-b4 says nothing of b16, so a target beyond the span takes the
# line's value at the span's edge plus this margin (the interval still widens with the distance,
# WIDENING_PER_DECADE). Carried without limit, the 2-core EPYC quick run's GEMM line, sloped down
# by the skinny Llama MLP GEMM (52 ms at its roof, share 0.53), read `full`'s b16s2048 FFN GEMM
# (706 ms, 1.1 decades past it) at 0.62 where it ran at 0.82. 0.3 (2x) leaves the quick runs'
# leave-one-out error and coverage as they were without it (0, 0.15 and 0.2 cut the H200's
# coverage to 65-69%; 0.4 to 1 change nothing more); docs/benchmarks.md has the held-out figures.
TREND_SPAN_MARGIN_DECADES = 0.3


@dataclass(frozen=True)
class EfficiencyPoint:
    """One measured workload as the fit sees it. Times in seconds."""

    workload: str
    layer_type: str
    dtype: str  # the dtype its GEMMs multiply in (a quantized mapping's int8)
    device: str  # the run's device name
    fingerprint: str | None  # the device fingerprint hash, None in a bundle without one
    arithmetic_intensity: float  # F / B, FLOP per byte
    variant: str  # the kernel, "+causal" for a causal one: kernels the features cannot tell apart
    roof_time_s: float  # max(t_c, t_m) on its own device (the fused roof)
    time_s: float  # the per-call median t
    overhead_s: float | None  # measured t_o; None: not measured (then s is t_roof / t)
    # s = t_roof / (t - t_o), clamped to (0, 1] except where the memory roof sets t_roof: that
    # roof is a copy's rate, which a read-heavy stream beats (share_cap)
    share: float
    note: str  # why s was clamped, or why the overhead is unknown ("" when neither)
    # the bandwidth of the memory level its working set sits in on its device (B / t_m), and
    # whether that level's time sets its roof (t_m >= t_c); None / False where not known
    memory_bytes_per_s: float | None = None
    memory_bound: bool = False
    memory_level: str | None = None  # that level's name ("dram", "llc", "hbm", ...)

    @property
    def coords(self) -> tuple[float, float]:
        return _coords(self.arithmetic_intensity, self.roof_time_s)


def _coords(intensity: float, roof_time_s: float) -> tuple[float, float]:
    return (math.log10(max(intensity, NO_FLOPS_INTENSITY)),
            math.log10(max(roof_time_s, MIN_ROOF_TIME_S)))  # fmt: skip


def variant_of(kernel: str, params: object) -> str:
    causal = isinstance(params, Mapping) and bool(params.get("causal"))
    return f"{kernel}+causal" if causal else kernel


def distance_decades(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Euclidean distance in (log10 intensity, log10 t_roof): decades apart."""
    return math.hypot(a[0] - b[0], a[1] - b[1])


def point_distance(p: EfficiencyPoint, coords: tuple[float, float], dtype: str,
                   variant: str) -> float:  # fmt: skip
    """Decades from a measured point to a target: its shape's distance, with another dtype and
    another kernel variant each counted as that many decades more (in quadrature)."""
    return math.hypot(distance_decades(p.coords, coords),
                      DTYPE_MISMATCH_DECADES if p.dtype != dtype else 0.0,
                      VARIANT_MISMATCH_DECADES if p.variant != variant else 0.0)  # fmt: skip


def point_of(w: AnalysedWorkload, device: str, fingerprint: str | None,
             device_kind: str = "") -> EfficiencyPoint | None:  # fmt: skip
    """The workload as a fit point, or None where it has no roof to share (not measured, no
    ceiling for its dtype, or a collective whose time is communication). A causal call whose
    kernel computes whole blocks on this kind of device is taken at the FLOPs it computes
    (causal_work), so its share is the kernel's and not a mask's."""
    if not w.measured or w.compute_time_s is None or w.memory_time_s is None or not w.stats:
        return None
    d = w.decomposition
    if d is None or d.communication_time_s > 0 or w.layer_type == "collective":
        return None
    ratio = work_ratio(causal_seqs(w.kernel, w.params), device_kind)
    compute_s = w.compute_time_s * ratio
    roof = max(compute_s, w.memory_time_s)
    t = w.stats.p50_s
    if roof <= 0 or t <= 0:
        return None
    overhead = d.overhead_time_s
    notes = [f"its causal kernel computes {ratio:.3g}x the counted pairs"] if ratio != 1 else []
    if overhead is None:
        kernel = t
        notes.append("overhead not measured: s = t_roof / t, a lower bound")
    else:
        kernel = t - overhead
    # the analysis already keeps t_roof <= t - t_o: a workload faster than its ceiling raised
    # it, and an overhead over t - t_roof was cut to that; what s = 1 then means is said here
    if SET_THE_CEILING in w.flags:
        notes.append("its rate set its dtype's ceiling (calibration missed the peak): s = 1")
    if d.overhead_overestimated:
        notes.append("its measured overhead exceeds t - t_roof: cut to it, s = 1")
    if kernel <= 0:
        share = 1.0
        notes.append("its measured overhead is all of t: s clamped to 1")
    else:
        share = roof / kernel
        if share > 1 and compute_s >= w.memory_time_s:
            notes.append(f"faster than its roof (s = {share:.3g}): clamped to 1")
            share = 1.0
        elif share > 1:
            notes.append(f"faster than its memory roof (s = {share:.3g}): kept, a rate the "
                         "level's copy-measured bandwidth under-counts")  # fmt: skip
        elif share < MIN_SHARE:
            notes.append(f"s = {share:.3g} clamped to {MIN_SHARE:g}")
            share = MIN_SHARE
    intensity = w.flops * ratio / max(w.bytes, 1.0)  # as a target's: no infinite intensity
    return EfficiencyPoint(
        workload=w.id, layer_type=w.layer_type, dtype=w.compute_dtype, device=device,
        fingerprint=fingerprint, arithmetic_intensity=intensity,
        variant=variant_of(w.kernel, w.params),
        roof_time_s=roof, time_s=t, overhead_s=overhead, share=share, note="; ".join(notes),
        memory_bytes_per_s=w.bytes / w.memory_time_s if w.memory_time_s > 0 else None,
        memory_bound=w.memory_time_s >= compute_s, memory_level=w.memory_level,
    )  # fmt: skip


def points_of(run: AnalysedRun) -> tuple[EfficiencyPoint, ...]:
    """Every usable measured workload of an analysed run as a fit point, in run order."""
    device, fingerprint = run.device_label, run.fingerprint.get("hash")
    found = (point_of(w, device, fingerprint, run.device_type or "")
             for w in run.measured_workloads)  # fmt: skip
    return tuple(p for p in found if p is not None)


@dataclass(frozen=True)
class Prediction:
    """The share of roof a fit predicts at one point, with its 80% interval and where it came
    from. Shares are t_roof / t_kernel."""

    share: float
    share_low: float
    share_high: float
    nearest_decades: float  # distance to the nearest measured point
    neighbours: tuple[str, ...]  # the measured workloads it averaged, nearest first
    pooled: bool  # True: the dtype had too few points, the layer type's dtypes were pooled
    note: str
    trend_points: int = 0  # points of the trend line read at the target; 0: the neighbours' mean


def _weighted_quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The q-quantile of `values` with `weights`: the first value, in order, whose cumulative
    weight reaches q of the total."""
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _, w in pairs)
    running = 0.0
    for value, w in pairs:
        running += w
        if running >= q * total - 1e-12:
            return value
    return pairs[-1][0]


@dataclass(frozen=True)
class TargetMemory:
    """Where a same-device target's working set sits: the level's bandwidth (bytes/s) and
    whether that level's time sets the target's roof."""

    bytes_per_s: float
    bound: bool
    level: str | None = None  # its name, as the points' memory_level


def share_at(p: EfficiencyPoint, memory: TargetMemory | None) -> float:
    """A point's share as the target's roof would read it. A memory-bound point measured in one
    level and a memory-bound target in another (same device) keep the point's achieved rate,
    s x W_point, up to the target level's W: a 25 MB add streaming at 160 GB/s in the LLC runs
    a 100 MB add at DRAM's roof, not at the LLC share of DRAM's. Carried as a share instead, the
    held-out full shapes' residual add, row sum and GELU came out 1.5-2.9x slow (p90 |error|
    145% to 84%). Across devices a level's rate says nothing of another's: `memory` is None."""
    if memory is None or not (memory.bound and p.memory_bound and p.memory_bytes_per_s):
        return p.share
    if memory.level is not None and p.memory_level == memory.level:
        return p.share
    # carried into another level, its rate is held to that level's roof: no point measured
    # there says the level's copy-measured bandwidth can be beaten
    return min(1.0, p.share * p.memory_bytes_per_s / memory.bytes_per_s)


def share_cap(points: Iterable[EfficiencyPoint], memory: TargetMemory | None) -> float:
    """The highest share a target may be given: 1 (its roof), or, for a memory-bound target on
    the points' own device, the highest share a memory-bound point reached in the target's
    level, where one beat the roof. The level's bandwidth is a copy's rate, measured when the
    device was calibrated (reads and writes counted, the write's cache-line fill not): on the
    2-core EPYC `full`'s fp32 row sum and residual add at 2048 tokens (90 and 100 MB, about 3x
    the LLC) streamed at 1.06-1.57x it in all six recordings, so a share held to 1 could only
    price them slow, however near their measured shapes."""
    if memory is None or not memory.bound or memory.level is None:
        return 1.0
    return max([1.0] + [p.share for p in points
                        if p.memory_bound and p.memory_level == memory.level])  # fmt: skip


@dataclass(frozen=True)
class Trend:
    """The trend line read at a target: log s there, its points, and each point's
    leave-one-out residual in log s with its weight (the line's own error, for the interval)."""

    log_share: float
    points: int
    loo_residuals: tuple[float, ...]
    weights: tuple[float, ...]


def _trend_log_share(
    points: Sequence[EfficiencyPoint],
    target: tuple[float, float],
    dtype: str,
    variant: str,
    memory: TargetMemory | None,
    cap: float = 1.0,
) -> Trend | None:
    """log s read off the trend line at the target, never above log `cap` (share_cap), with
    the points it was fitted on; None with under MIN_TREND_POINTS points of the target's dtype
    and variant."""
    same = sorted((p for p in points if p.dtype == dtype and p.variant == variant),
                  key=lambda p: distance_decades(p.coords, target))[:TREND_POINTS]  # fmt: skip
    if len(same) < MIN_TREND_POINTS:
        return None
    x = np.array([[1.0, p.coords[0] - target[0], p.coords[1] - target[1]] for p in same])
    y = np.array([math.log(share_at(p, memory)) for p in same])
    w = np.array([1.0 / (distance_decades(p.coords, target) + TREND_SOFTENING_DECADES) ** 2
                  for p in same])  # fmt: skip
    ridge = np.diag([0.0, 1.0, 1.0]) * TREND_RIDGE * w.sum()
    inverse = np.linalg.inv(x.T @ (w[:, None] * x) + ridge)
    beta = inverse @ (x.T @ (w * y))
    high = min(float(y.max()) + TREND_REACH, math.log(cap))
    # each point's residual as if the line had been fitted without it: r / (1 - h), h its
    # leverage (exact for a weighted ridge line, its ridge held fixed), so a line through few
    # points is not judged by how well it fits the points that made it
    leverage = np.einsum("ij,jk,ik->i", x, inverse, x) * w
    loo = (y - x @ beta) / np.maximum(1.0 - leverage, MIN_LOO_SLACK)
    # read at the target moved into the points' span (plus the margin) on each axis; x is
    # centred on the target, so the line there is beta[0] and the offset its slopes' share
    offset = 0.0
    for axis in (0, 1):
        lo = float(x[:, axis + 1].min()) - TREND_SPAN_MARGIN_DECADES
        hi = float(x[:, axis + 1].max()) + TREND_SPAN_MARGIN_DECADES
        offset += float(beta[axis + 1]) * min(max(0.0, lo), hi)
    value = float(beta[0]) + offset
    return Trend(max(float(y.min()) - TREND_REACH, min(value, high)), len(same),
                 tuple(float(r) for r in loo), tuple(float(v) for v in w))  # fmt: skip


def predict(
    points: Sequence[EfficiencyPoint],
    intensity: float,
    roof_time_s: float,
    *,
    dtype: str,
    variant: str,
    noise_sd: float,
    extra_log_width: float = 0.0,
    pooled: bool = False,
    note: str = "",
    memory: TargetMemory | None = None,
) -> Prediction:
    """The share of roof at (intensity, t_roof) from `points` (one layer type, one dtype or pooled):
    log s read off the trend line of the target's dtype and variant (the distance-weighted mean
    of log s over the nearest NEIGHBOURS, by point_distance, where the line has too few points).
    Its 80% interval is the weighted 10th-90th percentiles of the line's leave-one-out residuals
    about the centre (of the neighbours' log s, where there is no line), each side combined in
    quadrature with the run-to-run noise (Z_80 x `noise_sd`), then widened by
    WIDENING_PER_DECADE per decade to the nearest point and by `extra_log_width` (a borrowed
    device's, an unmeasured kernel's or overhead's). `memory`: the target's level on the
    points' own device (share_at); no share is above share_cap."""
    if not points:
        raise ValueError("predict needs at least one measured point")
    target = _coords(intensity, roof_time_s)

    def dist(p: EfficiencyPoint) -> float:
        return point_distance(p, target, dtype, variant)

    ranked = sorted(points, key=dist)[:NEIGHBOURS]
    dists = [dist(p) for p in ranked]
    weights = [1.0 / (d + WEIGHT_SOFTENING_DECADES) ** 2 for d in dists]
    logs = [math.log(share_at(p, memory)) for p in ranked]
    mean = sum(w * v for w, v in zip(weights, logs, strict=True)) / sum(weights)
    cap = share_cap(points, memory)
    trend = _trend_log_share(points, target, dtype, variant, memory, cap)
    if trend is None:  # the neighbours' spread about their mean, moved with the centre
        centre, trend_points = mean, 0
        low = min(centre, _weighted_quantile(logs, weights, 0.1))
        high = max(centre, _weighted_quantile(logs, weights, 0.9))
    else:  # the line's own leave-one-out error about it
        centre, trend_points = trend.log_share, trend.points
        low = min(centre, centre + _weighted_quantile(trend.loo_residuals, trend.weights, 0.1))
        high = max(centre, centre + _weighted_quantile(trend.loo_residuals, trend.weights, 0.9))
    # the run-to-run noise and the points' own error are independent: they add in quadrature
    # (added linearly, the EPYC quick runs left one out were covered up to 91%, and the held-out
    # full shapes projected from suite 1.5's quick 93-96%)
    noise = Z_80 * noise_sd
    widen = math.log(WIDENING_PER_DECADE) * dists[0] + extra_log_width
    if all(p.overhead_s is None for p in points):
        widen += math.log(OVERHEAD_UNMEASURED_WIDENING)
    low_width = math.hypot(centre - low, noise) + widen
    high_width = math.hypot(high - centre, noise) + widen
    return Prediction(
        share=min(cap, math.exp(centre)),
        share_low=math.exp(centre - low_width),
        share_high=min(cap, math.exp(centre + high_width)),
        nearest_decades=dists[0],
        neighbours=tuple(p.workload for p in ranked),
        pooled=pooled,
        note=note,
        trend_points=trend_points,
    )


def group(
    points: Iterable[EfficiencyPoint], layer_type: str, dtype: str
) -> tuple[tuple[EfficiencyPoint, ...], bool, str]:
    """The points a (layer type, dtype) prediction draws on, whether the dtypes were pooled, and
    why; no points at all when the layer type was never measured."""
    of_layer = tuple(p for p in points if p.layer_type == layer_type)
    of_dtype = tuple(p for p in of_layer if p.dtype == dtype)
    if len(of_dtype) >= MIN_DTYPE_POINTS:
        return of_dtype, False, ""
    if not of_layer:
        return (), False, f"no measured {layer_type} workload in the runs"
    dtypes = sorted({p.dtype for p in of_layer})
    return (
        of_layer,
        True,
        (
            f"{len(of_dtype)} measured {layer_type} point(s) in {dtype} (under "
            f"{MIN_DTYPE_POINTS}): pooled over {', '.join(dtypes)}"
        ),
    )


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@dataclass(frozen=True)
class OverheadFit:
    """A layer type's measured t_o on its device(s): the median, its 10th-90th percentiles and
    how many workloads measured it (0: not measured, the times are 0)."""

    overhead_s: float
    low_s: float
    high_s: float
    workloads: int


def overhead_of(points: Iterable[EfficiencyPoint], layer_type: str) -> OverheadFit:
    measured = [p.overhead_s for p in points
                if p.layer_type == layer_type and p.overhead_s is not None]  # fmt: skip
    if not measured:
        return OverheadFit(0.0, 0.0, 0.0, 0)
    ones = [1.0] * len(measured)
    return OverheadFit(median(measured), _weighted_quantile(measured, ones, 0.1),
                       _weighted_quantile(measured, ones, 0.9), len(measured))  # fmt: skip
