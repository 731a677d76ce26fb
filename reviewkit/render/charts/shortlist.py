"""The platform trade curve: each platform's latency, throughput, energy and risk for one model."""

from __future__ import annotations

import math

from reviewkit.render.charts.axes import log_axis, log_domain
from reviewkit.render.charts.base import (
    MAX_CHART_WIDTH_PX,
    MUTED_COLOUR,
    RULE_COLOUR,
    alt,
    chart_title,
    finish_chart,
    is_finite,
    is_positive,
    label_px,
    memoised_chart,
    named_data,
    no_data_chart,
    plural,
)
from reviewkit.render.charts.comparison import SLA_MISS_COLOUR

TRADE_TITLE = "Platform trade curve: projected service time, throughput, energy and risk"
# Shortlisted in the "better" blue the trade view uses; a miss in the SLA-miss vermillion.
STATUS_COLOURS = {"shortlisted": "#4C78A8", "misses the SLA": SLA_MISS_COLOUR,
                  "below the throughput floor": MUTED_COLOUR}  # fmt: skip
TRADE_ROW_PX = 22  # one platform a row: a 10 px label and its interval's whiskers
TRADE_SCATTER_PX = 260  # the scatter's height: five decades of latency with readable ticks
PANEL_GAP_PX = 24
# Platforms close in latency and throughput overlap their names: only the best ranked are named
# in the scatter, and only where a name does not overlap one already placed (the panels below
# name every one, and each point's tooltip its platform).
MAX_SCATTER_LABELS = 5


# A label's box as the scatter draws it (mark_text's 11 px font, dx 6 and dy -6 from its point):
# about 6.5 px a character and 12 px high, its left edge 6 px right of the point.
LABEL_CHAR_PX = 6.5
LABEL_HEIGHT_PX = 12
LABEL_DX_PX = 6


def _unoverlapped_labels(drawn: list[dict], x_domain: tuple[float, float],
                         y_domain: tuple[float, float], width_px: float) -> set[str]:  # fmt: skip
    """The platforms named in the scatter: in rank order, at most MAX_SCATTER_LABELS, each only
    where its name's box (on the log axes, in pixels) misses every name already placed, so
    platforms close in latency and throughput do not print over each other."""

    def px(v: float, lo: float, hi: float, size: float) -> float:
        return (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * size

    boxes: list[tuple[float, float, float, float]] = []
    named: set[str] = set()
    for d in sorted(drawn, key=lambda d: d["rank"]):
        if len(named) == MAX_SCATTER_LABELS:
            break
        x = px(d["decode_tokens_per_s"], *x_domain, width_px) + LABEL_DX_PX
        y = TRADE_SCATTER_PX - px(d["latency_s"], *y_domain, TRADE_SCATTER_PX) - LABEL_HEIGHT_PX
        box = (x, y, x + LABEL_CHAR_PX * len(d["platform"]), y + LABEL_HEIGHT_PX)
        if any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
               for b in boxes):  # fmt: skip
            continue
        boxes.append(box)
        named.add(d["platform"])
    return named


def _fmt(x: float) -> str:
    return f"{x:.3g}"


@memoised_chart
def trade_curve(rows: list[dict], sla_p99_s: float, notes: list[str] | None = None) -> dict:
    """A platform per point: decode tokens/s against the request's projected latency with its
    80% interval (the SLA a rule), then per platform its energy per output token (with its
    interval) and its engineering risk. Platforms without a priced latency are never drawn:
    the notes list them with why.

    rows: {"platform", "status", "latency_s", "latency_low_s", "latency_high_s",
    "decode_tokens_per_s", "energy_j", "energy_low_j", "energy_high_j", "risk", "tp", "rank"}
    in ranking order; a row whose latency is not finite is listed in the notes, not drawn."""
    notes = list(notes or [])
    drawn, left_out = [], []
    for r in rows:
        lat, low, high = r.get("latency_s"), r.get("latency_low_s"), r.get("latency_high_s")
        tput = r.get("decode_tokens_per_s")
        if not (is_positive(lat) and is_positive(low) and is_positive(high)
                and is_positive(tput)):  # fmt: skip
            left_out.append(f"{r.get('platform')}: {r.get('status')}")
            continue
        e = r.get("energy_j")
        drawn.append({
            "platform": str(r["platform"]), "status": str(r.get("status")),
            "rank": int(r.get("rank") or 0), "tp": int(r.get("tp") or 1),
            "latency_s": float(lat), "latency_low_s": float(low), "latency_high_s": float(high),
            "decode_tokens_per_s": float(tput),
            "energy_j": float(e) if is_finite(e) else None,
            "energy_low_j": float(r["energy_low_j"]) if is_finite(r.get("energy_low_j")) else None,
            "energy_high_j": float(r["energy_high_j"]) if is_finite(r.get("energy_high_j"))
            else None,
            "energy_text": f"{_fmt(e)} J" if is_finite(e) else "not available (no TDP)",
            "risk": float(r.get("risk") or 0.0),
            "interval_text": f"{_fmt(low)}-{_fmt(high)} s",
        })  # fmt: skip
    if left_out:
        notes.append(f"not drawn ({plural(len(left_out), 'platform')} without a priced "
                     f"latency): " + "; ".join(left_out))  # fmt: skip
    notes.append("latency: one request's service time with no queueing, not a p99 under load; "
                 f"whiskers: the projection's 80% interval; up to {MAX_SCATTER_LABELS} named in "
                 "the scatter, best ranked first, where a name does not cover another")  # fmt: skip
    if not drawn:
        return no_data_chart(TRADE_TITLE, notes)
    names = [d["platform"] for d in drawn]
    colour = alt.Color("status:N", title="status", legend=alt.Legend(orient="bottom"),
                       scale=alt.Scale(domain=list(STATUS_COLOURS),
                                       range=list(STATUS_COLOURS.values())))  # fmt: skip
    tooltip = [alt.Tooltip("platform:N"), alt.Tooltip("status:N"), alt.Tooltip("tp:Q", title="TP"),
               alt.Tooltip("latency_s:Q", title="latency (s)", format=".3g"),
               alt.Tooltip("interval_text:N", title="80% interval"),
               alt.Tooltip("decode_tokens_per_s:Q", title="decode tokens/s", format=".4g"),
               alt.Tooltip("energy_text:N", title="energy / output token"),
               alt.Tooltip("risk:Q", title="risk")]  # fmt: skip
    # within the print width: the scatter's y axis (labels, title), its point labels running
    # past the plot and the padding take up to ~131 px beside it (measured: 584 px of plot made
    # a 715 px chart), so 146 px are kept; the legend goes below, where it takes no width
    width = MAX_CHART_WIDTH_PX - 146
    x_lo, x_hi = log_domain([d["decode_tokens_per_s"] for d in drawn])
    ys = [v for d in drawn for v in (d["latency_low_s"], d["latency_high_s"])]
    y_lo, y_hi = log_domain([*ys, float(sla_p99_s)])
    named = _unoverlapped_labels(drawn, (x_lo, x_hi), (y_lo, y_hi), width)
    for d in drawn:
        d["label"] = d["platform"] if d["platform"] in named else ""
    base = alt.Chart(named_data(drawn))
    x = alt.X("decode_tokens_per_s:Q", title="decode tokens/s (one replica)",
              scale=alt.Scale(type="log", domain=[x_lo, x_hi], nice=False),
              axis=log_axis(x_lo, x_hi, width))  # fmt: skip
    y_title, e_title = "request latency (s)", "energy per output token (J)"
    y_scale = alt.Scale(type="log", domain=[y_lo, y_hi], nice=False)
    y_axis = log_axis(y_lo, y_hi, TRADE_SCATTER_PX, horizontal=False)
    y = alt.Y("latency_s:Q", title=y_title, scale=y_scale, axis=y_axis)
    y_low = alt.Y("latency_low_s:Q", title=y_title, scale=y_scale, axis=y_axis)
    whiskers = base.mark_rule(strokeWidth=1.5).encode(x=x, y=y_low, y2="latency_high_s:Q",
                                                      color=colour)  # fmt: skip
    points = base.mark_point(filled=True, size=60).encode(x=x, y=y, color=colour, tooltip=tooltip)
    labels = base.mark_text(align="left", dx=6, dy=-6).encode(x=x, y=y, text="label:N")
    sla = alt.Chart(named_data([{"sla_s": float(sla_p99_s), "text": f"SLA {sla_p99_s:g} s"}]))
    sla_rule = sla.mark_rule(color=RULE_COLOUR, strokeDash=[4, 3]).encode(
        y=alt.Y("sla_s:Q", scale=y_scale))  # fmt: skip
    sla_text = sla.mark_text(align="left", dx=2, dy=-5, color=RULE_COLOUR).encode(
        y=alt.Y("sla_s:Q", scale=y_scale), text="text:N", x=alt.value(0))  # fmt: skip
    scatter = alt.layer(whiskers, points, labels, sla_rule, sla_text).properties(
        width=width, height=TRADE_SCATTER_PX,
        title="Latency against throughput (lower right is better)")  # fmt: skip
    # two panels a row, each with its platform labels (and 12 px of ticks), the gap between and
    # ~40 px of padding and label overhang (measured: 20 px left a 719 px chart)
    panel_px = (MAX_CHART_WIDTH_PX - 40 - 2 * (label_px(names) + 12) - PANEL_GAP_PX) // 2
    row = alt.Y("platform:N", title=None, sort=names)
    height = max(60, len(drawn) * TRADE_ROW_PX)
    with_energy = base.transform_filter("isValid(datum.energy_j)")
    es = [v for d in drawn for v in (d["energy_low_j"], d["energy_high_j"]) if v is not None]
    e_lo, e_hi = log_domain(es) if es else (0.1, 10.0)
    e_scale = alt.Scale(type="log", domain=[e_lo, e_hi], nice=False)
    e_axis = log_axis(e_lo, e_hi, panel_px)
    e_x = alt.X("energy_j:Q", title=e_title, scale=e_scale, axis=e_axis)
    energy = alt.layer(
        with_energy.mark_rule().encode(x=alt.X("energy_low_j:Q", title=e_title,
                                               scale=e_scale, axis=e_axis),
                                       x2="energy_high_j:Q", y=row, color=colour),
        with_energy.mark_point(filled=True).encode(x=e_x, y=row, color=colour, tooltip=tooltip),
        base.transform_filter("!isValid(datum.energy_j)").mark_text(
            align="left", fontStyle="italic", color="#555555").encode(
            x=alt.value(4), y=row, text="energy_text:N"),
    ).properties(width=panel_px, height=height, title="Energy (lower is better)")  # fmt: skip
    risk = base.mark_bar().encode(
        x=alt.X("risk:Q", title="engineering risk (rubric weights summed)"), y=row,
        color=colour, tooltip=tooltip).properties(
        width=panel_px, height=height, title="Risk (lower is better)")  # fmt: skip
    chart = alt.vconcat(scatter, alt.hconcat(energy, risk, spacing=PANEL_GAP_PX)).properties(
        title=chart_title(TRADE_TITLE, notes))  # fmt: skip
    return finish_chart(chart)
