"""The sample packets' PDFs read back from their own text positions (issue 29, item 7): no text
under 7 pt, nothing outside the page; and the checker itself, on a hand-made page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pdflayout import MIN_TEXT_PT, check_layout, summary

from reviewkit.render.printing import render_pdf

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ("review-bf16-transformer", "review-cpu-to-h200")
# The page budgets a reviewer with five minutes can read (issue 29, item 7): the bf16 sample
# compares one dtype change on one device; the CPU-to-H200 one holds three dtypes on two devices.
PAGE_BUDGET = {"review-bf16-transformer": 16, "review-cpu-to-h200": 24}


@pytest.fixture(scope="module")
def packets(tmp_path_factory) -> dict[str, dict]:
    """Each sample's packet, printed as a user prints it (`reviewkit packet`, its worker
    included): the --json it reported and its PDF's layout."""
    built = {}
    for sample in SAMPLES:
        out = tmp_path_factory.mktemp(sample) / "packet"
        review = ROOT / "samples" / sample / "review.toml"
        run = subprocess.run(
            [sys.executable, "-m", "reviewkit", "packet", str(review), "--out", str(out),
             "--json"],
            capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        built[sample] = {"report": report, "layout": check_layout(Path(report["pdf"]))}
    return built


@pytest.mark.parametrize("sample", SAMPLES)
def test_a_sample_packet_prints_without_warnings(packets, sample):
    """WeasyPrint's warnings no longer fail the packet (item 8); the packet's own templates
    still must not cause any (an unknown CSS property is a rule that silently does nothing)."""
    assert packets[sample]["report"]["pdf_warnings"] == []


@pytest.mark.parametrize("sample", SAMPLES)
def test_a_sample_packet_keeps_to_its_page_budget(packets, sample):
    assert packets[sample]["layout"].pages <= PAGE_BUDGET[sample]


@pytest.mark.parametrize("sample", SAMPLES)
def test_no_text_under_the_minimum_size(packets, sample):
    small = packets[sample]["layout"].small
    assert not small, f"{len(small)} runs under {MIN_TEXT_PT} pt:\n{summary(small)}"


@pytest.mark.parametrize("sample", SAMPLES)
def test_nothing_outside_the_page(packets, sample):
    outside = packets[sample]["layout"].outside
    assert not outside, f"{len(outside)} runs outside the page:\n{summary(outside)}"


# 400 x 100 px, laid out 100 mm wide (scale 0.71): 8 px text prints at 5.7 pt, 20 px at 14 pt.
CHART_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="100" viewBox="0 0 400 100">'
    '<text x="20" y="40" font-family="DejaVu Sans" font-size="20">CHARTBIG</text>'
    '<text x="20" y="80" font-family="DejaVu Sans" font-size="8">CHARTTINY</text></svg>'
)
PAGE = """<html><head><style>
@page { size: A4; margin: 20mm }
body { font: 10pt "DejaVu Sans", sans-serif }
img { display: block; width: 100mm }
.off { position: absolute; left: 160mm; top: 40mm; white-space: nowrap }
</style></head><body>
<p>NORMALTEXT at ten points, <span style="font-size: 5pt">TINYTEXT</span> beside it.</p>
<p>ANOTHERLINE at <span style="font-size: 7pt">SEVENPOINT</span>, which is allowed.</p>
<div class="off">OFFPAGE runs past the right edge of the page</div>
<img src="assets/charts/demo.svg" alt="chart">
</body></html>"""


def test_the_checker_finds_exactly_the_small_and_the_off_page_text(tmp_path):
    """A page made with the packet's own engine: text at 5 pt, a chart laid over as a vector
    form whose 8 px label prints at 5.7 pt (found through the form's matrix), and a line set
    past the right edge. Text at 7 pt and the chart's large label are not reported."""
    charts = tmp_path / "assets" / "charts"
    charts.mkdir(parents=True)
    (charts / "demo.svg").write_text(CHART_SVG)
    layout = check_layout(render_pdf(PAGE, tmp_path, []).pdf)
    assert layout.pages == 1
    assert sorted((r.page, r.text) for r in layout.small) == [(1, "CHARTTINY"), (1, "TINYTEXT")]
    sizes = {r.text: r.size_pt for r in layout.small}
    assert sizes["TINYTEXT"] == pytest.approx(5.0, abs=0.05)
    assert sizes["CHARTTINY"] == pytest.approx(8 * 283.46 / 400, abs=0.1)
    ((page, text),) = [(r.page, r.text) for r in layout.outside]
    assert page == 1 and text.startswith("OFFPAGE runs past")
