"""Drift and throttling over a long window: throughput trend, first vs last sub-window, clocks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from reviewkit.analysis.compare import BASE_SEED, CAND_SEED, COMPARE_RESAMPLES
from reviewkit.analysis.pairing import ratio_ci
from reviewkit.analysis.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    bootstrap_quantiles,
    interval,
)
from reviewkit.common.format import change as fmt_change
from reviewkit.common.format import change_ci

# A change over the window below 5% is smaller than the mapping wins reviews typically weigh
# (10% and up) and within what shared hosts move a median between runs: call it noise, not
# drift, even when its interval excludes zero.
DRIFT_THRESHOLD = 0.05
# Boost clocks wander by a few percent with load and sampling instant; a fall of more than 5%
# from the first sub-window to the last is the governor or a power/thermal limit cutting clocks.
THROTTLE_CLOCK_DROP = 0.05
# A least-squares line through two points fits them exactly: no residual, no interval. Three
# sub-windows are the fewest that say anything about a trend.
MIN_SUBWINDOWS = 3
# The bootstrap of a median over fewer samples resamples so few distinct values that its
# interval is not worth reading: below this per side, the first/last rule is not applied.
MIN_FIRST_LAST_SAMPLES = 5

DRIFT, STABLE, INSUFFICIENT = "drift", "stable", "insufficient data"
THROTTLED, NOT_THROTTLED, NOT_AVAILABLE = "throttled", "not throttled", "not available"


@dataclass(frozen=True)
class Trend:
    """Least-squares line of a series over time; relative change = slope x span / mean."""

    points: int
    span_s: float
    mean: float | None
    slope_per_s: float | None
    relative_change: float | None
    relative_change_ci: tuple[float, float] | None
    reason: str = ""  # why a field is None, or empty

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FirstLast:
    """Median per-call time of the last sub-window over the first, with a bootstrap interval."""

    first_samples: int
    last_samples: int
    first_median_s: float | None
    last_median_s: float | None
    ratio: float | None  # > 1: the last sub-window is slower
    ratio_ci: tuple[float, float] | None
    reason: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ClockChange:
    series: str
    readings: int
    first_mhz: float
    last_mhz: float
    change: float  # last / first - 1; negative: the clock fell
    throttled: bool


@dataclass(frozen=True)
class TemperatureCheck:
    series: str
    readings: int
    max_c: float
    critical_c: float | None  # None: no critical temperature known for this sensor
    reached: bool


@dataclass(frozen=True)
class Throttling:
    status: str  # "throttled" | "not throttled" | "not available"
    reason: str
    clock_drop_threshold: float
    clocks: tuple[ClockChange, ...] = ()
    temperatures: tuple[TemperatureCheck, ...] = ()

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Drift:
    verdict: str  # "drift" | "stable" | "insufficient data"
    reasons: tuple[str, ...]
    threshold: float
    trend: Trend
    first_last: FirstLast
    throttling: Throttling

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "threshold": self.threshold,
            "trend": self.trend.to_json(),
            "first_last": self.first_last.to_json(),
            "throttling": self.throttling.to_json(),
        }


def _slopes(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slopes and means along the last axis; slope NaN where time has no spread."""
    tc = t - t.mean(axis=-1, keepdims=True)
    sxx = (tc * tc).sum(axis=-1)
    sxy = (tc * (v - v.mean(axis=-1, keepdims=True))).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), np.nan)
    return slope, v.mean(axis=-1)


def trend(
    times_s: Sequence[float],
    values: Sequence[float],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Trend:
    """Slope per second and relative change over the window, with a pairs-bootstrap 95% CI.

    The interval resamples (time, value) pairs with replacement and recomputes slope x span /
    mean per resample (the span is the window's, fixed); resamples whose times are all equal
    have no slope and are dropped.
    """
    t = np.asarray(times_s, dtype=float)
    v = np.asarray(values, dtype=float)
    if t.shape != v.shape or t.ndim != 1:
        raise ValueError(f"times and values differ in shape: {t.shape} vs {v.shape}")
    n = int(t.size)
    span = float(t.max() - t.min()) if n else 0.0
    mean = float(v.mean()) if n else None
    if n < MIN_SUBWINDOWS:
        return Trend(
            n,
            span,
            mean,
            None,
            None,
            None,
            f"{n} point(s): a trend needs at least {MIN_SUBWINDOWS}",
        )
    if span <= 0:
        return Trend(n, span, mean, None, None, None, "all points at one time: no slope")
    slope = float(_slopes(t, v)[0])
    if not mean > 0:
        return Trend(
            n, span, mean, slope, None, None, "mean is not positive: a relative change is undefined"
        )
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    slopes, means = _slopes(t[idx], v[idx])
    ok = np.isfinite(slopes) & (means > 0)
    ci = interval(slopes[ok] * span / means[ok]) if ok.any() else None
    return Trend(n, span, mean, slope, slope * span / mean, ci, "")


def first_last(first_samples_s: Sequence[float], last_samples_s: Sequence[float]) -> FirstLast:
    """Ratio of medians last/first with the bootstrap interval `reviewkit compare` uses."""
    first = np.asarray(first_samples_s, dtype=float)
    last = np.asarray(last_samples_s, dtype=float)
    nf, nl = int(first.size), int(last.size)
    if not nf or not nl:
        return FirstLast(
            nf,
            nl,
            None,
            None,
            None,
            None,
            "the first or last sub-window has no samples (fewer than two sub-windows measured)",
        )
    mf, ml = float(np.median(first)), float(np.median(last))
    if not mf > 0:
        return FirstLast(nf, nl, mf, ml, None, None, "the first median is not positive")
    if min(nf, nl) < MIN_FIRST_LAST_SAMPLES:
        return FirstLast(
            nf,
            nl,
            mf,
            ml,
            ml / mf,
            None,
            f"fewer than {MIN_FIRST_LAST_SAMPLES} samples in the first or last "
            "sub-window: no interval (use a longer window or fewer sub-windows)",
        )
    fd = bootstrap_quantiles(first, (0.5,), COMPARE_RESAMPLES, BASE_SEED)[:, 0]
    ld = bootstrap_quantiles(last, (0.5,), COMPARE_RESAMPLES, CAND_SEED)[:, 0]
    return FirstLast(nf, nl, mf, ml, ml / mf, ratio_ci(ld, fd), "")


def _readings(series: Sequence[float | None]) -> list[float]:
    return [float(x) for x in series if x is not None and np.isfinite(x)]


def throttling(
    clocks_mhz: Mapping[str, Sequence[float | None]] | None = None,
    temperatures_c: Mapping[str, Sequence[float | None]] | None = None,
    critical_c: Mapping[str, float] | None = None,
    unavailable_reason: str = "",
    clock_drop: float = THROTTLE_CLOCK_DROP,
) -> Throttling:
    """Throttled when a clock's last reading is more than `clock_drop` below its first, or a
    temperature reaches its known critical value. Series are one reading per sub-window end
    (None where the read failed)."""
    critical_c = critical_c or {}
    clocks = []
    for name, series in (clocks_mhz or {}).items():
        r = _readings(series)
        if len(r) < 2 or not r[0] > 0:
            continue
        change = r[-1] / r[0] - 1
        clocks.append(ClockChange(name, len(r), r[0], r[-1], change, change < -clock_drop))
    temps = []
    for name, series in (temperatures_c or {}).items():
        r = _readings(series)
        if not r:
            continue
        crit = critical_c.get(name)
        temps.append(
            TemperatureCheck(name, len(r), max(r), crit, crit is not None and max(r) >= crit)
        )
    hits = [
        f"{c.series} fell {-c.change:.1%} ({c.first_mhz:.0f} -> {c.last_mhz:.0f} MHz)"
        for c in clocks
        if c.throttled
    ]
    hits += [
        f"{t.series} reached {t.max_c:.1f} C (critical {t.critical_c:.1f} C)"
        for t in temps
        if t.reached
    ]
    args = (clock_drop, tuple(clocks), tuple(temps))
    if hits:
        return Throttling(THROTTLED, "; ".join(hits), *args)
    judged = list(clocks) + [t for t in temps if t.critical_c is not None]
    if judged:
        parts = []
        if clocks:
            worst = min(c.change for c in clocks)
            parts.append(
                f"{len(clocks)} clock(s), largest change {fmt_change(worst)} "
                f"(throttled below -{clock_drop:.0%})"
            )
        checked = [t for t in temps if t.critical_c is not None]
        if checked:
            parts.append(f"{len(checked)} temperature(s) below their critical value")
        return Throttling(NOT_THROTTLED, "; ".join(parts), *args)
    if temps:
        why = (
            "temperatures recorded but no critical temperature is known for them, and no "
            "clock series"
        )
    else:
        why = unavailable_reason or "no clock or temperature series was recorded"
    return Throttling(NOT_AVAILABLE, why, *args)


def detect(
    times_s: Sequence[float],
    throughput_per_s: Sequence[float],
    first_samples_s: Sequence[float],
    last_samples_s: Sequence[float],
    clocks_mhz: Mapping[str, Sequence[float | None]] | None = None,
    temperatures_c: Mapping[str, Sequence[float | None]] | None = None,
    critical_c: Mapping[str, float] | None = None,
    unavailable_reason: str = "",
    threshold: float = DRIFT_THRESHOLD,
    clock_drop: float = THROTTLE_CLOCK_DROP,
) -> Drift:
    """Drift verdict over a soak window, and throttling from the clock and temperature series.

    "drift" when the throughput trend's interval excludes 0 and its relative change is at least
    `threshold` in size, or when the first/last ratio's whole interval lies beyond 1 +/-
    `threshold`; else "stable", or "insufficient data" when the trend could not be computed.
    """
    tr = trend(times_s, throughput_per_s)
    fl = first_last(first_samples_s, last_samples_s)
    th = throttling(clocks_mhz, temperatures_c, critical_c, unavailable_reason, clock_drop)
    reasons = []
    if tr.relative_change_ci is not None and tr.relative_change is not None:
        low, high = tr.relative_change_ci
        if (low > 0 or high < 0) and abs(tr.relative_change) >= threshold:
            reasons.append(
                f"throughput changed {fmt_change(tr.relative_change)} over the window "
                f"(95% CI {change_ci((low, high))}; threshold {threshold:.0%})"
            )
    if fl.ratio_ci is not None:
        low, high = fl.ratio_ci
        if low > 1 + threshold or high < 1 - threshold:
            reasons.append(
                f"last/first median per-call time {fl.ratio:.3f}x "
                f"(95% CI {low:.3f} .. {high:.3f}, beyond 1 +/- {threshold:.0%})"
            )
    if reasons:
        verdict = DRIFT
    elif tr.relative_change_ci is None:
        verdict = INSUFFICIENT
        reasons.append(f"no trend interval: {tr.reason or 'no resample had a slope'}")
    else:
        verdict = STABLE
        reasons.append(f"no change of {threshold:.0%} or more that the intervals support")
    return Drift(verdict, tuple(reasons), threshold, tr, fl, th)
