"""Terminal tables of a production slice: what it covers, its workloads, what it leaves out."""

from __future__ import annotations

from rich.console import Console

from reviewkit.cli.tables import DataTable
from reviewkit.common.format import elided

WORKLOADS_SHOWN = 25  # the terminal lists these; the file holds them all
EXAMPLE_MAX_CHARS = 60


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def print_slice(doc: dict, console: Console) -> None:
    """The slice document as `reviewkit trace slice` shows it."""
    c = doc["coverage"]
    console.print(
        f"production slice {doc['hash']} ({doc['time_basis']} time): {len(doc['workloads'])} "
        f"workloads cover {c['share_of_reproducible']:.1%} of the {_ms(c['reproducible_time_s'])} "
        f"the suite's kernels can reproduce, {c['share_of_production']:.1%} of all "
        f"{_ms(c['production_time_s'])} of production time",
        highlight=False, markup=False,
    )  # fmt: skip
    table = DataTable(title="Workloads, by production time", title_justify="left")
    for col in ("workload", "op", "count", "time", "of production"):
        table.add_column(col, justify="left" if col in ("workload", "op") else "right",
                         overflow="fold")  # fmt: skip
    for w in doc["workloads"][:WORKLOADS_SHOWN]:
        p = w["production"]
        table.add_row(w["id"], w["params"]["op"], str(p["count"]), _ms(p["time_s"]),
                      f"{p['share_of_production']:.1%}")  # fmt: skip
    console.print(table)
    if len(doc["workloads"]) > WORKLOADS_SHOWN:
        console.print(f"... and {len(doc['workloads']) - WORKLOADS_SHOWN} more (in the file)",
                      highlight=False, markup=False)  # fmt: skip
    left = DataTable(title="Not in the slice, by reason", title_justify="left")
    for col in ("reason", "time", "of production", "the most of it"):
        left.add_column(col, justify="right" if col in ("time", "of production") else "left",
                        overflow="fold")  # fmt: skip
    for r in doc["not_reproduced"]:
        examples = "; ".join(elided(e["name"], EXAMPLE_MAX_CHARS) for e in r["examples"][:3])
        left.add_row(r["reason"], _ms(r["time_s"]), f"{r['share_of_production']:.1%}", examples)
    console.print(left)
