"""The claim's own slice on page 1: its dtype only, and ratios beside the values they divide."""

from __future__ import annotations

from pathlib import Path

import pytest
from chartspecs import datasets

from reviewkit.render.packet.figures import trade_rows
from reviewkit.render.packet.model import build_model
from reviewkit.review.gate import run_check

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "review-cpu-to-h200" / "review.toml"


@pytest.fixture(scope="module")
def cross():
    report = run_check(SAMPLE)
    return report, build_model(report)


def test_the_claim_chart_keeps_to_the_claims_dtype(cross):
    report, model = cross
    # The review's primary metric names model.gpt-2-small-decoder-2l.b1s256.bf16; the runs also
    # hold fp32 and fp16, which the old brief chart pooled by layer type.
    assert report.primary.dtype == "bf16"
    assert model["brief"]["chart"] == "forest_claim"
    rows = [r for values in datasets(model["charts"]["forest_claim"]) for r in values
            if "workload" in r and "ratio" in r]  # fmt: skip
    names = [r["workload"] for r in rows]
    assert names and all(".bf16" in n for n in names), names
    assert not any(".fp32" in n or ".fp16" in n for n in names)
    # the primary workload is there, marked
    assert "model.gpt-2-small-decoder-2l.b1s256.bf16 (primary)" in names


def test_the_trade_view_draws_the_claims_workload_with_its_dtype(cross):
    report, _ = cross
    rows = trade_rows(report, with_baseline=True)
    # baseline and candidate: the primary metric's workload on each side, bf16, labelled so
    assert [r["workload"] for r in rows] == ["model.gpt-2-small-decoder-2l.b1s256.bf16"] * 2
    assert all(r["candidate"].endswith(" · bf16") for r in rows)


def test_the_ratio_beside_two_values_is_their_quotient(cross):
    report, model = cross
    head = model["headline"]
    divides = head["divides"]
    # the median ratio is the quotient of the means over rounds of each round's median
    assert head["ratio"] == pytest.approx(divides["candidate_ms"] / divides["baseline_ms"])
    assert divides["estimator"] == "mean over rounds of each round's median"
    for group in model["workloads"]:
        for row in group["rows"]:
            if row["median_ratio"] is None:
                continue
            w = next(w for w in report.comparisons[0].workloads if w.key == row["key"])
            base, cand = w.points_s["p50"]
            assert row["median_ratio"] == pytest.approx(cand / base)
            # the table shows those values, not the pooled medians of run.json
            assert row["baseline_p50_ms"] == pytest.approx(base * 1e3)
            assert row["candidate_p50_ms"] == pytest.approx(cand * 1e3)
