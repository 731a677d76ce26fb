"""Terminal tables of a trace diff: totals, device shares, layer types and ops ranked by change."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from reviewkit.cli.tables import DataTable
from reviewkit.common.format import MISSING, elided

OPS_SHOWN = 15  # the ops the terminal lists; --json and --out hold them all


# A kernel's C++ signature can run to thousands of characters; the JSON keeps it whole.
NAME_MAX_CHARS = 90


def _ms(seconds: float | None, signed: bool = False) -> str:
    if seconds is None:
        return MISSING
    return f"{seconds * 1e3:+.3f} ms" if signed else f"{seconds * 1e3:.3f} ms"


def _pct(share: float | None, signed: bool = False) -> str:
    if share is None:
        return MISSING
    return f"{100 * share:+.1f}%" if signed else f"{100 * share:.1f}%"


def _count(n: int | None) -> str:
    return MISSING if n is None else str(n)


def _rows_table(title: str, rows: list[dict], key_label: str, with_type: bool) -> DataTable:
    t = DataTable(title=title, title_justify="left")
    for col in (key_label, *(["layer type"] if with_type else []), "base", "candidate",
                "change", "of change", "count", "status"):  # fmt: skip
        left = col in (key_label, "layer type", "status")
        t.add_column(col, justify="left" if left else "right", overflow="fold")
    for r in rows:
        count = f"{_count(r['base_count'])} -> {_count(r['cand_count'])}"
        # a trace's names are untrusted text: "[...]" in a kernel or shape is not rich markup
        cells = [escape(elided(r["key"], NAME_MAX_CHARS))]
        if with_type:
            cells.append(r["layer_type"] or "unmapped")
        cells += [
            _ms(r["base_time_s"]),
            _ms(r["cand_time_s"]),
            _ms(r["delta_s"], signed=True),
            _pct(r["share_of_change"]),
            count,
            r["status"],
        ]
        t.add_row(*cells)
    return t


def print_trace_diff(doc: dict, console: Console) -> None:
    """The diff document as `reviewkit trace diff` shows it."""
    console.print(
        f"base {doc['base']['path']} -> candidate {doc['cand']['path']}: "
        f"{doc['time_basis']} time ({doc['basis_reason']})",
        highlight=False,
        markup=False,
    )
    console.print(
        f"total {_ms(doc['base_time_s'])} -> {_ms(doc['cand_time_s'])}: "
        f"{_ms(doc['delta_s'], signed=True)}",
        highlight=False,
        markup=False,
    )
    shares = DataTable(title="Device shares of the trace window", title_justify="left")
    for col in ("share", "base", "candidate", "change (points)"):
        shares.add_column(col, justify="left" if col == "share" else "right")
    for s in doc["device_shares"]:
        shares.add_row(
            s["name"].replace("_share", "").replace("_", " "),
            _pct(s["base"]),
            _pct(s["cand"]),
            _pct(s["delta"], signed=True),
        )
    console.print(shares)
    console.print(_rows_table("By layer type", doc["layer_types"], "layer type", False))
    ops = doc["ops"]
    shown = min(OPS_SHOWN, len(ops))
    title = f"By {doc['op_list'][:-1]} name, ranked by change (top {shown} of {len(ops)})"
    console.print(_rows_table(title, ops[:OPS_SHOWN], "name", True))
    shapes = doc.get("shapes") or []
    if shapes:
        shown = min(OPS_SHOWN, len(shapes))
        console.print(_rows_table(f"By op and shape, ranked by change (top {shown} of "
                                  f"{len(shapes)})", shapes[:OPS_SHOWN], "op, dims, type", True))
    for note in doc["notes"]:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
