"""Drift and throttling verdicts on synthetic series whose answers are worked out by hand."""

import json

import numpy as np
import pytest

from reviewkit.evidence.drift import (
    DRIFT,
    DRIFT_THRESHOLD,
    INSUFFICIENT,
    NOT_AVAILABLE,
    NOT_THROTTLED,
    STABLE,
    THROTTLE_CLOCK_DROP,
    THROTTLED,
    detect,
    first_last,
    throttling,
    trend,
)

# Identical first and last samples: ratio exactly 1, interval exactly (1, 1), so a verdict
# in these tests comes from the trend alone unless a test says otherwise.
SAME = [1e-3] * 10


def test_thresholds_are_the_documented_five_percent():
    assert DRIFT_THRESHOLD == 0.05 and THROTTLE_CLOCK_DROP == 0.05


def test_exact_line_slope_and_relative_change_by_hand():
    # values 100, 98, 96, 94, 92 at t = 0..4 s: slope -2 /s, span 4 s, mean 96,
    # relative change = -2 * 4 / 96 = -1/12 = -0.0833...
    tr = trend([0, 1, 2, 3, 4], [100, 98, 96, 94, 92])
    assert tr.points == 5 and tr.span_s == 4 and tr.mean == pytest.approx(96)
    assert tr.slope_per_s == pytest.approx(-2)
    assert tr.relative_change == pytest.approx(-1 / 12)
    # Any resample of collinear points has slope -2 again; only its mean moves, within
    # [92, 100], so every bootstrap value lies in [-8/92, -8/100] = [-0.08696, -0.08].
    low, high = tr.relative_change_ci
    assert -8 / 92 - 1e-9 <= low <= high <= -8 / 100 + 1e-9
    # the resampled mean's spread (sd 1.26 for 5 of these values) is carried into the interval
    assert low < -1 / 12 - 1e-3 and high > -1 / 12 + 1e-3
    assert detect([0, 1, 2, 3, 4], [100, 98, 96, 94, 92], SAME, SAME).verdict == DRIFT


def test_ten_percent_decline_with_noise_is_drift():
    # 100 -> 90 linearly over t = 0..19 s: slope -10/19, span 19, mean 95, so the noise-free
    # relative change is -10/95 = -0.1053. Noise sd 0.5 gives the slope a standard error of
    # 0.5 / sqrt(sum (t - 9.5)^2 = 665) = 0.0194 /s, i.e. 0.0194 * 19 / 95 = 0.0039 relative:
    # 0.015 is about four standard errors.
    t = np.arange(20.0)
    noise = np.random.default_rng(1).normal(0, 0.5, 20)
    v = 100 - 10 * t / 19 + noise
    result = detect(t, v, SAME, SAME)
    assert result.trend.relative_change == pytest.approx(-10 / 95, abs=0.015)
    low, high = result.trend.relative_change_ci
    assert low < result.trend.relative_change < high < -DRIFT_THRESHOLD
    assert result.verdict == DRIFT and "throughput changed" in result.reasons[0]


def test_rising_throughput_is_drift_too():
    # the mirror of the exact line: 92 .. 100, relative change +8/96
    result = detect([0, 1, 2, 3, 4], [92, 94, 96, 98, 100], SAME, SAME)
    assert result.trend.relative_change == pytest.approx(8 / 96)
    assert result.verdict == DRIFT


def test_flat_with_noise_is_stable():
    # Same noise, no trend: relative change within 0.02 (five standard errors of 0.0037).
    t = np.arange(20.0)
    v = 100 + np.random.default_rng(2).normal(0, 0.5, 20)
    result = detect(t, v, SAME, SAME)
    assert abs(result.trend.relative_change) < 0.02
    assert result.verdict == STABLE


def test_significant_but_small_trend_is_below_the_threshold():
    # Exact 2% decline: 100 - 2 t / 19 at t = 0..19: slope -2/19, span 19, mean 99, so the
    # relative change is -2/99 = -0.0202; collinear, so the interval lies in [-2/98, -2/100]
    # and excludes 0, but |change| < 5%: stable.
    t = np.arange(20.0)
    result = detect(t, 100 - 2 * t / 19, SAME, SAME)
    assert result.trend.relative_change == pytest.approx(-2 / 99)
    low, high = result.trend.relative_change_ci
    assert -2 / 98 - 1e-9 <= low <= high <= -2 / 100 + 1e-9
    assert result.verdict == STABLE


# Tight first sub-window: 50 samples 1.0000 .. 1.0049 ms (spread 0.49%).
FIRST = [1e-3 * (1 + 1e-4 * i) for i in range(50)]


def test_first_last_ratio_of_medians_by_hand():
    # The last sub-window is the first scaled by 1.2, so its median is 1.2x the first's
    # (1.00245 ms -> 1.20294 ms). Any bootstrap median of either lies between the min and max
    # of its samples, so every draw of the ratio lies in [1.2 / 1.0049, 1.2 * 1.0049]
    # = [1.19415, 1.20588].
    fl = first_last(FIRST, [1.2 * x for x in FIRST])
    assert fl.first_samples == fl.last_samples == 50
    assert fl.first_median_s == pytest.approx(1.00245e-3)
    assert fl.ratio == pytest.approx(1.2)
    low, high = fl.ratio_ci
    assert 1.2 / 1.0049 - 1e-9 <= low <= high <= 1.2 * 1.0049 + 1e-9


def test_first_last_rule_alone_gives_drift():
    # flat throughput (trend 0, interval (0, 0)) but the last sub-window 20% slower per call
    result = detect([0, 1, 2, 3], [100] * 4, FIRST, [1.2 * x for x in FIRST])
    assert result.trend.relative_change == 0
    assert result.verdict == DRIFT
    assert len(result.reasons) == 1 and "last/first" in result.reasons[0]


def test_first_last_within_threshold_is_stable():
    # 3% slower: every draw in [1.03 / 1.0049, 1.03 * 1.0049] = [1.02498, 1.03505], which
    # excludes 1 but not 1 + 5%: stable.
    result = detect([0, 1, 2, 3], [100] * 4, FIRST, [1.03 * x for x in FIRST])
    low, high = result.first_last.ratio_ci
    assert low >= 1.03 / 1.0049 - 1e-9 and high <= 1.03 * 1.0049 + 1e-9
    assert result.verdict == STABLE


def test_falling_clocks_are_throttling():
    # 3000 -> 2700 MHz: 2700 / 3000 - 1 = -10%, beyond the 5% allowed
    th = throttling({"cpu0": [3000, 2950, 2900, 2800, 2700]})
    assert th.status == THROTTLED and "cpu0 fell 10.0%" in th.reason
    (c,) = th.clocks
    assert c.change == pytest.approx(-0.10) and c.readings == 5 and c.throttled


def test_steady_clocks_are_not_throttling():
    # 3000 -> 2990: -0.33%; and the two sides of the 5% line: -4% is not, -6% is throttled
    assert throttling({"cpu0": [3000, 2950, 3010, 2990]}).status == NOT_THROTTLED
    assert throttling({"cpu0": [3000, 2880]}).status == NOT_THROTTLED
    assert throttling({"cpu0": [3000, 2820]}).status == THROTTLED
    # one throttled clock among steady ones is enough; a failed read (None) is skipped
    th = throttling({"cpu0": [3000, 3000], "cpu1": [3000, None, 2700]})
    assert th.status == THROTTLED and "cpu1" in th.reason and "cpu0" not in th.reason


def test_temperature_reaching_critical_is_throttling():
    assert throttling(None, {"pkg": [70, 85, 95.0]}, {"pkg": 95.0}).status == THROTTLED
    th = throttling(None, {"pkg": [70, 85, 94.9]}, {"pkg": 95.0})
    assert th.status == NOT_THROTTLED and th.temperatures[0].max_c == 94.9
    # a temperature with no known critical value cannot decide anything alone
    th = throttling(None, {"pkg": [70, 99]})
    assert th.status == NOT_AVAILABLE and "critical" in th.reason


def test_no_clocks_no_temperatures_is_not_available_with_the_reason():
    th = throttling({}, {}, unavailable_reason="cpu_clocks_mhz: no cpufreq here")
    assert th.status == NOT_AVAILABLE and th.reason == "cpu_clocks_mhz: no cpufreq here"
    assert throttling().reason  # a default reason, never empty
    # a single reading per clock cannot show a fall
    assert throttling({"cpu0": [3000]}).status == NOT_AVAILABLE
    assert detect([0, 1, 2], [1, 1, 1], SAME, SAME).throttling.status == NOT_AVAILABLE


def test_fewer_than_three_subwindows_is_insufficient_not_a_crash():
    for n in (0, 1, 2):
        t = list(range(n))
        result = detect(t, [100.0] * n, SAME if n else [], SAME if n > 1 else [])
        assert result.verdict == INSUFFICIENT, n
        assert result.trend.relative_change_ci is None and "at least 3" in result.trend.reason
    assert "no samples" in first_last([], [1.0]).reason


def test_zero_variance_is_stable_with_a_point_interval():
    # constant throughput: slope 0 in every resample, so relative change 0 and interval (0, 0)
    result = detect([0, 1, 2, 3, 4], [50.0] * 5, SAME, SAME)
    assert result.trend.slope_per_s == 0 and result.trend.relative_change == 0
    assert result.trend.relative_change_ci == (0.0, 0.0)
    assert result.first_last.ratio == 1 and result.first_last.ratio_ci == (1.0, 1.0)
    assert result.verdict == STABLE


def test_other_degenerate_inputs_say_why():
    assert "one time" in trend([5, 5, 5], [1, 2, 3]).reason
    zero = trend([0, 1, 2], [0, 0, 0])
    assert zero.relative_change is None and "not positive" in zero.reason
    few = first_last([1.0, 1.1, 1.2], [1.3, 1.4, 1.5])  # medians 1.1 and 1.4
    assert few.ratio == pytest.approx(1.4 / 1.1) and few.ratio_ci is None and few.reason
    with pytest.raises(ValueError):
        trend([0, 1, 2], [1, 2])


def test_result_is_json():
    result = detect([0, 1, 2, 3, 4], [100, 98, 96, 94, 92], FIRST, FIRST, {"c": [3000, 2000]})
    doc = json.loads(json.dumps(result.to_json()))
    assert doc["verdict"] == DRIFT and doc["throttling"]["status"] == THROTTLED
    assert set(doc) == {"verdict", "reasons", "threshold", "trend", "first_last", "throttling"}
