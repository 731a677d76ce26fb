"""A PDF's layout faults read from its own text positions: text too small to read, and text
that lies outside the page."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

# The smallest text a printed packet may carry (issue 29, item 7): 7 pt is about the smallest a
# reader makes out on A4 at arm's length, and the size WeasyPrint prints the tables' small text at.
MIN_TEXT_PT = 7.0
# How far a glyph's box may pass the page's edge before it counts as outside: glyph boxes are
# font metrics, and a letter set flush against the edge measures a few hundredths over it.
EDGE_TOLERANCE_PT = 0.5
# Sizes that differ by less than this are one size (the same font size through two matrices).
SAME_SIZE_PT = 0.05
# Glyphs drawn one text object each (vl-convert's charts) join into one run when they share a
# size and a baseline and the gap between them is under this many ems (a word space is ~0.3).
RUN_GAP_EM = 0.6
# pdfium's stand-in for a hyphen inserted where a word was broken across lines.
HYPHEN_MARK = "\x02"


@dataclass(frozen=True)
class TextRun:
    """Text drawn at one size along one line, with its box in page space (points, origin at the
    page's bottom left)."""

    page: int  # 1-based, as a reader counts
    text: str
    size_pt: float
    box: tuple[float, float, float, float]  # left, bottom, right, top


@dataclass(frozen=True)
class Layout:
    pages: int
    small: list[TextRun]  # text under the minimum size
    outside: list[TextRun]  # text whose box lies (partly) outside the page's visible box


def check_layout(
    pdf: bytes | Path, min_pt: float = MIN_TEXT_PT, tolerance_pt: float = EDGE_TOLERANCE_PT
) -> Layout:
    """Every text run of `pdf` under `min_pt` points, and every one whose box passes the page's
    crop box (what a viewer shows) or media box by more than `tolerance_pt`.

    Text inside form XObjects counts (the packet's charts are laid over as vector PDFs): each
    object's matrix is composed with those of the forms that hold it, so its size and box are
    what the page shows."""
    doc = pdfium.PdfDocument(pdf.read_bytes() if isinstance(pdf, Path) else pdf)
    small: list[TextRun] = []
    outside: list[TextRun] = []
    try:
        for index in range(len(doc)):
            page = doc[index]
            visible = _intersect(page.get_cropbox(), page.get_mediabox())
            for run in page_runs(page, index + 1):
                if run.size_pt < min_pt - SAME_SIZE_PT:
                    small.append(run)
                if not _inside(run.box, visible, tolerance_pt):
                    outside.append(run)
        return Layout(len(doc), small, outside)
    finally:
        doc.close()


def page_runs(page: pdfium.PdfPage, number: int) -> list[TextRun]:
    """The page's visible text as runs: objects in content order, each joined to the one before
    when both lie in one container, at one size and orientation, on one baseline, close by;
    blank ones left out."""
    textpage = page.get_textpage()
    runs: list[TextRun] = []
    last: tuple | None = None  # (container, orientation, baseline) of the run before
    for container, obj, matrix, outer in _text_objects(page, page.raw, pdfium.PdfMatrix(),
                                                       textpage):  # fmt: skip
        text = obj.extract()
        if not text.strip():
            continue
        scale = math.hypot(matrix.c, matrix.d)
        size = obj.get_font_size() * scale
        # pdfium gives a nested object's box in its container's space: the forms' matrices
        # carry it to the page.
        box = outer.on_rect(*obj.get_bounds())
        up = (matrix.c / scale, matrix.d / scale) if scale else (0.0, 1.0)
        orientation = (round(up[0], 2), round(up[1], 2))
        baseline = matrix.e * up[0] + matrix.f * up[1]
        here = (container, orientation, baseline)
        if runs and last is not None and _continues(runs[-1], size, box, here, last):
            prev = runs[-1]
            runs[-1] = TextRun(number, prev.text + text, prev.size_pt, _union(prev.box, box))
        else:
            runs.append(TextRun(number, text, size, box))
        last = here
    return [TextRun(r.page, _readable(r.text), r.size_pt, r.box) for r in runs]


def _readable(text: str) -> str:
    """White space as single spaces; pdfium's mark for a hyphen WeasyPrint broke a word at
    (U+0002) as the hyphen the page shows."""
    return " ".join(text.replace(HYPHEN_MARK, "-").split())


def _text_objects(page, parent, outer: pdfium.PdfMatrix, textpage, form=None):
    """(container, text object, its matrix in page space, its container's matrix in page
    space) for every text object under `parent` (the page, or a form object), forms descended
    into with their matrices composed."""
    if form is None:
        count, get = pdfium_c.FPDFPage_CountObjects, pdfium_c.FPDFPage_GetObject
    else:
        count, get = pdfium_c.FPDFFormObj_CountObjects, pdfium_c.FPDFFormObj_GetObject
    for i in range(count(parent)):
        obj = pdfium.PdfObject(get(parent, i), page=page, container=form, textpage=textpage)
        # PDF matrices act on row vectors: an object's own matrix first, then its form's.
        matrix = obj.get_matrix().multiply(outer)
        if obj.type == pdfium_c.FPDF_PAGEOBJ_FORM:
            yield from _text_objects(page, obj.raw, matrix, textpage, obj)
        elif obj.type == pdfium_c.FPDF_PAGEOBJ_TEXT:
            yield form, obj, matrix, outer


def _continues(prev: TextRun, size: float, box: tuple, here: tuple, last: tuple) -> bool:
    """Whether a glyph of `size` at `box` carries on the run `prev`."""
    if here[0] is not last[0] or here[1] != last[1] or abs(prev.size_pt - size) > SAME_SIZE_PT:
        return False
    if abs(here[2] - last[2]) > SAME_SIZE_PT:
        return False
    gap_x = max(0.0, box[0] - prev.box[2], prev.box[0] - box[2])
    gap_y = max(0.0, box[1] - prev.box[3], prev.box[1] - box[3])
    return max(gap_x, gap_y) <= RUN_GAP_EM * size


def _union(a: tuple, b: tuple) -> tuple[float, float, float, float]:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def _intersect(a: tuple, b: tuple) -> tuple[float, float, float, float]:
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def _inside(box: tuple, page: tuple, tolerance: float) -> bool:
    left, bottom, right, top = box
    return (
        left >= page[0] - tolerance
        and bottom >= page[1] - tolerance
        and right <= page[2] + tolerance
        and top <= page[3] + tolerance
    )


def summary(runs: list[TextRun], limit: int = 40) -> str:
    """One line per run (page, size, text), for an assertion message a person reads."""
    lines = [f"p{r.page} {r.size_pt:.1f}pt {r.text[:60]!r} at {tuple(round(v) for v in r.box)}"
             for r in runs[:limit]]  # fmt: skip
    if len(runs) > limit:
        lines.append(f"... and {len(runs) - limit} more")
    return "\n".join(lines)
