"""Shared pieces of the packet: its error, schema version, build date, run labels, milliseconds,
slices."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from reviewkit.common.errors import InputError, ReviewkitError
from reviewkit.common.numbers import finite_number

if TYPE_CHECKING:
    from reviewkit.bundle.records import Workload

PACKET_SCHEMA_VERSION = 1


# The PDF keeps the tables a meeting reads; the full per-workload data travels as the
# embedded run.json files (WeasyPrint takes ~8 s for a 2,000-row table).
PDF_MAX_WORKLOAD_ROWS = 120


LATENCY_CHART_WORKLOADS = 12


Progress = Callable[[str], None]


class PacketError(ReviewkitError):
    """The packet could not be rendered (a template, chart or PDF step failed)."""


def generated_stamp() -> str | None:
    """Wall-clock time only when SOURCE_DATE_EPOCH asks for it: same inputs, same bytes."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch:
        return None
    try:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(int(epoch)))
    except ValueError as exc:
        raise InputError(f"SOURCE_DATE_EPOCH={epoch!r}: expected an integer") from exc


def run_label(i: int, n: int) -> str:
    return "candidate" if n == 1 else f"candidate {i + 1}"


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def run_file(path: Path) -> Path:
    return path / "run.json" if path.is_dir() else path


def slice_name(w: Workload) -> str:
    from reviewkit.analysis.compare import slice_key

    return slice_key(w)


def number_or_none(x: object) -> float | int | None:
    """A finite number read from a file, else None (JSON from disk may hold NaN or a string)."""
    return x if finite_number(x) else None  # type: ignore[return-value]
