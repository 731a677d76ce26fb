"""The packet as PDF: the review file and run bundles attached, rendered by render.printing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from reviewkit.render.packet.labels import PacketError, run_file, run_label
from reviewkit.render.printing import PdfError, PdfWorker, render_pdf

if TYPE_CHECKING:
    from reviewkit.review.gate import Report


def write_pdf(
    html_text: str,
    base: Path,
    report: Report,
    target: Path,
    worker: PdfWorker | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> None:
    """The printed packet at `target`, with the review file and run bundles attached; in
    `worker` when one was started for it, while this process runs `meanwhile`."""
    r = report.review
    attachments = [(str(r.path), "review.toml", "the review file")]
    attachments += [
        (str(run_file(p)), f"{label.replace(' ', '-')}-run.json",
         f"{label} run bundle ({r.relative(p)})")
        for label, p in [("baseline", r.baseline)]
        + [(run_label(i, len(r.candidates)), p) for i, p in enumerate(r.candidates)]
    ]  # fmt: skip
    try:
        if worker is not None:
            pdf = worker.render(html_text, base, attachments, meanwhile)
        else:
            if meanwhile is not None:
                meanwhile()
            pdf = render_pdf(html_text, base, attachments)
    except PdfError as exc:
        raise PacketError(str(exc)) from exc
    target.write_bytes(pdf)
