"""Sample statistics: percentiles worked out by hand, bootstrap interval, noise flag."""

import numpy as np
import pytest

from reviewkit.analysis.stats import closed_form_quantile_ci, summarise


def test_percentiles_of_one_to_hundred():
    # Linear interpolation over order statistics x_k = k (k = 1..100): the q-th percentile is
    # 1 + 99 q: p50 = 50.5, p95 = 95.05, p99 = 99.01.
    s = summarise([float(k) for k in range(1, 101)])
    assert s.p50_s == pytest.approx(50.5)
    assert s.p95_s == pytest.approx(95.05)
    assert s.p99_s == pytest.approx(99.01)
    assert s.mean_s == pytest.approx(50.5)
    assert s.min_s == 1 and s.max_s == 100
    assert s.iqr_s == pytest.approx(49.5)  # 75.25 - 25.75
    assert s.noisy  # 49.5 / 50.5 > 10%
    assert s.tail_ratio == pytest.approx(99.01 / 50.5)
    assert s.median_ci_low_s < 50.5 < s.median_ci_high_s


def test_quiet_samples_are_not_noisy():
    # Sorted: .99 .995 1 1 1 1 1.005 1.01; p25 = .995 + .75 * .005 = .99875 and
    # p75 = 1 + .25 * .005 = 1.00125, so IQR = .0025 against a median of 1.0: 0.25% < 10%.
    s = summarise([1.0, 0.99, 1.01, 1.0, 1.005, 0.995, 1.0, 1.0])
    assert s.iqr_s == pytest.approx(0.0025)
    assert not s.noisy
    # Sample std: squared deviations sum to 2 * 1e-4 + 2 * 2.5e-5 = 2.5e-4; sqrt(2.5e-4 / 7).
    assert s.std_s == pytest.approx(0.0059761, rel=1e-4)


def test_single_sample():
    s = summarise([2.0])
    assert (s.p50_s, s.p99_s, s.median_ci_low_s, s.median_ci_high_s, s.std_s) == (2, 2, 2, 2, 0)


def test_bootstrap_is_deterministic_and_brackets_the_median():
    data = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert closed_form_quantile_ci(data) == closed_form_quantile_ci(data)
    low, high = closed_form_quantile_ci(data)
    assert low <= 3.0 <= high


def test_bootstrap_matches_the_textbook_interval():
    # For n = 401 normal samples the median's standard error is about
    # sqrt(pi / 2) * sigma / sqrt(n) = 1.2533 / 20.025 = 0.0626, so a 95% interval spans about
    # 2 * 1.96 * 0.0626 = 0.245. The bootstrap should land within 30% of that width.
    data = np.random.default_rng(1).normal(0.0, 1.0, 401)
    low, high = closed_form_quantile_ci(data)
    assert low < np.median(data) < high
    assert 0.7 * 0.245 < high - low < 1.3 * 0.245


def test_bootstrap_of_even_count_averages_the_middle_pair():
    # Every resample of [1, 1, 3, 3] has a median in {1, 2, 3}; the interval lies inside.
    low, high = closed_form_quantile_ci([1.0, 1.0, 3.0, 3.0])
    assert 1.0 <= low <= high <= 3.0


def test_empty_samples_raise():
    with pytest.raises(ValueError):
        summarise([])
