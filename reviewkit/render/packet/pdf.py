"""The packet as PDF through WeasyPrint: file:/data: URLs only, warnings fail, attachments."""

from __future__ import annotations

import logging
from pathlib import Path

from reviewkit.render.packet.labels import PacketError, run_file, run_label
from reviewkit.review.gate import Report


def write_pdf(html_text: str, base: Path, report: Report, target: Path) -> None:
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
        document = weasyprint.HTML(string=html_text, base_url=str(base) + "/", url_fetcher=fetcher)
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
        document.write_pdf(
            target,
            attachments=attachments,
            pdf_identifier=b"reviewkit-packet",
            uncompressed_pdf=False,
        )
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
