"""Rounds in the statistics: closed-form and hierarchical bootstrap, three-way verdicts, the
false discovery rate, and A/A comparisons under drift between rounds (fake clocks)."""

from __future__ import annotations

import numpy as np
import pytest
from runfactory import analysed, fake_clock_run

from reviewkit.analysis.compare import Margins, compare
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
    return fake_clock_run(workloads, pairing)


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
        docs = [a.to_json(), b.to_json()]
        for doc in docs:  # the same samples as one window (a v2 bundle)
            for w in doc["workloads"]:
                w["round_sizes"] = [len(w["samples_s"])]
        pooled = compare(*map(analysed, docs), margins=Margins(0.0, 0.05, 0.05))
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
    b = _drifting_run(0, drift_sd=0.0).to_json()  # the same samples
    b["ceilings"]["compute"]["fp32"]["peak"] = 1.2e12  # calibrated 20% higher this time
    b = analysed(b)
    assert b.workloads[0].mfu != a.workloads[0].mfu  # each against its own
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
            "suite": {"hash": "h"}, "environment": {},
            "knobs": {"dtypes": ["fp32"], "device": "cpu", "device_name": "Test CPU"},
            "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
            "pairing": {**pairing, "side": side},
            "workloads": [{"id": "gemm.a.fp32", "layer_type": "gemm", "dtype": "fp32",
                           "status": "ok", "flops": 1e6, "bytes": 1e6,
                           "samples_s": [x for x in levels for _ in range(20)],
                           "round_sizes": [20] * 5, "params": {}, "reproduce": ""}],
        }  # fmt: skip
        docs.append(analysed(doc))
    (w,) = compare(*docs, margins=MARGINS).workloads
    assert w.median_ratio == pytest.approx(1.0)
    low, high = w.median_ratio_ci
    assert low == pytest.approx(0.902, abs=0.012) and high == pytest.approx(1.103, abs=0.012)
    assert w.verdict == INCONCLUSIVE  # 1 +/- 0.1 crosses the 5% margin


def test_call_paired_ratios_by_hand():
    """Three rounds; within each, the candidate's i-th call is 1.1x the baseline's i-th call
    times a per-round wobble (0.99, 1.0, 1.01), while both sides drift 1 -> 4 within the round.
    Each round's median log ratio is log(1.1) + log(wobble); the drift cancels call by call.
    Mean over rounds: log 1.1 + (log 0.99 + log 1.01) / 3 = log 1.1 - 0.0000333; their sample
    standard deviation is 0.0100003 (logs -0.0100503, 0, 0.0099503), so the standard error is
    0.0057737 and with t(0.975, 2 df) = 4.302653 the half-width is 0.024842."""
    from reviewkit.analysis.stats import CALL_PAIRED, call_paired_interval, call_paired_log_ratios

    base = [np.array([1.0, 2.0, 3.0, 4.0])] * 3
    cand = [b * 1.1 * wobble for b, wobble in zip(base, (0.99, 1.0, 1.01), strict=True)]
    logs = call_paired_log_ratios(base, cand)
    assert logs == pytest.approx(np.log(1.1) + np.log([0.99, 1.0, 1.01]))
    point, interval = call_paired_interval(logs)
    centre = np.log(1.1) + (np.log(0.99) + np.log(1.01)) / 3
    assert point == pytest.approx(np.exp(centre))
    assert interval.ci == pytest.approx((np.exp(centre - 0.024842), np.exp(centre + 0.024842)),
                                        rel=1e-5)  # fmt: skip
    assert interval.df == 2 and interval.method == CALL_PAIRED
    # A round where one side took no call is left out; unequal counts pair the first k calls.
    assert len(call_paired_log_ratios([np.array([1.0]), np.array([])], [np.array([1.1])] * 2)) == 1


def _alternated_pair(seed: int, effect: float, shared_sd: float, rounds: int = 10, n: int = 40,
                     calls: str | None = "alternated"):  # fmt: skip
    """An interleaved A/B on a fake clock: in each round both sides' calls alternate; the i-th
    calls of the two sides run in the same machine state (a factor with `shared_sd` spread,
    drawn per pair of neighbouring calls: a burst of a neighbour's traffic, a preemption) and
    each call has 1% noise of its own. `calls=None`: the pairing record does not say the calls
    alternated (the same samples)."""
    rng = np.random.default_rng(seed)
    docs = []
    states = [np.exp(rng.normal(0, shared_sd, n)) for _ in range(rounds)]
    for side, factor in (("baseline", 1.0), ("candidate", effect)):
        samples = [x for state in states for x in factor * state * (1 + rng.normal(0, 0.01, n))]
        doc = {
            "suite": {"hash": "h"}, "environment": {},
            "knobs": {"dtypes": ["fp32"], "device": "cpu", "device_name": "Test CPU"},
            "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
            "pairing": {"id": "p", "side": side, **({"calls": calls} if calls else {})},
            "workloads": [{"id": "gemm.a.fp32", "layer_type": "gemm", "dtype": "fp32",
                           "status": "ok", "flops": 1e6, "bytes": 1e6, "samples_s": samples,
                           "round_sizes": [n] * rounds, "params": {}, "reproduce": ""}],
        }  # fmt: skip
        docs.append(analysed(doc))
    return docs


def test_alternated_calls_cancel_the_state_neighbouring_calls_share():
    """Neighbouring calls share the machine's state (30% spread from pair to pair): each side's
    round median carries that noise, which resampling each side's samples on its own counts
    twice; the call pairs cancel it. An A/A is equivalent and a 10% slowdown slower, every
    time; without the call pairing the same data leaves most slowdowns inconclusive."""
    without = 0
    for seed in range(20):
        aa = compare(*_alternated_pair(seed, 1.0, 0.3), margins=MARGINS)
        assert aa.design.startswith("rounds and calls paired")
        assert [w.verdict for w in aa.workloads] == [EQUIVALENT]
        slow_docs = _alternated_pair(seed + 100, 1.1, 0.3)
        assert [w.verdict for w in compare(*slow_docs, margins=MARGINS).workloads] == [SLOWER]
        slow_docs = _alternated_pair(seed + 100, 1.1, 0.3, calls=None)
        without += compare(*slow_docs, margins=MARGINS).workloads[0].verdict == SLOWER
    assert without <= 5
