"""`reviewkit packet`: strict HTML, a paged PDF with its evidence, inert inputs, determinism."""

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import html5lib
import pypdfium2
import pytest
from htmlsafety import parse_inert
from runfactory import complete_review, write_review

from reviewkit.render import charts
from reviewkit.render.packet import PacketError, markdown_html, write_packet
from reviewkit.render.packet.sections import shown_sections

PAYLOAD = '<script>alert(1)</script><img src=x onerror=alert(2)>"><svg onload=alert(3)>'
LINK_PAYLOAD = "[click](javascript:alert(4)) and [off](https://example.invalid/x)"


def shown(model: dict) -> dict[str, str | None]:
    """The sections the packet shows, by id, with each heading (the brief's is the title)."""
    return {s.id: s.title if s.listed else None for s in shown_sections(model)}


pytestmark = pytest.mark.usefixtures("weasyprint_warnings_fail")


@pytest.fixture(scope="module")
def packet(tmp_path_factory):
    root = tmp_path_factory.mktemp("packet")
    review = write_review(root / "review", complete_review())
    result = write_packet(review, root / "out")
    return result, root


def pdf_text(path):
    pdf = pypdfium2.PdfDocument(str(path))
    return [pdf[i].get_textpage().get_text_range() for i in range(len(pdf))], pdf


def test_files_written(packet):
    _, root = packet
    out = root / "out"
    assert {p.name for p in out.iterdir()} == {"packet.html", "packet.pdf", "packet.json",
                                               "assets"}  # fmt: skip
    assets = {p.name for p in (out / "assets").iterdir()}
    assert {"packet.css", "screen.css", "print.css", "packet.js", "vega-bundle.js"} <= assets
    model = json.loads((out / "packet.json").read_text())
    for name in model["charts"]:
        assert (out / "assets" / "charts" / f"{name}.vl.json").exists()
        assert (out / "assets" / "charts" / f"{name}.svg").read_text().startswith("<svg")
    assert not list(root.glob(".out.*")), "temporary folders left behind"


def test_html_is_strict_and_complete(packet):
    result, _ = packet
    text = result.html.read_text()
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    tree = parser.parse(text)
    ids = {el.get("id") for el in tree.iter() if el.get("id")}
    model = json.loads(result.json.read_text())
    sections = shown(model)
    assert set(sections) <= ids
    for heading in filter(None, sections.values()):
        assert f">{heading}</h2>" in text.replace("&amp;", "&")
    # the contents list every section but the brief (before them), in the page's order
    toc = [a.get("href") for a in tree.iter("a") if a.get("class") == "toc-link"]
    assert toc == [f"#{s}" for s, heading in sections.items() if heading]
    scripts = [el for el in tree.iter("script")]
    assert [s.get("src") for s in scripts if s.get("src")] == ["assets/vega-bundle.js",
                                                               "assets/packet.js"]  # fmt: skip
    # one static SVG fallback and one JSON spec per chart drawn; a chart with nothing to draw
    # is one line saying what is missing instead (issue 29, item 7)
    drawn = [name for name in model["charts"] if name not in model["no_data"]]
    assert len([s for s in scripts if s.get("type") == "application/json"]) == len(drawn)
    for name, why in model["no_data"].items():
        assert f'id="chart-{name}"' in text and why["title"] in text.replace("&amp;", "&")


BRIEF_ITEMS = (
    "The claim",
    "Primary metric",
    "The senior question: bottleneck and proof",
    "Red flags",
    "Disproof criteria, evaluated",
    "Owner, risks and rollback",
)


def test_the_decision_brief_comes_first_and_links_into_the_evidence(packet):
    result, _ = packet
    text = result.html.read_text()
    tree = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(text)
    main = tree.find(".//main")
    first = next(el for el in main if el.tag == "section")
    assert first.get("id") == "brief"  # before the contents and every evidence section
    assert text.index('id="brief"') < text.index('id="contents"') < text.index('id="claim"')
    headings = [" ".join(h.itertext()) for h in first.iter("h3")]
    assert headings == list(BRIEF_ITEMS)
    ids = {el.get("id") for el in tree.iter() if el.get("id")}
    links = [a.get("href") for a in first.iter("a")]
    for target in ("#claim", "#comparison", "#bottlenecks", "#red-flags", "#disproof",
                   "#risks", "#rollback"):  # fmt: skip
        assert target in links and target[1:] in ids, target
    # the chart that carries the claim, as an image (the interactive one is in its section)
    # (the primary metric names a workload: its own slice, not every dtype pooled by layer type)
    assert first.find(".//figure[@id='chart-forest_claim-brief']/img") is not None
    model = json.loads(result.json.read_text())
    brief = model["brief"]
    assert [f["id"] for f in brief["red_flags"]] == [f["id"] for f in model["red_flags"]]
    assert all(f["clears_with"] for f in brief["red_flags"])


def test_the_brief_fills_the_first_pages_of_the_pdf(packet):
    result, _ = packet
    pages, _pdf = pdf_text(result.pdf)
    contents = next(i for i, p in enumerate(pages) if "Contents" in p)
    assert 1 <= contents <= 2  # the brief takes one or two pages, then the contents
    brief = "\n".join(pages[:contents])
    for item in BRIEF_ITEMS:
        assert item in brief, item


def test_a_passing_gate_with_red_flags_says_why_they_do_not_block(tmp_path):
    """A decision marked go beside a passing gate and raised red flags: each flag says why it
    does not block and what clears it, and the brief says the decision accepts them."""
    review = complete_review()
    review["decision"] = {"status": "go", "date": "2026-12-04"}
    del review["evidence"]["long_window"]  # a major red flag (long-window stability) is raised
    path = write_review(tmp_path / "review", review)
    result = write_packet(path, tmp_path / "out", pdf=False)
    brief = json.loads(result.json.read_text())["brief"]
    assert brief["gate"]["verdict"] == "pass"
    assert brief["red_flags"], "the test needs a raised red flag"
    assert "red flag(s) raised: none of them is a blocking item" in brief["gate"]["note"]
    for f in brief["red_flags"]:
        assert not f["blocks"] and f["why"].startswith("does not block")
    page = result.html.read_text()
    assert "a decision to go accepts them" in page
    # each flag says what was found, not only what clears it (seen in the demo's brief: a
    # quality flag told to "run reviewkit quality" beside a quality result it had failed)
    tree = html5lib.parse(page, namespaceHTMLElements=False)
    cards = tree.findall(".//section[@id='brief']//p[@class='brief-flag']")
    assert len(cards) == len(brief["red_flags"])
    for card, flag in zip(cards, brief["red_flags"], strict=True):
        shown = " ".join(" ".join(card.itertext()).split())
        assert " ".join(flag["summary"].split())[:60] in shown, (shown, flag["summary"])


def test_no_url_leaves_the_machine(packet):
    result, _ = packet
    tree = html5lib.parse(result.html.read_text(), namespaceHTMLElements=False)
    urls = [v for el in tree.iter() for k, v in el.attrib.items()
            if k in ("src", "href", "{http://www.w3.org/1999/xlink}href", "action")]  # fmt: skip
    assert urls
    for url in urls:
        assert not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", url) or url.startswith("data:"), url
        assert not url.startswith("//"), url
    assert "https://" not in result.html.read_text().replace(
        "http://www.w3.org/2000/svg", ""
    ).replace("http://www.w3.org/1999/xlink", "")


def test_pdf_pages_headings_footer_and_attachments(packet):
    result, _ = packet
    pages, pdf = pdf_text(result.pdf)
    text = "\n".join(pages)
    for heading in filter(None, shown(json.loads(result.json.read_text())).values()):
        assert heading in text, heading
    assert f"page 1 of {len(pages)}" in pages[0]
    assert f"page {len(pages)} of {len(pages)}" in pages[-1]
    assert "Toy decoder in bf16" in pages[1]  # the running header from page 2 on
    names = sorted(pdf.get_attachment(i).get_name() for i in range(pdf.count_attachments()))
    assert names == ["baseline-run.json", "candidate-run.json", "review.toml"]
    meta = pdf.get_metadata_dict()
    assert meta["Title"] == "Toy decoder in bf16" and meta["Author"] == "Ada"
    assert "decision proposed" in meta["Subject"]


def test_pdf_charts_are_vector_text(packet):
    result, _ = packet
    pages, _ = pdf_text(result.pdf)
    text = "\n".join(pages)
    # Axis titles of the roofline and the forest plot are selectable text in the PDF.
    assert "Arithmetic intensity" in text
    assert "log scale; below 1 is faster" in text


def test_every_chart_spec_validates(packet):
    result, _ = packet
    model = json.loads(result.json.read_text())
    # every chart the shown sections always place (optional ones only when the review has them)
    assert {c for s in shown_sections(model) for c in s.charts} <= set(model["charts"])
    for spec in model["charts"].values():
        charts.validate(spec)


def test_rerendering_is_byte_identical(tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    review = write_review(tmp_path / "review", complete_review())
    a = write_packet(review, tmp_path / "a", pdf=False)
    b = write_packet(review, tmp_path / "b", pdf=False)
    assert a.html.read_bytes() == b.html.read_bytes()
    assert a.json.read_bytes() == b.json.read_bytes()
    assert a.pdf is None and not (tmp_path / "a" / "packet.pdf").exists()
    assert json.loads(a.json.read_text())["generated"] is None
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764633600")
    c = write_packet(review, tmp_path / "c", pdf=False)
    assert json.loads(c.json.read_text())["generated"] == "2025-12-02 00:00 UTC"


def test_a_pinned_build_date_renders_the_pdf_with_it_as_its_creation_date(tmp_path, monkeypatch):
    """SOURCE_DATE_EPOCH used to write "2025-12-02 00:00 UTC" into dcterms.created, a date
    WeasyPrint refuses (exit 1): the meta carries W3C-DTF, the page the readable form."""
    import pypdfium2

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764633600")  # 2025-12-02T00:00:00Z
    review = write_review(tmp_path / "review", complete_review())
    result = write_packet(review, tmp_path / "out")
    assert '<meta name="dcterms.created" content="2025-12-02T00:00:00Z">' in result.html.read_text()
    assert "2025-12-02 00:00 UTC" in result.html.read_text()  # the kicker on the page
    created = pypdfium2.PdfDocument(result.pdf).get_metadata_dict()["CreationDate"]
    assert created.startswith("D:20251202000000")


def test_injection_payloads_are_inert(tmp_path):
    review = complete_review()
    review["title"] = "Title " + PAYLOAD
    review["summary"] = "Summary " + PAYLOAD + "\n\n" + LINK_PAYLOAD
    review["owner"]["name"] = "Owner " + PAYLOAD
    review["reviewers"] = ["Reviewer " + PAYLOAD]
    review["risks"][0]["description"] = "Risk " + PAYLOAD
    review["risks"][0]["mitigation"] = "Mitigation " + PAYLOAD
    review["rollback"]["boundary"] = "Boundary " + PAYLOAD
    review["disproof"][0]["statement"] = "Disproof " + PAYLOAD
    review["sla"]["targets"][0]["note"] = "Note " + PAYLOAD
    review["sla"]["load"] = "Load " + PAYLOAD
    review["answers"]["senior-question"]["answer"] = "Answer " + PAYLOAD
    review["decision"]["note"] = "Decision " + PAYLOAD
    result = write_packet(write_review(tmp_path / "review", review), tmp_path / "out")
    html = result.html.read_text()
    parse_inert(html)
    assert "example.invalid" not in html  # the off-machine link lost its href
    pages, _ = pdf_text(result.pdf)
    text = "\n".join(pages)
    assert "Risk <script>alert(1)</script>" in text  # shown as text, not run
    assert "Boundary <script>alert(1)</script>" in text


def test_several_candidates_get_the_trade_view(tmp_path):
    from runfactory import make_run

    review = complete_review()
    review["runs"]["candidates"] = ["runs/cand", "runs/cand2"]
    folder = tmp_path / "review"
    path = write_review(folder, review)
    make_run(folder / "runs" / "cand2", dtype="bf16", speedup=1.5, seed=2)
    result = write_packet(path, tmp_path / "out", pdf=False)
    model = json.loads(result.json.read_text())
    assert "trade_view" in model["charts"]
    charts.validate(model["charts"]["trade_view"])
    svg = (tmp_path / "out" / "assets" / "charts" / "trade_view.svg").read_text()
    assert "not available" in svg  # no run measured energy: said, not drawn as zero
    assert [d["candidate"] for d in model["knob_diffs"]] == ["candidate 1", "candidate 2"]


def test_a_multi_rank_candidate_gets_the_communication_section(tmp_path):
    from runfactory import distributed_doc

    from reviewkit.bundle.run import write_run

    folder = tmp_path / "review"
    path = write_review(folder, complete_review())
    write_run(folder / "runs" / "cand", distributed_doc(t1_s=0.060, t2_s=0.040))
    result = write_packet(path, tmp_path / "out", pdf=False)
    model = json.loads(result.json.read_text())
    (c,) = model["communication"]
    assert c["world_size"] == 2 and c["link_gb_per_s"] == 4.0
    assert c["scaling"][0]["efficiency"] == 0.75  # 60 ms / 40 ms over tp 2, by hand
    for name in ("collective_times", "rank_skew"):
        charts.validate(model["charts"][name])
    page = result.html.read_text()
    assert '<section id="communication">' in page and 'href="#communication"' in page
    assert "1.50\u00d7 the unsharded layer, efficiency 75.0%" in page


def test_a_one_process_review_has_no_communication_section(packet):
    result, _ = packet
    model = json.loads(result.json.read_text())
    assert model["communication"] == [] and "collective_times" not in model["charts"]
    assert 'id="communication"' not in result.html.read_text()


def test_markdown_sanitiser():
    html = markdown_html("**bold** <b onclick=x>raw</b> [a](javascript:x) [b](./runs/x.json)\n\n"
                         "<script>alert(1)</script>")  # fmt: skip
    assert "<strong>bold</strong>" in html
    assert "onclick" not in html and "<script" not in html and "javascript:" not in html
    assert 'href="./runs/x.json"' in html


def test_failed_render_keeps_the_previous_packet(tmp_path, monkeypatch):
    """A failure that is not the PDF's own (a template, a chart): nothing is swapped in. A PDF
    that cannot be produced is tests/render/test_pdf_problems.py's."""
    review = write_review(tmp_path / "review", complete_review())
    out = tmp_path / "out"
    write_packet(review, out, pdf=False)
    before = (out / "packet.html").read_bytes()

    def broken(*args, **kwargs):
        raise PacketError("a template failed: simulated")

    monkeypatch.setattr("reviewkit.render.packet.write.write_pdf", broken)
    with pytest.raises(PacketError):
        write_packet(review, out)
    assert (out / "packet.html").read_bytes() == before
    assert not (out / "packet.pdf").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "review"]


def test_the_vega_bundle_is_written_while_the_worker_prints(tmp_path):
    """A cold cache builds the Vega bundle (~1.4 s): it is this process's work while the
    worker prints the PDF, not a wait before the packet model is built."""
    from reviewkit.render.packet.html import VEGA_BUNDLE
    from reviewkit.render.printing import PdfWorker

    seen = {}

    class Spy(PdfWorker):
        def render(self, html_text, base, attachments, meanwhile=None):
            seen["bundle before"] = (base / "assets" / VEGA_BUNDLE).exists()
            pdf = super().render(html_text, base, attachments, meanwhile)
            seen["bundle after"] = (base / "assets" / VEGA_BUNDLE).exists()
            return pdf

    review = write_review(tmp_path / "review", complete_review())
    worker = Spy()
    try:
        result = write_packet(review, tmp_path / "out", pdf_worker=worker)
    finally:
        worker.close()
    assert seen == {"bundle before": False, "bundle after": True}
    bundle = (result.out_dir / "assets" / VEGA_BUNDLE).read_text(encoding="utf-8")
    assert bundle == charts.javascript_bundle() and "vegaEmbed" in bundle
    assert result.pdf.read_bytes().startswith(b"%PDF-")


def test_cli_packet_refuses_the_review_folder_and_reports_json(tmp_path):
    review = write_review(tmp_path / "review", complete_review())
    cmd = [sys.executable, "-m", "reviewkit", "packet", str(review)]
    refused = subprocess.run([*cmd, "--out", str(tmp_path / "review")], capture_output=True,
                             text=True)  # fmt: skip
    assert refused.returncode == 2 and "review's own folder" in refused.stderr
    ok = subprocess.run([*cmd, "--out", str(tmp_path / "p"), "--no-pdf", "--json"],
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["pdf"] is None and doc["html"].endswith("packet.html")


def _badges_and_next_cells(box):
    """(badge box, the left edge of the next cell in its row) for every badge in a table row
    of a WeasyPrint box tree (the last cell of a row has no next one and is skipped)."""
    if getattr(box, "element_tag", "") == "tr":
        cells = [c for c in box.children if getattr(c, "element_tag", "") == "td"]
        for cell, after in itertools.pairwise(cells):
            for badge in _badges(cell):
                yield badge, after.position_x
        return
    for child in getattr(box, "children", []) or []:
        yield from _badges_and_next_cells(child)


def _badges(box):
    element = getattr(box, "element", None)
    if element is not None and "badge" in (element.get("class") or "").split():
        yield box
        return
    for child in getattr(box, "children", []) or []:
        yield from _badges(child)


def test_verdict_badges_stay_inside_their_cells_in_print(tmp_path):
    """The sample review's per-workload table in the PDF layout: an "inconclusive" or
    "equivalent" badge used to run over the MFU column (its cell was narrower than the
    unbreakable badge)."""
    import weasyprint

    from reviewkit.render.packet.html import render_html
    from reviewkit.render.packet.model import build_model
    from reviewkit.review.gate import run_check

    sample = Path(__file__).parents[2] / "samples" / "review-bf16-transformer" / "review.toml"
    result = write_packet(sample, tmp_path / "out", pdf=False)
    model = build_model(run_check(sample))
    # the label the defect was seen with (since shortened to "equivalent"/"inconclusive"): the
    # longest a cell may have to hold
    model["workloads"][0]["rows"][0]["verdict"] = "no significant difference"
    svgs = {n: (result.out_dir / "assets" / "charts" / f"{n}.svg").read_text()
            for n in model["charts"]}  # fmt: skip
    html = render_html(model, svgs, "print", "assets/", None)
    document = weasyprint.HTML(string=html, base_url=str(result.out_dir) + "/").render()
    pairs = [p for page in document.pages for p in _badges_and_next_cells(page._page_box)]
    assert len(pairs) > 20  # the workload, bottleneck and finding tables' badges
    for badge, next_left in pairs:
        right = badge.position_x + badge.margin_width()
        assert right <= next_left + 0.5, ("".join(badge.element.itertext()), right, next_left)


def _boxes(box):
    yield box
    for child in getattr(box, "children", []) or []:
        yield from _boxes(child)


def test_contents_numbers_stay_inside_the_page_margin_in_print(tmp_path):
    """The contents' numbers "10." to "18." hung 9 pt into the left margin (the list's
    indent held one digit); every marker now starts inside the page's content box."""
    import weasyprint

    from reviewkit.render.packet.html import render_html
    from reviewkit.render.packet.model import build_model
    from reviewkit.review.gate import run_check

    sample = Path(__file__).parents[2] / "samples" / "review-bf16-transformer" / "review.toml"
    result = write_packet(sample, tmp_path / "out", pdf=False)
    model = build_model(run_check(sample))
    svgs = {n: (result.out_dir / "assets" / "charts" / f"{n}.svg").read_text()
            for n in model["charts"]}  # fmt: skip
    html = render_html(model, svgs, "print", "assets/", None)
    document = weasyprint.HTML(string=html, base_url=str(result.out_dir) + "/").render()
    markers = []
    for page in document.pages:
        boxes = list(_boxes(page._page_box))
        if any(b.element is not None and b.element.get("class") == "toc" for b in boxes
               if getattr(b, "element", None) is not None):  # fmt: skip
            markers += [
                (page._page_box.margin_left, b) for b in boxes
                if getattr(b, "element_tag", "") == "li::marker" and hasattr(b, "text")
            ]  # fmt: skip
    assert len(markers) >= 10 and any(m.text.startswith("1") and len(m.text.strip()) == 3
                                      for _, m in markers)  # fmt: skip
    for margin_left, marker in markers:
        assert marker.position_x >= margin_left, (marker.text, marker.position_x, margin_left)


def _brief_text(html_path) -> str:
    tree = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(
        html_path.read_text()
    )
    brief = next(el for el in tree.iter("section") if el.get("id") == "brief")
    return " ".join(" ".join(brief.itertext()).split())


def test_an_unsigned_decision_says_so_on_page_one(packet):
    # complete_review's decision has a status and a date, and nobody signed it
    result, _ = packet
    assert "Signed off unsigned" in _brief_text(result.html)


def test_the_authors_note_and_sign_off_are_on_page_one(tmp_path):
    review = complete_review()
    review["decision"] = {
        "status": "go", "date": "2026-12-03", "signed_off_by": "A. Reviewer",
        "note": "Roll out to <canary> first; <b>watch</b> the norms.",
    }  # fmt: skip
    path = write_review(tmp_path / "review", review)
    result = write_packet(path, tmp_path / "out", pdf=False)
    text = _brief_text(result.html)
    assert "Signed off A. Reviewer" in text and "unsigned" not in text
    assert "The author's decision: Roll out to <canary> first; <b>watch</b> the norms." in text
    assert "<b>watch</b>" not in result.html.read_text()  # the note is text, escaped


def test_a_full_disk_is_one_line_and_the_previous_packet_stays(tmp_path, monkeypatch):
    import errno

    from reviewkit.common.errors import OutputError
    from reviewkit.render.packet import write as write_mod

    path = write_review(tmp_path / "review", complete_review())
    out = tmp_path / "out"
    out.mkdir()
    (out / "packet.html").write_text("the previous packet")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(out.parent / ".out.x"))

    monkeypatch.setattr(write_mod, "render_into", full)
    with pytest.raises(OutputError) as info:
        write_packet(path, out, pdf=False)
    message = str(info.value)
    assert "\n" not in message and "No space left on device" in message
    assert message.startswith(f"--out {out}: could not write the packet")
    assert (out / "packet.html").read_text() == "the previous packet"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
