"""Statistics recomputed from raw samples: percentiles, bootstrap CI of the median, noise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

# An interquartile range above 10% of the median means neighbouring samples disagree more
# than most mapping changes under review would move the median: flag the workload as noisy.
NOISE_IQR_OVER_MEDIAN = 0.10
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0  # fixed so the same samples always give the same interval
CONFIDENCE = 0.95
# A tail this far above the median breaks latency SLAs that the median meets (design.md).
TAIL_RISK_P99_OVER_P50 = 1.5


@dataclass(frozen=True)
class SampleStats:
    n: int
    p50_s: float
    p95_s: float
    p99_s: float
    mean_s: float
    std_s: float
    min_s: float
    max_s: float
    iqr_s: float
    median_ci_low_s: float
    median_ci_high_s: float
    noisy: bool
    tail_ratio: float

    def to_json(self) -> dict:
        return asdict(self)


def bootstrap_quantiles(
    values: Sequence[float],
    quantiles: Sequence[float],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> np.ndarray:
    """Each quantile (numpy's linear interpolation) of each bootstrap resample: (resamples, q).

    The data are sorted once, so a resample's order statistic is the value at the matching
    order statistic of its drawn indices: sorting small integers instead of gathering floats
    is cheaper and gives exactly the distribution of the plain bootstrap.
    """
    data = np.sort(np.asarray(values, dtype=float))
    n = data.size
    qs = np.asarray(quantiles, dtype=float)
    if n == 1:
        return np.full((resamples, qs.size), data[0])
    positions = qs * (n - 1)
    lower = np.floor(positions).astype(int)
    upper = np.minimum(lower + 1, n - 1)
    frac = positions - lower
    rng = np.random.default_rng(seed)
    # Small integers sort fast: numpy's vectorised sort of int16 beat np.partition by 2-3x
    # here (docs/benchmarks.md), so sort the drawn indices outright.
    index_type = np.int16 if n <= np.iinfo(np.int16).max else np.int32
    idx = np.sort(rng.integers(0, n, size=(resamples, n), dtype=index_type), axis=1)
    low_values = data[idx[:, lower]]
    return low_values + frac * (data[idx[:, upper]] - low_values)


def interval(draws: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of bootstrap draws."""
    alpha = (1 - confidence) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return float(low), float(high)


def bootstrap_median_ci(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median over resamples with replacement."""
    draws = bootstrap_quantiles(values, [0.5], resamples, seed)[:, 0]
    return interval(draws, confidence)


def summarise(samples_s: Sequence[float]) -> SampleStats:
    """Percentiles use linear interpolation between order statistics (numpy's default)."""
    data = np.asarray(samples_s, dtype=float)
    if data.size == 0:
        raise ValueError("no samples to summarise")
    p25, p50, p75, p95, p99 = np.percentile(data, [25, 50, 75, 95, 99])
    low, high = bootstrap_median_ci(data)
    iqr = p75 - p25
    return SampleStats(
        n=int(data.size),
        p50_s=float(p50),
        p95_s=float(p95),
        p99_s=float(p99),
        mean_s=float(data.mean()),
        std_s=float(data.std(ddof=1)) if data.size > 1 else 0.0,
        min_s=float(data.min()),
        max_s=float(data.max()),
        iqr_s=float(iqr),
        median_ci_low_s=low,
        median_ci_high_s=high,
        noisy=bool(p50 > 0 and iqr / p50 > NOISE_IQR_OVER_MEDIAN),
        tail_ratio=float(p99 / p50) if p50 > 0 else float("inf"),
    )
