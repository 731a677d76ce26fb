"""Charts of production-like evidence: sweeps, soak stability, perf per watt, quality drift."""

from __future__ import annotations

import math

from reviewkit.common.format import MISSING, change_ci
from reviewkit.common.format import change as fmt_change
from reviewkit.render.charts.axes import log_axis, log_domain
from reviewkit.render.charts.base import (
    BAR_PX,
    CATEGORY_SCHEME,
    GIGA,
    KNEE_COLOUR,
    LABEL_LIMIT,
    LABEL_PX,
    MAX_CHART_HEIGHT_PX,
    MILLI,
    MUTED_COLOUR,
    NO_DATA_HEIGHT,
    PERCENTILE_COLOURS,
    RULE_COLOUR,
    WIDTH,
    alt,
    chart_title,
    finish_chart,
    fmt_readable,
    is_finite,
    is_positive,
    memoised_chart,
    named_data,
    no_data_chart,
    plot_width,
    plural,
    unique_in_order,
)
from reviewkit.render.charts.runs import grouped_height

SWEEP_PANEL_HEIGHT = 180


SWEEP_WIDTH = 480  # with the y axis (~70 px) and the percentile legend (~90 px): ~680 px


# A panel with its title, notes and x axis takes ~290 px: three keep the chart within
# MAX_CHART_HEIGHT_PX (3 x 290 + the title, 60 px). The rest are in packet.json, said so.
MAX_SWEEP_PANELS = 3


STABILITY_PANEL_HEIGHT = 180


SENSOR_PANEL_HEIGHT = 110


ENERGY_PANEL_WIDTH = 190  # two, with their layer-type labels and the run legend: ~690 px


MAX_QUALITY_WORKLOADS = 40


def _x_rule(x: alt.X, value: float, label: str, what: str, dash: list[int]) -> list[alt.Chart]:
    """A vertical rule with its label upright beside it, mid-height: the panel's corners are
    where the knee and the p50 line sit."""
    rows = [{"achieved_rate_per_s": value, "label": label}]
    return [
        alt.Chart(named_data(rows))
        .mark_rule(color=RULE_COLOUR, strokeDash=dash)
        .encode(x=x, tooltip=[alt.Tooltip("label:N", title=what)]),
        alt.Chart(named_data(rows))
        .mark_text(angle=270, baseline="bottom", dy=-3, fontSize=LABEL_PX, color=RULE_COLOUR)
        .encode(x=x, y=alt.value(SWEEP_PANEL_HEIGHT // 2), text="label:N"),
    ]


def _sweep_panel(p: dict) -> alt.LayerChart:
    """One workload: p50/p99 against achieved rate, SLA and offline rules, the knee marked."""
    rows = []
    for lv in p.get("levels") or []:
        rate = lv.get("achieved_rate_per_s")
        if not is_positive(rate):
            continue
        reasons = "; ".join(map(str, lv.get("invalid_reasons") or [])) or "valid"
        for name in ("p50", "p99"):
            value = lv.get(f"{name}_s")
            # in milliseconds a huge finite number of seconds can overflow to inf
            if not (is_positive(value) and is_positive(float(value) * MILLI)):
                continue
            rows.append(
                {
                    "achieved_rate_per_s": float(rate),
                    "latency_ms": float(value) * MILLI,
                    "percentile": name,
                    "valid": bool(lv.get("valid")),
                    "status": "valid" if lv.get("valid") else "invalid",
                    "reasons": reasons,
                    "target_rate_per_s": lv.get("target_rate_per_s"),
                    "load_fraction": lv.get("load_fraction"),
                }
            )
    rows.sort(key=lambda r: (r["percentile"], r["achieved_rate_per_s"]))
    sla_ms = float(p["sla_p99_s"]) * MILLI if is_positive(p.get("sla_p99_s")) else None
    sla_ms = sla_ms if is_positive(sla_ms) else None
    offline = float(p["offline_rate_per_s"]) if is_positive(p.get("offline_rate_per_s")) else None
    knee = p.get("knee") or {}
    ys = [r["latency_ms"] for r in rows] + ([sla_ms] if sla_ms else [])
    log_y = bool(ys) and max(ys) / min(ys) > 10  # queueing blows p99 up by orders of magnitude
    y_title = "Latency (ms" + (", log scale)" if log_y else ")")
    if log_y:
        y_lo, y_hi = log_domain(ys, 1.2)
        y_scale = alt.Scale(type="log", domain=[y_lo, y_hi], nice=False)
        y_axis = log_axis(y_lo, y_hi, SWEEP_PANEL_HEIGHT, horizontal=False)
    else:
        y_scale, y_axis = alt.Scale(zero=True), alt.Undefined
    extra_x = [v for v in (offline, p.get("sla_min_rate_per_s")) if is_positive(v)]
    x_top = max([r["achieved_rate_per_s"] for r in rows] + [float(v) for v in extra_x] + [1e-9])
    x = alt.X(
        "achieved_rate_per_s:Q",
        title="Achieved throughput (queries/s)",
        scale=alt.Scale(domain=[0, x_top * 1.08], nice=False),
    )
    y = alt.Y("latency_ms:Q", title=y_title, scale=y_scale, axis=y_axis)
    names = ["p50", "p99"]
    colour = alt.Color(
        "percentile:N",
        title="percentile",
        scale=alt.Scale(domain=names, range=[PERCENTILE_COLOURS[n] for n in names]),
    )
    tooltip = [
        alt.Tooltip("percentile:N"),
        alt.Tooltip("latency_ms:Q", title="latency (ms)", format=",.4~r"),
        alt.Tooltip("achieved_rate_per_s:Q", title="achieved (queries/s)", format=",.4~r"),
        alt.Tooltip("target_rate_per_s:Q", title="offered (queries/s)", format=",.4~r"),
        alt.Tooltip("load_fraction:Q", title="of offline", format=".0%"),
        alt.Tooltip("status:N", title="level"),
        alt.Tooltip("reasons:N", title="why"),
    ]
    valid = [r for r in rows if r["valid"]]
    invalid = [r for r in rows if not r["valid"]]
    layers = [
        alt.Chart(named_data(valid))
        .mark_line(strokeWidth=1.5)
        .encode(x=x, y=y, color=colour, detail="percentile:N"),
        alt.Chart(named_data(valid))
        .mark_point(filled=True, size=40, opacity=1)
        .encode(x=x, y=y, color=colour, tooltip=tooltip),
    ]
    # Only the layers with rows: altair copies every layer's encodings on combining them (~10 ms
    # a layer), and a packet draws this chart cold on every render.
    if invalid:  # not results: hollow and grey, their reasons in the tooltip
        layers.append(
            alt.Chart(named_data(invalid))
            .mark_point(filled=False, size=50, color=MUTED_COLOUR, strokeWidth=1.5)
            .encode(x=x, y=y, shape=alt.value("circle"), tooltip=tooltip)
        )
    if sla_ms is not None:
        sla = [
            {
                "latency_ms": sla_ms,
                "label": f"SLA p99 {fmt_readable(sla_ms)} ms ({p.get('sla_source')})",
            }
        ]
        layers += [
            alt.Chart(named_data(sla))
            .mark_rule(color=RULE_COLOUR, strokeDash=[6, 3])
            .encode(y=y, tooltip=[alt.Tooltip("label:N", title="SLA")]),
            alt.Chart(named_data(sla))
            .mark_text(
                align="left", baseline="bottom", dx=4, dy=-2, fontSize=LABEL_PX, color=RULE_COLOUR
            )
            .encode(x=alt.value(0), y=y, text="label:N"),
        ]
    if offline is not None:
        label = f"offline {fmt_readable(offline)}/s"
        layers += _x_rule(x, offline, label, "offline throughput", [2, 2])
    min_rate = p.get("sla_min_rate_per_s")
    if is_positive(min_rate):
        layers += _x_rule(x, float(min_rate), f"SLA ≥ {fmt_readable(min_rate)}/s", "SLA", [6, 3])
    point = knee.get("point")
    if point and is_positive(point.get("achieved_rate_per_s")) and is_positive(point.get("p99_s")):
        mark = [
            {
                "achieved_rate_per_s": float(point["achieved_rate_per_s"]),
                "latency_ms": float(point["p99_s"]) * MILLI,
                "knee_rate_per_s": knee.get("rate_per_s"),
                "label": f"knee: {fmt_readable(float(knee['rate_per_s']))}/s offered",
                "rule": str(knee.get("rule") or ""),
            }
        ]
        layers += [
            alt.Chart(named_data(mark))
            .mark_point(shape="diamond", size=160, filled=False, strokeWidth=2, color=KNEE_COLOUR)
            .encode(
                x=x,
                y=y,
                tooltip=[
                    alt.Tooltip("label:N", title="knee"),
                    alt.Tooltip("latency_ms:Q", title="p99 (ms)", format=",.4~r"),
                    alt.Tooltip("rule:N"),
                ],
            ),
            alt.Chart(named_data(mark))
            .mark_text(align="right", baseline="middle", dx=-10, fontSize=LABEL_PX, color="#8A5C00")
            .encode(x=x, y=y, text="label:N"),
        ]
    return alt.layer(*layers).properties(
        width=SWEEP_WIDTH,
        height=SWEEP_PANEL_HEIGHT,
        title=chart_title(str(p["workload"]), p.get("notes") or []),
    )


@memoised_chart
def latency_throughput(panels: list[dict], notes: list[str] | None = None) -> dict:
    """A latency-throughput curve per swept workload: where latency bends, against the SLA.

    panels: {"workload", "levels": [{achieved_rate_per_s, target_rate_per_s, load_fraction,
    p50_s, p99_s, valid, invalid_reasons}], "offline_rate_per_s", "sla_p99_s", "sla_source",
    "knee": {found, rate_per_s, rule, point: {achieved_rate_per_s, p99_s}}, "notes": [str]}.
    """
    title = "Latency against throughput (server scenario, Poisson arrivals)"
    notes = list(notes or [])
    usable = [p for p in panels if any(is_positive(lv.get("achieved_rate_per_s"))
                                       for lv in p.get("levels") or [])]  # fmt: skip
    if len(usable) < len(panels):
        notes.append(f"{plural(len(panels) - len(usable), 'workload')} with no level to draw")
    if len(usable) > MAX_SWEEP_PANELS:
        notes.append(f"the first {MAX_SWEEP_PANELS} of {len(usable)} workloads; all are in "
                     "packet.json and the sweep file")  # fmt: skip
        usable = usable[:MAX_SWEEP_PANELS]
    if not usable:
        return no_data_chart(title, notes)
    chart = (
        alt.vconcat(*[_sweep_panel(p) for p in usable], spacing=28)
        .resolve_scale(x="independent", y="independent")
        .properties(title=chart_title(title, notes))
    )
    return finish_chart(chart)


def _sensor_panel(points: list[dict], unit: str, title: str, x_scale: alt.Scale) -> alt.Chart:
    return (
        alt.Chart(named_data(points))
        .mark_line(point=True, strokeWidth=1.2)
        .encode(
            x=alt.X("time_s:Q", title="Time into the window (s)", scale=x_scale),
            y=alt.Y("value:Q", title=unit, scale=alt.Scale(zero=False)),
            color=alt.Color(
                "series:N", title="sensor", sort=unique_in_order(p["series"] for p in points)
            ),
            tooltip=[
                alt.Tooltip("series:N", title="sensor"),
                alt.Tooltip("time_s:Q", title="time (s)", format=",.4~r"),
                alt.Tooltip("value:Q", title=unit, format=",.4~r"),
            ],
        )
        .properties(width=WIDTH, height=SENSOR_PANEL_HEIGHT, title=title)
    )


def _soak_panels(s: dict) -> list[alt.TopLevelMixin]:
    windows = []
    for w in s.get("subwindows") or []:
        rate, start, end = w.get("calls_per_s"), w.get("start_s"), w.get("end_s")
        if not (is_finite(rate) and is_finite(start) and is_finite(end)):
            continue
        partial = bool(w.get("partial"))
        windows.append(
            {
                "index": w.get("index"),
                "time_s": (float(start) + float(end)) / 2,
                "start_s": float(start),
                "end_s": float(end),
                "calls_per_s": float(rate),
                "status": "partial (interrupted)" if partial else "full",
                "partial": partial,
            }
        )
    full = [w for w in windows if not w["partial"] and w["calls_per_s"] > 0]
    trend = s.get("trend") or {}
    fit = []
    slope, mean = trend.get("slope_per_s"), trend.get("mean")
    if full and is_finite(slope) and is_finite(mean):
        # The least-squares line passes through the means of the full sub-windows it was fit to.
        t_mean = sum(w["time_s"] for w in full) / len(full)
        for t in (full[0]["time_s"], full[-1]["time_s"]):
            fit.append({"time_s": t, "calls_per_s": float(mean) + float(slope) * (t - t_mean),
                        "label": "least-squares trend"})  # fmt: skip
    # One time axis for the soak's panels, so a clock fall lines up with the throughput fall.
    x_scale = alt.Scale(domain=[0, max([w["end_s"] for w in windows] + [1e-9])], nice=False)
    x = alt.X("time_s:Q", title="Time into the window (s)", scale=x_scale)
    y = alt.Y("calls_per_s:Q", title="Throughput (calls/s)", scale=alt.Scale(zero=False))
    tooltip = [
        alt.Tooltip("index:Q", title="sub-window"),
        alt.Tooltip("start_s:Q", title="from (s)", format=",.4~r"),
        alt.Tooltip("end_s:Q", title="to (s)", format=",.4~r"),
        alt.Tooltip("calls_per_s:Q", title="calls/s", format=",.4~r"),
        alt.Tooltip("status:N", title="sub-window"),
    ]
    layers = [
        alt.Chart(named_data(full)).mark_line(color="#4C78A8", strokeWidth=1.5).encode(x=x, y=y),
        alt.Chart(named_data(full))
        .mark_point(filled=True, size=30, color="#4C78A8", opacity=1)
        .encode(x=x, y=y, tooltip=tooltip),
    ]
    partial_windows = [w for w in windows if w["partial"]]
    if partial_windows:  # measured but cut short: hollow and grey, outside the trend
        layers.append(
            alt.Chart(named_data(partial_windows))
            .mark_point(filled=False, size=60, color=MUTED_COLOUR, strokeWidth=1.5)
            .encode(x=x, y=y, tooltip=tooltip)
        )
    if fit:
        layers.append(
            alt.Chart(named_data(fit))
            .mark_line(color=KNEE_COLOUR, strokeDash=[6, 3], strokeWidth=2)
            .encode(x=x, y=y, tooltip=[alt.Tooltip("label:N")])
        )
    verdict = str(s.get("verdict") or "no verdict")
    change, ci = trend.get("relative_change"), trend.get("relative_change_ci")
    lines = [f"verdict: {verdict}"]
    if is_finite(change):
        text = f"trend {fmt_change(change)} over the window"
        if ci and len(ci) == 2 and all(is_finite(v) for v in ci):
            text += f" (95% CI {change_ci(ci)})"
        lines.append(text + "; dashed: the fitted line")
    elif trend.get("reason"):
        lines.append(f"no trend: {trend['reason']}")
    lines += [str(r) for r in s.get("reasons") or []]
    throttling = s.get("throttling") or {}
    if throttling:
        # the status only: why a sensor is missing is a paragraph, said under the chart
        lines.append(f"throttling: {throttling.get('status', '?')}")
    partial = len(partial_windows)
    if partial:
        lines.append(f"{plural(partial, 'partial sub-window')} (hollow, grey): not in the trend")
    if s.get("sensor_notes"):
        lines.append("sensors not available: the reasons are given beside the chart")
    panels: list[alt.TopLevelMixin] = [
        alt.layer(*layers).properties(
            width=WIDTH,
            height=STABILITY_PANEL_HEIGHT,
            title=chart_title(f"Throughput over the soak of {s.get('workload')}", lines),
        )
    ]
    if s.get("clocks"):
        panels.append(_sensor_panel(s["clocks"], "Clock (MHz)", "Clocks", x_scale))
    if s.get("temperatures"):
        panels.append(_sensor_panel(s["temperatures"], "Temperature (°C)", "Temperatures", x_scale))
    return panels


@memoised_chart
def stability(soaks: list[dict], notes: list[str] | None = None) -> dict:
    """Throughput per sub-window over a soak with its fitted trend; clocks and temperatures.

    soaks: {"workload", "verdict", "reasons", "trend": {mean, slope_per_s, relative_change,
    relative_change_ci, reason}, "throttling": {status, reason}, "subwindows": [{index,
    start_s, end_s, calls_per_s, partial}], "clocks"/"temperatures": [{time_s, series, value}],
    "sensor_notes": [str]}.
    """
    title = "Stability over a long window"
    notes = list(notes or [])
    usable = [s for s in soaks if any(is_finite(w.get("calls_per_s"))
                                      for w in s.get("subwindows") or [])]  # fmt: skip
    if len(usable) < len(soaks):
        notes.append(f"{plural(len(soaks) - len(usable), 'soak')} with no measured sub-window")
    if not usable:
        return no_data_chart(title, notes)
    panels = [p for s in usable for p in _soak_panels(s)]
    chart = (
        alt.vconcat(*panels, spacing=22)
        .resolve_scale(color="independent", x="independent", y="independent")
        .properties(title=chart_title(title, notes))
    )
    return finish_chart(chart)


@memoised_chart
def perf_per_watt(rows: list[dict], notes: list[str] | None = None) -> dict:
    """Work per joule and average power per layer type and run, from metered energy only.

    rows: {"run", "layer_type", "flops_per_joule", "avg_watts", "joules", "window_s",
    "confidence"}; a layer type without energy is not a row (its reason goes in notes).
    """
    title = "Perf per watt by layer type"
    notes = list(notes or [])
    data = [
        {
            "run": str(r["run"]),
            "layer_type": str(r["layer_type"]),
            "gflops_per_joule": float(r["flops_per_joule"]) / GIGA,
            "avg_watts": float(r["avg_watts"]),
            "joules": float(r["joules"]) if is_finite(r.get("joules")) else None,
            "window_s": float(r["window_s"]) if is_finite(r.get("window_s")) else None,
            "confidence": str(r.get("confidence") or ""),
        }
        for r in rows
        if is_positive(r.get("flops_per_joule")) and is_positive(r.get("avg_watts"))
    ]
    if not data:
        return no_data_chart(title, notes)
    runs = unique_in_order(d["run"] for d in data)
    layers = sorted({d["layer_type"] for d in data})
    data.sort(key=lambda d: (layers.index(d["layer_type"]), runs.index(d["run"])))
    low = sum(d["confidence"] == "low" for d in data)
    if low:
        notes.append(f"{plural(low, 'bar')} from low-confidence readings (short windows)")
    y = alt.Y("layer_type:N", title="Layer type", sort=layers)
    colour = alt.Color("run:N", title="run", scale=alt.Scale(domain=runs, scheme=CATEGORY_SCHEME))
    tooltip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("layer_type:N", title="layer type"),
        alt.Tooltip("gflops_per_joule:Q", title="GFLOP/J", format=",.4~r"),
        alt.Tooltip("avg_watts:Q", title="average W", format=",.4~r"),
        alt.Tooltip("joules:Q", title="J", format=",.4~r"),
        alt.Tooltip("window_s:Q", title="window (s)", format=",.4~r"),
        alt.Tooltip("confidence:N"),
    ]
    height = grouped_height(len(layers), len(runs))

    def panel(field: str, axis_title: str, better: str) -> alt.Chart:
        return (
            alt.Chart(named_data(data))
            .mark_bar()
            .encode(
                x=alt.X(f"{field}:Q", title=axis_title),
                y=y,
                yOffset=alt.YOffset("run:N", sort=runs),
                color=colour,
                tooltip=tooltip,
            )
            .properties(width=ENERGY_PANEL_WIDTH, height=height, title=better)
        )

    chart = alt.hconcat(
        panel("gflops_per_joule", "Work per joule (GFLOP/J)", "Work per joule: higher is better"),
        panel("avg_watts", "Average power (W)", "Average power over the windows"),
        spacing=20,
    ).properties(title=chart_title(title, notes))
    return finish_chart(chart)


@memoised_chart
def quality_drift(
    rows: list[dict], tolerances: dict[str, float], notes: list[str] | None = None
) -> dict:
    """Relative error against float64 per workload and dtype, against the rubric's tolerances.

    rows: {"workload", "dtype", "rel_error", "max_abs_error", "top1_agreement",
    "kl_divergence", "source"}; only measured rows (status ok) belong here.
    """
    title = "Quality drift: relative error against float64"
    notes = list(notes or [])
    points, dropped = [], 0
    for r in rows:
        rel = r.get("rel_error")
        if not is_positive(rel):
            dropped += 1  # zero (bit-exact) or missing: a log axis has no place for it
            continue
        dtype = str(r.get("dtype"))
        tol = tolerances.get(dtype)
        tol = float(tol) if is_positive(tol) else None
        # the review stage's judgement where the row carries it (the packet's rows do)
        over = r["over_tolerance"] if isinstance(r.get("over_tolerance"), bool) else (
            tol is not None and float(rel) > tol)  # fmt: skip
        top1, kl = r.get("top1_agreement"), r.get("kl_divergence")
        points.append(
            {
                "workload": str(r["workload"]),
                "dtype": dtype,
                "rel_error": float(rel),
                "max_abs_error": float(r["max_abs_error"]) if is_finite(r.get("max_abs_error"))
                else None,
                # Tooltip text, written out: d3's ".3e" printed "4.600e-6"
                "rel_error_text": fmt_readable(float(rel), 3),
                "max_abs_text": fmt_readable(float(r["max_abs_error"]), 3)
                if is_finite(r.get("max_abs_error")) else MISSING,
                "kl_text": f"{fmt_readable(float(kl), 3)} nats" if is_finite(kl) else MISSING,
                "tolerance_text": fmt_readable(tol) if tol is not None else "none",
                "top1_agreement": float(top1) if is_finite(top1) else None,
                "kl_divergence": float(kl) if is_finite(kl) else None,
                "tolerance": tol,
                "within": "over tolerance" if over else
                ("within tolerance" if tol is not None else "no tolerance"),
                "source": str(r.get("source") or ""),
            }
        )  # fmt: skip
    if dropped:
        notes.append(f"{plural(dropped, 'row')} with a zero or missing relative error not shown "
                     "(log axis)")  # fmt: skip
    if not points:
        return no_data_chart(title, notes)
    worst: dict[str, float] = {}
    for p in points:
        score = p["rel_error"] / p["tolerance"] if p["tolerance"] else 0.0
        worst[p["workload"]] = max(worst.get(p["workload"], -1.0), score)
    order = sorted(worst, key=lambda w: (-worst[w], w))
    if len(order) > MAX_QUALITY_WORKLOADS:
        notes.append(f"the {MAX_QUALITY_WORKLOADS} workloads nearest their tolerance of "
                     f"{len(order)}; all are in packet.json")  # fmt: skip
        order = order[:MAX_QUALITY_WORKLOADS]
        points = [p for p in points if p["workload"] in order]
    over = sum(p["within"] == "over tolerance" for p in points)
    if over:
        notes.append(f"{plural(over, 'result')} over the rubric's tolerance (large crosses)")
    dtypes = sorted({p["dtype"] for p in points})
    untolerated = [d for d in dtypes if d not in tolerances]
    if untolerated:
        notes.append(f"no rubric tolerance for {', '.join(untolerated)}")
    rules = [
        {"dtype": d, "rel_error": float(tol), "label": f"{d} tolerance {fmt_readable(float(tol))}"}
        for d in dtypes
        if is_positive(tol := tolerances.get(d))
    ]
    ends = [p["rel_error"] for p in points] + [r["rel_error"] for r in rules]
    lo = 10.0 ** math.floor(math.log10(min(ends) / 1.5))
    hi = 10.0 ** math.ceil(math.log10(max(ends) * 1.5))
    width = plot_width(order)
    x = alt.X(
        "rel_error:Q",
        title="Relative error against float64 (log scale)",
        scale=alt.Scale(type="log", domain=[lo, hi], nice=False),
        axis=log_axis(lo, hi, width),
    )
    y = alt.Y("workload:N", title=None, sort=order, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    # the legends below the plot: beside it they took 120 px of a print width the ids need
    below = alt.Legend(orient="bottom", direction="horizontal")
    colour = alt.Color(
        "dtype:N",
        title="dtype",
        scale=alt.Scale(domain=dtypes, scheme=CATEGORY_SCHEME),
        legend=below,
    )
    states = ["within tolerance", "over tolerance", "no tolerance"]
    dots = (
        alt.Chart(named_data(points))
        .mark_point(filled=True, opacity=0.9)
        .encode(
            x=x,
            y=y,
            color=colour,
            shape=alt.Shape(
                "within:N",
                title="rubric",
                scale=alt.Scale(domain=states, range=["circle", "cross", "square"]),
                legend=below,
            ),
            size=alt.Size(
                "within:N", legend=None, scale=alt.Scale(domain=states, range=[45, 150, 45])
            ),
            tooltip=[
                alt.Tooltip("workload:N"),
                alt.Tooltip("dtype:N"),
                alt.Tooltip("rel_error_text:N", title="relative error"),
                alt.Tooltip("tolerance_text:N", title="tolerance"),
                alt.Tooltip("within:N", title="rubric"),
                alt.Tooltip("max_abs_text:N", title="max abs error"),
                alt.Tooltip("top1_agreement:Q", title="top-1 agreement", format=".2%"),
                alt.Tooltip("kl_text:N", title="KL divergence"),
                alt.Tooltip("source:N", title="file"),
            ],
        )
    )
    rule_layer = (
        alt.Chart(named_data(rules))
        .mark_rule(strokeDash=[5, 3], strokeWidth=1.5)
        .encode(x=x, color=colour, tooltip=[alt.Tooltip("label:N", title="rubric")])
    )
    labels = (
        alt.Chart(named_data(rules))
        .mark_text(align="left", baseline="top", dx=3, fontSize=LABEL_PX, angle=0)
        .encode(x=x, y=alt.value(2), text="label:N", color=colour)
    )
    pitch = max(LABEL_PX + 4, min(BAR_PX + 4, (MAX_CHART_HEIGHT_PX - 200) // len(order)))
    chart = alt.layer(*([rule_layer, labels] if rules else []), dots).properties(
        width=width,
        height=max(NO_DATA_HEIGHT, len(order) * pitch),
        title=chart_title(title, notes),
    )
    return finish_chart(chart)
