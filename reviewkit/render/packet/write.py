"""Writing a packet: render into a temporary folder beside the target, then swap it in; a PDF
that cannot be produced leaves the HTML and JSON in place and says why."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reviewkit.common.errors import InputError
from reviewkit.common.files import output_errors
from reviewkit.render.packet.html import SCRIPTS, STYLESHEETS, TEMPLATES, VEGA_BUNDLE, render_html
from reviewkit.render.packet.labels import PacketError, Progress
from reviewkit.render.packet.model import build_model
from reviewkit.render.packet.pdf import write_pdf
from reviewkit.render.printing import PdfError, PdfWorker
from reviewkit.review.gate import Report, run_check


@dataclass(frozen=True)
class PacketResult:
    out_dir: Path
    html: Path
    json: Path
    pdf: Path | None
    timings_s: dict
    # What WeasyPrint warned about while printing a PDF that was kept (it was usable).
    pdf_warnings: tuple[str, ...] = ()
    # Why no PDF was written when one was asked for (then write_packet raises PdfNotProduced).
    pdf_error: str | None = None

    def to_json(self) -> dict:
        return {
            "out": str(self.out_dir),
            "html": str(self.html),
            "json": str(self.json),
            "pdf": str(self.pdf) if self.pdf else None,
            "pdf_warnings": list(self.pdf_warnings),
            "pdf_error": self.pdf_error,
            "timings_s": self.timings_s,
        }


class PdfNotProduced(PacketError):
    """The HTML and JSON were written and swapped in, but no usable PDF came out. `result` is
    what was written (its pdf None, its pdf_error the reason)."""

    def __init__(self, result: PacketResult) -> None:
        super().__init__(
            f"--out {result.out_dir}: packet.html and packet.json are written, but no PDF: "
            f"{result.pdf_error}. Read the HTML (a browser prints it too), or fix the cause and "
            "run again (--no-pdf skips the PDF)"
        )
        self.result = result


@dataclass(frozen=True)
class Rendered:
    """What render_into made: the packet model, each stage's seconds, and how the PDF went."""

    model: dict
    timings: dict
    pdf_warnings: tuple[str, ...] = ()
    pdf_error: str | None = None  # set when a PDF was asked for and none was written


def write_shared_assets(assets: Path) -> None:
    """Stylesheets, the page script and the Vega bundle: one copy per packet or per site."""
    copy_page_assets(assets)
    write_vega_bundle(assets)


def copy_page_assets(assets: Path) -> None:
    """The stylesheets and the page script."""
    assets.mkdir(parents=True, exist_ok=True)
    for name in STYLESHEETS + SCRIPTS:
        shutil.copyfile(TEMPLATES / name, assets / name)


def write_vega_bundle(assets: Path) -> None:
    """The Vega bundle the HTML's charts run on (built once per vl-convert version, ~1.4 s,
    then cached on disk)."""
    from reviewkit.render import charts

    assets.mkdir(parents=True, exist_ok=True)
    (assets / VEGA_BUNDLE).write_text(charts.javascript_bundle(), encoding="utf-8")


def render_into(
    report: Report,
    folder: Path,
    pdf: bool = True,
    asset_base: str = "assets/",
    nav: dict | None = None,
    progress: Progress | None = None,
    pdf_worker: PdfWorker | None = None,
    while_printing: Callable[[], None] | None = None,
) -> Rendered:
    """Render a checked review's packet into an existing folder.

    Shared assets are not written here (see write_shared_assets): a site keeps one copy.
    `while_printing` is work of the caller's that runs while the PDF worker prints (or after
    the HTML, when there is no PDF). A PDF that cannot be produced is not an error here: the
    HTML and JSON are already written, and the result says why there is no packet.pdf.
    """
    from reviewkit.render import charts

    say = progress or (lambda _msg: None)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    say("building the packet model")
    model = build_model(report)
    timings["model_s"] = time.perf_counter() - t
    t = time.perf_counter()
    say("converting charts to SVG")
    if pdf and pdf_worker is not None:
        pdf_worker.prepare_charts(list(model["charts"].values()))
    svgs = {name: charts.to_svg(spec) for name, spec in model["charts"].items()}
    timings["charts_s"] = time.perf_counter() - t
    t = time.perf_counter()
    say("rendering HTML")
    screen = render_html(model, svgs, "screen", asset_base, nav)
    printed = render_html(model, svgs, "print", asset_base, nav) if pdf else None
    timings["html_s"] = time.perf_counter() - t
    chart_dir = folder / "assets" / "charts"
    chart_dir.mkdir(parents=True, exist_ok=True)
    for name, spec in model["charts"].items():
        (chart_dir / f"{name}.vl.json").write_text(
            json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
        (chart_dir / f"{name}.svg").write_text(svgs[name], encoding="utf-8")
    (folder / "packet.html").write_text(screen, encoding="utf-8")
    (folder / "packet.json").write_text(
        json.dumps(model, indent=1, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8"
    )
    pending = [while_printing] if while_printing is not None else []

    def meanwhile() -> None:
        while pending:
            pending.pop()()

    warnings: tuple[str, ...] = ()
    error = None
    if printed is not None:
        t = time.perf_counter()
        say("rendering PDF")
        try:
            warnings = write_pdf(printed, folder, report, folder / "packet.pdf", pdf_worker,
                                 meanwhile)  # fmt: skip
        except PdfError as exc:
            error = str(exc)
        timings["pdf_s"] = time.perf_counter() - t
    meanwhile()  # the caller's work is done whether or not the PDF came out
    return Rendered(model, timings, warnings, error)


def write_packet(
    review_path: Path | str,
    out_dir: Path | str,
    rubric: Path | str | None = None,
    allow_outside: bool = False,
    pdf: bool = True,
    progress: Progress | None = None,
    pdf_worker: PdfWorker | None = None,
) -> PacketResult:
    """Gather everything in memory, write into a temporary folder beside DIR, then swap it in.

    A PDF that cannot be produced still swaps the new HTML and JSON in (the previous packet,
    its PDF included, is replaced whole: a PDF of an earlier review beside this one's HTML
    would contradict it), then raises PdfNotProduced. A failed write swaps nothing in."""
    say = progress or (lambda _msg: None)
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    say("checking the review")
    report = run_check(review_path, rubric, allow_outside=allow_outside)
    review_dir = report.review.folder
    if out_dir.resolve() == review_dir or review_dir.is_relative_to(out_dir.resolve()):
        raise InputError(f"--out {out_dir}: would replace the review's own folder; pick another")
    check_s = time.perf_counter() - t0
    with output_errors(out_dir, "packet"):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        try:
            copy_page_assets(tmp / "assets")
            # A cold cache builds the Vega bundle (~1.4 s): while the worker prints, not before.
            rendered = render_into(
                report,
                tmp,
                pdf=pdf,
                progress=say,
                pdf_worker=pdf_worker,
                while_printing=lambda: write_vega_bundle(tmp / "assets"),
            )
            os.chmod(tmp, 0o755)
            swap_into_place(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    timings = {"check_s": check_s, **rendered.timings, "total_s": time.perf_counter() - t0}
    result = PacketResult(
        out_dir,
        out_dir / "packet.html",
        out_dir / "packet.json",
        out_dir / "packet.pdf" if pdf and rendered.pdf_error is None else None,
        {k: round(v, 3) for k, v in timings.items()},
        rendered.pdf_warnings,
        rendered.pdf_error,
    )
    if rendered.pdf_error is not None:
        raise PdfNotProduced(result)
    return result


def swap_into_place(tmp: Path, out_dir: Path) -> None:
    """Replace DIR by the new folder; the old one is removed only once the new one is in place."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: exists and is not a folder; pick another path")
    if not out_dir.exists():
        os.replace(tmp, out_dir)
        return
    old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
    os.replace(out_dir, old)
    try:
        os.replace(tmp, out_dir)
    except BaseException:
        os.replace(old, out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)
