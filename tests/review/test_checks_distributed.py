"""The multi-device check and the distributed analysis it reads, on bundles worked by hand:
communication share, tensor-parallel scaling efficiency, stragglers, incomplete runs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from runfactory import analysed, complete_review, distributed_doc, write_review

from reviewkit.analysis import distributed as dist_analysis
from reviewkit.analysis.analysed import AnalysedRun, AnalysedWorkload, Skew
from reviewkit.review.checks import FAIL, MISSING, PASS, WARN, Context
from reviewkit.review.checks.distributed import multi_device
from reviewkit.review.reviewfile import load_review
from reviewkit.suite import collectives as coll

MIB = 1 << 20


def test_collective_numbers_by_hand():
    doc = distributed_doc()
    ar = doc.workloads[0]
    # 8 MiB in 8 ms: algbw = 8388608 / 0.008 = 1.048576 GB/s; at 2 ranks busbw = algbw x 1;
    # over a 4 GB/s link: 26.2%
    c = ar.collective
    assert c.algbw_p50_bytes_per_s == pytest.approx(1.048576e9)
    assert c.busbw_p50_bytes_per_s == pytest.approx(1.048576e9)
    assert c.link_fraction == pytest.approx(1.048576e9 / 4e9)
    # t_comm = 8 MiB / 4e9 = 2.097 ms of 8 ms (no alpha recorded); t_m = 16 MiB / 3e10 =
    # 0.559 ms; the collective's host cost is inside alpha: overhead 0.
    # communication = min(2.097, 8 - 0.559) / 8 = 26.2%; inefficiency = (8 - 0.559 - 2.097) / 8
    f = ar.fractions
    assert f["communication"] == pytest.approx(8 * MIB / 4e9 / 0.008)
    assert f["overhead"] == 0.0
    assert f["inefficiency"] == pytest.approx((0.008 - 16 * MIB / 3e10 - 8 * MIB / 4e9) / 0.008)
    assert sum(v for k, v in f.items() if k != "unattributed") == pytest.approx(1)
    # communication-bound (t_comm > t_m > t_c), its roof (0.559 + 2.097) / 8 = 33% < 50%
    assert ar.bottleneck == "communication-bound" and "below-roof" in ar.flags
    assert ar.skew.to_json() == {"rank_median_s": [0.008, 0.008], "rank_over_others": [1.0, 1.0],
                          "max_over_median": 1.0,
                          "slowest_rank": 0}  # fmt: skip


def test_scaling_efficiency_by_hand():
    (s,) = distributed_doc(t1_s=0.060, t2_s=0.040).scaling
    # speed-up 60 / 40 = 1.5 at tp 2: efficiency 0.75
    assert s.speedup == pytest.approx(1.5) and s.efficiency == pytest.approx(0.75)
    # its communication: 2 MiB on the wire / 4e9 = 0.524 ms of 40 ms (t_c = 2e9 / 1e11 = 20 ms)
    assert s.communication_fraction == pytest.approx(2 * MIB / 4e9 / 0.040)


def test_a_rank_ten_percent_slower_is_a_straggler_five_is_not():
    slow = distributed_doc(probe_slowdown=1.15).stragglers
    # each rank against the others' median (at two ranks: the other rank): 10 / 11.5 and
    # 11.5 / 10
    assert slow.rank_ratio == pytest.approx([10 / 11.5, 1.15])
    assert slow.to_json()["flagged"] == [{"rank": 1, "host": "b", "ratio": pytest.approx(1.15)}]
    assert distributed_doc(probe_slowdown=1.05).stragglers.flagged == ()
    # three ranks: rank 1 at 11.2 ms against the others' 10 ms reads 1.12, flagged; the
    # others read 10 / median(10, 11.2) = 10 / 10.6
    ratios, flagged = dist_analysis.stragglers([_probe(0.010, 0.0112, 0.010)], 3)
    assert ratios == pytest.approx([10 / 10.6, 1.12, 10 / 10.6]) and flagged == [1]
    ratios, flagged = dist_analysis.stragglers([_probe(0.010, 0.0105, 0.010)], 3)
    assert flagged == []


def _probe(*rank_median_s: float) -> AnalysedWorkload:
    """A straggler probe as the analysis reads it: its role and each rank's median."""
    skew = Skew(rank_median_s, (), None, 0)
    return AnalysedWorkload("gemm.probe.fp32", "gemm", "fp32", "ok",
                            params={"role": coll.PROBE}, skew=skew)  # fmt: skip


@pytest.fixture
def review(tmp_path):
    return load_review(write_review(tmp_path / "r", complete_review()))


def _one_process(**changes) -> AnalysedRun:
    """The hand-made two-rank run's document measured in one process (with `changes`)."""
    return analysed({**distributed_doc().to_json(), "distributed": None, **changes})


def _ctx(review, candidate: AnalysedRun) -> Context:
    base = _one_process(workloads=[], ceilings={})
    cand_path = review.candidates[0]
    return Context(
        review, base, [(cand_path, candidate)], [], params={"min_scaling_efficiency": 0.5}
    )


def test_multi_device_check(review):
    assert multi_device(_ctx(review, _one_process())).status == PASS
    ok = multi_device(_ctx(review, distributed_doc(t1_s=0.060, t2_s=0.040)))
    assert ok.status == PASS
    assert "scaling efficiency 75.0% at tp 2" in ok.summary
    assert "communication 26.2% of the collectives' time" in ok.summary
    low = multi_device(_ctx(review, distributed_doc(t1_s=0.060, t2_s=0.070)))
    assert low.status == WARN and "below the rubric's 50% minimum" in low.summary
    straggling = multi_device(_ctx(review, distributed_doc(probe_slowdown=1.2)))
    assert straggling.status == WARN and "straggler rank 1 (1.20x" in straggling.summary
    broken = multi_device(_ctx(review, distributed_doc(incomplete="rank 1 died")))
    assert broken.status == FAIL and "rank 1 died" in broken.summary
    lacking = replace(distributed_doc(), scaling=())
    assert multi_device(_ctx(review, lacking)).status == MISSING


def test_compare_says_world_sizes_and_scaling_against_one_rank():
    from reviewkit.analysis.compare import compare

    one = _one_process()
    two = distributed_doc(t1_s=0.060, t2_s=0.040)
    notes = compare(one, two).warnings
    assert any(n.startswith("world size 1 -> 2") for n in notes)
    assert (
        "candidate scaling against world size 1: the tensor-parallel layer at tp 2 (fp32) "
        "runs 1.50x the unsharded layer, efficiency 75%" in " ".join(notes)
    )
    assert not any("world size" in n for n in compare(one, one).warnings)
