"""`reviewkit compare`: verdicts on samples from known distributions, knob diff, pairing."""

import json
import subprocess
import sys

import numpy as np
import pytest
from runfactory import analysed, make_run

from reviewkit.analysis.compare import FASTER, SLOWER, compare, knob_diff, shape_key, slice_key
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.records import Workload
from reviewkit.bundle.run import load_run


def _doc(samples_by_name: dict, dtype="fp32", knobs=None, suite_hash="h", round_sizes=None):
    """An analysed run of one workload per name; `round_sizes` maps a name to its rounds."""
    return analysed({
        "suite": {"hash": suite_hash}, "environment": {},
        "knobs": {"dtypes": [dtype], **(knobs or {})},
        "ceilings": {"compute": {dtype: {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
        "workloads": [
            {"id": f"{name}.{dtype}", "layer_type": name.split(".")[0], "dtype": dtype,
             "status": "ok", "flops": 1e6, "bytes": 1e6, "samples_s": list(s),
             "params": {}, "reproduce": "",
             **({"round_sizes": round_sizes[name]} if name in (round_sizes or {}) else {})}
            for name, s in samples_by_name.items()
        ],
    })  # fmt: skip


def _normal(mean, n=200, sd=0.05, seed=0):
    return np.random.default_rng(seed).normal(mean, sd * mean, n)


def test_a_real_ten_percent_shift_is_detected_every_time():
    # 5% noise, 200 samples: the median's standard error is ~1.25 * 0.05 / sqrt(200) = 0.44%,
    # so a 10% shift is over 15 standard errors away. Every seed must call it.
    for seed in range(20):
        base = _doc({"gemm.a": _normal(1.0, seed=seed)})
        slower = _doc({"gemm.a": _normal(1.1, seed=seed + 100)})
        faster = _doc({"gemm.a": _normal(0.9, seed=seed + 200)})
        assert compare(base, slower).workloads[0].verdict == SLOWER
        assert compare(base, faster).workloads[0].verdict == FASTER


def test_pure_noise_is_rarely_called_a_difference():
    # Same distribution, different seeds: a 95% interval should exclude 1 about 5% of the
    # time; allow 3 of 40 (the chance of 4+ at a true 5% rate is ~14%; at 10%, ~57%).
    calls = [
        compare(_doc({"gemm.a": _normal(1.0, seed=s)}),
                _doc({"gemm.a": _normal(1.0, seed=s + 1000)})).workloads[0].verdict
        for s in range(40)
    ]  # fmt: skip
    assert sum(v in (FASTER, SLOWER) for v in calls) <= 3


def test_ratio_and_interval_values():
    base = _doc({"gemm.a": [1.0, 1.0, 1.0]})
    cand = _doc({"gemm.a": [0.5, 0.5, 0.5]})
    w = compare(base, cand).workloads[0]
    assert w.median_ratio == 0.5 and w.median_ratio_ci == (0.5, 0.5)
    assert w.p99_ratio == 0.5 and w.verdict == FASTER


def test_layer_ratio_is_time_weighted():
    # gemm: 1 s -> 0.5 s and 3 s -> 3 s: summed medians 4 s -> 3.5 s, ratio 0.875.
    base = _doc({"gemm.a": [1.0] * 5, "gemm.b": [3.0] * 5})
    cand = _doc({"gemm.a": [0.5] * 5, "gemm.b": [3.0] * 5})
    layer = compare(base, cand).layer_types[0]
    assert layer.time_ratio == pytest.approx(0.875)
    assert layer.verdict == FASTER


def test_knob_diff_and_dtype_pairing():
    base = _doc({"gemm.a": [1.0] * 5}, "fp32", {"threads": 2})
    cand = _doc({"gemm.a": [0.5] * 5}, "bf16", {"threads": 1})
    c = compare(base, cand)
    assert [(k.knob, k.baseline, k.candidate) for k in c.knob_changes] == [
        ("dtypes", ["fp32"], ["bf16"]),
        ("threads", 2, 1),
    ]
    assert c.paired_by == "shape (dtype differs)"
    assert c.workloads[0].key == "gemm.a"
    assert knob_diff({"a": 1}, {"a": 1, "b": 2})[0].knob == "b"
    w = Workload(id="gemm.x.b1s128.bf16", layer_type="gemm", dtype="bf16", status="ok")
    assert slice_key(w) == shape_key(w.id, w.dtype) == "gemm.x.b1s128"


def test_different_suites_compare_on_common_workloads_with_a_warning():
    base = _doc({"gemm.a": [1.0] * 5, "gemm.b": [1.0] * 5}, suite_hash="one")
    cand = _doc({"gemm.a": [1.0] * 5, "norm.c": [1.0] * 5}, suite_hash="two")
    c = compare(base, cand)
    assert [w.key for w in c.workloads] == ["gemm.a.fp32"]
    assert any("suite hashes differ" in w for w in c.warnings)
    assert any("1 workload(s) only in the baseline" in w for w in c.warnings)


def test_cli_fail_on_regression_and_no_torch(tmp_path):
    base = make_run(tmp_path / "base", samples_for={"gemm.toy-ffn-up.b1s128": [1e-3] * 50})
    cand = make_run(tmp_path / "cand", samples_for={"gemm.toy-ffn-up.b1s128": [2e-3] * 50})
    code = (
        "import sys, json; from reviewkit.cli.app import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
        "assert 'torch' not in sys.modules, 'compare imported torch'\n"
        "sys.exit(code)\n"
    )
    args = [sys.executable, "-c", code, "compare", str(base), str(cand)]
    plain = subprocess.run([*args, "--json"], capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    doc = json.loads(plain.stdout)
    assert doc["p99_regressions"] == ["gemm.toy-ffn-up.b1s128.fp32"]
    gated = subprocess.run([*args, "--fail-on-regression"], capture_output=True, text=True)
    assert gated.returncode == 1
    assert "significantly slower at p99" in gated.stdout


def test_compare_on_the_committed_sample_runs():
    from pathlib import Path

    runs = Path(__file__).parents[2] / "samples" / "review-bf16-transformer" / "runs"
    c = compare(analyse_run(load_run(runs / "baseline-fp32")),
                analyse_run(load_run(runs / "candidate-bf16")))  # fmt: skip
    assert [k.knob for k in c.knob_changes] == ["dtypes"]
    model = next(w for w in c.workloads if w.layer_type == "model")
    assert model.verdict == FASTER and model.median_ratio < 0.67


def test_cli_says_what_settles_an_inconclusive_verdict_for_each_design(tmp_path, capsys):
    """Two separate A/A runs under the default rubric: every verdict is inconclusive (the 8%
    run-to-run allowance per run: 1 * exp(+/- 1.96 * 0.08 * sqrt(2)) = 0.80-1.25 at least, wider
    than the 5% margin), and the hint names `ab`, not more rounds, which cannot remove a
    run's state. The same samples as the two sides of one A/B carry no allowance: equivalent."""
    from reviewkit.cli.app import main

    def run_compare(base, cand) -> str:
        with pytest.raises(SystemExit) as info:
            main(["compare", str(base), str(cand)])
        assert info.value.code in (0, None)
        return " ".join(capsys.readouterr().out.split())

    out = run_compare(make_run(tmp_path / "a1", seed=0), make_run(tmp_path / "a2", seed=1))
    assert "run-to-run allowance 8.0% per run" in out
    assert (
        "Inconclusive: the interval crosses the margin; an interleaved `reviewkit ab` would "
        "narrow it (two separate runs carry the machine's run-to-run variation" in out
    )
    assert "Verdicts: 5 inconclusive." in out  # all five workloads of the toy suite
    paired = [make_run(tmp_path / side, seed=i, pairing={"id": "p", "side": side})
              for i, side in enumerate(("baseline", "candidate"))]  # fmt: skip
    out = run_compare(*paired)
    assert "run-to-run" not in out
    assert "Verdicts: 5 equivalent" in out  # 2% noise and 200 samples: within the margin


def test_the_design_counts_the_workloads_measured_in_one_round():
    # the CPU-to-H200 review read "percentile bootstrap ... (one round ...)" as if the whole
    # comparison had one round, when one workload of 96 had
    rounds = {"gemm.a": _normal(1.0, n=40, seed=1), "gemm.b": _normal(2.0, n=40, seed=2)}
    four = {"gemm.a": [10, 10, 10, 10]}  # gemm.a: four rounds
    base, cand = _doc(rounds, round_sizes=four), _doc(rounds, round_sizes=four)
    design = compare(base, cand).design
    assert design.endswith("; 1 of 2 workloads: percentile bootstrap of the samples (one round: "
                           "the drift between rounds not in it)")  # fmt: skip
    both_single = compare(_doc(rounds), _doc(rounds)).design
    assert "; every workload: percentile bootstrap" in both_single


def test_the_noise_floor_is_the_intervals_half_width_relative_to_its_ratio():
    # One workload ~100x faster: whatever its interval [lo, hi] around the ratio r, the noise
    # floor is (hi - lo) / 2 / r. Before, (hi - lo) / 2 alone: a 0.012 [0.008, 0.019] ratio
    # read "±0.5%" where its interval is ±46% of it.
    base = _doc({"model.a": _normal(0.1, sd=0.2, n=40)})
    cand = _doc({"model.a": _normal(0.001, sd=0.2, n=40, seed=7)})
    comp = compare(base, cand)
    w = comp.workloads[0]
    lo, hi = w.median_ratio_ci
    assert comp.noise_floor == pytest.approx((hi - lo) / 2 / w.median_ratio)
    assert comp.noise_floor > 0.03  # 20% noise on 40 samples each: several percent, not 0.1%


def test_one_sample_a_side_is_inconclusive_however_far_apart(tmp_path):
    # one call per side (a budget that allowed no more): the bootstrap has nothing to resample,
    # so its interval has no width; 5.0 vs 5.2 ms must not read "equivalent" (or "slower")
    name = "gemm.toy-ffn-up.b1s128"
    base = analyse_run(load_run(make_run(tmp_path / "a", samples_for={name: [5.0e-3]})))
    cand = analyse_run(load_run(make_run(tmp_path / "b", samples_for={name: [5.2e-3]})))
    row = next(w for w in compare(base, cand).workloads if w.key.startswith(name))
    assert row.verdict == "inconclusive" and row.p99_verdict == "inconclusive"
    assert "too few samples for an interval (1 baseline, 1 candidate" in row.reason
    assert abs(row.median_ratio - 1.04) < 1e-9  # the point estimate stays: 5.2 / 5.0
