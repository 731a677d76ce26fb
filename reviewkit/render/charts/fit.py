"""The production fit chart: production layer types by shape band against the suite."""

from __future__ import annotations

import json
import re

from reviewkit.common.format import MISSING
from reviewkit.evidence.trace import fit as fitmatrix
from reviewkit.render.charts.axes import tick_label
from reviewkit.render.charts.base import (
    LABEL_LIMIT,
    LABEL_PX,
    MAX_WIDE_WIDTH_PX,
    alt,
    chart_title,
    finish_chart,
    fmt_readable,
    is_finite,
    label_px,
    memoised_chart,
    named_data,
    no_data_chart,
    plural,
)
from reviewkit.render.charts.comparison import SLA_MISS_COLOUR, SLA_MISS_STROKE_PX

FIT_TAIL_BANDS = fitmatrix.TAIL_BANDS  # drawn after the decades, in this order


FIT_UNMAPPED = fitmatrix.UNMAPPED  # its own row, last, whatever its share


FIT_ROW_PX = 30  # two LABEL_PX text lines 13 px apart ("12.3%", "80% cov.") and margins


# The matrix prints on its own landscape page (print.css `@page wide`), MAX_WIDE_WIDTH_PX wide
# at most: fourteen columns (ten decades and four tail bands) of 66 px, the layer-type labels
# (~90 px) and the padding make 14 x 66 + 90 + 29 = 1,043 px. A cell's widest line at 10 px,
# "100% cov." (~50 px), fits; "100% covered" (~72 px) did not.
FIT_MIN_COLUMN_PX = 66


# Rows that fit the landscape page under the title and up to seven subtitle lines (~230 px
# with the two-line column labels and the legend below): (590 - 230) / 30 = 12.
MAX_FIT_LAYERS = 12


MAX_FIT_TOOLTIP_WORKLOADS = 8  # a tooltip taller than the screen cannot be read


# Uncovered time is a gap in the evidence, as an SLA miss is a regression: the same vermillion.
UNCOVERED_COLOUR = SLA_MISS_COLOUR


UNCOVERED_STROKE_PX = SLA_MISS_STROKE_PX


# Covered and total time are sums of the same floats in different orders: a relative gap this
# small is rounding, not uncovered time.
FIT_ROUNDING = 1e-9


TIME_BASIS_WORDS = {
    "host": "host operator self time (the trace has no GPU events)",
    "device": "GPU kernel, memcpy and memset time",
    "mixed": "device time where a trace has GPU events, host operator time elsewhere",
}


FIT_BAND_WHY = {  # tooltip: why time in these columns is never covered
    fitmatrix.EMPTY_TENSOR: "operators on tensors with a zero dimension: no size to match",
    fitmatrix.SHAPE_NOT_RECORDED: "no Input Dims recorded (profile with record_shapes=True): "
    "counts towards layer-type coverage only",
    fitmatrix.OTHER_SHAPES: "shapes past the ones the summary lists: not matched against the suite",
    fitmatrix.NOT_MAPPED: "no layer-map rule names these operators: nothing to match them against",
}


_DECADES = re.compile(r"1e(\d+)-1e(\d+)")


def _band_text(band: str) -> str:
    """A decade band as counts are written: "1e2-1e3 elements" -> "100-1k elements"."""
    return _DECADES.sub(
        lambda m: f"{tick_label(10.0 ** int(m[1]))}-{tick_label(10.0 ** int(m[2]))}", band
    )


def _two_lines(label: str) -> list[str]:
    """A column label over two lines: the last word on the second, the rest on the first."""
    head, _, last = label.rpartition(" ")
    return [head, last]


def _share_text(x: float) -> str:
    return "<0.1%" if 0 < x < 5e-4 else f"{100 * x:.1f}%"


def _covered_pct(covered: float, share: float, uncovered: bool) -> str:
    """The covered part of a cell; never "100%" on an outlined cell, nor "0%" on a covered one."""
    if share <= 0:
        return MISSING
    pct = 100 * covered / share
    if not uncovered:
        return "100%"
    if 0 < pct < 1:
        return "<1%"
    return f"{min(pct, 99.0):.0f}%"


@memoised_chart
def fit_matrix(
    rows: list[dict], summary: dict | None = None, notes: list[str] | None = None
) -> dict:
    """Production layer types x shape bands: where production spends its time, and whether a
    suite workload of that layer type and size measures it.

    rows: fitmatrix.FitRow as JSON ({"layer_type", "band", "numel_low", "numel_high", "share",
    "covered_share", "workloads"}), optionally "note" (tooltip text: why, which names);
    summary: {"score", "min_coverage" (None: the rubric sets none), "layer_coverage",
    "time_basis", "shape_range_factor"}. Shares are of all production time on the time basis.
    """
    summary = summary or {}
    notes = list(notes or [])
    score, threshold = summary.get("score"), summary.get("min_coverage")
    title = "Production fit: share of production time the suite covers"
    if is_finite(score):
        title = f"Production fit: the suite covers {100 * score:.1f}% of production time"
        if is_finite(threshold):
            met = "met" if score >= threshold else "NOT met"
            title += f" (rubric: at least {fmt_readable(100 * threshold, 3)}%, {met})"
        else:
            title += " (the rubric sets no threshold)"
    cells, dropped = [], 0
    for r in rows:
        share, covered = r.get("share"), r.get("covered_share")
        if not (is_finite(share) and is_finite(covered)) or share < 0:
            dropped += 1  # a cell without a share would read as 0 % of production
            continue
        share, covered = float(share), max(0.0, min(float(covered), float(share)))
        uncovered = share - covered > FIT_ROUNDING * share
        band = str(r.get("band"))
        ws = [str(w) for w in r.get("workloads") or []]
        shown = ", ".join(ws[:MAX_FIT_TOOLTIP_WORKLOADS])
        if len(ws) > MAX_FIT_TOOLTIP_WORKLOADS:
            shown += f" and {len(ws) - MAX_FIT_TOOLTIP_WORKLOADS} more"
        low = r.get("numel_low")
        cells.append(
            {
                "layer_type": str(r.get("layer_type")),
                "band": band,
                "band_text": _band_text(band),
                "column": _band_text(band).removesuffix(" elements"),
                "order": float(low) if is_finite(low) else None,
                "share": share,
                "covered_share": covered,
                "uncovered": uncovered,
                "line1": _share_text(share),
                "line2": f"{_covered_pct(covered, share, uncovered)} cov.",
                "share_text": f"{_share_text(share)} of production time",
                "covered_text": f"{_share_text(covered)} of production time"
                + (f" ({_covered_pct(covered, share, uncovered)} of the cell)" if share else ""),
                "workloads_text": shown or "none",
                "why": " ".join(str(r.get("note") or FIT_BAND_WHY.get(band, "")).split()),
            }
        )
    if dropped:
        notes.append(f"{plural(dropped, 'row')} without a share not shown")
    if not cells:
        return no_data_chart(title, notes)
    layer_share: dict[str, float] = {}
    for c in cells:
        layer_share[c["layer_type"]] = layer_share.get(c["layer_type"], 0.0) + c["share"]
    layers = sorted(layer_share, key=lambda k: (k == FIT_UNMAPPED, -layer_share[k], k))
    if len(layers) > MAX_FIT_LAYERS:
        notes.append(f"the {MAX_FIT_LAYERS} largest of {len(layers)} layer types; every row is "
                     "in the table below and in packet.json")  # fmt: skip
        layers = layers[:MAX_FIT_LAYERS]
        cells = [c for c in cells if c["layer_type"] in set(layers)]
    decades = sorted({(c["order"], c["column"]) for c in cells if c["order"] is not None})
    tail = [b for b in FIT_TAIL_BANDS if any(c["column"] == b for c in cells)]
    known = {d[1] for d in decades} | set(tail)
    columns = [d[1] for d in decades] + tail + sorted({c["column"] for c in cells} - known)
    top = max([1e-3] + [c["share"] for c in cells])
    for c in cells:  # white text on the deepest blues, dark text elsewhere, as the shape heatmap
        c["ink"] = "#FFFFFF" if c["share"] > 0.6 * top else "#1D2330"
    lead = []
    if is_finite(summary.get("layer_coverage")):
        lead.append(f"layer-type coverage {100 * summary['layer_coverage']:.1f}% (production time "
                    "whose layer type the suite measures at any shape)")  # fmt: skip
    if is_finite(summary.get("shape_range_factor")):
        factor = summary["shape_range_factor"]
        lead.append(f"covered: a suite workload of the layer type within "
                    f"{fmt_readable(factor)}x the shape's first-input elements")  # fmt: skip
    basis = str(summary.get("time_basis") or "")
    if basis:
        lead.append(f"time basis: {TIME_BASIS_WORDS.get(basis, basis)}")
    lead.append("colour: share of production time; text: that share and the part of it a suite "
                "workload covers (cov.)")  # fmt: skip
    outlined = [c for c in cells if c["uncovered"]]
    if outlined:
        lead.append(f"{plural(len(outlined), 'cell')} outlined in vermillion: production time no "
                    "suite workload covers")  # fmt: skip
    room = MAX_WIDE_WIDTH_PX - 29 - label_px(layers)
    column_px = max(FIT_MIN_COLUMN_PX, room // max(1, len(columns)))
    # Two lines a column label, all of them: "shape not / recorded" fits the column, and a
    # first line left empty keeps "1-10" level with the others' second line. The padding lifts
    # the two lines clear of the plot (a top axis anchors its first line).
    lines = json.dumps({c: _two_lines(c) for c in columns}, ensure_ascii=False)
    x_axis = alt.Axis(orient="top", labelAngle=0, labelLimit=column_px - 4,
                      labelExpr=f"{lines}[datum.label]", labelPadding=LABEL_PX + 4)  # fmt: skip
    x = alt.X("column:N", title="Elements in the first input", sort=columns, axis=x_axis)
    y = alt.Y("layer_type:N", title=None, sort=layers, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    tooltip = [
        alt.Tooltip("layer_type:N", title="layer type"),
        alt.Tooltip("band_text:N", title="shape band"),
        alt.Tooltip("share_text:N", title="time"),
        alt.Tooltip("covered_text:N", title="covered"),
        alt.Tooltip("workloads_text:N", title="covering suite workloads"),
        alt.Tooltip("why:N", title="note"),
    ]
    base = alt.Chart(named_data(cells))
    rect = base.mark_rect(stroke="#FFFFFF", strokeWidth=1).encode(
        x=x,
        y=y,
        color=alt.Color("share:Q", title=["share of", "production time"],
                        scale=alt.Scale(domain=[0, top], scheme="blues"),
                        legend=alt.Legend(format="%", orient="bottom", direction="horizontal")),
        tooltip=tooltip,
    )  # fmt: skip
    ink = alt.Fill("ink:N", scale=None)  # its own channel: the rect owns the colour scale
    # The text and the outline carry the tooltip too: the topmost mark under the pointer is the
    # one asked, and text covers the middle of every cell.
    layers_drawn = [rect] + [
        base.mark_text(fontSize=LABEL_PX, dy=dy).encode(
            x=x, y=y, fill=ink, text=f"{field}:N", tooltip=tooltip
        )
        for field, dy in (("line1", -7), ("line2", 7))
    ]
    if outlined:  # drawn last, unfilled: a neighbour cell drawn later would cover half the line
        layers_drawn.append(
            alt.Chart(named_data(outlined))
            .mark_rect(filled=False, stroke=UNCOVERED_COLOUR, strokeWidth=UNCOVERED_STROKE_PX)
            .encode(x=x, y=y, tooltip=tooltip)
        )
    chart = alt.layer(*layers_drawn).properties(
        width=alt.Step(column_px),
        height=alt.Step(FIT_ROW_PX),
        title=chart_title(title, lead + notes),
    )
    return finish_chart(chart)
