"""The brief puts the change weighted by production's time beside the primary metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewkit.render.packet import write_packet

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("weasyprint_warnings_fail")


def brief_of(sample: str, out: Path) -> dict:
    paths = write_packet(ROOT / "samples" / sample / "review.toml", out, pdf=False)
    return json.loads(paths.json.read_text())["brief"]


def test_a_cited_trace_weighs_the_change_in_the_brief(tmp_path):
    # the CPU-to-H200 review cites the sampled 128-rank trace: 65% of its device time is NCCL,
    # which neither run measured, so most of production is carried at 1 and the weighted
    # ratio cannot settle; the suite's primary metric is faster, so the finding warns
    brief = brief_of("review-cpu-to-h200", tmp_path / "out")
    weighted = brief["production"]
    assert weighted["status"] == "warn"
    assert "on production's device time" in weighted["summary"]
    assert "carried at 1" in weighted["summary"]


def test_without_a_trace_the_brief_has_no_weighted_line(tmp_path):
    assert brief_of("review-bf16-transformer", tmp_path / "out")["production"] is None
