"""Charts of a comparison: forest of ratios, shape portability, trade view, platforms."""

from __future__ import annotations

import math

from reviewkit.common.format import MISSING
from reviewkit.render.charts.base import (
    BAR_PX,
    GIGA,
    LABEL_LIMIT,
    MILLI,
    NO_DATA_HEIGHT,
    VERDICT_COLOURS,
    VERDICT_SHAPES,
    WIDTH,
    _data,
    _finish,
    _finite,
    _fmt,
    _memo,
    _no_data,
    _plural,
    _positive,
    _title,
    _unique,
    alt,
)

FOREST_PAD = 1.1  # factor of x range beyond the outermost interval end
TRADE_PANEL_WIDTH = 200  # two panels side by side fit the A4 width with candidate labels
TRADE_BAR_PX = 22


def _log_ticks(low: float, high: float) -> list[float] | alt.UndefinedType:
    """Tick values for a log axis over [low, high]. Over more than a decade and a half, Vega's
    own ticks (1, 2, 3 ... 9 of each decade) crowd together: 0.002 and 0.003 printed as
    "0.0020.003" in a CPU-to-GPU review. There the ticks are 1, 2 and 5 of each decade, and
    only the decades beyond three. Over narrower spans Vega's ticks read well and are kept."""
    decades = math.log10(high / low)
    if decades <= 1.5:
        return alt.Undefined
    steps = (1,) if decades > 3 else (1, 2, 5)
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    ticks = [s * 10.0**e for e in range(first, last + 1) for s in steps]
    return [float(f"{t:.3g}") for t in ticks if low <= t <= high]


@_memo
def forest(
    rows: list[dict],
    *,
    item: str = "workload",
    margin: float | None = None,
    noise_floor: float | None = None,
    run_to_run_sd: float | None = None,
    part: tuple[int, int, int] | None = None,
    axis_ends: tuple[float, float] | None = None,
) -> dict:
    """Forest plot of candidate/baseline median ratios with intervals; rows may be layer types.

    With `margin`, the band 1 -/+ margin is shaded: an interval inside it is `equivalent`, one
    wholly beyond it `faster` or `slower`, any other `inconclusive`. `run_to_run_sd` (separate
    runs) is named in the note: it is part of every interval drawn. One part of a forest split
    over several charts gives `part` (first row, last row, all rows) for its title and
    `axis_ends` (the smallest and largest value of every part) so that all parts share an axis."""
    title = f"Median latency ratio per {item}, candidate / baseline"
    if part:
        title += f" ({item}s {part[0]}-{part[1]} of {part[2]}, fastest first)"
    points, dropped = [], 0
    for r in rows:
        ratio = r.get("ratio")
        if not _positive(ratio):
            dropped += 1
            continue
        verdict = r.get("verdict")
        if verdict not in VERDICT_COLOURS:
            raise ValueError(f"forest: unknown verdict {verdict!r} for {r.get('workload')!r}")
        low, high = r.get("low"), r.get("high")
        interval = _positive(low) and _positive(high)
        points.append(
            {
                "workload": str(r["workload"]),
                "ratio": float(ratio),
                "low": float(low) if interval else None,
                "high": float(high) if interval else None,
                "verdict": verdict,
            }
        )
    notes = [f"{_plural(dropped, item)} without a positive ratio not shown"] if dropped else []
    if not points:
        return _no_data(title, notes)
    band = margin is not None and 0 < margin < 1
    if band:
        floor = "" if noise_floor is None else f"; measured noise floor ±{100 * noise_floor:.1f}%"
        if run_to_run_sd:
            floor += f", with a run-to-run allowance of {100 * run_to_run_sd:.0f}% per run"
        notes.append(
            f"shaded: the rubric's margin ±{100 * margin:.0f}% (within it: equivalent){floor}"
        )
    points.sort(key=lambda p: (p["ratio"], p["workload"]))
    order = _unique(p["workload"] for p in points)
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
    x_scale = alt.Scale(type="log", domain=list(x_domain), nice=False)
    x_title = "Ratio of medians, candidate / baseline (log scale; below 1 is faster)"
    x_axis = alt.Axis(labelOverlap="greedy", labelSeparation=6, values=_log_ticks(*x_domain))
    y = alt.Y("workload:N", title=None, sort=order, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    verdicts = list(VERDICT_COLOURS)
    colour_scale = alt.Scale(domain=verdicts, range=list(VERDICT_COLOURS.values()))
    one = (
        alt.Chart(_data([{"ratio": 1.0}]))
        .mark_rule(color="#333333", strokeDash=[4, 3])
        .encode(x=alt.X("ratio:Q", title=x_title, scale=x_scale, axis=x_axis))
    )
    bars = (
        alt.Chart(_data(intervals))
        .mark_rule(strokeWidth=1.5)
        .encode(
            x=alt.X("low:Q", title=x_title, scale=x_scale, axis=x_axis),
            x2="high:Q",
            y=y,
            color=alt.Color("verdict:N", legend=None, scale=colour_scale),
        )
    )
    dots = (
        alt.Chart(_data(points))
        .mark_point(filled=True, size=70, opacity=1)
        .encode(
            x=alt.X("ratio:Q", title=x_title, scale=x_scale, axis=x_axis),
            y=y,
            color=alt.Color("verdict:N", title="verdict", scale=colour_scale),
            shape=alt.Shape(
                "verdict:N",
                title="verdict",
                scale=alt.Scale(domain=verdicts, range=list(VERDICT_SHAPES.values())),
            ),
            tooltip=[
                alt.Tooltip("workload:N", title=item),
                alt.Tooltip("ratio:Q", format=".3f"),
                alt.Tooltip("low:Q", title="95% low", format=".3f"),
                alt.Tooltip("high:Q", title="95% high", format=".3f"),
                alt.Tooltip("verdict:N"),
            ],
        )
    )
    layers = [one, bars, dots]
    if band:
        shade = (
            alt.Chart(_data([{"low": 1 - margin, "high": 1 + margin}]))
            .mark_rect(color="#999999", opacity=0.15)
            .encode(x=alt.X("low:Q", title=x_title, scale=x_scale, axis=x_axis), x2="high:Q")
        )
        layers.insert(0, shade)
    chart = alt.layer(*layers).properties(
        width=WIDTH,
        height=max(NO_DATA_HEIGHT, len(order) * (BAR_PX + 8)),
        title=_title(title, notes),
    )
    return _finish(chart)


# key, panel name, axis title, better direction, scale to display units, fixed domain
TRADE_DIMENSIONS = (
    ("throughput_per_s", "Throughput", "Throughput (per s)", "higher is better", 1.0, None),
    ("latency_p99_s", "p99 latency", "p99 latency (ms)", "lower is better", MILLI, None),
    ("energy_j_per_call", "Energy", "Energy (J per call)", "lower is better", 1.0, None),
    ("engineering_risk", "Engineering risk", "Risk (0-1)", "lower is better", 1.0, (0.0, 1.0)),
)


@_memo
def trade_view(rows: list[dict]) -> dict:
    """Four panels (throughput, p99, energy, risk) of bars per candidate; gaps said in words."""
    title = "Platform trade view"
    if not rows:
        return _no_data(title)
    candidates = _unique(str(r["candidate"]) for r in rows)
    panels = []
    for key, name, axis_title, better, scale, fixed in TRADE_DIMENSIONS:
        bars, missing = [], []
        for r in rows:
            value = r.get(key)
            if _finite(value):
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
            alt.Chart(_data(bars))
            .mark_bar(color="#4C78A8")
            .encode(
                x=x,
                y=y,
                tooltip=[
                    alt.Tooltip("candidate:N"),
                    alt.Tooltip("value:Q", title=axis_title, format=",.4~g"),
                ],
            )
        )
        text_layer = (
            alt.Chart(_data(missing))
            .mark_text(align="left", baseline="middle", fontStyle="italic", color="#555555")
            .encode(x=alt.value(4), y=y, text="label:N")
        )
        panels.append(
            alt.layer(bar_layer, text_layer).properties(
                width=TRADE_PANEL_WIDTH,
                height=max(60, len(candidates) * TRADE_BAR_PX),
                title=f"{name}: {better}",
            )
        )
    chart = alt.concat(*panels, columns=2, spacing=24).properties(title=_title(title))
    return _finish(chart)


# A cell holds three 9 px text lines ("MFU 41.2%", "p99 0.736 ms", "SLA missed").
PLATFORM_ROW_PX = 38


# The platform columns share the plot width; below this a cell's "p99 0.736 ms" would not fit.
PLATFORM_MIN_COLUMN_PX = 104


# 18 rows of 38 px keep the matrix and its caption on one A4 page once the image is scaled to
# the page width; the table and packet.json carry every cell.
MAX_PLATFORM_ROWS = 18


SLA_MISS_COLOUR = "#D55E00"  # Okabe-Ito vermillion, the "slower" colour: a miss is a regression


SLA_MISS_STROKE_PX = 3


@_memo
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
    rows = _unique(str(c["workload"]) for c in cells)
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
                "mfu": float(mfu) if measured and _finite(mfu) else None,
                "missed": sla == "missed",
                "line1": (f"MFU {100 * mfu:.1f}%" if _finite(mfu) else "MFU —")
                if measured else "not measured",
                "line2": f"p99 {_fmt(float(p99) * MILLI)} ms" if measured and _finite(p99) else "",
                "line3": {"met": "SLA met", "missed": "SLA missed"}.get(sla, ""),
                # Tooltip text: preformatted, so a value that is absent reads as its reason.
                "workload_id": str(c.get("workload_id") or MISSING),
                "device": str(c.get("device_name") or ""),
                "dtype": str(c.get("dtype") or ""),
                "mfu_text": (f"{100 * mfu:.1f}% of the {c.get('peak_source')} peak"
                             if _finite(mfu) else str(c.get("reason") or "no MFU")),
                "p99_text": f"{_fmt(float(p99) * MILLI)} ms" if _finite(p99) else MISSING,
                "sla_text": sla + (f": {c['sla_reason']}" if c.get("sla_reason") else "")
                + (f" [{c['sla_target']}]" if c.get("sla_target") else ""),
                "throughput_text": (f"{_fmt(float(rate))} calls/s"
                                    + (f" at batch {c['batch']}" if c.get("batch") else "")
                                    if _finite(rate) else MISSING),
                "perf_w_text": (f"{_fmt(float(energy) / GIGA)} GFLOP/J, "
                                f"{_fmt(float(c.get('avg_watts') or 0.0))} W average"
                                if _finite(energy) else
                                f"not measured: {c.get('energy_reason') or 'no energy'}"),
                "status_text": "measured" if measured else f"not measured: {c.get('reason')}",
            }
        )  # fmt: skip
    if not data:
        return _no_data(title, notes)
    top = max([1e-3] + [d["mfu"] for d in data if d["mfu"] is not None])
    for d in data:  # white text on the deepest blues, dark text elsewhere, as the shape heatmap
        d["ink"] = "#FFFFFF" if d["mfu"] is not None and d["mfu"] > 0.6 * top else "#1D2330"
    missed = sum(d["missed"] for d in data)
    lead = ["colour: MFU against each platform's own peak (datasheet for a listed GPU, "
            "measured otherwise); text: MFU, p99 per call, SLA verdict"]  # fmt: skip
    if missed:
        lead.append(f"{_plural(missed, 'cell')} outlined in vermillion: the SLA is missed")
    grey = sum(d["mfu"] is None for d in data)
    if grey:
        lead.append(f"{_plural(grey, 'grey cell')}: not measured, or no MFU (tooltip says why)")
    columns = [p for p in platforms if any(d["platform"] == p for d in data)]
    column_px = max(PLATFORM_MIN_COLUMN_PX, WIDTH // max(1, len(columns)))
    x = alt.X("platform:N", title=None, sort=columns,
              axis=alt.Axis(orient="top", labelAngle=0, labelLimit=column_px - 6))  # fmt: skip
    y = alt.Y("workload:N", title=None, sort=rows, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    base = alt.Chart(_data(data))
    rect = base.mark_rect().encode(
        x=x,
        y=y,
        color=alt.condition(
            "datum.mfu === null",
            alt.value(MISSING_CELL),
            alt.Color("mfu:Q", title="MFU", scale=alt.Scale(domain=[0, top], scheme="blues"),
                      legend=alt.Legend(format="%")),
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
        base.mark_text(fontSize=9, dy=dy).encode(x=x, y=y, fill=ink, text=f"{field}:N")
        for field, dy in (("line1", -11), ("line2", 0), ("line3", 11))
    ]
    chart = alt.layer(rect, *lines).properties(
        width=alt.Step(column_px),
        height=alt.Step(PLATFORM_ROW_PX),
        title=_title(title, lead + notes),
    )
    return _finish(chart)


HEAT_STEP_PX = 74  # a heatmap cell fits two 9 px text lines ("MFU 41.2%", "p99 0.736 ms")


HEAT_COLUMNS = 3  # three panels of up to three sequence lengths fit the A4 width


HEAT_FASTER, HEAT_EVEN, HEAT_SLOWER = "#009E73", "#F7F7F7", "#D55E00"  # verdict colours


HEAT_MIN_SPREAD = 1.25  # colour domain at least 0.8x..1.25x, so noise is not painted vivid


MISSING_CELL = "#DDDDDD"  # measured shape with no ratio (not comparable)


@_memo
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
        if not (_finite(seq) and _finite(batch)):
            dropped += 1
            continue
        ratio, mfu, p99 = r.get("ratio"), r.get("mfu"), r.get("p99_ms")
        cells.append(
            {
                "panel": str(r["panel"]),
                "workload": str(r["workload"]),
                "seq": int(seq),
                "batch": int(batch),
                "ratio": float(ratio) if _positive(ratio) else None,
                "verdict": str(r.get("verdict") or ""),
                "mfu": float(mfu) if _finite(mfu) else None,
                "p99_ms": float(p99) if _finite(p99) else None,
                "mfu_label": f"MFU {100 * mfu:.1f}%" if _finite(mfu) else "MFU —",
                "p99_label": f"p99 {p99:.3g} ms" if _finite(p99) else "p99 —",
            }
        )
    if dropped:
        notes.append(f"{_plural(dropped, 'workload')} without a sequence length and batch")
    if not cells:
        return _no_data(title, notes)
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
            # the ends and even, to two digits: the ends are computed (85.265690453 was shown)
            legend=alt.Legend(
                format=".2~g", values=[float(f"{v:.2g}") for v in (1 / spread, 1, spread)]
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
            legend=alt.Legend(format="%"),
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
        notes.append(f"{_plural(unmatched, 'grey cell')}: measured, but no "
                     f"{'ratio' if by_ratio else 'MFU'}")  # fmt: skip
    panels = _unique(c["panel"] for c in sorted(cells, key=lambda c: c["panel"]))
    seqs = sorted({c["seq"] for c in cells})
    batches = sorted({c["batch"] for c in cells})
    x = alt.X("seq:O", title="sequence length", sort=seqs, axis=alt.Axis(labelAngle=0))
    y = alt.Y("batch:O", title="batch", sort=batches)
    base = alt.Chart(_data(cells))
    rect = base.mark_rect(stroke="#FFFFFF", strokeWidth=1).encode(
        x=x,
        y=y,
        color=alt.condition(missing, alt.value(MISSING_CELL), colour),
        tooltip=[
            alt.Tooltip("workload:N"),
            alt.Tooltip("seq:O", title="sequence length"),
            alt.Tooltip("batch:O"),
            alt.Tooltip("ratio:Q", title="median ratio", format=".3f"),
            alt.Tooltip("verdict:N"),
            alt.Tooltip("mfu:Q", title="MFU", format=".1%"),
            alt.Tooltip("p99_ms:Q", title="p99 (ms)", format=",.4~g"),
        ],
    )
    ink = alt.Fill("ink:N", scale=None)  # its own channel: the rect owns the colour scale
    line1 = base.mark_text(fontSize=9, dy=-6).encode(x=x, y=y, fill=ink, text="mfu_label:N")
    line2 = base.mark_text(fontSize=9, dy=7).encode(x=x, y=y, fill=ink, text="p99_label:N")
    chart = (
        alt.layer(rect, line1, line2)
        .properties(width=alt.Step(HEAT_STEP_PX), height=alt.Step(HEAT_STEP_PX * 3 // 5))
        .facet(
            facet=alt.Facet(
                "panel:N",
                title=None,
                sort=panels,
                header=alt.Header(labelLimit=HEAT_STEP_PX * len(seqs) + 40, labelFontSize=10),
            ),
            columns=HEAT_COLUMNS,
            spacing=14,
        )
        .properties(title=_title(title, [lead, "text: candidate MFU and p99", *notes]))
    )
    return _finish(chart)
