"""Statistics recomputed from raw samples: percentiles, bootstrap intervals (closed-form within a
round, hierarchical across rounds), three-way verdicts against a margin, and the false
discovery rate across many comparisons."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

# An interquartile range above 10% of the median means neighbouring samples disagree more
# than most mapping changes under review would move the median: flag the workload as noisy.
NOISE_IQR_OVER_MEDIAN = 0.10
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0  # fixed so the same samples always give the same interval
CONFIDENCE = 0.95
# A tail this far above the median breaks latency SLAs that the median meets (docs/metrics.md).
TAIL_RISK_P99_OVER_P50 = 1.5


@dataclass(frozen=True)
class SampleStats:
    n: int
    rounds: int
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
    # Each round's median, and their spread ((max - min) / median of them): how much the
    # workload moved between rounds, which the samples of one round cannot show.
    round_p50_s: tuple[float, ...] = ()
    round_spread: float | None = None

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


# Draws of the closed-form and hierarchical bootstraps: each is a table lookup. 2000 estimate
# the variance the t interval is built on to within ~3% (relative standard error sqrt(2/2000))
# and the percentile ends of a one-round comparison to within ~1%; 4000 cost `compare` 0.3 s
# more on two 5-round quick bundles.
DRAWS = 2000
FASTER, SLOWER = "faster", "slower"
EQUIVALENT, INCONCLUSIVE = "equivalent", "inconclusive"


@functools.lru_cache(maxsize=4096)  # rounds of one run often share a size (a sample cap)
def order_statistic_cdf(n: int, k: int) -> np.ndarray:
    """P(X*_(k) <= x_(j)) for j = 1..n: the bootstrap distribution of the k-th smallest value of
    a resample (with replacement) of n sorted values, in closed form. X*_(k) <= x_(j) exactly
    when at least k of the n draws fall on x_(1..j), each with probability j/n, so the
    probability is P(Binomial(n, j/n) >= k) = I_{j/n}(k, n - k + 1), the regularised
    incomplete beta function (Efron & Tibshirani 1993, ch. 7; Maritz & Jarrett 1978)."""
    from scipy.special import betainc

    p = np.arange(1, n + 1, dtype=float) / n
    cdf = betainc(float(k), float(n - k + 1), p)
    cdf[-1] = 1.0  # x_(n) bounds every draw; betainc(., ., 1) is 1 up to rounding
    cdf.flags.writeable = False  # shared through the cache
    return cdf


def quantile_draws(sorted_values: np.ndarray, q: float, u: np.ndarray) -> np.ndarray:
    """Bootstrap draws of numpy's (linearly interpolated) q-quantile of one sample, by inverse
    transform of the closed-form order-statistic distributions at the uniforms `u`.

    The two order statistics the quantile interpolates between are drawn with the same uniform
    (their joint law is approximated by the comonotone one, exact in each marginal); no
    resample is ever built or sorted."""
    n = sorted_values.size
    position = q * (n - 1)
    lower = int(np.floor(position))
    frac = position - lower
    low = sorted_values[np.minimum(np.searchsorted(order_statistic_cdf(n, lower + 1), u), n - 1)]
    if frac == 0 or lower + 1 >= n:
        return low
    high_cdf = order_statistic_cdf(n, lower + 2)
    high = sorted_values[np.minimum(np.searchsorted(high_cdf, u), n - 1)]
    return low + frac * (high - low)


def split_rounds(samples_s: Sequence[float], round_sizes: Sequence[int] | None) -> list[np.ndarray]:
    """The samples of each round, sorted (one round when the bundle records none)."""
    return [np.sort(part) for part in split_rounds_in_order(samples_s, round_sizes)]


def round_quantile(rounds: Sequence[np.ndarray], q: float) -> float:
    """The statistic compared across runs: the mean over rounds of each round's q-quantile.
    With one round it is the plain quantile of the samples."""
    return float(np.mean([np.quantile(r, q) for r in rounds]))


def round_draws(rng: np.random.Generator, n_rounds: int, draws: int = DRAWS) -> np.ndarray:
    """Which rounds each hierarchical resample takes: (draws, n_rounds) indices, drawn with
    replacement. A paired design (interleaved A/B) uses one plan for both sides."""
    return rng.integers(0, n_rounds, size=(draws, n_rounds))


def hierarchical_draws(
    rounds: Sequence[np.ndarray], q: float, plan: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Draws of `round_quantile` under a two-level bootstrap: the rounds in `plan`, then the
    samples within each drawn round (Kalibera & Jones 2013; Davison & Hinkley 1997, 3.8). The
    inner level is the closed form, so a draw costs one lookup per round."""
    u = rng.random(plan.shape)
    out = np.empty(plan.shape)
    for r, values in enumerate(rounds):
        taken = plan == r
        if taken.any():
            out[taken] = quantile_draws(values, q, u[taken])
    return out.mean(axis=1)


def closed_form_quantile_ci(
    values: Sequence[float], q: float = 0.5, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The percentile bootstrap interval of a quantile, without resampling: the order
    statistics at which its closed-form bootstrap distribution crosses (1 -/+ confidence) / 2."""
    data = np.sort(np.asarray(values, dtype=float))
    alpha = (1 - confidence) / 2
    low, high = quantile_draws(data, q, np.array([alpha, 1 - alpha]))
    return float(low), float(high)


def cluster_variance(log_draws: np.ndarray, rounds: int) -> float:
    """The variance of a log statistic averaged over `rounds` rounds, from its hierarchical
    bootstrap draws. Resampling R clusters gives (R - 1) / R of the unbiased variance of their
    mean (Davison & Hinkley 1997, sec. 2.4 and 3.8), so the draws' variance is scaled back up."""
    return float(np.var(log_draws, ddof=1)) * rounds / (rounds - 1)


@dataclass(frozen=True)
class RatioInterval:
    """A ratio's interval and what it rests on: the log-scale standard error, the degrees of
    freedom of the rounds, and how it was formed."""

    low: float
    high: float
    se_log: float | None
    df: float | None
    method: str

    @property
    def ci(self) -> tuple[float, float]:
        return self.low, self.high


T_INTERVAL = "t on the rounds (hierarchical bootstrap variance, Welch df)"
CALL_PAIRED = "t on the rounds of call-paired ratios (each call beside its neighbour)"
PERCENTILE = "percentile bootstrap of the samples (one round: the drift between rounds not in it)"


def ratio_interval(
    point: float,
    parts: Sequence[tuple[np.ndarray, int]],
    confidence: float = CONFIDENCE,
    known_variance: float = 0.0,
) -> RatioInterval:
    """The interval of a ratio whose log draws come in independent `parts` (log draws, rounds):
    one part for a paired design (the log ratio), two for independent runs (each side's log).
    `known_variance` is a further log-scale variance the rounds cannot show (two separate runs'
    run-to-run variation, `run_to_run_variance`); it is taken as known, so it adds no degrees
    of freedom of its own.

    With a handful of rounds a percentile interval of the bootstrap is too narrow (its
    variance is (R - 1) / R of the truth and its tails are normal, not t). So the variance is
    corrected per part, the degrees of freedom come from Welch-Satterthwaite, and the interval
    is log(point) +/- t * se. With one round in any part there is no between-round variance to
    scale, and the caller uses a percentile interval instead."""
    from scipy.special import stdtrit

    variances = [(cluster_variance(d, r), r) for d, r in parts]
    var = sum(v for v, _ in variances) + known_variance
    se = float(np.sqrt(var))
    if var == 0:
        return RatioInterval(point, point, 0.0, None, T_INTERVAL)
    rounds_term = sum(v**2 / (r - 1) for v, r in variances if v > 0)
    df = var**2 / rounds_term if rounds_term else float("inf")
    half = float(stdtrit(df, 0.5 + confidence / 2)) * se
    centre = float(np.log(point))
    return RatioInterval(float(np.exp(centre - half)), float(np.exp(centre + half)), se, df,
                         T_INTERVAL)  # fmt: skip


def widen(
    point: float, ci: tuple[float, float], known_variance: float, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """A percentile interval of the ratio widened, on the log scale, by a normal component of
    `known_variance`: each half-width h becomes sqrt(h^2 + (z * sd)^2), as independent errors
    add (one-round runs, where no t interval can be formed)."""
    from scipy.special import ndtri

    if known_variance <= 0:
        return ci
    extra = float(ndtri(0.5 + confidence / 2)) ** 2 * known_variance
    centre = np.log(point)
    low = centre - np.sqrt((centre - np.log(ci[0])) ** 2 + extra)
    high = centre + np.sqrt((np.log(ci[1]) - centre) ** 2 + extra)
    return float(np.exp(low)), float(np.exp(high))


def run_to_run_variance(log_points: Sequence[float], within_variances: Sequence[float]) -> float:
    """The variance of a workload's log statistic between separate runs beyond what each run's
    own rounds show: the one-way random-effects moment estimate (Searle, Casella & McCulloch
    1992, ch. 3), the variance of the K runs' log points less the mean of their within-run
    variances, and 0 when the runs agree better than their rounds say. This is the level of
    repetition above the rounds that Kalibera & Jones (2013) ask to be measured once per
    platform; a comparison of two separate runs adds it to each side."""
    points = np.asarray(log_points, dtype=float)
    if points.size < 2:
        raise ValueError("run-to-run variance needs two or more runs")
    between = float(np.var(points, ddof=1)) - float(np.mean(within_variances))
    return max(0.0, between)


def split_rounds_in_order(
    samples_s: Sequence[float], round_sizes: Sequence[int] | None
) -> list[np.ndarray]:
    """The samples of each round in the order they were taken (one round when the bundle
    records none)."""
    data = np.asarray(samples_s, dtype=float)
    sizes = [int(n) for n in round_sizes or () if n > 0] or [data.size]
    if sum(sizes) != data.size:
        raise ValueError(f"round sizes {sizes} do not add up to {data.size} samples")
    return list(np.split(data, np.cumsum(sizes)[:-1]))


def call_paired_log_ratios(
    base_rounds: Sequence[np.ndarray], cand_rounds: Sequence[np.ndarray]
) -> np.ndarray:
    """Per round, the median over i of log(cand_i / base_i), where the i-th calls of the two
    sides ran back to back (an interleaved A/B alternates them A B, B A, ...). A drift of the
    machine within a round reaches both calls of a pair alike and cancels in their ratio, as
    the rounds' pairing cancels a drift between rounds. Rounds where a side took no call are
    left out."""
    out = []
    for b, c in zip(base_rounds, cand_rounds, strict=False):
        k = min(len(b), len(c))
        if k:
            out.append(float(np.median(np.log(c[:k] / b[:k]))))
    return np.asarray(out)


def call_paired_interval(
    log_ratios: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, RatioInterval]:
    """(point, interval) of the median ratio from per-round call-paired log ratios: the
    geometric mean over rounds, with a t interval on the rounds (R - 1 degrees of freedom).
    Each round's value already carries that round's sampling noise, so the spread between
    rounds is the whole uncertainty (Student's paired design); no bootstrap is needed."""
    from scipy.special import stdtrit

    rounds = len(log_ratios)
    centre = float(np.mean(log_ratios))
    point = float(np.exp(centre))
    se = float(np.std(log_ratios, ddof=1) / np.sqrt(rounds))
    if se == 0:
        return point, RatioInterval(point, point, 0.0, rounds - 1, CALL_PAIRED)
    half = float(stdtrit(rounds - 1, 0.5 + confidence / 2)) * se
    interval = RatioInterval(float(np.exp(centre - half)), float(np.exp(centre + half)), se,
                             float(rounds - 1), CALL_PAIRED)  # fmt: skip
    return point, interval


def p_beyond(
    point: float, interval: RatioInterval, ratio_draws: np.ndarray, margin: float
) -> float:
    """One-sided p-value that the ratio exceeds 1 + margin: from the t distribution of the
    rounds when the interval is a t interval, else the share of bootstrap draws at or below
    it with the +1 correction (Davison & Hinkley 1997, eq. 4.11)."""
    from scipy.special import stdtr

    if interval.method != T_INTERVAL:
        return p_slower_beyond(ratio_draws, margin)
    excess = float(np.log(point) - np.log1p(margin))
    if not interval.se_log:
        return 0.0 if excess > 0 else 1.0
    return float(stdtr(interval.df, -excess / interval.se_log))


def three_way_verdict(ci: tuple[float, float], margin: float) -> str:
    """`faster` / `slower` only when the whole interval of the ratio lies beyond the margin;
    `equivalent` when it lies within 1 +/- margin; `inconclusive` otherwise (a two one-sided
    tests reading of the interval, Schuirmann 1987)."""
    low, high = ci
    if high < 1 - margin:
        return FASTER
    if low > 1 + margin:
        return SLOWER
    if low >= 1 - margin and high <= 1 + margin:
        return EQUIVALENT
    return INCONCLUSIVE


def p_slower_beyond(ratio_draws: np.ndarray, margin: float) -> float:
    """One-sided bootstrap p-value that the ratio exceeds 1 + margin (a regression beyond the
    margin): the share of draws at or below it, with the +1 correction (Davison & Hinkley
    1997, eq. 4.11) so it is never 0."""
    at_or_below = int(np.count_nonzero(ratio_draws <= 1 + margin))
    return (at_or_below + 1) / (ratio_draws.size + 1)


def benjamini_hochberg(p_values: Sequence[float], fdr: float) -> list[bool]:
    """Which hypotheses to reject so the expected share of false discoveries among them stays
    at or below `fdr` (Benjamini & Hochberg 1995, step-up)."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    passed = p[order] <= fdr * np.arange(1, m + 1) / m
    reject = np.zeros(m, dtype=bool)
    if passed.any():
        last = int(np.nonzero(passed)[0].max())
        reject[order[: last + 1]] = True
    return reject.tolist()


def summarise(samples_s: Sequence[float], round_sizes: Sequence[int] | None = None) -> SampleStats:
    """Percentiles over all samples (numpy's linear interpolation); the interval of the median
    from the closed-form bootstrap for one round, the hierarchical one across rounds."""
    data = np.asarray(samples_s, dtype=float)
    if data.size == 0:
        raise ValueError("no samples to summarise")
    rounds = split_rounds(data, round_sizes)
    p25, p50, p75, p95, p99 = np.percentile(data, [25, 50, 75, 95, 99])
    if len(rounds) == 1:
        low, high = closed_form_quantile_ci(data)
    else:
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        draws = hierarchical_draws(rounds, 0.5, round_draws(rng, len(rounds)), rng)
        low, high = interval(draws)
    iqr = p75 - p25
    round_p50 = tuple(float(np.median(r)) for r in rounds)
    centre = float(np.median(round_p50))
    spread = (max(round_p50) - min(round_p50)) / centre if len(rounds) > 1 and centre > 0 else None
    return SampleStats(
        n=int(data.size),
        rounds=len(rounds),
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
        round_p50_s=round_p50 if len(rounds) > 1 else (),
        round_spread=spread,
    )
