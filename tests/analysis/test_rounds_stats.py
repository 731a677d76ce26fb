"""Rounds in the statistics: closed-form and hierarchical bootstrap, three-way verdicts, the
false discovery rate, and A/A comparisons under drift between rounds (fake clocks)."""

from __future__ import annotations

import numpy as np
import pytest

from reviewkit.analysis.compare import Margins, compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.analysis.stats import (
    EQUIVALENT,
    FASTER,
    INCONCLUSIVE,
    SLOWER,
    benjamini_hochberg,
    closed_form_quantile_ci,
    hierarchical_draws,
    order_statistic_cdf,
    quantile_draws,
    round_draws,
    split_rounds,
    summarise,
    three_way_verdict,
)

MARGINS = Margins(min_effect=0.05, fdr=0.05, max_ceiling_shift=0.05)


def test_order_statistic_cdf_by_hand():
    # n = 2: the smaller of two draws is x_(1) unless both are x_(2): 1 - 1/4 = 3/4; the larger
    # is x_(1) only if both are: 1/4.
    assert order_statistic_cdf(2, 1).tolist() == pytest.approx([0.75, 1.0])
    assert order_statistic_cdf(2, 2).tolist() == pytest.approx([0.25, 1.0])
    # n = 3, the median (k = 2) at x_(1): at least two of three draws on x_(1), p = 1/3:
    # 3 (1/3)^2 (2/3) + (1/3)^3 = 6/27 + 1/27 = 7/27; at x_(2), p = 2/3: 3 (2/3)^2 (1/3) +
    # (2/3)^3 = 12/27 + 8/27 = 20/27.
    assert order_statistic_cdf(3, 2).tolist() == pytest.approx([7 / 27, 20 / 27, 1.0])


def test_closed_form_median_interval_matches_a_brute_force_bootstrap():
    data = np.sort(np.random.default_rng(3).lognormal(0.0, 0.3, 41))
    rng = np.random.default_rng(4)
    brute = np.median(data[rng.integers(0, 41, size=(40_000, 41))], axis=1)
    low, high = closed_form_quantile_ci(data)
    # The brute force's ends, as data points (the median of 41 values is one of them), are the
    # closed form's or the neighbouring order statistic (Monte Carlo error of 40,000 draws).
    ends = np.quantile(brute, [0.025, 0.975], method="inverted_cdf")
    for closed, brute_end in zip((low, high), ends, strict=True):
        gap = abs(int(np.searchsorted(data, closed)) - int(np.searchsorted(data, brute_end)))
        assert gap <= 1, (closed, brute_end)
    # And the whole distribution: the closed-form draws' deciles are the brute force's.
    closed_draws = quantile_draws(data, 0.5, rng.random(40_000))
    deciles = np.linspace(0.1, 0.9, 9)
    assert np.quantile(closed_draws, deciles) == pytest.approx(
        np.quantile(brute, deciles), rel=0.02
    )


def test_hierarchical_bootstrap_by_hand():
    """Rounds [1, 1] and [3, 3]: resampling inside a constant round changes nothing, so a draw
    is the mean of two rounds drawn with replacement: 1 (both the first, 1/4), 2 (one of each,
    1/2) or 3 (1/4)."""
    rounds = split_rounds([1.0, 1.0, 3.0, 3.0], [2, 2])
    rng = np.random.default_rng(0)
    draws = hierarchical_draws(rounds, 0.5, round_draws(rng, 2, 8000), rng)
    shares = {v: float(np.mean(draws == v)) for v in (1.0, 2.0, 3.0)}
    assert shares == pytest.approx({1.0: 0.25, 2.0: 0.5, 3.0: 0.25}, abs=0.02)
    assert sum(shares.values()) == 1.0


def test_one_round_is_the_closed_form():
    data = np.random.default_rng(1).normal(1.0, 0.1, 101)
    rounds = split_rounds(data, None)
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    plan = round_draws(rng_a, 1, 1000)
    rng_b.integers(0, 1, size=(1000, 1))  # the same stream position as the plan's draw
    assert np.array_equal(
        hierarchical_draws(rounds, 0.5, plan, rng_a),
        quantile_draws(np.sort(data), 0.5, rng_b.random((1000, 1))[:, 0]),
    )


def test_benjamini_hochberg_by_hand():
    # m = 4 at 5%: thresholds 0.0125, 0.025, 0.0375, 0.05. Sorted p 0.01 passes, 0.03 and
    # 0.04 do not, and no later one does: only the first is rejected.
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.2], 0.05) == [True, False, False, False]
    # Step-up: 0.04 <= 0.05 at rank 4 rejects all four, though 0.02 > 0.0125 at rank 1.
    assert benjamini_hochberg([0.04, 0.03, 0.02, 0.02], 0.05) == [True] * 4
    assert benjamini_hochberg([], 0.05) == []


@pytest.mark.parametrize(
    ("ci", "verdict"),
    [
        ((0.80, 0.94), FASTER),
        ((1.06, 1.20), SLOWER),
        ((0.97, 1.04), EQUIVALENT),
        ((0.95, 1.05), EQUIVALENT),  # on the margin is within it
        ((0.90, 0.97), INCONCLUSIVE),  # faster, perhaps, but not surely by 5%
        ((0.90, 1.10), INCONCLUSIVE),
    ],
)
def test_three_way_verdict_at_a_five_percent_margin(ci, verdict):
    assert three_way_verdict(ci, 0.05) == verdict


def _drifting_run(seed, drift_sd, effect=1.0, rounds=5, n=100, levels=None, pairing=None):
    """A fake-clock run of three workloads: each round runs at a level drawn once per round
    (the machine's state then), samples within a round are 1% noise around it."""
    rng = np.random.default_rng(seed)
    levels = levels if levels is not None else 1 + rng.normal(0, drift_sd, rounds)
    workloads = []
    for i, name in enumerate(("gemm.a", "gemm.b", "norm.c")):
        samples = [x for level in levels for x in effect * level * (1 + rng.normal(0, 0.01, n))]
        workloads.append(
            {"id": f"{name}.fp32", "layer_type": name.split(".")[0], "dtype": "fp32",
             "status": "ok", "flops": 1e6 * (i + 1), "bytes": 1e6, "samples_s": samples,
             "round_sizes": [n] * len(levels), "params": {}, "reproduce": ""}
        )  # fmt: skip
    doc = {
        "suite": {"hash": "h"},
        "knobs": {"dtypes": ["fp32"], "device": "cpu", "device_name": "Test CPU"},
        "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
        "workloads": workloads,
    }
    if pairing:
        doc["pairing"] = pairing
    return analyse_run(doc)


def test_an_aa_with_drift_between_rounds_is_never_faster_or_slower():
    """4% drift between rounds, 1% noise within: pooled into one window the intervals see only
    the 1% and call most A/A pairs different; with rounds they are equivalent or
    inconclusive, never directional."""
    pooled_directional = 0
    for seed in range(20):
        a = _drifting_run(seed, drift_sd=0.04)
        b = _drifting_run(seed + 1000, drift_sd=0.04)
        comp = compare(a, b, margins=MARGINS)
        assert {w.verdict for w in comp.workloads} <= {EQUIVALENT, INCONCLUSIVE}
        assert {x.verdict for x in comp.layer_types} <= {EQUIVALENT, INCONCLUSIVE}
        assert not comp.p99_regressions
        for doc in (a, b):  # the same samples as one window (a v2 bundle)
            for w in doc["workloads"]:
                w["round_sizes"] = [len(w["samples_s"])]
        pooled = compare(analyse_run(a), analyse_run(b), margins=Margins(0.0, 0.05, 0.05))
        pooled_directional += sum(w.verdict in (FASTER, SLOWER) for w in pooled.workloads)
    assert pooled_directional > 20  # the defect the rounds remove: noise called a change


def test_a_real_effect_under_drift_is_found_with_interleaving():
    """Interleaved rounds see the same machine state: the candidate (10% faster) runs in each
    round right after the baseline. Resampling the rounds in pairs finds it every time."""
    for seed in range(20):
        levels = 1 + np.random.default_rng(seed).normal(0, 0.04, 5)
        a = _drifting_run(seed, 0.04, levels=levels, pairing={"id": "p", "side": "baseline"})
        b = _drifting_run(seed + 1, 0.04, effect=0.9, levels=levels,
                          pairing={"id": "p", "side": "candidate"})  # fmt: skip
        comp = compare(a, b, margins=MARGINS)
        assert comp.design.startswith("rounds paired")
        assert {w.verdict for w in comp.workloads} == {FASTER}


def test_one_denominator_on_one_device_and_a_moved_ceiling_is_a_finding():
    a = _drifting_run(0, drift_sd=0.0)
    b = _drifting_run(0, drift_sd=0.0)  # the same samples
    b["ceilings"]["compute"]["fp32"]["peak"] = 1.2e12  # calibrated 20% higher this time
    b = analyse_run(b)
    assert b["workloads"][0]["mfu"] != a["workloads"][0]["mfu"]  # each against its own
    comp = compare(a, b, margins=MARGINS)
    assert comp.denominator.startswith("the baseline's ceilings")
    assert all(w.mfu_delta == pytest.approx(0.0) for w in comp.workloads)
    assert any("fp32 ceiling moved +20.0%" in w for w in comp.warnings)


def test_summarise_records_the_round_spread():
    # Round medians 1.0, 1.1, 0.9: spread (1.1 - 0.9) / 1.0 = 20%.
    st = summarise([1.0, 1.0, 1.0, 1.1, 1.1, 1.1, 0.9, 0.9, 0.9], [3, 3, 3])
    assert st.rounds == 3 and st.round_p50_s == (1.0, 1.1, 0.9)
    assert st.round_spread == pytest.approx(0.2)
    assert st.median_ci_low_s >= 0.9 and st.median_ci_high_s <= 1.1


def test_the_interval_on_five_paired_rounds_by_hand():
    """Paired rounds, each constant within (so only the rounds vary): baseline 1.0 in every
    round, candidate 1.0, 1.1, 0.9, 1.05, 0.95. Point ratio 1.0; the rounds' sample variance
    is (0 + 0.01 + 0.01 + 0.0025 + 0.0025) / 4 = 0.00625, so the mean's standard error is
    sqrt(0.00625 / 5) = 0.0354, and with t(0.975, 4 df) = 2.776 the interval is 1 +/- 0.098
    (on the log scale, where these ratios sit within 1% of their logs). A percentile interval
    of the same draws would be about 1 +/- 0.06: too narrow for five rounds."""
    cand = [1.0, 1.1, 0.9, 1.05, 0.95]
    pairing = {"id": "p"}
    docs = []
    for side, levels in (("baseline", [1.0] * 5), ("candidate", cand)):
        doc = {
            "suite": {"hash": "h"},
            "knobs": {"dtypes": ["fp32"], "device": "cpu", "device_name": "Test CPU"},
            "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
            "pairing": {**pairing, "side": side},
            "workloads": [{"id": "gemm.a.fp32", "layer_type": "gemm", "dtype": "fp32",
                           "status": "ok", "flops": 1e6, "bytes": 1e6,
                           "samples_s": [x for x in levels for _ in range(20)],
                           "round_sizes": [20] * 5, "params": {}, "reproduce": ""}],
        }  # fmt: skip
        docs.append(analyse_run(doc))
    (w,) = compare(*docs, margins=MARGINS).workloads
    assert w.median_ratio == pytest.approx(1.0)
    low, high = w.median_ratio_ci
    assert low == pytest.approx(0.902, abs=0.012) and high == pytest.approx(1.103, abs=0.012)
    assert w.verdict == INCONCLUSIVE  # 1 +/- 0.1 crosses the 5% margin
