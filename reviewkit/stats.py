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


def bootstrap_median_ci(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the median over resamples with replacement.

    The data are sorted once, so a resample's median is the value at the median of its drawn
    indices: partitioning small integers instead of gathering floats halves the cost, and
    gives exactly the distribution of the plain bootstrap.
    """
    data = np.sort(np.asarray(values, dtype=float))
    n = data.size
    if n == 1:
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n), dtype=np.int32)
    lo, hi = (n - 1) // 2, n // 2
    part = np.partition(idx, [lo, hi], axis=1)
    medians = (data[part[:, lo]] + data[part[:, hi]]) / 2
    alpha = (1 - confidence) / 2
    low, high = np.quantile(medians, [alpha, 1 - alpha])
    return float(low), float(high)


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
