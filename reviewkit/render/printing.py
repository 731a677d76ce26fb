"""The PDF engine: WeasyPrint with every chart laid over as a vector PDF, in this process or in
a worker process started early, so its imports and font set-up run beside the caller's work."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import queue
import re
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reviewkit.common.errors import ReviewkitError

# The print HTML's charts: <img src="assets/charts/NAME.svg" ...> (macros.html.j2). Names are
# the packet's own chart ids, never input.
CHART_IMG = re.compile(r'<img src="assets/charts/([A-Za-z0-9_-]+)\.svg"')
SVG_ROOT = re.compile(r"<svg\b[^>]*>")
# CSS px to PDF points: WeasyPrint lays out at 96 px per inch, PDF counts 72 points per inch.
PT_PER_PX = 0.75


class PdfError(ReviewkitError):
    """No usable PDF could be produced: WeasyPrint failed, or what it wrote is not usable
    (render.packet.pdf.check_usable)."""


@dataclass(frozen=True)
class Printed:
    """A PDF and the problems WeasyPrint logged while printing it (it logs rather than raises:
    an unknown CSS property, a font it subset the slow way), one line each, first seen first.
    Whether the PDF is still usable is for the caller to judge (render.packet.pdf)."""

    pdf: bytes
    warnings: tuple[str, ...] = ()


def render_pdf(html_text: str, base: Path, attachments: list[tuple[str, str, str]]) -> Printed:
    """The PDF of `html_text` (relative URLs under `base`), with `attachments` (file, name,
    description) embedded, and WeasyPrint's warnings.

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
        laid_out, svgs, stand_ins = _stand_ins(html_text, base)
        document = weasyprint.HTML(string=laid_out, base_url=str(base) + "/", url_fetcher=fetcher)
        rendered = document.render()
        places = chart_boxes(rendered)
        if sorted(name for _, name, _ in places) != sorted(stand_ins):
            # A box not found (a WeasyPrint whose boxes differ): draw the SVGs themselves.
            document = weasyprint.HTML(string=html_text, base_url=str(base) + "/",
                                       url_fetcher=fetcher)  # fmt: skip
            rendered, places = document.render(), []
        embedded = [
            weasyprint.Attachment(filename=file, name=name, description=description)
            for file, name, description in attachments
        ]
        pdf = rendered.write_pdf(
            attachments=embedded, pdf_identifier=b"reviewkit-packet", uncompressed_pdf=False
        )
        if places:
            pdf = overlay_charts(pdf, places, svgs)
    except BaseException as exc:  # WeasyPrint's fatal fetch error is a BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise PdfError(f"PDF rendering failed: {type(exc).__name__}: {exc}") from exc
    finally:
        logger.removeHandler(handler)
    # One line each, once each: WeasyPrint repeats a warning for every box it applies to.
    warnings = dict.fromkeys(" ".join(record.getMessage().split()) for record in records)
    return Printed(pdf, tuple(warnings))


def _stand_ins(html_text: str, base: Path) -> tuple[str, dict[str, str], list[str]]:
    """The HTML with every chart image it can size replaced by a blank SVG of the same width,
    height and viewBox (so the layout is the same), marked data-chart; the charts' SVGs; and
    the name of each image replaced (a chart the brief shows again is there twice)."""
    svgs: dict[str, str] = {}
    replaced: list[str] = []

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
        replaced.append(name)
        return f'<img data-chart="{name}" src="data:image/svg+xml,{urllib.parse.quote(blank)}"'

    return CHART_IMG.sub(replace, html_text), svgs, replaced


def chart_pdfs(html_text: str, base: Path) -> None:
    """Make (and cache) the vector PDF of every chart the printed HTML shows."""
    from reviewkit.render.charts.convert import svg_to_pdf

    for name in dict.fromkeys(CHART_IMG.findall(html_text)):
        svg_to_pdf((base / "assets" / "charts" / f"{name}.svg").read_text(encoding="utf-8"))


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

    from reviewkit.render.charts.convert import svg_to_pdf

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


class PdfWorker:
    """A process that imports WeasyPrint, pikepdf and the chart cache and lays out a small page
    while the caller checks the review and builds the packet (the machine has a second core),
    converts charts the caller hands it, then renders the one PDF it is sent. If it dies, the
    PDF is rendered in this process.

    Messages go through a writer thread: a chart message is megabytes of specs, more than a
    pipe holds, and the worker reads nothing until its warm-up is done; written from the
    caller's own thread they would stall it for that long."""

    def __init__(self) -> None:
        code = "from reviewkit.render.printing import serve; serve()"
        self._process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._outbox: queue.Queue[bytes | None] = queue.Queue()
        self._writer = threading.Thread(target=self._write, daemon=True)
        self._writer.start()

    def _write(self) -> None:
        stdin = self._process.stdin
        while (message := self._outbox.get()) is not None:
            try:
                stdin.write(message)
                stdin.flush()
            except OSError:  # the worker died: render() falls back to this process
                return
        with contextlib.suppress(OSError):
            stdin.close()

    def prepare_charts(self, specs: list[dict]) -> None:
        """Hand the worker the packet's chart specs before converting them here. It converts
        them from the last one back, each it finds uncached, while this process converts from
        the first one on: the disk cache is where the two meet (vl-convert runs one chart at a
        time per process, so a second process is what shares a cold packet's charts)."""
        self._outbox.put(pickle.dumps(("charts", specs), protocol=pickle.HIGHEST_PROTOCOL))

    def render(
        self,
        html_text: str,
        base: Path,
        attachments: list[tuple[str, str, str]],
        meanwhile: Callable[[], None] | None = None,
    ) -> Printed:
        """The PDF, printed by the worker while this process runs `meanwhile` (if given)."""
        request = ("render", html_text, str(base), attachments)
        self._outbox.put(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
        self._outbox.put(None)
        # The worker lays the page out before it needs the charts' PDFs: this process makes
        # them meanwhile (cached; the worker makes any it finds missing itself).
        with contextlib.suppress(Exception):
            chart_pdfs(html_text, base)
        if meanwhile is not None:
            meanwhile()
        try:
            # One pickle, read as soon as it is written: the worker leaves without tearing
            # down its imports, which took ~0.4 s of waiting for the end of its output.
            kind, *payload = pickle.load(self._process.stdout)
            self._process.wait()
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            return render_pdf(html_text, base, attachments)
        if kind == "error":
            raise PdfError(payload[0])
        pdf, warnings = payload
        return Printed(pdf, tuple(warnings))

    def close(self) -> None:
        """Stop the worker if it was never sent its page (the review failed its check)."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._outbox.put(None)


def serve() -> None:
    """The worker's side: warm up, then read requests from stdin: any number of chart lists,
    then one page to render, whose PDF is the one reply written to stdout."""
    import tempfile

    reply_to = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but the reply goes to the parent's pipe
    import weasyprint  # noqa: F401  (imported now, while the parent works)

    from reviewkit.render.charts import convert

    with tempfile.TemporaryDirectory() as scratch:
        render_pdf("<p>warm-up: fonts and Pango</p>", Path(scratch), [])
    while True:
        try:
            request = pickle.load(sys.stdin.buffer)
        except EOFError:  # the command ended (or failed) before it had a page to send
            return
        if request[0] == "charts":
            for spec in reversed(request[1]):
                with contextlib.suppress(Exception):  # the caller converts it and reports
                    convert.to_svg(spec)
            continue
        _, html_text, base, attachments = request
        try:
            printed = render_pdf(html_text, Path(base), attachments)
            reply = ("ok", printed.pdf, printed.warnings)
        except PdfError as exc:
            reply = ("error", str(exc))
        reply_to.write(pickle.dumps(reply))
        reply_to.flush()
        sys.stderr.flush()
        os._exit(0)  # the reply is all the caller waits for; tearing down WeasyPrint is not
