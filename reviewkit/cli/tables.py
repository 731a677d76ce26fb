"""Terminal table primitives shared by every view: a markup-safe table, time and rate texts."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from reviewkit.common.format import MISSING

SLOWEST_SHOWN = 8  # the slowest workloads a run's table lists


class DataTable(Table):
    """A table of values read from files: a str cell or title is shown as it is, never read
    as rich markup (a workload id "[red]x[/]" is an id, and "[/]" would be a rendering error);
    a cell styled on purpose is a Text."""

    def __init__(self, *args, title: str | None = None, **kwargs) -> None:
        super().__init__(*args, title=None if title is None else Text(title), **kwargs)

    def add_row(self, *cells, **kwargs) -> None:
        super().add_row(*(Text(c) if isinstance(c, str) else c for c in cells), **kwargs)


def time_text(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def rate_text(flops_per_s: float | None) -> str:
    return MISSING if flops_per_s is None else f"{flops_per_s / 1e9:.3g}"
