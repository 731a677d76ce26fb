"""Charts of a comparison: forest of ratios, shape portability, trade view, platforms."""

from __future__ import annotations

from reviewkit.common.format import MISSING
from reviewkit.render.charts.axes import log_axis
from reviewkit.render.charts.base import (
    BAR_PX,
    GIGA,
    LABEL_LIMIT,
    LABEL_PX,
    MAX_CHART_HEIGHT_PX,
    MAX_CHART_WIDTH_PX,
    MILLI,
    NO_DATA_HEIGHT,
    VERDICT_COLOURS,
    VERDICT_SHAPES,
    alt,
    chart_notes,
    chart_title,
    duration_text,
    finish_chart,
    fmt_readable,
    is_finite,
    is_positive,
    label_px,
    memoised_chart,
    named_data,
    no_data_chart,
    plot_width,
    plural,
    unique_in_order,
)

FOREST_PAD = 1.1  # factor of x range beyond the outermost interval end
TRADE_PANEL_WIDTH = 200  # at most: two panels side by side, each with its candidate labels
TRADE_BAR_PX = 22


@memoised_chart
def forest(
    rows: list[dict],
    *,
    item: str = "workload",
    margin: float | None = None,
    noise_floor: float | None = None,
    run_to_run_sd: float | None = None,
    allowance_from: str | None = None,
    part: tuple[int, int, int] | None = None,
    axis_ends: tuple[float, float] | None = None,
    quantile: str = "Median",
) -> dict:
    """Forest plot of candidate/baseline median ratios with intervals; rows may be layer types.
    `quantile` names another latency quantile the rows' ratios are of ("p99", say).

    With `margin`, the band 1 -/+ margin is shaded: an interval inside it is `equivalent`, one
    wholly beyond it `faster` or `slower`, any other `inconclusive`. `run_to_run_sd` (separate
    runs) is named in the note, with `allowance_from` (where the figure came from: measured for
    the device, the rubric's default or its floor): it is part of every interval drawn. One
    part of a forest split over several charts gives `part` (first row, last row, all rows) for
    its title and `axis_ends` (the smallest and largest value of every part) so that all parts
    share an axis."""
    title = f"{quantile} latency ratio per {item}, candidate / baseline"
    if part:
        title += f" ({item}s {part[0]}-{part[1]} of {part[2]}, fastest first)"
    points, dropped = [], 0
    for r in rows:
        ratio = r.get("ratio")
        if not is_positive(ratio):
            dropped += 1
            continue
        verdict = r.get("verdict")
        if verdict not in VERDICT_COLOURS:
            raise ValueError(f"forest: unknown verdict {verdict!r} for {r.get('workload')!r}")
        low, high = r.get("low"), r.get("high")
        interval = is_positive(low) and is_positive(high)
        points.append(
            {
                "workload": str(r["workload"]),
                "ratio": float(ratio),
                "low": float(low) if interval else None,
                "high": float(high) if interval else None,
                "verdict": verdict,
            }
        )
    notes = [f"{plural(dropped, item)} without a positive ratio not shown"] if dropped else []
    if not points:
        return no_data_chart(title, notes)
    band = margin is not None and 0 < margin < 1
    if band:
        floor = "" if noise_floor is None else f"; measured noise floor ±{100 * noise_floor:.1f}%"
        if run_to_run_sd:
            # two significant digits: a quiet device's 1.2% is not 1%
            floor += f", with a run-to-run allowance of {100 * run_to_run_sd:.2g}% per run"
            floor += f" (from: {allowance_from})" if allowance_from else ""
        notes.append(
            f"shaded: the rubric's margin ±{100 * margin:.0f}% (within it: equivalent){floor}"
        )
    points.sort(key=lambda p: (p["ratio"], p["workload"]))
    order = unique_in_order(p["workload"] for p in points)
    intervals = [p for p in points if p["low"] is not None]

    # Log "nice" rounds out to whole decades, which squeezes ratios near 1 into a sliver: pad
    # the data (and the rule at 1) by 10 % either side instead.
    ends = (
        [1.0] + [p["ratio"] for p in points] + [v for p in intervals for v in (p["low"], p["high"])]
    )
    if band:
        ends += [1 - margin, 1 + margin]
    if axis_ends:
        ends += list(axis_ends)
    x_domain = (min(ends) / FOREST_PAD, max(ends) * FOREST_PAD)
    width = plot_width(order)
    x_scale = alt.Scale(type="log", domain=list(x_domain), nice=False)
    # two lines: on one, the title was wider than a plot beside 300 px of labels
    x_title = ["Ratio of medians, candidate / baseline", "(log scale; below 1 is faster)"]
    x_axis = log_axis(*x_domain, width)
    y = alt.Y("workload:N", title=None, sort=order, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    verdicts = list(VERDICT_COLOURS)
    colour_scale = alt.Scale(domain=verdicts, range=list(VERDICT_COLOURS.values()))
    # below the plot: beside it, the legend took 100 px from a plot that shares the print
    # width with labels up to LABEL_LIMIT
    legend = alt.Legend(orient="bottom", direction="horizontal", title="verdict")
    one = (
        alt.Chart(named_data([{"ratio": 1.0}]))
        .mark_rule(color="#333333", strokeDash=[4, 3])
        .encode(x=alt.X("ratio:Q", title=x_title, scale=x_scale, axis=x_axis))
    )
    bars = (
        alt.Chart(named_data(intervals))
        .mark_rule(strokeWidth=1.5)
        .encode(
            x=alt.X("low:Q", title=x_title, scale=x_scale, axis=x_axis),
            x2="high:Q",
            y=y,
            # the same legend as the dots': a `legend: null` here hid the shared one
            color=alt.Color("verdict:N", scale=colour_scale, legend=legend),
        )
    )
    dots = (
        alt.Chart(named_data(points))
        .mark_point(filled=True, size=70, opacity=1)
        .encode(
            x=alt.X("ratio:Q", title=x_title, scale=x_scale, axis=x_axis),
            y=y,
            color=alt.Color("verdict:N", scale=colour_scale, legend=legend),
            shape=alt.Shape(
                "verdict:N",
                scale=alt.Scale(domain=verdicts, range=list(VERDICT_SHAPES.values())),
                legend=legend,
            ),
            tooltip=[
                alt.Tooltip("workload:N", title=item),
                alt.Tooltip("ratio:Q", format=",.3~r"),
                alt.Tooltip("low:Q", title="95% low", format=",.3~r"),
                alt.Tooltip("high:Q", title="95% high", format=",.3~r"),
                alt.Tooltip("verdict:N"),
            ],
        )
    )
    layers = [one, bars, dots]
    if band:
        shade = (
            alt.Chart(named_data([{"low": 1 - margin, "high": 1 + margin}]))
            .mark_rect(color="#999999", opacity=0.15)
            .encode(x=alt.X("low:Q", title=x_title, scale=x_scale, axis=x_axis), x2="high:Q")
        )
        layers.insert(0, shade)
    chart = alt.layer(*layers).properties(
        width=width,
        height=_rows_height(len(order), len(chart_notes(notes))),
        title=chart_title(title, notes),
    )
    return finish_chart(chart)


FOREST_ROW_PX = BAR_PX + 8  # a row's pitch when the page has room


MIN_ROW_PX = LABEL_PX + 4  # a 10 px label and a little air: tighter, neighbours touch


# Around a forest's rows: its title (~20 px), up to four subtitle lines (~15 px each), the x
# axis with its title (~45 px), the legend below (~35 px) and the padding (10 px).
FOREST_CHROME_PX = 170


def _rows_height(rows: int, note_lines: int = 0) -> int:
    """A forest's plot height: FOREST_ROW_PX a row, less where the rows would make the chart
    taller than MAX_CHART_HEIGHT_PX (the part of a 48-row forest is 48 x 15 = 720 px), never
    under MIN_ROW_PX."""
    room = MAX_CHART_HEIGHT_PX - FOREST_CHROME_PX - 15 * max(0, note_lines - 2)
    pitch = max(MIN_ROW_PX, min(FOREST_ROW_PX, room // max(1, rows)))
    return max(NO_DATA_HEIGHT, rows * pitch)


MISSING_CELL = "#DDDDDD"  # measured, but no value to colour by (not comparable)


# key, panel name, axis title, better direction, scale to display units, fixed domain
TRADE_DIMENSIONS = (
    ("throughput_per_s", "Throughput", "Throughput (per s)", "higher is better", 1.0, None),
    ("latency_p99_s", "p99 latency", "p99 latency (ms)", "lower is better", MILLI, None),
    ("energy_j_per_call", "Energy", "Energy (J per call)", "lower is better", 1.0, None),
    ("engineering_risk", "Engineering risk", "Risk (0-1)", "lower is better", 1.0, (0.0, 1.0)),
)


@memoised_chart
def trade_view(rows: list[dict]) -> dict:
    """Four panels (throughput, p99, energy, risk) of bars per candidate; gaps said in words."""
    title = "Platform trade view"
    if not rows:
        return no_data_chart(title)
    candidates = unique_in_order(str(r["candidate"]) for r in rows)
    # Two panels a row share the print width with their candidate labels (drawn on each), the
    # spacing (24) and the padding: "baseline · AMD EPYC" made it 733 px at 200 px a panel.
    room = MAX_CHART_WIDTH_PX - 24 - 19 - 2 * (label_px(candidates) + 12)
    panel_px = min(TRADE_PANEL_WIDTH, room // 2)
    panels = []
    for key, name, axis_title, better, scale, fixed in TRADE_DIMENSIONS:
        bars, missing = [], []
        for r in rows:
            value = r.get(key)
            if is_finite(value):
                bars.append({"candidate": str(r["candidate"]), "value": float(value) * scale})
            else:
                # A missing measurement drawn as 0 would win every "lower is better" panel.
                missing.append({"candidate": str(r["candidate"]), "label": "not available"})
        domain = None
        if fixed:
            top = max([fixed[1]] + [b["value"] for b in bars])
            domain = [fixed[0], top]
        x = alt.X(
            "value:Q",
            title=axis_title,
            scale=alt.Scale(domain=domain) if domain else alt.Undefined,
        )
        y = alt.Y("candidate:N", title=None, sort=candidates)
        bar_layer = (
            alt.Chart(named_data(bars))
            .mark_bar(color="#4C78A8")
            .encode(
                x=x,
                y=y,
                tooltip=[
                    alt.Tooltip("candidate:N"),
                    alt.Tooltip("value:Q", title=axis_title, format=",.4~r"),
                ],
            )
        )
        text_layer = (
            alt.Chart(named_data(missing))
            .mark_text(align="left", baseline="middle", fontStyle="italic", color="#555555")
            .encode(x=alt.value(4), y=y, text="label:N")
        )
        panels.append(
            alt.layer(bar_layer, text_layer).properties(
                width=panel_px,
                height=max(60, len(candidates) * TRADE_BAR_PX),
                title=f"{name}: {better}",
            )
        )
    chart = alt.concat(*panels, columns=2, spacing=24).properties(title=chart_title(title))
    return finish_chart(chart)


# A cell holds three LABEL_PX text lines 11 px apart ("MFU 41.2%", "p99 736 µs", "SLA missed").
PLATFORM_ROW_PX = 40


# The widest cell line at 10 px, "MFU 105.4%" or "p99 62.5 µs" (~68 px), and a margin.
PLATFORM_MIN_COLUMN_PX = 74


# 16 rows of 40 px (640 px) with the title, four subtitle lines, the two-line platform labels
# and the legend below (~230 px) stay within MAX_CHART_HEIGHT_PX; the table and packet.json
# carry every cell.
MAX_PLATFORM_ROWS = 16


SLA_MISS_COLOUR = "#D55E00"  # Okabe-Ito vermillion, the "slower" colour: a miss is a regression


SLA_MISS_STROKE_PX = 3


@memoised_chart
def platform_matrix(
    cells: list[dict], platforms: list[str], notes: list[str] | None = None
) -> dict:
    """Workloads x platforms coloured by MFU, each cell's MFU, p99 and SLA verdict as text.

    cells: {"workload", "platform", "status" ("measured" | "not measured"), "reason", "mfu",
    "p99_s", "sla" ("met" | "missed" | "no target" | "not measured"), and for the tooltip
    "device_name", "dtype", "peak_source", "workload_id", "sla_target", "sla_reason",
    "throughput_calls_per_s", "batch", "flops_per_joule", "avg_watts", "energy_reason"};
    platforms: column order. A cell missing from the run or not measured is grey and says so.
    """
    title = "Platforms side by side: MFU and p99 by workload"
    notes = list(notes or [])
    rows = unique_in_order(str(c["workload"]) for c in cells)
    if len(rows) > MAX_PLATFORM_ROWS:
        notes.append(f"the first {MAX_PLATFORM_ROWS} of {len(rows)} workloads (end-to-end first); "
                     "every cell is in the table below and in packet.json")  # fmt: skip
        rows = rows[:MAX_PLATFORM_ROWS]
    kept = set(rows)
    data = []
    for c in cells:
        if str(c["workload"]) not in kept:
            continue
        measured = c.get("status") == "measured"
        mfu, p99 = c.get("mfu"), c.get("p99_s")
        energy = c.get("flops_per_joule")
        rate = c.get("throughput_calls_per_s")
        sla = str(c.get("sla") or "")
        data.append(
            {
                "workload": str(c["workload"]),
                "platform": str(c["platform"]),
                "mfu": float(mfu) if measured and is_finite(mfu) else None,
                "missed": sla == "missed",
                "line1": (f"MFU {100 * mfu:.1f}%" if is_finite(mfu) else "MFU —")
                if measured else "not measured",
                "line2": f"p99 {duration_text(float(p99))}" if measured and is_finite(p99) else "",
                "line3": {"met": "SLA met", "missed": "SLA missed"}.get(sla, ""),
                # Tooltip text: preformatted, so a value that is absent reads as its reason.
                "workload_id": str(c.get("workload_id") or MISSING),
                "device": str(c.get("device_name") or ""),
                "dtype": str(c.get("dtype") or ""),
                "mfu_text": (f"{100 * mfu:.1f}% of the {c.get('peak_source')} peak"
                             if is_finite(mfu) else str(c.get("reason") or "no MFU")),
                "p99_text": duration_text(float(p99)) if is_finite(p99) else MISSING,
                "sla_text": sla + (f": {c['sla_reason']}" if c.get("sla_reason") else "")
                + (f" [{c['sla_target']}]" if c.get("sla_target") else ""),
                "throughput_text": (f"{fmt_readable(float(rate))} calls/s"
                                    + (f" at batch {c['batch']}" if c.get("batch") else "")
                                    if is_finite(rate) else MISSING),
                "perf_w_text": (f"{fmt_readable(float(energy) / GIGA)} GFLOP/J, "
                                f"{fmt_readable(float(c.get('avg_watts') or 0.0))} W average"
                                if is_finite(energy) else
                                f"not measured: {c.get('energy_reason') or 'no energy'}"),
                "status_text": "measured" if measured else f"not measured: {c.get('reason')}",
            }
        )  # fmt: skip
    if not data:
        return no_data_chart(title, notes)
    top = max([1e-3] + [d["mfu"] for d in data if d["mfu"] is not None])
    for d in data:  # white text on the deepest blues, dark text elsewhere, as the shape heatmap
        d["ink"] = "#FFFFFF" if d["mfu"] is not None and d["mfu"] > 0.6 * top else "#1D2330"
    missed = sum(d["missed"] for d in data)
    lead = ["colour: MFU against each platform's own peak (datasheet for a listed GPU, "
            "measured otherwise); text: MFU, p99 per call, SLA verdict"]  # fmt: skip
    if missed:
        lead.append(f"{plural(missed, 'cell')} outlined in vermillion: the SLA is missed")
    grey = sum(d["mfu"] is None for d in data)
    if grey:
        lead.append(f"{plural(grey, 'grey cell')}: not measured, or no MFU (tooltip says why)")
    columns = [p for p in platforms if any(d["platform"] == p for d in data)]
    # The columns share what the workload labels leave of the print width (no legend beside).
    room = MAX_CHART_WIDTH_PX - 30 - label_px(rows)
    column_px = max(PLATFORM_MIN_COLUMN_PX, room // max(1, len(columns)))
    # "AMD EPYC · fp32" on two lines, device over dtype: one line was wider than the column.
    # The padding lifts the two lines clear of the plot (a top axis anchors its first line).
    x_axis = alt.Axis(orient="top", labelAngle=0, labelLimit=column_px - 6,
                      labelExpr="split(datum.label, ' · ')", labelPadding=LABEL_PX + 4)  # fmt: skip
    x = alt.X("platform:N", title=None, sort=columns, axis=x_axis)
    y = alt.Y("workload:N", title=None, sort=rows, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    base = alt.Chart(named_data(data))
    rect = base.mark_rect().encode(
        x=x,
        y=y,
        color=alt.condition(
            "datum.mfu === null",
            alt.value(MISSING_CELL),
            alt.Color("mfu:Q", title="MFU", scale=alt.Scale(domain=[0, top], scheme="blues"),
                      legend=alt.Legend(format="%", orient="bottom", direction="horizontal")),
        ),
        stroke=alt.condition("datum.missed", alt.value(SLA_MISS_COLOUR), alt.value("#FFFFFF")),
        strokeWidth=alt.condition("datum.missed", alt.value(SLA_MISS_STROKE_PX), alt.value(1)),
        tooltip=[
            alt.Tooltip("workload:N"),
            alt.Tooltip("workload_id:N", title="id in the run"),
            alt.Tooltip("platform:N"),
            alt.Tooltip("device:N"),
            alt.Tooltip("mfu_text:N", title="MFU"),
            alt.Tooltip("p99_text:N", title="p99"),
            alt.Tooltip("sla_text:N", title="SLA"),
            alt.Tooltip("throughput_text:N", title="throughput"),
            alt.Tooltip("perf_w_text:N", title="perf per watt"),
            alt.Tooltip("status_text:N", title="status"),
        ],
    )  # fmt: skip
    ink = alt.Fill("ink:N", scale=None)  # its own channel: the rect owns the colour scale
    lines = [
        base.mark_text(fontSize=LABEL_PX, dy=dy).encode(x=x, y=y, fill=ink, text=f"{field}:N")
        for field, dy in (("line1", -12), ("line2", 0), ("line3", 12))
    ]
    chart = alt.layer(rect, *lines).properties(
        width=alt.Step(column_px),
        height=alt.Step(PLATFORM_ROW_PX),
        title=chart_title(title, lead + notes),
    )
    return finish_chart(chart)
