"""The shape-portability heatmap: sequence length x batch per workload family, coloured by the
candidate / baseline ratio (or MFU for one run), as many panels as one printed page holds."""

from __future__ import annotations

import json
import math

from reviewkit.render.charts.axes import LABEL_EXPR
from reviewkit.render.charts.base import (
    LABEL_PX,
    MAX_CHART_HEIGHT_PX,
    MAX_CHART_WIDTH_PX,
    MILLI,
    PENDING,
    TITLE_PX,
    alt,
    chart_title,
    duration_text,
    finish_chart,
    is_finite,
    is_positive,
    memoised_chart,
    named_data,
    no_data_chart,
    plural,
    unique_in_order,
)
from reviewkit.render.charts.comparison import MISSING_CELL

HEAT_STEP_PX = 76  # a heatmap cell fits two 10 px text lines ("MFU 41.2%", "p99 736 µs")


HEAT_ROW_PX = 40  # the two lines 13 px apart and their margins


HEAT_SPACING = 14  # between panels


HEAT_AXIS_PX = 50  # a panel's y axis: the title "batch" and labels up to "128"


HEAT_PANEL_CHROME_PX = 60  # a panel's header (~18 px) and x axis with its title (~35 px)


# The chart's title, its subtitle lines (two, and 15 px a note) and the legend below.
HEAT_CHROME_PX = 120


HEAT_FASTER, HEAT_EVEN, HEAT_SLOWER = "#009E73", "#F7F7F7", "#D55E00"  # verdict colours


HEAT_MIN_SPREAD = 1.25  # colour domain at least 0.8x..1.25x, so noise is not painted vivid


def _fitting_panels(cells: list[dict], notes: list[str]) -> tuple[list[dict], int]:
    """The cells of the panels that fit one printed page, and the panels a row. Panels with
    several shapes first (one shape shows nothing of portability), then by name; what is left
    out is said in `notes` (every ratio is in the per-workload table)."""
    by_panel: dict[str, list[dict]] = {}
    for c in sorted(cells, key=lambda c: c["panel"]):
        by_panel.setdefault(c["panel"], []).append(c)
    order = sorted(by_panel, key=lambda k: (len(by_panel[k]) == 1, k))
    wide = max(len({c["seq"] for c in v}) for v in by_panel.values())
    tall = max(len({c["batch"] for c in v}) for v in by_panel.values())
    panel_w = HEAT_STEP_PX * wide + HEAT_AXIS_PX + HEAT_SPACING
    columns = max(1, (MAX_CHART_WIDTH_PX - 20) // panel_w)
    room = MAX_CHART_HEIGHT_PX - HEAT_CHROME_PX - 15 * (len(notes) + 1)
    rows = max(1, room // (HEAT_ROW_PX * tall + HEAT_PANEL_CHROME_PX + HEAT_SPACING))
    keep = order[: columns * rows]
    if len(keep) < len(order):
        single = sum(1 for k in order[len(keep) :] if len(by_panel[k]) == 1)
        several = len(order) - len(keep) - single
        if several:
            notes.append(
                f"{plural(several, 'more panel')} of several shapes not drawn (a page holds "
                f"{len(keep)}): every ratio is in the per-workload table"
            )
        if single:
            notes.append(
                f"{plural(single, 'panel')} of a single shape not drawn (one shape shows "
                "nothing of portability): its ratio is in the per-workload table"
            )
    return [c for k in keep for c in by_panel[k]], min(columns, len(keep))


@memoised_chart
def shape_heatmap(rows: list[dict], notes: list[str] | None = None) -> dict:
    """Sequence length x batch per workload family: does a win on one shape hold on the others?

    rows: {"panel", "workload", "seq", "batch", "ratio" (candidate/baseline median, or None),
    "verdict", "mfu", "p99_ms"}. With no ratio anywhere (a single run) the colour is MFU.
    """
    title = "Shape portability: sequence length x batch"
    notes = list(notes or [])
    cells, dropped = [], 0
    for r in rows:
        seq, batch = r.get("seq"), r.get("batch")
        if not (is_finite(seq) and is_finite(batch)):
            dropped += 1
            continue
        ratio, mfu, p99 = r.get("ratio"), r.get("mfu"), r.get("p99_ms")
        cells.append(
            {
                "panel": str(r["panel"]),
                "workload": str(r["workload"]),
                "seq": int(seq),
                "batch": int(batch),
                "ratio": float(ratio) if is_positive(ratio) else None,
                "verdict": str(r.get("verdict") or ""),
                "mfu": float(mfu) if is_finite(mfu) else None,
                "p99_ms": float(p99) if is_finite(p99) else None,
                "mfu_label": f"MFU {100 * mfu:.1f}%" if is_finite(mfu) else "MFU —",
                "p99_label": f"p99 {duration_text(p99 / MILLI)}" if is_finite(p99) else "p99 —",
            }
        )
    if dropped:
        notes.append(f"{plural(dropped, 'workload')} without a sequence length and batch")
    if not cells:
        return no_data_chart(title, notes)
    cells, columns = _fitting_panels(cells, notes)
    by_ratio = any(c["ratio"] is not None for c in cells)
    if by_ratio:
        spread = max([HEAT_MIN_SPREAD] + [max(c["ratio"], 1 / c["ratio"]) for c in cells
                                          if c["ratio"] is not None])  # fmt: skip
        colour = alt.Color(
            "ratio:Q",
            title=["median ratio", "cand / base", "(green faster)"],
            scale=alt.Scale(
                type="log",
                domain=[1 / spread, 1.0, spread],
                range=[HEAT_FASTER, HEAT_EVEN, HEAT_SLOWER],
                nice=False,
            ),
            # the ends and even, to two digits, labelled as the axes are ("0.00016", "6.4k"):
            # the ends are computed (85.265690453 was shown, and "6.4e+3")
            legend=alt.Legend(
                values=[float(f"{v:.2g}") for v in (1 / spread, 1, spread)],
                labelExpr=LABEL_EXPR,
                orient="bottom",
                direction="horizontal",
            ),
        )
        missing = "datum.ratio === null"
        lead = "colour: candidate / baseline median time (below 1, green, is faster)"
    else:
        top = max([1e-3] + [c["mfu"] for c in cells if c["mfu"] is not None])
        colour = alt.Color(
            "mfu:Q",
            title="MFU",
            scale=alt.Scale(domain=[0, top], scheme="blues"),
            legend=alt.Legend(format="%", orient="bottom", direction="horizontal"),
        )
        missing = "datum.mfu === null"
        lead = "colour: MFU (one run, nothing to compare against)"
    # White text on the deepest colours, dark text elsewhere: legible on every cell in print.
    for c in cells:
        if by_ratio:
            deep = c["ratio"] is not None and abs(math.log(c["ratio"])) > 0.6 * math.log(spread)
        else:
            deep = c["mfu"] is not None and c["mfu"] > 0.6 * top
        c["ink"] = "#FFFFFF" if deep else "#1D2330"
    unmatched = sum(1 for c in cells if (c["ratio"] if by_ratio else c["mfu"]) is None)
    if unmatched:
        notes.append(f"{plural(unmatched, 'grey cell')}: measured, but no "
                     f"{'ratio' if by_ratio else 'MFU'}")  # fmt: skip
    panels = unique_in_order(c["panel"] for c in cells)
    tooltip = [
        alt.Tooltip("workload:N"),
        alt.Tooltip("seq:O", title="sequence length"),
        alt.Tooltip("batch:O"),
        alt.Tooltip("ratio:Q", title="median ratio", format=",.3~r"),
        alt.Tooltip("verdict:N"),
        alt.Tooltip("mfu:Q", title="MFU", format=".1%"),
        alt.Tooltip("p99_ms:Q", title="p99 (ms)", format=",.4~r"),
    ]
    ink = alt.Fill("ink:N", scale=None)  # its own channel: the rect owns the colour scale

    def axes_of(name: str) -> tuple[list[dict], list[int], list[int]]:
        mine = [c for c in cells if c["panel"] == name]
        return mine, sorted({c["seq"] for c in mine}), sorted({c["batch"] for c in mine})

    # A heading as wide as the grid's column (the widest panel's): a one-shape panel's own
    # width cut "gemm · bert-base-ffn-up" to "gemm · bert-base-…".
    widest = max(len({c["seq"] for c in cells if c["panel"] == name}) for name in panels)

    def heading(name: str, seqs: list[int]) -> alt.TitleParams:
        limit = HEAT_STEP_PX * widest + HEAT_AXIS_PX - 10
        return alt.TitleParams(name, fontSize=TITLE_PX, fontWeight="normal", limit=limit)

    # One workload family a panel, its own sequence lengths and batches only: one axis for all
    # drew every panel four columns wide, mostly empty. Concatenated panels, not a facet: a
    # facet with independent axes is what Vega-Lite cannot lay out with step widths.
    mine, seqs, batches = axes_of(panels[0])
    x = alt.X("seq:O", title="sequence length", sort=seqs, axis=alt.Axis(labelAngle=0))
    y = alt.Y("batch:O", title="batch", sort=batches)
    base = alt.Chart(named_data(mine))
    rect = base.mark_rect(stroke="#FFFFFF", strokeWidth=1).encode(
        x=x, y=y, color=alt.condition(missing, alt.value(MISSING_CELL), colour), tooltip=tooltip
    )
    lines = [
        base.mark_text(fontSize=LABEL_PX, dy=dy).encode(x=x, y=y, fill=ink, text=field)
        for field, dy in (("mfu_label:N", -7), ("p99_label:N", 7))
    ]
    first = alt.layer(rect, *lines).properties(
        width=alt.Step(HEAT_STEP_PX), height=alt.Step(HEAT_ROW_PX), title=heading(panels[0], seqs)
    )
    chart = (
        alt.concat(first, columns=columns, spacing=HEAT_SPACING)
        .resolve_scale(x="independent", y="independent", color="shared")
        .properties(title=chart_title(title, [lead, "text: candidate MFU and p99", *notes]))
    )
    spec = finish_chart(chart)
    # The other panels as copies of the first's dict with their own rows, axes and heading:
    # through altair, which deep-copies every layer on every combination, eleven panels took
    # 0.6 s to build.
    if "data" in spec:  # altair lifts a lone panel's rows to the top: each panel its own
        spec["concat"][0]["data"] = spec.pop("data")
    template = json.dumps(spec["concat"][0])
    old_name = base.data.name
    for name in panels[1:]:
        mine, seqs, batches = axes_of(name)
        rows = named_data(mine).name
        spec["datasets"][rows] = PENDING[rows]
        sorts = {"seq": seqs, "batch": batches}
        panel = _retarget(json.loads(template), old_name, rows, sorts)
        panel["title"] = heading(name, seqs).to_dict()
        spec["concat"].append(panel)
    return spec


def _retarget(node: object, old_name: str, new_name: str, sorts: dict[str, list]) -> object:
    """A panel's dict with its data name and its axes' orders replaced, in place."""
    if isinstance(node, dict):
        if node.get("name") == old_name and set(node) == {"name"}:
            node["name"] = new_name
        if node.get("field") in sorts and "sort" in node:
            node["sort"] = sorts[node["field"]]
        for value in node.values():
            _retarget(value, old_name, new_name, sorts)
    elif isinstance(node, list):
        for value in node:
            _retarget(value, old_name, new_name, sorts)
    return node
