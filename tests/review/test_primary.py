"""The claim's primary metric, judged once in the review stage: which metric, and whether its
verdict settles the claim's hypothesis (a `go` it does not settle fails and reads
needs-evidence)."""

from __future__ import annotations

from runfactory import complete_review, samples, write_review

from reviewkit.review.gate import run_check

MODEL = "model.toy-decoder.b1s256"  # 0.25 s a call in the baseline (runfactory.WORKLOADS)


def _finding(report, item):
    return next(f for f in report.findings if f.item.id == item)


def test_the_quantile_the_answer_names_is_the_primary_metric(tmp_path):
    # complete_review's answer reads "model p99": the p99 of the model workload, whose ratio is
    # the comparison row's p99 ratio (the candidate 2.5x faster everywhere: about 0.4)
    report = run_check(write_review(tmp_path, complete_review()))
    p = report.primary
    row = next(w for w in report.comparisons[0].workloads if w.key == p.key)
    assert p.quantile == "p99" and p.label == f"p99 latency of {row.key}"
    assert (p.ratio, p.ci) == (row.p99_ratio, row.p99_ratio_ci)
    assert p.verdict == "faster" and p.settles
    assert _finding(report, "primary-metric-verdict").status == "pass"


def _noisy(tmp_path, status, hypothesis=None):
    # The candidate's model 0.97x the baseline's median, 20% noise on 12 samples each: the
    # interval straddles 1 - 5%, so the improvement is inconclusive.
    review = complete_review()
    review["decision"] = {"status": status, "date": "2026-12-03"}
    review["answers"]["primary-metric"]["answer"] = f"median latency of {MODEL}"
    if hypothesis:
        review["hypothesis"] = hypothesis
    base = {"samples_for": {MODEL: samples(0.25, n=12, rel_sd=0.2, seed=3)}}
    cand = {"speedup": 1.0, "samples_for": {MODEL: samples(0.2425, n=12, rel_sd=0.2, seed=4)}}
    return run_check(write_review(tmp_path, review, base_kw=base, cand_kw=cand))


def test_a_go_its_primary_metric_does_not_settle_fails_and_reads_needs_evidence(tmp_path):
    report = _noisy(tmp_path, "go")
    p = report.primary
    assert p.quantile == "p50" and p.verdict == "inconclusive" and not p.settles
    f = _finding(report, "primary-metric-verdict")
    assert f.status == "fail" and f.blocks and "reads needs-evidence" in f.summary
    assert report.decision_reads == "needs-evidence" and report.verdict == "fail"


def test_a_proposal_is_told_what_a_go_would_need(tmp_path):
    report = _noisy(tmp_path, "proposed")
    f = _finding(report, "primary-metric-verdict")
    assert f.status == "warn" and "a go would need it" in f.summary
    assert report.decision_reads == "proposed"


def _same_speed(tmp_path, hypothesis=None):
    # The candidate's model at the baseline's speed, 1% noise on 200 samples each, the two sides
    # of one interleaved `ab` (no run-to-run allowance between them): the ratio's interval sits
    # within 1 +/- 5%: equivalent.
    review = complete_review()
    review["decision"] = {"status": "go", "date": "2026-12-03"}
    review["answers"]["primary-metric"]["answer"] = f"median latency of {MODEL}"
    if hypothesis:
        review["hypothesis"] = hypothesis
    base = {"samples_for": {MODEL: samples(0.25, n=200, rel_sd=0.01, seed=5)},
            "pairing": {"id": "p", "side": "baseline"}}  # fmt: skip
    cand = {"speedup": 1.0, "samples_for": {MODEL: samples(0.25, n=200, rel_sd=0.01, seed=6)},
            "pairing": {"id": "p", "side": "candidate"}}  # fmt: skip
    return run_check(write_review(tmp_path, review, base_kw=base, cand_kw=cand))


def test_a_no_regression_claim_is_settled_by_the_intervals_upper_end(tmp_path):
    # "Same latency, cheaper": an equivalent primary metric settles it (upper end <= 1.05)...
    report = _same_speed(tmp_path / "same", hypothesis="no-regression")
    p = report.primary
    assert p.verdict == "equivalent" and p.ci[1] <= 1 + p.margin and p.settles
    assert _finding(report, "primary-metric-verdict").status == "pass"
    assert report.decision_reads == "go"
    # ...while the same numbers do not settle an improvement, which needs `faster`
    report = _same_speed(tmp_path / "faster")
    assert not report.primary.settles
    assert _finding(report, "primary-metric-verdict").status == "fail"
