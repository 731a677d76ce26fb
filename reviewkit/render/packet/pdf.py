"""The packet as PDF through WeasyPrint: file:/data: URLs only, warnings fail, attachments."""

from __future__ import annotations

import io
import logging
import re
import urllib.parse
from pathlib import Path

from reviewkit.render.packet.labels import PacketError, run_file, run_label
from reviewkit.review.gate import Report

# The print HTML's charts: <img src="assets/charts/NAME.svg" ...> (macros.html.j2). Names are
# the packet's own chart ids, never input.
CHART_IMG = re.compile(r'<img src="assets/charts/([A-Za-z0-9_-]+)\.svg"')
SVG_ROOT = re.compile(r"<svg\b[^>]*>")
# CSS px to PDF points: WeasyPrint lays out at 96 px per inch, PDF counts 72 points per inch.
PT_PER_PX = 0.75


def write_pdf(html_text: str, base: Path, report: Report, target: Path) -> None:
    """The printed packet at `target`, with the review file and run bundles attached."""
    import weasyprint

    r = report.review
    attachments = [
        weasyprint.Attachment(
            filename=str(r.path), name="review.toml", description="the review file"
        )
    ]
    attachments += [
        weasyprint.Attachment(
            filename=str(run_file(p)),
            name=f"{label.replace(' ', '-')}-run.json",
            description=f"{label} run bundle ({r.relative(p)})",
        )
        for label, p in [("baseline", r.baseline)]
        + [(run_label(i, len(r.candidates)), p) for i, p in enumerate(r.candidates)]
    ]
    target.write_bytes(render_pdf(html_text, base, attachments))


def render_pdf(html_text: str, base: Path, attachments: list) -> bytes:
    """The PDF of `html_text` (relative URLs under `base`).

    WeasyPrint draws an SVG through Pango text by text, about half of the packet's PDF time.
    So each chart's <img> is laid out as a blank SVG of the same size, and vl-convert's vector
    PDF of the chart (text kept as text, cached) is laid over the box WeasyPrint kept for it.
    A chart whose SVG size cannot be read is drawn by WeasyPrint as before."""
    import weasyprint
    from weasyprint.urls import URLFetcher

    fetcher = URLFetcher(allowed_protocols={"file", "data"}, fail_on_errors=True)
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                records.append(record)

    handler = Collect()
    logger = logging.getLogger("weasyprint")
    logger.addHandler(handler)
    try:
        laid_out, svgs = _stand_ins(html_text, base)
        document = weasyprint.HTML(string=laid_out, base_url=str(base) + "/", url_fetcher=fetcher)
        rendered = document.render()
        places = chart_boxes(rendered)
        if sorted(name for _, name, _ in places) != sorted(_stand_in_names(laid_out)):
            # A box not found (a WeasyPrint whose boxes differ): draw the SVGs themselves.
            document = weasyprint.HTML(string=html_text, base_url=str(base) + "/",
                                       url_fetcher=fetcher)  # fmt: skip
            rendered, places = document.render(), []
        pdf = rendered.write_pdf(
            attachments=attachments, pdf_identifier=b"reviewkit-packet", uncompressed_pdf=False
        )
        if places:
            pdf = overlay_charts(pdf, places, svgs)
    except BaseException as exc:  # WeasyPrint's fatal fetch error is a BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise PacketError(f"PDF rendering failed: {type(exc).__name__}: {exc}") from exc
    finally:
        logger.removeHandler(handler)
    if records:
        raise PacketError(
            f"PDF rendering reported {len(records)} problem(s); first: {records[0].getMessage()}"
        )
    return pdf


def _stand_ins(html_text: str, base: Path) -> tuple[str, dict[str, str]]:
    """The HTML with every chart image it can size replaced by a blank SVG of the same width,
    height and viewBox (so the layout is the same), marked data-chart; and the charts' SVGs."""
    svgs: dict[str, str] = {}

    def replace(match: re.Match) -> str:
        name = match.group(1)
        try:
            svg = (base / "assets" / "charts" / f"{name}.svg").read_text(encoding="utf-8")
        except OSError:
            return match.group(0)  # WeasyPrint's fetch then reports it
        blank = blank_svg(svg)
        if blank is None:
            return match.group(0)
        svgs[name] = svg
        return f'<img data-chart="{name}" src="data:image/svg+xml,{urllib.parse.quote(blank)}"'

    return CHART_IMG.sub(replace, html_text), svgs


def _stand_in_names(html_text: str) -> list[str]:
    return re.findall(r'<img data-chart="([A-Za-z0-9_-]+)"', html_text)


def blank_svg(svg: str) -> str | None:
    """An empty SVG with `svg`'s width, height and viewBox, or None when it has no numeric
    width and height to copy."""
    root = SVG_ROOT.search(svg)
    if root is None:
        return None
    attrs = dict(re.findall(r'\b(width|height|viewBox)="([^"]*)"', root.group(0)))
    number = re.compile(r"[0-9]+(\.[0-9]+)?")
    if not all(number.fullmatch(attrs.get(k, "")) for k in ("width", "height")):
        return None
    view_box = f' viewBox="{attrs["viewBox"]}"' if "viewBox" in attrs else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{attrs["width"]}" '
            f'height="{attrs["height"]}"{view_box}></svg>')  # fmt: skip


def chart_boxes(document) -> list[tuple[int, str, tuple[float, float, float, float]]]:
    """(page index, chart name, (x, y, width, height) in CSS px from the page's top left) of
    every laid-out chart stand-in. Images are never split, so each is on one page."""
    places = []
    for index, page in enumerate(document.pages):
        for box in page._page_box.descendants():
            element = getattr(box, "element", None)
            name = element.get("data-chart") if element is not None else None
            if name and element.tag == "img":
                rect = (box.content_box_x(), box.content_box_y(), box.width, box.height)
                places.append((index, name, rect))
    return places


def overlay_charts(pdf: bytes, places: list, svgs: dict[str, str]) -> bytes:
    """`pdf` with each chart's vector PDF laid over its box (aspect ratio kept, centred)."""
    import pikepdf

    from reviewkit.render.charts import svg_to_pdf

    charts = {name: pikepdf.open(io.BytesIO(svg_to_pdf(svg))) for name, svg in svgs.items()}
    try:
        with pikepdf.open(io.BytesIO(pdf)) as doc:
            for index, name, (x, y, width, height) in places:
                page = doc.pages[index]
                top = float(page.mediabox[3])  # PDF's y runs up from the bottom of the page
                rect = pikepdf.Rectangle(x * PT_PER_PX, top - (y + height) * PT_PER_PX,
                                         (x + width) * PT_PER_PX, top - y * PT_PER_PX)  # fmt: skip
                page.add_overlay(charts[name].pages[0], rect)
            out = io.BytesIO()
            doc.save(out, deterministic_id=True)
            return out.getvalue()
    finally:
        for chart in charts.values():
            chart.close()
