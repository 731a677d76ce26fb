"""The PDF's charts: laid out as blank stand-ins of the same size, then vl-convert's vector PDF
of each laid over its box (positions against hand-placed boxes); the worker process."""

from __future__ import annotations

import pypdfium2 as pdfium
import pytest

from reviewkit.render.printing import PdfError, PdfWorker, blank_svg, render_pdf

MM_PT = 72 / 25.4  # points per millimetre

# 400 x 100 px, one word of text at its horizontal middle.
CHART_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="100" viewBox="0 0 400 100">'
    '<rect x="0" y="0" width="400" height="100" fill="#eeeeee"/>'
    '<text x="200" y="55" font-family="DejaVu Sans" font-size="20" text-anchor="middle">'
    "OVERLAYMARK</text></svg>"
)


def _page(body: str) -> str:
    return (
        "<html><head><style>@page { size: A4; margin: 10mm } body { margin: 0 }"
        "img { display: block; width: 100mm; margin-left: 20mm }</style></head><body>"
        f"{body}</body></html>"
    )


def _render(tmp_path, body: str, svg: str = CHART_SVG) -> pdfium.PdfDocument:
    charts = tmp_path / "assets" / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    (charts / "demo.svg").write_text(svg)
    return pdfium.PdfDocument(render_pdf(_page(body), tmp_path, []).pdf)


def _word_boxes(doc: pdfium.PdfDocument, word: str) -> list[tuple[int, tuple]]:
    """(page index, (left, bottom, right, top) in points) of each occurrence of `word`."""
    found = []
    for index in range(len(doc)):
        text = doc[index].get_textpage()
        searcher = text.search(word)
        while (hit := searcher.get_next()) is not None:
            first, count = hit
            boxes = [text.get_charbox(i) for i in range(first, first + count)]
            found.append((index, (min(b[0] for b in boxes), min(b[1] for b in boxes),
                                  max(b[2] for b in boxes), max(b[3] for b in boxes))))  # fmt: skip
    return found


def test_a_chart_is_drawn_once_in_the_box_the_layout_kept_for_it(tmp_path):
    """The image box: 10 mm page margin + 20 mm indent = 30 mm from the left, 100 mm wide, so
    100 x 25 mm (the SVG's 4:1); its top at the 10 mm margin. The word sits at the chart's
    horizontal middle (80 mm from the page's left) and a little above its vertical middle
    (baseline at 55% of 25 mm below the top, the glyphs above it)."""
    doc = _render(tmp_path, '<img src="assets/charts/demo.svg" alt="demo">')
    ((page, (left, bottom, right, top)),) = _word_boxes(doc, "OVERLAYMARK")
    height_pt = doc[0].get_height()
    assert page == 0
    assert (left + right) / 2 == pytest.approx(80 * MM_PT, abs=1.0)
    baseline_mm = 10 + 0.55 * 25
    assert bottom == pytest.approx(height_pt - baseline_mm * MM_PT, abs=1.5)
    assert top < height_pt - 10 * MM_PT  # inside the box, below its top edge


def test_a_chart_pushed_to_the_next_page_is_laid_over_that_page(tmp_path):
    doc = _render(tmp_path, '<p style="break-after: page">first</p>'
                            '<img src="assets/charts/demo.svg" alt="demo">')  # fmt: skip
    assert [page for page, _ in _word_boxes(doc, "OVERLAYMARK")] == [1]


def test_a_chart_without_a_numeric_size_is_drawn_by_weasyprint(tmp_path):
    """width="100%": no size to copy to a stand-in, so WeasyPrint draws the SVG itself; its
    text is there, once."""
    svg = CHART_SVG.replace('width="400" height="100"', 'width="100%" height="100"')
    doc = _render(tmp_path, '<img src="assets/charts/demo.svg" alt="demo">', svg)
    assert len(_word_boxes(doc, "OVERLAYMARK")) == 1


def test_a_missing_chart_file_fails_the_pdf(tmp_path):
    (tmp_path / "assets" / "charts").mkdir(parents=True)
    with pytest.raises(PdfError, match="PDF rendering failed"):
        render_pdf(_page('<img src="assets/charts/absent.svg" alt="x">'), tmp_path, [])


def test_blank_svg_copies_the_size_and_nothing_else():
    assert blank_svg(CHART_SVG) == (
        '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="100" '
        'viewBox="0 0 400 100"></svg>'
    )
    assert blank_svg('<svg width="10" height="5"><text>x</text></svg>') == (
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="5"></svg>'
    )
    assert blank_svg('<svg width="100%" height="5"></svg>') is None
    assert blank_svg("<p>no svg</p>") is None


def test_the_worker_renders_what_this_process_renders(tmp_path):
    body = '<p>before</p><img src="assets/charts/demo.svg" alt="demo"><p>after</p>'
    here = _render(tmp_path, body)
    worker = PdfWorker()
    try:
        there = pdfium.PdfDocument(worker.render(_page(body), tmp_path, []).pdf)
    finally:
        worker.close()
    assert len(there) == len(here) == 1
    assert there[0].get_textpage().get_text_range() == here[0].get_textpage().get_text_range()
    assert _word_boxes(there, "OVERLAYMARK") == _word_boxes(here, "OVERLAYMARK")


def test_the_caller_works_while_the_worker_prints_and_the_worker_exits_cleanly(tmp_path):
    """`meanwhile` runs once in this process, after the page was sent; the worker, its reply
    written, leaves with status 0 (it skips tearing its imports down, it does not crash)."""
    body = '<img src="assets/charts/demo.svg" alt="demo">'
    (tmp_path / "assets" / "charts").mkdir(parents=True)
    (tmp_path / "assets" / "charts" / "demo.svg").write_text(CHART_SVG)
    worker = PdfWorker()
    calls = []
    try:
        pdf = worker.render(_page(body), tmp_path, [], lambda: calls.append("meanwhile")).pdf
    finally:
        worker.close()
    assert calls == ["meanwhile"]
    assert len(_word_boxes(pdfium.PdfDocument(pdf), "OVERLAYMARK")) == 1
    assert worker._process.returncode == 0


def test_the_worker_reports_a_failure_as_this_process_would(tmp_path):
    (tmp_path / "assets" / "charts").mkdir(parents=True)
    worker = PdfWorker()
    try:
        with pytest.raises(PdfError, match=r"PDF rendering failed.*absent\.svg"):
            worker.render(_page('<img src="assets/charts/absent.svg" alt="x">'), tmp_path, [])
    finally:
        worker.close()


def test_a_dead_worker_falls_back_to_this_process_and_close_stops_an_idle_one(tmp_path):
    body = '<img src="assets/charts/demo.svg" alt="demo">'
    (tmp_path / "assets" / "charts").mkdir(parents=True)
    (tmp_path / "assets" / "charts" / "demo.svg").write_text(CHART_SVG)
    worker = PdfWorker()
    worker._process.kill()
    worker._process.wait()
    doc = pdfium.PdfDocument(worker.render(_page(body), tmp_path, []).pdf)
    assert len(_word_boxes(doc, "OVERLAYMARK")) == 1
    idle = PdfWorker()
    idle.close()  # the review failed its check: nothing is sent, the worker must not linger
    assert idle._process.poll() is not None


def test_a_worker_whose_command_ended_without_a_page_exits_quietly(capfd):
    """The parent died or failed before sending a page: its end of the pipe closes, and the
    worker exits 0 with nothing on stderr rather than a traceback."""
    worker = PdfWorker()
    out, _ = worker._process.communicate(b"")
    assert worker._process.returncode == 0 and out == b""
    assert "Traceback" not in capfd.readouterr().err


def test_a_chart_shown_twice_is_laid_over_both_boxes(tmp_path):
    """The brief shows the claim's chart again: both images become stand-ins (the count the
    overlay is checked against), and each box gets the chart."""
    from reviewkit.render.printing import _stand_ins

    body = '<img src="assets/charts/demo.svg" alt="a"><img src="assets/charts/demo.svg" alt="b">'
    doc = _render(tmp_path, body)
    assert _stand_ins(_page(body), tmp_path)[2] == ["demo", "demo"]
    (first, second) = [box for _, box in _word_boxes(doc, "OVERLAYMARK")]
    assert second[1] < first[1] - 20 * MM_PT  # the second 25 mm lower on the page


def _bar_spec(label: str, rows: int = 3) -> dict:
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": [{"k": f"{label}{i}", "v": i} for i in range(rows)]},
        "mark": "bar", "encoding": {"x": {"field": "k", "type": "nominal"},
                                    "y": {"field": "v", "type": "quantitative"}},
    }  # fmt: skip


def test_the_worker_converts_the_charts_it_is_handed_and_the_caller_makes_their_pdfs(
    tmp_path, monkeypatch
):
    """A cold packet: the worker converts the specs it is handed (from the last one back) while
    the caller converts from the first; while the worker lays the page out, the caller makes
    the charts' PDFs. Both land in the one disk cache."""
    from reviewkit.render.charts import convert

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the worker inherits it
    specs = [_bar_spec("a"), _bar_spec("b")]
    keys = [convert._spec_key(convert.printable(s)) for s in specs]
    worker = PdfWorker()
    try:
        worker.prepare_charts(specs)
        body = '<img src="assets/charts/demo.svg" alt="demo">'
        (tmp_path / "assets" / "charts").mkdir(parents=True)
        (tmp_path / "assets" / "charts" / "demo.svg").write_text(CHART_SVG)
        doc = pdfium.PdfDocument(worker.render(_page(body), tmp_path, []).pdf)
    finally:
        worker.close()
    cache = convert.chart_cache_dir()
    # this process converted neither spec: the worker did, before it rendered the page
    assert all((cache / "svg" / f"{k}.svg").exists() for k in keys)
    assert len(_word_boxes(doc, "OVERLAYMARK")) == 1
    pdfs = list((cache / "pdf").glob("*.pdf"))
    assert len(pdfs) == 1 and pdfs[0].read_bytes() == convert.svg_to_pdf(CHART_SVG)


def test_handing_a_busy_worker_megabytes_of_charts_does_not_stall_the_caller(tmp_path):
    """A chart message is more than a pipe holds and the worker reads nothing until its
    warm-up is done: the caller must not wait for it. A stopped worker reads nothing at all."""
    import os
    import signal
    import threading

    worker = PdfWorker()
    os.kill(worker._process.pid, signal.SIGSTOP)
    try:
        specs = [_bar_spec("x", rows=40_000) for _ in range(4)]  # ~8 MB pickled
        call = threading.Thread(target=worker.prepare_charts, args=(specs,), daemon=True)
        call.start()
        call.join(timeout=20)  # a write from the caller's thread would block until SIGCONT
        assert not call.is_alive(), "prepare_charts waited for a worker that cannot read"
    finally:
        os.kill(worker._process.pid, signal.SIGCONT)
        worker.close()


def test_a_dead_worker_handed_charts_still_falls_back(tmp_path):
    (tmp_path / "assets" / "charts").mkdir(parents=True)
    (tmp_path / "assets" / "charts" / "demo.svg").write_text(CHART_SVG)
    worker = PdfWorker()
    worker._process.kill()
    worker._process.wait()
    worker.prepare_charts([_bar_spec("dead")])
    body = '<img src="assets/charts/demo.svg" alt="demo">'
    doc = pdfium.PdfDocument(worker.render(_page(body), tmp_path, []).pdf)
    assert len(_word_boxes(doc, "OVERLAYMARK")) == 1
