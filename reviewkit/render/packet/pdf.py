"""The packet as PDF: the review file and run bundles attached, rendered by render.printing, and
kept only when it is usable (it opens, every page can be drawn, its bookmarks are the HTML's
headings)."""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from reviewkit.render.packet.labels import run_file, run_label
from reviewkit.render.printing import PdfError, PdfWorker, render_pdf

if TYPE_CHECKING:
    from reviewkit.review.gate import Report

# The headings every PDF must have a bookmark for: print.css bookmarks h2 (a section) and h3
# (a part of one, a brief item). h1 is the packet's title (print.css turns its bookmark off),
# and h4-h6 are bookmarked by WeasyPrint's defaults, which a template may change without
# losing a section: those may be bookmarked or not.
REQUIRED = ("h2", "h3")
HEADING = re.compile(r"<(h[1-6])\b[^>]*>(.*?)</\1\s*>", re.S | re.I)
TAG = re.compile(r"<[^>]*>")
# How qpdf names a PDF read from memory in its messages: noise in a line meant for a person.
IN_MEMORY = re.compile(r"stream <_io\.BytesIO object at 0x[0-9a-f]+>(:\s*)?")
# Content operators that name a resource of the page (or form) they run in: a font to set,
# an XObject (image or form) to draw. A name missing from the resources draws nothing.
NAMED_RESOURCES = {"Tf": "/Font", "Do": "/XObject"}
# Forms inside forms (a chart laid over as a form holds its own, about 5 deep): a chain
# deeper than this is a malformed file, not a chart, and would exhaust the recursion.
MAX_FORM_DEPTH = 64


def write_pdf(
    html_text: str,
    base: Path,
    report: Report,
    target: Path,
    worker: PdfWorker | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> tuple[str, ...]:
    """The printed packet at `target`, with the review file and run bundles attached; in
    `worker` when one was started for it, while this process runs `meanwhile`. Returns
    WeasyPrint's warnings; raises PdfError, `target` unwritten, when no usable PDF came out."""
    r = report.review
    attachments = [(str(r.path), "review.toml", "the review file")]
    attachments += [
        (str(run_file(p)), f"{label.replace(' ', '-')}-run.json",
         f"{label} run bundle ({r.relative(p)})")
        for label, p in [("baseline", r.baseline)]
        + [(run_label(i, len(r.candidates)), p) for i, p in enumerate(r.candidates)]
    ]  # fmt: skip
    if worker is not None:

        def also_import() -> None:  # the check's PDF library, loaded while the worker prints
            import pikepdf  # noqa: F401

            if meanwhile is not None:
                meanwhile()

        printed = worker.render(html_text, base, attachments, also_import)
    else:
        if meanwhile is not None:
            meanwhile()
        printed = render_pdf(html_text, base, attachments)
    check_usable(printed.pdf, html_text)
    target.write_bytes(printed.pdf)
    return printed.warnings


def check_usable(pdf: bytes, html_text: str) -> None:
    """Raise PdfError unless `pdf` opens, every page's content parses and names only resources
    the page has, and its outline lists the section headings of `html_text` (the print HTML).

    Judged with pikepdf (qpdf), which the overlay already needs, not by drawing the pages: a
    renderer (pdfium, which the tests use) would be a second PDF engine for every install to
    ship, for about the same time (0.1-0.4 s on the samples). A page whose content parses and
    whose fonts and forms are all present is one a viewer can draw; what this does not see
    (a glyph drawn wrong inside a font) a renderer would not report either."""
    import pikepdf

    try:
        doc = pikepdf.open(io.BytesIO(pdf))
    except Exception as exc:  # qpdf's errors for a damaged file are not all pikepdf.PdfError
        raise PdfError(f"the PDF does not open ({_first_line(exc)})") from exc
    with doc:
        if len(doc.pages) == 0:
            raise PdfError("the PDF has no pages")
        seen: set[tuple[int, int]] = set()
        for number, page in enumerate(doc.pages, 1):
            try:
                problem = _content_problem(page, page.resources, seen, 0)
            except Exception as exc:  # a stream qpdf cannot decode or parse
                problem = _first_line(exc)
            if problem:
                raise PdfError(f"page {number} of the PDF cannot be drawn: {problem}")
        try:
            titles = _outline_titles(doc)
        except Exception as exc:
            raise PdfError(f"the PDF's bookmarks cannot be read ({_first_line(exc)})") from exc
    mismatch = heading_mismatch(html_headings(html_text), titles)
    if mismatch:
        raise PdfError(f"the PDF's bookmarks do not match the HTML's headings: {mismatch}")


def _content_problem(content, resources, seen: set, depth: int) -> str | None:
    """What keeps `content` (a page or a form) from being drawn, or None: content that does not
    parse (raised), a resource it names and does not have, or the same of a form it draws
    (each form once: `seen`)."""
    import pikepdf

    if depth > MAX_FORM_DEPTH:
        return f"forms nested more than {MAX_FORM_DEPTH} deep"
    # Names read once per content stream and kind, when first used: a chart sets its font
    # once per glyph, and most of its thousands of small forms name nothing.
    tables: dict[str, tuple] = {}
    drawn: set[str] = set()
    for operands, operator in pikepdf.parse_content_stream(content, " ".join(NAMED_RESOURCES)):
        kind = NAMED_RESOURCES[str(operator)]
        if kind not in tables:
            table = resources.get(kind) if resources is not None else None
            tables[kind] = (table, set(table.keys()) if table is not None else set())
        table, names = tables[kind]
        name = str(operands[0]) if operands else ""
        if name not in names:
            return f"its content names a {kind[1:].lower()} {name or '(none)'} it does not have"
        if kind != "/XObject" or name in drawn:
            continue
        drawn.add(name)
        xobject = table[name]
        if xobject.get("/Subtype") != "/Form" or xobject.objgen in seen:
            continue
        seen.add(xobject.objgen)
        # A form without resources of its own uses those of the content drawing it.
        problem = _content_problem(xobject, xobject.get("/Resources", resources), seen, depth + 1)
        if problem:
            return problem
    return None


def _outline_titles(doc) -> list[str]:
    """The outline's titles, depth first (the order a reader's sidebar lists them)."""
    titles: list[str] = []

    def walk(items) -> None:
        for item in items:
            titles.append(item.title)
            walk(item.children)

    with doc.open_outline() as outline:
        walk(outline.root)
    return titles


def html_headings(html_text: str) -> list[tuple[str, str]]:
    """(tag, text) of the print HTML's headings, h1 to h6, in order. A pattern, not a parser:
    the packet's own templates write the headings (well formed, never nested), and reading
    the whole page with html.parser costs ~80 ms on a large packet."""
    return [
        (match.group(1).lower(), html.unescape(TAG.sub("", match.group(2))))
        for match in HEADING.finditer(html_text)
    ]


def heading_mismatch(headings: list[tuple[str, str]], titles: list[str]) -> str | None:
    """How the PDF's bookmark `titles` fail the HTML's `headings` (tag, text), or None when
    they match: the bookmarks are the headings in order, every REQUIRED one among them.
    Compared without case and with runs of white space as one space: a heading's badge is its
    own element, spaced by layout rather than by the source."""

    def norm(text: str) -> str:
        return " ".join(text.split()).casefold()

    position = 0
    for title in titles:
        while position < len(headings) and norm(headings[position][1]) != norm(title):
            tag, text = headings[position]
            if tag in REQUIRED:
                return (f"the HTML's {tag} {_clip(text)!r} has no bookmark "
                        f"(the PDF's next is {_clip(title)!r})")  # fmt: skip
            position += 1
        if position == len(headings):
            return f"the bookmark {_clip(title)!r} is not a heading of the HTML (or out of order)"
        position += 1
    for tag, text in headings[position:]:
        if tag in REQUIRED:
            return f"the HTML's {tag} {_clip(text)!r} has no bookmark (the PDF's outline ends)"
    return None


def _clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _first_line(exc: BaseException) -> str:
    """The exception's first line, without the in-memory stream qpdf names as the file."""
    lines = IN_MEMORY.sub("", str(exc)).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
