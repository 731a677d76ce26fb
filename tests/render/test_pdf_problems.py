"""A PDF problem is not a lost packet (issue 29, item 8): WeasyPrint's warnings are reported and
a usable PDF kept; a PDF that cannot be produced fails with the HTML and JSON in place."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pikepdf
import pypdfium2 as pdfium
import pytest
from runfactory import complete_review, write_review
from typer.testing import CliRunner

from reviewkit.cli.app import app
from reviewkit.render.packet import PdfNotProduced, write_packet
from reviewkit.render.packet.pdf import check_usable, heading_mismatch, html_headings
from reviewkit.render.printing import PdfError, PdfWorker, Printed, render_pdf
from reviewkit.site.build import build_site

# WeasyPrint's own warning when HarfBuzz-Subset is missing: it subsets fonts with fontTools.
FONT_WARNING = "Using fontTools instead of HarfBuzz-Subset"
UNKNOWN_PROPERTY = '<p style="overflow-x: auto">x</p>'


@pytest.fixture()
def review(tmp_path):
    return write_review(tmp_path / "review", complete_review())


@pytest.fixture()
def no_harfbuzz_subset(monkeypatch):
    """The machine of the issue: no HarfBuzz-Subset, so WeasyPrint warns once per font and
    subsets with fontTools. In this process: the packet's worker is not started (a PdfWorker
    of None renders here), so the missing library is seen by the render."""
    import weasyprint.pdf.fonts

    monkeypatch.setattr(weasyprint.pdf.fonts, "harfbuzz_subset", None)
    monkeypatch.setattr("reviewkit.render.printing.PdfWorker", lambda: None)


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_a_font_warning_is_reported_and_the_pdf_kept(review, tmp_path, no_harfbuzz_subset):
    out = tmp_path / "out"
    result = _invoke("packet", review, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert any(FONT_WARNING in w for w in doc["pdf_warnings"]), doc["pdf_warnings"]
    assert doc["pdf_error"] is None and doc["pdf"] == str(out / "packet.pdf")
    assert "reviewkit: warning: the PDF printed with" in result.stderr
    assert FONT_WARNING in result.stderr and "Traceback" not in result.output
    pdf = pdfium.PdfDocument((out / "packet.pdf").read_bytes())
    assert len(pdf) > 1 and "Toy decoder in bf16" in pdf[0].get_textpage().get_text_range()


def test_the_terminal_shows_a_few_warnings_and_counts_the_rest(capsys):
    from reviewkit.cli.shared import SHOWN_PDF_WARNINGS, print_pdf_warnings

    print_pdf_warnings([f"warning {i}" for i in range(SHOWN_PDF_WARNINGS + 2)], "alpha")
    err = capsys.readouterr().err
    assert err.startswith("reviewkit: warning: alpha: the PDF printed with 7 warning(s)")
    assert "warning 4" in err and "warning 5" not in err and "and 2 more" in err


def test_the_worker_returns_warnings_as_this_process_does(tmp_path):
    page = f"<html><body><h2>A</h2>{UNKNOWN_PROPERTY}</body></html>"
    here = render_pdf(page, tmp_path, [])
    worker = PdfWorker()
    try:
        there = worker.render(page, tmp_path, [])
    finally:
        worker.close()
    assert there.warnings == here.warnings and len(here.warnings) == 1
    assert "overflow-x" in here.warnings[0]
    assert there.pdf.startswith(b"%PDF-")


def test_a_warning_repeated_for_every_box_is_reported_once(tmp_path):
    printed = render_pdf(f"<html><body>{UNKNOWN_PROPERTY * 3}</body></html>", tmp_path, [])
    assert len(printed.warnings) == 1


def _garbage(*args, **kwargs):
    return Printed(b"%PDF-1.7 this is not a PDF", ())


def _raises(*args, **kwargs):
    raise PdfError("PDF rendering failed: RuntimeError: simulated")


@pytest.mark.parametrize(
    ("renderer", "problem"),
    [(_garbage, "the PDF does not open"), (_raises, "PDF rendering failed: RuntimeError")],
)
def test_a_pdf_that_cannot_be_produced_fails_with_the_html_and_json_in_place(
    review, tmp_path, monkeypatch, renderer, problem
):
    """The previous packet is replaced whole, its PDF included: an old PDF beside the new HTML
    would describe another review. The error is one line that names the problem."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("packet.html", "packet.pdf", "stale.txt"):
        (out / name).write_text("the previous packet")
    monkeypatch.setattr("reviewkit.render.printing.PdfWorker", lambda: None)
    monkeypatch.setattr("reviewkit.render.packet.pdf.render_pdf", renderer)
    result = _invoke("packet", review, "--out", out, "--json")
    assert result.exit_code == 1
    error = result.stderr.strip()
    assert "\n" not in error and "Traceback" not in result.output
    assert error.startswith(f"reviewkit: error: --out {out}: packet.html and packet.json are")
    assert problem in error and "--no-pdf" in error
    doc = json.loads(result.stdout)
    assert doc["pdf"] is None and problem in doc["pdf_error"]
    assert sorted(p.name for p in out.iterdir()) == ["assets", "packet.html", "packet.json"]
    assert "Toy decoder in bf16" in (out / "packet.html").read_text()
    assert json.loads((out / "packet.json").read_text())["title"] == "Toy decoder in bf16"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "review"]


def test_the_library_raises_with_what_was_written(review, tmp_path, monkeypatch):
    monkeypatch.setattr("reviewkit.render.packet.pdf.render_pdf", _garbage)
    with pytest.raises(PdfNotProduced) as info:
        write_packet(review, tmp_path / "out")
    written = info.value.result
    assert written.pdf is None and written.html.exists() and written.json.exists()
    assert "the PDF does not open" in written.to_json()["pdf_error"]


def test_work_for_while_the_pdf_prints_is_done_when_the_worker_fails(review, tmp_path):
    """The Vega bundle is written while the worker prints: a worker that fails before it
    gets to that still leaves an HTML whose charts run."""
    from reviewkit.render.packet.html import VEGA_BUNDLE

    class Failing:
        def prepare_charts(self, specs):
            pass

        def render(self, *args, **kwargs):
            raise PdfError("PDF rendering failed: simulated")

    with pytest.raises(PdfNotProduced, match="simulated"):
        write_packet(review, tmp_path / "out", pdf_worker=Failing())
    assert "vegaEmbed" in (tmp_path / "out" / "assets" / VEGA_BUNDLE).read_text()


def test_a_failed_write_still_leaves_the_previous_packet(review, tmp_path, monkeypatch):
    """The PDF's failure is reported once the folder is in place; a write that fails (here the
    PDF file itself) swaps nothing in, as before."""
    import errno

    from reviewkit.common.errors import OutputError

    out = tmp_path / "out"
    out.mkdir()
    (out / "packet.html").write_text("the previous packet")
    real = Printed(render_pdf("<html><body>x</body></html>", tmp_path, []).pdf)
    monkeypatch.setattr("reviewkit.render.packet.pdf.render_pdf", lambda *a, **k: real)
    monkeypatch.setattr("reviewkit.render.packet.pdf.check_usable", lambda *a: None)
    write_bytes = Path.write_bytes

    def full(self, data):
        if self.name == "packet.pdf":
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_bytes(self, data)

    monkeypatch.setattr("pathlib.Path.write_bytes", full)
    with pytest.raises(OutputError, match="No space left on device"):
        write_packet(review, out)
    assert (out / "packet.html").read_text() == "the previous packet"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


# The usability check, on hand-made PDFs.


def _pdf_with_content(content: bytes, resources: dict | None = None) -> bytes:
    doc = pikepdf.new()
    doc.add_blank_page()
    page = doc.pages[0]
    page.obj.Contents = doc.make_stream(content)
    if resources is not None:
        page.obj.Resources = pikepdf.Dictionary(resources)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def test_a_page_that_names_a_font_it_does_not_have_cannot_be_drawn():
    pdf = _pdf_with_content(b"BT /F9 12 Tf 10 10 Td (x) Tj ET", {})
    with pytest.raises(PdfError, match=r"page 1 of the PDF cannot be drawn: .*font /F9"):
        check_usable(pdf, "")


def test_a_form_that_draws_a_missing_form_cannot_be_drawn():
    doc = pikepdf.new()
    doc.add_blank_page()
    form = doc.make_stream(b"/Gone Do", Type=pikepdf.Name.XObject, Subtype=pikepdf.Name.Form,
                           BBox=[0, 0, 10, 10], Resources=pikepdf.Dictionary())  # fmt: skip
    page = doc.pages[0]
    page.obj.Resources = pikepdf.Dictionary(XObject=pikepdf.Dictionary(Fm0=form))
    page.obj.Contents = doc.make_stream(b"q /Fm0 Do Q")
    out = io.BytesIO()
    doc.save(out)
    with pytest.raises(PdfError, match=r"page 1 .*xobject /Gone"):
        check_usable(out.getvalue(), "")
    page.obj.Contents = doc.make_stream(b"q Q")  # the page no longer draws the form
    out = io.BytesIO()
    doc.save(out)
    check_usable(out.getvalue(), "")


def test_a_pdf_without_pages_or_bytes_is_unusable():
    doc, out = pikepdf.new(), io.BytesIO()
    doc.save(out)
    with pytest.raises(PdfError, match="no pages"):
        check_usable(out.getvalue(), "")
    with pytest.raises(PdfError, match="does not open"):
        check_usable(b"", "")


HEADINGS = [("h1", "Title"), ("h3", "The claim"), ("h2", "Contents"), ("h2", "Knob diff"),
            ("h3", "candidate"), ("h4", "Production shapes"), ("h2", "Rollback")]  # fmt: skip


@pytest.mark.parametrize(
    ("titles", "expected"),
    [
        (["The claim", "Contents", "Knob diff", "candidate", "Production shapes", "Rollback"],
         None),
        # h1 and h4 may go unbookmarked; case and white space are layout's
        (["the  claim", "Contents", "Knob diff", "candidate", "Rollback"], None),
        (["The claim", "Contents", "candidate", "Rollback"],
         "the HTML's h2 'Knob diff' has no bookmark (the PDF's next is 'candidate')"),
        (["The claim", "Contents", "Knob diff", "candidate"],
         "the HTML's h2 'Rollback' has no bookmark (the PDF's outline ends)"),
        (["The claim", "Contents", "Knob diff", "candidate", "Rollback", "Appendix"],
         "the bookmark 'Appendix' is not a heading of the HTML (or out of order)"),
        (["Contents", "The claim", "Knob diff", "candidate", "Rollback"],
         "the HTML's h3 'The claim' has no bookmark (the PDF's next is 'Contents')"),
        ([], "the HTML's h3 'The claim' has no bookmark (the PDF's outline ends)"),
    ],
)  # fmt: skip
def test_bookmarks_against_headings(titles, expected):
    assert heading_mismatch(HEADINGS, titles) == expected


def test_headings_are_read_from_the_html_with_their_markup_dropped():
    html = ('<h1 class="t">Title</h1><h3>The <em>claim</em></h3>'
            '<h3><span class="badge">fail</span> KPI &amp; SLA</h3><h5>x</h5>')  # fmt: skip
    assert html_headings(html) == [("h1", "Title"), ("h3", "The claim"),
                                   ("h3", "fail KPI & SLA"), ("h5", "x")]  # fmt: skip


def test_a_printed_pdf_whose_bookmarks_differ_from_the_html_is_unusable(tmp_path):
    """The check reads the PDF's own outline: WeasyPrint's bookmarks of one page, held against
    that page's HTML (usable) and against an HTML with a section more (unusable)."""
    page = "<html><body><h1>T</h1><h2>First</h2><h3>Part</h3><h2>Second</h2></body></html>"
    pdf = render_pdf(page, tmp_path, []).pdf
    check_usable(pdf, page)
    other = page.replace("<h2>Second</h2>", "<h2>Second</h2><h2>Third</h2>")
    with pytest.raises(PdfError, match="the HTML's h2 'Third' has no bookmark"):
        check_usable(pdf, other)


# The site: warnings reported per decision, never fatal.


@pytest.fixture()
def log(tmp_path):
    write_review(tmp_path / "log" / "decisions" / "alpha", complete_review())
    return tmp_path / "log"


def test_the_site_reports_a_decisions_pdf_warnings_and_keeps_its_pdf(
    log, tmp_path, no_harfbuzz_subset
):
    out = tmp_path / "site"
    result = _invoke("site", "build", log, "--out", out, "--json", "--jobs", "1")
    assert result.exit_code == 0, result.output
    (decision,) = json.loads(result.stdout)["decisions"]
    assert decision["status"] == "rendered"
    assert any(FONT_WARNING in w for w in decision["pdf_warnings"])
    assert "reviewkit: warning: alpha: the PDF printed with" in result.stderr
    assert (out / "decisions" / "alpha" / "packet.pdf").read_bytes().startswith(b"%PDF-")


def test_the_site_fails_a_decision_whose_pdf_cannot_be_produced(log, tmp_path, monkeypatch):
    monkeypatch.setattr("reviewkit.render.packet.pdf.render_pdf", _garbage)
    result = build_site(log, tmp_path / "site", jobs=1)
    (decision,) = result.decisions
    assert decision.status == "failed" and "the PDF does not open" in decision.error
    assert not (tmp_path / "site" / "decisions" / "alpha").exists()
