"""What every command shares: the error console, --debug, progress bars, JSON output, evidence."""

from __future__ import annotations

import contextlib
import functools
import json
import shlex
import sys
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from reviewkit.common.errors import ReviewkitError

stderr = Console(stderr=True)


cli_state = {"debug": False}


@contextlib.contextmanager
def progress_bar(first: str = "starting"):
    """A transient progress bar on stderr; yields the (label, done, total) callback stages take."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task(first, total=None)
        yield lambda label, done, total: bar.update(
            task, description=label[:60], completed=done, total=total
        )


def user_errors(command):
    """One actionable line and a non-zero exit for a ReviewkitError; --debug re-raises."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except ReviewkitError as exc:
            if cli_state["debug"]:
                raise
            stderr.print(
                f"[red]reviewkit: error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True
            )
            raise typer.Exit(exc.exit_code) from None

    return wrapper


# Warnings a terminal shows one per line before folding the rest into a count: WeasyPrint can
# warn once per font or property, and the full list is in --json.
SHOWN_PDF_WARNINGS = 5


def print_pdf_warnings(warnings: tuple[str, ...] | list[str], whose: str = "") -> None:
    """WeasyPrint's warnings for a PDF that was kept, one line each on stderr."""
    if not warnings:
        return
    prefix = f"{whose}: " if whose else ""
    stderr.print(
        f"[yellow]reviewkit: warning:[/] {escape(prefix)}the PDF printed with "
        f"{len(warnings)} warning(s) and is kept (it opens, every page parses, its bookmarks "
        "match the HTML's headings):",
        highlight=False,
        soft_wrap=True,
    )
    for message in warnings[:SHOWN_PDF_WARNINGS]:
        stderr.print(f"  {escape(message)}", highlight=False, soft_wrap=True)
    if len(warnings) > SHOWN_PDF_WARNINGS:
        stderr.print(
            f"  and {len(warnings) - SHOWN_PDF_WARNINGS} more (--json lists them all)",
            highlight=False,
        )


def parse_dtypes(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.split(",") if d.strip())


def emit_json(document: dict) -> None:
    sys.stdout.write(json.dumps(document, indent=1, allow_nan=False) + "\n")


def save_evidence(doc: dict, out: Path, as_json: bool) -> bool:
    """Record the command line, write the evidence file atomically; True when JSON was printed."""
    from reviewkit.bundle.run import write_json_atomic

    doc["command"] = shlex.join(["reviewkit", *sys.argv[1:]]) if sys.argv[1:] else None
    write_json_atomic(out, doc)
    if as_json:
        emit_json(doc)
    return as_json


def default_out(profile: str, device: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path("runs") / f"{stamp}-{profile}-{device.replace(':', '')}"
