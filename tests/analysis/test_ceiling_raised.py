"""No MFU above 100%: a compute ceiling a workload beats is raised to its rate, said where; a
knob that moves the ceiling gives each run its own denominator (issue 30, item 1)."""

from __future__ import annotations

import pytest
from runfactory import make_run

from reviewkit.analysis.analysed import AnalysedRun
from reviewkit.analysis.ceilings import SET_THE_CEILING, moved_settings
from reviewkit.analysis.compare import compare
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run

CALIBRATED = 2e11  # runfactory's fp32 peak: 200 GFLOP/s


def _run(folder, **kw) -> AnalysedRun:
    return analyse_run(load_run(make_run(folder, **kw)))


def test_a_workload_faster_than_the_peak_raises_it_and_is_flagged(tmp_path):
    # Twice as fast as runfactory's base: gemm.toy-ffn-up.b4s512 moves 9.6e9 FLOP in ~0.04 s,
    # ~240 GFLOP/s, above the 200 calibrated; the decoder's 2.7e10 in ~0.125 s is ~216.
    doc = _run(tmp_path / "fast", speedup=2.0)
    rate = {w.id: w.flops / w.stats.p50_s for w in doc.workloads if w.stats}
    best_id = max(rate, key=rate.get)
    assert best_id.startswith("gemm.toy-ffn-up.b4s512")
    entry = doc.ceilings["compute"]["fp32"]
    assert entry["peak"] == pytest.approx(rate[best_id])
    assert entry["calibrated_peak"] == CALIBRATED
    assert entry["raised_by"] == best_id and "calibration missed the peak" in entry["method"]
    assert doc.workload_by_id[best_id].mfu == pytest.approx(1.0)
    assert max(w.mfu for w in doc.workloads if w.mfu is not None) <= 1.0 + 1e-12
    flagged = [w.id for w in doc.workloads if SET_THE_CEILING in w.flags]
    assert flagged == [best_id]
    # analysing again changes nothing: the raised peak is the best rate already
    again = analyse_run(doc)
    assert again.ceilings["compute"]["fp32"]["peak"] == pytest.approx(rate[best_id])


def test_a_run_within_its_peak_keeps_it(tmp_path):
    doc = _run(tmp_path / "base")  # the fastest, 120 GFLOP/s, is under 200
    entry = doc.ceilings["compute"]["fp32"]
    assert entry["peak"] == CALIBRATED and "raised_by" not in entry


def test_a_thread_change_divides_each_run_by_its_own_ceilings(tmp_path):
    base = _run(tmp_path / "t1", knobs={"threads": 1})
    cand = _run(tmp_path / "t2", speedup=2.0, knobs={"threads": 2})
    assert moved_settings(base, cand) == ["threads"]
    comp = compare(base, cand)
    assert comp.same_device and "threads differ" in comp.denominator
    mfus = [w.mfu_candidate for w in comp.workloads if w.mfu_candidate is not None]
    assert mfus and max(mfus) <= 1.0 + 1e-12  # on the baseline's 200 GFLOP/s it read 1.2
    assert all(w.mfu_delta_ci is None for w in comp.workloads)  # two denominators: no CI


def test_one_setting_shares_a_denominator_raised_for_both_sides(tmp_path):
    base = _run(tmp_path / "a")
    cand = _run(tmp_path / "b", speedup=2.0)
    comp = compare(base, cand)
    assert comp.denominator == "the baseline's ceilings for both runs (one device)"
    by_key = {w.key: w for w in comp.workloads}
    fastest = max(cand.workloads, key=lambda w: w.flops / w.stats.p50_s)
    # the candidate's fastest workload sets the shared peak: it reads exactly 100%
    w = next(x for x in by_key.values() if x.candidate_id == fastest.id)
    assert w.mfu_candidate == pytest.approx(1.0)
    assert max(x.mfu_candidate for x in by_key.values() if x.mfu_candidate) <= 1.0 + 1e-12
