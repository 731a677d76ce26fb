"""The run-to-run figure belongs to the device (issue 30, item 3): estimated from fake separate
runs of a quiet and a noisy device, and carried by a comparison as each bundle records it: the
device's measured figure, the rubric's default where none was measured, never below the floor."""

from __future__ import annotations

import math

import numpy as np
import pytest
from runfactory import analysed
from runfactory import separate_run as fake_run

from reviewkit.analysis import run_to_run
from reviewkit.analysis.compare import STATISTICAL_ONLY, Margins, compare
from reviewkit.analysis.stats import FASTER, INCONCLUSIVE, SLOWER
from reviewkit.bundle.records import Run
from reviewkit.review.checks import CHECKS
from reviewkit.review.gate import margins_of
from reviewkit.review.rubric import load_rubric

NAMES = ("gemm.a", "attention.b", "norm.c", "softmax.d", "elementwise.e")


def _observations(docs):
    return [run_to_run.observation(d, f"run-{i}", "test")[0] for i, d in enumerate(docs)]


@pytest.mark.parametrize("true_sd", [0.01, 0.10], ids=["quiet device", "noisy device"])
def test_the_estimate_finds_a_quiet_and_a_noisy_device(true_sd):
    """12 separate runs of 5 workloads: each workload's variance has 11 degrees of freedom,
    pooled 55. A sample variance with d degrees of freedom has relative standard error
    sqrt(2 / d) = sqrt(2 / 55) = 0.19, so the sd's is about half, 0.095; 30% is three of them.
    The within-run part is small beside either level (a run's point is the mean of 5 rounds of
    0.5% drift: variance 0.005^2 / 5 = 5e-6, against 1e-4 for the quiet device) and is taken
    out by the estimator in any case."""
    rng = np.random.default_rng(30)
    est = run_to_run.estimate(_observations([fake_run(rng, true_sd) for _ in range(12)]))
    assert est.sd == pytest.approx(true_sd, rel=0.30)
    assert est.runs == 12 and est.workloads == 5
    assert set(est.workload_ids) == {f"{n}.fp32" for n in NAMES}


def test_quiet_and_noisy_are_told_apart_from_four_runs():
    """The default calibration (4 runs of 5 workloads, 15 degrees of freedom): the noisy
    device's figure is ten times the quiet one's, far beyond the estimate's own spread."""
    rng = np.random.default_rng(4)
    quiet = run_to_run.estimate(_observations([fake_run(rng, 0.01) for _ in range(4)]))
    noisy = run_to_run.estimate(_observations([fake_run(rng, 0.10) for _ in range(4)]))
    assert quiet.sd < 0.02 < 0.05 < noisy.sd


def test_the_pooled_figure_by_hand():
    """Two workloads at one setting. a: log points 0.0, 0.2 and within variances 0.004,
    0.006: var 0.02 - 0.005 = 0.015, 1 degree of freedom. b: points 0.0, 0.1, 0.2 (var 0.01)
    and within 0.001 each: 0.009, 2 degrees of freedom. Pooled (1 * 0.015 + 2 * 0.009) / 3 =
    0.011, sd 0.104881. A workload measured once (c) is no part of it."""
    obs = [
        {"run": "r1", "setting": "s", "points": {"a": [0.0, 0.004], "b": [0.0, 0.001],
                                                  "c": [0.0, 0.001]}},
        {"run": "r2", "setting": "s", "points": {"a": [0.2, 0.006], "b": [0.1, 0.001]}},
        {"run": "r3", "setting": "s", "points": {"b": [0.2, 0.001]}},
    ]  # fmt: skip
    est = run_to_run.estimate(obs)
    assert est.sd == pytest.approx(0.104881, abs=1e-6)
    assert est.per_workload_sd == pytest.approx({"a": math.sqrt(0.015), "b": math.sqrt(0.009)})
    assert (est.runs, est.workloads) == (3, 2)


def test_runs_at_another_setting_are_not_repeats():
    """Two runs at 1 thread and two at 2 threads: each workload forms two groups of two; the
    change of setting (a 2x speed-up here) is no part of the noise."""
    rng = np.random.default_rng(1)
    docs = []
    for threads, effect in ((1, 1.0), (1, 1.0), (2, 0.5), (2, 0.5)):
        doc = fake_run(rng, 0.01, effect=effect)
        docs.append(doc.with_values(knobs={**doc.knobs, "threads": threads}))
    est = run_to_run.estimate(_observations(docs))
    assert est.sd < 0.03  # mixing the settings would read log(2) / sqrt(2) ~ 0.49
    assert est.workloads == 10 and est.runs == 4


def test_one_run_is_no_estimate():
    with pytest.raises(ValueError, match="one run shows no run-to-run variation"):
        run_to_run.estimate(_observations([fake_run(np.random.default_rng(0), 0.01)]))


def test_a_run_passed_twice_counts_once():
    kept = [{"run": "a"}, {"run": "b"}]
    merged, repeated = run_to_run.merge(kept, [{"run": "b"}, {"run": "c"}, {"run": "c"}])
    assert [o["run"] for o in merged] == ["a", "b", "c"] and repeated == 2


# --- which figure a comparison carries -----------------------------------------------------------

RUBRIC = margins_of(load_rubric(None, CHECKS))


def measured(sd, runs=6, workloads=5, when=1_780_000_000.0):  # 2026-05-28 UTC
    return {"available": True, "sd": sd, "runs": runs, "workloads": workloads,
            "updated_unix_s": when, "fingerprint": "f", "method": "m"}  # fmt: skip


NEVER = {"available": False, "reason": "none measured for this device (fingerprint f)"}


def _exact(level, rounds=5, record=None, pairing=None):
    """A run whose every call takes `level`: its rounds show no variation at all, so an
    interval between two such runs is exactly the run-to-run allowance. `pairing` makes it
    one side of an interleaved A/B."""
    doc = fake_run(np.random.default_rng(0), 0.0, rounds=rounds, round_sd=0.0, call_sd=0.0,
                   names=("gemm.a",), record=record).to_json()  # fmt: skip
    for w in doc["workloads"]:
        w["samples_s"] = [level] * len(w["samples_s"])
    if pairing:
        doc["pairing"] = pairing
    return analysed(doc)


def test_the_default_rubric_keeps_a_default_and_a_floor():
    assert (RUBRIC.min_effect, RUBRIC.run_to_run_sd, RUBRIC.run_to_run_sd_floor) == (
        0.05, 0.08, 0.01)  # fmt: skip


def test_a_quiet_device_resolves_15_percent_that_the_vm_figure_leaves_open():
    """Candidate 15% faster (ratio 0.85, log -0.162519), every call exact, the default rubric
    (margin 5%). The interval is log 0.85 +/- 1.959964 * sqrt(sd_b^2 + sd_c^2).
    A quiet device measured at 1% on both runs: half-width 1.959964 * 0.0141421 = 0.0277181,
    so 0.85 * exp(-/+0.0277181) = 0.826763 to 0.873890, wholly below 0.95: faster.
    The VM's figure, 8% (the rubric's default, or measured so): half-width 1.959964 * 0.113137
    = 0.221745, so 0.680952 to 1.061015, which crosses 0.95 and 1: inconclusive."""
    quiet = measured(0.01)
    comp = compare(_exact(1.0, record=quiet), _exact(0.85, record=quiet), margins=RUBRIC)
    (w,) = comp.workloads
    assert w.median_ratio == pytest.approx(0.85)
    assert w.median_ratio_ci == pytest.approx((0.826763, 0.873890), rel=1e-5)
    assert w.verdict == FASTER
    assert comp.run_to_run.baseline.source == run_to_run.MEASURED
    assert comp.run_to_run_sd == pytest.approx(0.01)
    for record in (None, measured(0.08)):  # never measured: the default; or measured at 8%
        vm = compare(_exact(1.0, record=record), _exact(0.85, record=record), margins=RUBRIC)
        (w,) = vm.workloads
        assert w.median_ratio_ci == pytest.approx((0.680952, 1.061015), rel=1e-5)
        assert w.verdict == INCONCLUSIVE


def test_every_comparison_says_which_figure_and_where_it_came_from():
    comp = compare(_exact(1.0, record=measured(0.012)), _exact(0.85, record=measured(0.012)),
                   margins=RUBRIC)  # fmt: skip
    basis = comp.basis()
    assert "run-to-run allowance 1.2% per run in every interval" in basis
    assert "allowance from: measured for this device: 6 runs of 5 workloads, 2026-05-28" in basis
    side = comp.to_json()["run_to_run"]["baseline"]
    assert (side["sd"], side["source"], side["runs"]) == (0.012, "measured", 6)
    assert side["from"].startswith("measured for this device")
    default = compare(_exact(1.0, record=NEVER), _exact(0.85, record=NEVER), margins=RUBRIC)
    assert "8.0% per run" in default.basis()
    assert "rubric default run_to_run_sd: never measured on this device" in default.basis()
    old = compare(_exact(1.0), _exact(0.85), margins=RUBRIC)
    assert "the bundle records no per-device figure" in old.basis()


def test_a_measured_figure_under_the_floor_carries_the_floor():
    """Measured 0.4%, floor 1%: each side carries 1%, so the interval is the quiet device's
    above (0.826763 to 0.873890), and the figure says it is the floor."""
    low = measured(0.004)
    comp = compare(_exact(1.0, record=low), _exact(0.85, record=low), margins=RUBRIC)
    assert comp.workloads[0].median_ratio_ci == pytest.approx((0.826763, 0.873890), rel=1e-5)
    assert comp.run_to_run.baseline.source == run_to_run.FLOOR
    assert comp.run_to_run.baseline.sd == 0.01 and comp.run_to_run.baseline.measured_sd == 0.004
    assert "rubric floor run_to_run_sd_floor; measured for this device" in comp.basis()


def test_two_devices_carry_each_its_own_figure():
    """A baseline measured at 2% against a candidate never measured (the default 8%): the
    variance is 0.02^2 + 0.08^2 = 0.0068, not 2 * either; half-width 1.959964 * 0.0824621 =
    0.161623, so 0.85 * exp(-/+0.161623) = 0.723148 to 0.999104: inconclusive against the
    5% margin, and the basis names both figures."""
    comp = compare(_exact(1.0, record=measured(0.02)), _exact(0.85, record=NEVER),
                   margins=RUBRIC)  # fmt: skip
    assert comp.workloads[0].median_ratio_ci == pytest.approx((0.723148, 0.999104), rel=1e-5)
    assert comp.run_to_run.variance == pytest.approx(0.0068)
    assert comp.run_to_run_sd == pytest.approx(math.sqrt(0.0034))
    basis = comp.basis()
    assert "2.0% for the baseline (allowance from: measured for its device" in basis
    assert "8.0% for the candidate (from: rubric default run_to_run_sd: never measured on its " \
           "device)" in basis  # fmt: skip


def test_the_layer_types_carry_the_same_variance():
    comp = compare(_exact(1.0, record=measured(0.01)), _exact(0.85, record=measured(0.01)),
                   margins=RUBRIC)  # fmt: skip
    (layer,) = comp.layer_types
    assert layer.time_ratio_ci == pytest.approx((0.826763, 0.873890), rel=1e-5)
    assert layer.verdict == FASTER


def test_an_ab_carries_no_allowance_measured_or_not():
    pairing = {"id": "p"}
    base = _exact(1.0, record=measured(0.08), pairing={**pairing, "side": "baseline"})
    cand = _exact(1.2, record=measured(0.08), pairing={**pairing, "side": "c"})
    comp = compare(base, cand, margins=RUBRIC)
    assert comp.workloads[0].median_ratio_ci == pytest.approx((1.2, 1.2))
    assert comp.workloads[0].verdict == SLOWER
    assert comp.run_to_run is None and "run-to-run" not in comp.basis()


def test_statistics_only_ignores_the_recorded_figures():
    comp = compare(_exact(1.0, record=measured(0.08)), _exact(1.2, record=measured(0.08)),
                   margins=STATISTICAL_ONLY)  # fmt: skip
    assert comp.workloads[0].median_ratio_ci == pytest.approx((1.2, 1.2))
    assert "no run-to-run allowance" in comp.basis()


def test_the_default_itself_is_held_at_the_floor():
    """Margins built in code (not through the rubric's check) with a default under the floor."""
    m = Margins(0.05, 0.05, 0.05, run_to_run_sd=0.001, run_to_run_sd_floor=0.01)
    comp = compare(_exact(1.0), _exact(0.85), margins=m)
    assert comp.run_to_run.baseline.sd == 0.01


def _recording(**doc) -> Run:
    """A run bundle of no workloads that records `doc` (its run_to_run figure)."""
    return Run.from_json({"suite": {}, "environment": {}, "knobs": {}, "ceilings": {},
                          "workloads": [], **doc})  # fmt: skip


def test_show_says_where_the_figure_came_from():
    assert run_to_run.recorded_text(_recording(run_to_run=measured(0.012))).startswith(
        "run-to-run allowance from: measured for this device: 6 runs of 5 workloads, "
        "2026-05-28, 1.2% per run")  # fmt: skip
    assert "takes the rubric's default" in run_to_run.recorded_text(_recording(run_to_run=NEVER))
    assert "records no per-device figure" in run_to_run.recorded_text(_recording())
