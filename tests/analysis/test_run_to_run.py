"""Two separate runs carry the machine's run-to-run variation, which their rounds cannot show:
the allowance added to their intervals, by hand and on fake clocks, and its estimate."""

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
    run_to_run_variance,
)

NO_ALLOWANCE = Margins(min_effect=0.05, fdr=0.05, max_ceiling_shift=0.05)
ALLOWANCE = Margins(min_effect=0.05, fdr=0.05, max_ceiling_shift=0.05, run_to_run_sd=0.1)


def _doc(levels_by_round, n=20, pairing=None, names=("gemm.a",), flops=1e6):
    """A run whose workloads take `level` seconds on every call of a round (fake clock)."""
    workloads = [
        {"id": f"{name}.fp32", "layer_type": name.split(".")[0], "dtype": "fp32", "status": "ok",
         "flops": flops, "bytes": 1e6,
         "samples_s": [x for x in levels_by_round for _ in range(n)],
         "round_sizes": [n] * len(levels_by_round), "params": {}, "reproduce": ""}
        for name in names
    ]  # fmt: skip
    return fake_clock_run(workloads, pairing)


# z(0.975) * sd * sqrt(2) for sd = 0.1: 1.959964 * 0.141421 = 0.277181 on the log scale;
# exp(-0.277181) = 0.757911 and exp(0.277181) = 1.319417.
LOW, HIGH = 1.2 * 0.757911, 1.2 * 1.319417


@pytest.mark.parametrize("rounds", [5, 1])
def test_the_allowance_by_hand(rounds):
    """Every call of the baseline takes 1.0, every call of the candidate 1.2: the rounds show no
    variation at all, so the whole interval is the allowance: each run's log median varies by
    sd = 0.1 between runs, so their difference by sd * sqrt(2), with a normal (known) spread.
    Without the allowance the interval is the point and the verdict `slower`."""
    base, cand = _doc([1.0] * rounds), _doc([1.2] * rounds)
    (plain,) = compare(base, cand, margins=NO_ALLOWANCE).workloads
    assert plain.median_ratio_ci == pytest.approx((1.2, 1.2)) and plain.verdict == SLOWER
    comp = compare(base, cand, margins=ALLOWANCE)
    (w,) = comp.workloads
    assert w.median_ratio == pytest.approx(1.2)
    assert w.median_ratio_ci == pytest.approx((LOW, HIGH), rel=1e-5)
    assert w.verdict == INCONCLUSIVE and "interleaved `reviewkit ab`" in w.reason
    (layer,) = comp.layer_types
    assert layer.time_ratio_ci == pytest.approx((LOW, HIGH), rel=1e-5)
    assert comp.run_to_run_sd == 0.1 and "run-to-run allowance 10.0% per run" in comp.basis()


def test_the_two_sides_of_one_ab_carry_no_allowance():
    """Pairing cancels what lasts a run: the interleaved A/B's interval is the same with and
    without the allowance, and the basis does not name one."""
    base = _doc([1.0, 1.1, 0.9, 1.0, 1.0], pairing={"id": "p", "side": "baseline"})
    cand = _doc([1.2, 1.3, 1.1, 1.2, 1.2], pairing={"id": "p", "side": "candidate"})
    plain = compare(base, cand, margins=NO_ALLOWANCE)
    allowed = compare(base, cand, margins=ALLOWANCE)
    assert allowed.workloads[0].median_ratio_ci == plain.workloads[0].median_ratio_ci
    assert allowed.run_to_run_sd is None and "run-to-run" not in allowed.basis()


def _separate_run(rng, run_sd, effect=1.0, names=("gemm.a", "gemm.b", "norm.c")):
    """A fake-clock run: a level drawn once for the whole run (the machine's state, which lasts
    it), then 3% drift between five rounds and 1% noise between calls."""
    run_level = effect * np.exp(rng.normal(0.0, run_sd))
    levels = run_level * (1 + rng.normal(0.0, 0.03, 5))
    doc = _doc(list(levels), names=names).to_json()
    for w in doc["workloads"]:
        w["samples_s"] = [x * (1 + rng.normal(0.0, 0.01)) for x in w["samples_s"]]
    return analysed(doc)


def test_separate_aa_runs_whose_machine_state_lasts_a_run_are_not_called_different():
    """20 A/A pairs of separate runs whose levels differ by 10% (log sd) run to run. The rounds
    see only their 3% drift, so without the allowance a pair is called different when its two
    levels differ by more than about 9% (margin plus half-width): |N(0, 0.14)| > 0.09, about
    half of the pairs expected. With the allowance set to the machine's 10% the threshold is
    0.05 + 1.96 * 0.14 = 0.33 on the log scale: 2% of pairs (a pair's three workloads move
    together, so pairs are counted)."""
    rng = np.random.default_rng(11)
    plain_pairs = allowed_pairs = gate = 0
    for _ in range(20):
        a, b = _separate_run(rng, 0.1), _separate_run(rng, 0.1)
        plain = compare(a, b, margins=NO_ALLOWANCE)
        plain_pairs += any(w.verdict in (FASTER, SLOWER) for w in plain.workloads)
        allowed = compare(a, b, margins=ALLOWANCE)
        allowed_pairs += any(w.verdict in (FASTER, SLOWER) for w in allowed.workloads)
        gate += bool(allowed.p99_regressions)
    assert plain_pairs >= 5  # the defect: 6 of 20 pairs with this seed
    assert allowed_pairs <= 1
    assert gate <= 1


def test_a_large_effect_between_separate_runs_is_still_found():
    """Threads 1 -> 2 on a gemm is about 1.9x here (docs/benchmarks.md): with the allowance
    the interval's width is about exp(+/-0.28), far inside a factor of 1.9."""
    rng = np.random.default_rng(5)
    for _ in range(10):
        a, b = _separate_run(rng, 0.1), _separate_run(rng, 0.1, effect=1 / 1.9)
        assert {w.verdict for w in compare(a, b, margins=ALLOWANCE).workloads} == {FASTER}


def test_run_to_run_variance_by_hand():
    # Log points 0.0 and 0.2: variance (0.1^2 + 0.1^2) / 1 = 0.02; within-run variances 0.004
    # and 0.006, mean 0.005; between 0.02 - 0.005 = 0.015.
    assert run_to_run_variance([0.0, 0.2], [0.004, 0.006]) == pytest.approx(0.015)
    # Runs agreeing better than their rounds say: no evidence of any run-to-run part.
    assert run_to_run_variance([0.0, 0.01], [0.01, 0.01]) == 0.0
    with pytest.raises(ValueError, match="two or more runs"):
        run_to_run_variance([0.0], [0.01])


def test_run_to_run_variance_recovers_a_known_level():
    """400 runs: a run level with sd 0.08, then each run's measured log point off by its own
    rounds' error with sd 0.05 (variance 0.0025, which the run reports). The estimate is
    0.08^2 = 0.0064, within its sampling error (about 0.0064 * sqrt(2 / 400) ~ 7% relative)."""
    rng = np.random.default_rng(2)
    points = rng.normal(0.0, 0.08, 400) + rng.normal(0.0, 0.05, 400)
    estimate = run_to_run_variance(points, np.full(400, 0.0025))
    assert estimate == pytest.approx(0.0064, rel=0.25)


def test_equivalent_needs_the_allowance_inside_the_margin():
    """A tiny allowance (0.5%) inside the 5% margin still lets an exact A/A be equivalent."""
    margins = Margins(0.05, 0.05, 0.05, run_to_run_sd=0.005)
    (w,) = compare(_doc([1.0] * 5), _doc([1.0] * 5), margins=margins).workloads
    assert w.verdict == EQUIVALENT


def test_an_mfu_change_between_separate_runs_carries_the_interval():
    """5e11 FLOP a call on a 1e12 FLOP/s ceiling: 0.5 s of compute in 1.0 s is MFU 0.5; the
    candidate at 1.2 s is 0.5 / 1.2 = 0.4167, a change of -8.3 points. One denominator, so
    MFU moves as 1 / the time ratio: at the interval's ends (LOW, HIGH above) the candidate's
    MFU is 0.5 / 1.5833 = 0.3158 and 0.5 / 0.9095 = 0.5498, a change of -18.4 to +5.0
    points: the two separate runs cannot tell this drop from the machine's noise."""
    base = _doc([1.0] * 5, flops=5e11)
    cand = _doc([1.2] * 5, flops=5e11)
    (w,) = compare(base, cand, margins=ALLOWANCE).workloads
    assert w.mfu_baseline == pytest.approx(0.5)
    assert w.mfu_delta == pytest.approx(0.5 / 1.2 - 0.5)
    assert w.mfu_delta_ci == pytest.approx((0.5 / HIGH - 0.5, 0.5 / LOW - 0.5), rel=1e-4)
    assert w.mfu_delta_ci[0] < 0 < w.mfu_delta_ci[1]
    (plain,) = compare(base, cand, margins=NO_ALLOWANCE).workloads
    assert plain.mfu_delta_ci == pytest.approx((0.5 / 1.2 - 0.5, 0.5 / 1.2 - 0.5))
