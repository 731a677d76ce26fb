"""A review citing a platform shortlist (`[evidence].shortlist`): the packet's "Platform
shortlist" section shows its ranking, reasons, risk items and commands, and draws its trade
curve; a cited file that is not a shortlist is named with why."""

from __future__ import annotations

import json
from pathlib import Path

import html5lib
import pytest
from runfactory import complete_review, write_review

from reviewkit.cli.shortlisting import build_shortlist, document
from reviewkit.render.packet import write_packet

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture(scope="module")
def packet(tmp_path_factory):
    root = tmp_path_factory.mktemp("shortlist")
    review = complete_review()
    review["evidence"]["shortlist"] = "evidence/shortlist.json"
    path = write_review(root / "review", review)
    sl = build_shortlist("Llama-3-8B", 1, 512, 30.0, [SAMPLES / "gpu-quick-h200"],
                         output_tokens=16, platforms="h200-sxm,mi355x")  # fmt: skip
    doc = document(sl)
    (root / "review" / "evidence" / "shortlist.json").write_text(json.dumps(doc))
    result = write_packet(path, root / "out", pdf=False)
    return doc, json.loads(result.json.read_text()), result.html.read_text()


def test_the_section_shows_the_cited_shortlist_as_ranked(packet):
    doc, model, page = packet
    (shown,) = model["shortlist"]["shortlists"]
    assert shown["source"] == "evidence/shortlist.json" and shown["model"] == "Llama-3-8B"
    # the same platforms, in the same order, with the same reasons as the file
    assert [r["key"] for r in shown["rows"]] == [c["key"] for c in doc["candidates"]]
    assert [r["rank_reason"] for r in shown["rows"]] == [c["rank_reason"] for c in
                                                         doc["candidates"]]  # fmt: skip
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    section = tree.find(".//section[@id='shortlist']")
    text = " ".join("".join(section.itertext()).split())
    assert "Platform shortlist" in text and "no queueing" in text
    # MI355X has no bf16 dense peak in the table: not available, never priced at another dtype
    assert "not available for bf16" in text
    h200 = next(r for r in shown["rows"] if r["key"] == "h200-sxm")
    assert h200["efficiency"] == "measured" and h200["commands"]
    assert h200["commands"][0] in text  # the benchmark command, as the file gives it
    assert section.find(".//figure[@id='chart-trade_curve']") is not None
    assert "trade_curve" in model["charts"]
    # issue 34: the projection's measured error of its kind beside it (measured here; the
    # figures are rubrics/projection_error.toml's, read independently)
    from reviewkit.analysis.projection_accuracy import shipped_errors

    cases = shipped_errors()["measured"]
    fp32 = cases[0]
    assert h200["error_kind"] == "measured"
    # and in its row, the range of the kind's median |error| over its cases (eight measured:
    # full shapes recorded with a suite-1.5 fit three times, with a 1.3 and a 1.4 fit, from a
    # fit of the day before; decode shapes from a quick run with its decode step and without)
    low = min(case.median_abs_error for case in cases)
    high = max(case.median_abs_error for case in cases)
    assert h200["error_brief"] == f"median |error| {low:.0%}-{high:.0%} (8 cases)"
    assert h200["error_brief"] == "median |error| 6%-57% (8 cases)"
    for case in cases:
        assert f"{case.case}: median |error| {case.median_abs_error:.0%}" in text
    assert f"measured error with measured efficiency: {fp32.case}" in text


def test_a_cited_file_of_another_kind_is_named_with_why(tmp_path):
    review = complete_review()
    review["evidence"]["shortlist"] = "evidence/soak.json"
    path = write_review(tmp_path / "review", review)
    model = json.loads(write_packet(path, tmp_path / "out", pdf=False).json.read_text())
    assert model["shortlist"]["shortlists"] == []
    (note,) = model["shortlist"]["notes"]
    assert note.startswith("evidence/soak.json: not used:")
    assert "not a `reviewkit shortlist` result" in note
