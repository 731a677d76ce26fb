"""A review citing a trace diff (`[evidence].trace_diff`): the packet's "Production trace diff"
section shows its totals, device shares and largest changes; a cited file that is not a trace
diff is named with why."""

from __future__ import annotations

import json
from pathlib import Path

import html5lib
import pytest
from runfactory import complete_review, write_review

from reviewkit.evidence.trace.diff import diff
from reviewkit.render.packet import write_packet

SUMMARY = Path(__file__).resolve().parents[2] / "samples" / "trace-gpu-sampled-rank0"
SUMMARY = SUMMARY / "trace_summary.json"
SLOWER_S = 0.05  # added to one GEMM kernel in the candidate: the injected slowdown


@pytest.fixture(scope="module")
def packet(tmp_path_factory):
    root = tmp_path_factory.mktemp("tracediff")
    review = complete_review()
    review["evidence"]["trace_diff"] = ["evidence/trace_diff.json", "evidence/not_a_diff.json"]
    path = write_review(root / "review", review)
    cand_doc = json.loads(SUMMARY.read_text())
    t = cand_doc["traces"][0]
    gemm = next(k for k in t["kernels"] if k["layer_type"] == "gemm")
    gemm["total_s"] += SLOWER_S
    t["op_mix"]["layer_types"]["gemm"]["time_s"] += SLOWER_S
    t["op_mix"]["time_s"] += SLOWER_S
    cand = root / "cand.json"
    cand.write_text(json.dumps(cand_doc))
    evidence = root / "review" / "evidence"
    doc = diff(SUMMARY, cand).to_json(1_700_000_000.0)
    (evidence / "trace_diff.json").write_text(json.dumps(doc))
    (evidence / "not_a_diff.json").write_text(SUMMARY.read_text())
    result = write_packet(path, root / "out", pdf=False)
    return gemm["name"], json.loads(result.json.read_text()), result.html.read_text()


def test_the_section_shows_the_cited_diff_largest_change_first(packet):
    kernel, model, page = packet
    (shown,) = model["trace_diff"]["diffs"]
    assert shown["source"] == "evidence/trace_diff.json"
    assert shown["delta_s"] == pytest.approx(SLOWER_S)
    assert shown["ops"][0]["key"] == kernel
    assert shown["ops"][0]["share_of_change"] == pytest.approx(1.0)
    assert shown["layer_types"][0]["key"] == "gemm"
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    section = tree.find(".//section[@id='trace-diff']")
    text = " ".join("".join(section.itertext()).split())
    assert "Production trace diff" in text and "+50.000 ms" in text
    assert "idle" in text and "keyed by name" in text
    (note,) = model["trace_diff"]["notes"]
    assert note.startswith("evidence/not_a_diff.json: not used:")
    assert "not a `reviewkit trace diff` result" in note and note in text


def test_a_long_kernel_name_is_cut_in_its_cell_and_whole_in_its_tooltip(packet):
    # the sample's kernels include fbgemm's embedding backward, a C++ signature of 1,800-odd
    # characters that filled a printed page whole; the cell keeps 90, the title all of them
    _, model, page = packet
    (shown,) = model["trace_diff"]["diffs"]
    longest = max(shown["ops"], key=lambda r: len(r["key"]))
    assert len(longest["key"]) > 1000
    assert len(longest["name_text"]) == 90 and longest["name_text"].endswith("…")
    assert longest["key"].startswith(longest["name_text"][:-1])
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    section = tree.find(".//section[@id='trace-diff']")
    tables = section.findall(".//table")
    layer_heads = [th.text for th in tables[1].findall(".//th")]
    assert layer_heads == ["Layer type", "Change", "Of the change", "Status"]  # no repeat
    cells = [td for td in tables[2].findall(".//td") if td.get("title") == longest["key"]]
    assert cells and cells[0].text == longest["name_text"]


def test_the_diff_is_drawn_layer_types_then_ops_and_shapes(packet):
    _, model, page = packet
    spec = model["charts"]["trace_change"]
    # two panels: the layer types (gemm's +50 ms first), then the op-and-shape rows
    layers, shapes = spec["vconcat"]
    assert layers["title"]["text"] == "by layer type"
    assert shapes["title"]["text"] == "by op and shape"
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    section = tree.find(".//section[@id='trace-diff']")
    assert section.find(".//figure[@id='chart-trace_change']") is not None
