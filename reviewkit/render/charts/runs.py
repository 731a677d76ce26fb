"""Charts of one or more runs: MFU and memory stall by layer, time split, latency (the roofline
is in roofline.py)."""

from __future__ import annotations

import math

from reviewkit.render.charts.axes import log_axis, log_domain
from reviewkit.render.charts.base import (
    BAR_PX,
    CATEGORY_SCHEME,
    COMMUNICATION_COMPONENT,
    COMPONENTS,
    GROUP_GAP_PX,
    LABEL_LIMIT,
    MAX_CHART_HEIGHT_PX,
    MAX_CHART_WIDTH_PX,
    MAX_SAMPLES,
    MAX_WORKLOADS,
    MEASURED_COMPONENTS,
    MILLI,
    NO_DATA_HEIGHT,
    PERCENTILE_COLOURS,
    ROOF_COMPONENTS,
    UNATTRIBUTED_COMPONENT,
    WIDTH,
    alt,
    chart_title,
    finish_chart,
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

MIN_BAR_PX = 5  # still a bar, and its colour still reads


# A grouped bar chart's title, subtitle lines, x axis and padding around its plot.
BARS_CHROME_PX = 120


def _bar_px(groups: int, per_group: int, chrome: int = BARS_CHROME_PX) -> int:
    """BAR_PX a bar, thinner where groups x bars of it would pass MAX_CHART_HEIGHT_PX (eleven
    layer types of six runs and dtypes: (900 - 120 - 11 x 10) / 66 = 10 px)."""
    room = MAX_CHART_HEIGHT_PX - chrome - groups * GROUP_GAP_PX
    return max(MIN_BAR_PX, min(BAR_PX, room // max(1, groups * per_group)))


def grouped_height(groups: int, per_group: int) -> int:
    bar = _bar_px(groups, per_group)
    return max(NO_DATA_HEIGHT, groups * (per_group * bar + GROUP_GAP_PX))


def _bars_by_layer(
    rows: list[dict], field: str, title: str, axis_title: str, what: str, over_note: str = ""
) -> dict:
    data, dropped = [], 0
    for r in rows:
        value = r.get(field)
        if not is_finite(value):
            dropped += 1  # a missing value drawn as a zero-length bar would read as 0 %
            continue
        data.append({"run": str(r["run"]), "layer_type": str(r["layer_type"]), field: float(value)})
    notes = [f"{plural(dropped, 'row')} without a {what} value not shown"] if dropped else []
    if not data:
        return no_data_chart(title, notes)
    runs = unique_in_order(d["run"] for d in data)
    layers = sorted({d["layer_type"] for d in data})
    data.sort(key=lambda d: (layers.index(d["layer_type"]), runs.index(d["run"])))
    over = sum(1 for d in data if d[field] > 1)
    if over and over_note:
        notes.append(f"{plural(over, 'bar')} above 100 %: {over_note}")
    chart = (
        alt.Chart(named_data(data))
        .mark_bar()
        .encode(
            # No fixed domain: values above 100 % must stay visible, not be clipped.
            x=alt.X(f"{field}:Q", title=axis_title, axis=alt.Axis(format="%")),
            y=alt.Y("layer_type:N", title="Layer type", sort=layers),
            yOffset=alt.YOffset("run:N", sort=runs),
            color=alt.Color(
                "run:N", title="run", scale=alt.Scale(domain=runs, scheme=CATEGORY_SCHEME)
            ),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("layer_type:N", title="layer type"),
                alt.Tooltip(f"{field}:Q", title=what, format=".1%"),
            ],
        )
        .properties(
            width=WIDTH,
            height=grouped_height(len(layers), len(runs)),
            title=chart_title(title, notes),
        )
    )
    return finish_chart(chart)


@memoised_chart
def mfu_by_layer(rows: list[dict]) -> dict:
    """Grouped horizontal bars of MFU per layer type, one bar per run."""
    return _bars_by_layer(
        rows,
        "mfu",
        "MFU by layer type",
        "MFU (% of peak FLOP/s)",
        "MFU",
        # Above the roofline is physically impossible: the count or the peak is wrong.
        over_note="check the FLOP count or the peak",
    )


@memoised_chart
def stall_by_layer(rows: list[dict]) -> dict:
    """Grouped horizontal bars of memory-stall fraction per layer type, one bar per run."""
    return _bars_by_layer(
        rows,
        "memory_stall_fraction",
        "Memory-stall fraction by layer type",
        "Memory-stall fraction (% of layer time)",
        "memory-stall fraction",
    )


# Every segment a decomposition bar can have, in stack order: the roof terms, the measured split
# of the rest (or the two together where it was not measured), then the wire.
ALL_COMPONENTS = (*COMPONENTS, UNATTRIBUTED_COMPONENT, COMMUNICATION_COMPONENT)


def _segments(r: dict) -> list[tuple[tuple[str, str, str], float]] | None:
    """A row's segments with their shares, or None when a share it needs is missing (a partial
    stack would look like a complete one). Overhead and inefficiency are drawn apart only when
    both were measured; with neither (a bundle recorded before overhead was measured) the rest
    is one segment, `unattributed` (1 - compute - stall - communication where not given)."""
    if not all(is_finite(r.get(key)) for key, _, _ in ROOF_COMPONENTS):
        return None
    out = [(c, float(r[c[0]])) for c in ROOF_COMPONENTS]
    if is_finite(r.get("overhead")) and is_finite(r.get("inefficiency")):
        return out + [(c, float(r[c[0]])) for c in MEASURED_COMPONENTS]
    if r.get("overhead") is not None or r.get("inefficiency") is not None:
        return None  # one measured and not the other: nothing says where the rest goes
    rest = r.get("unattributed")
    if rest is None:
        explained = sum(share for _, share in out) + float(r.get("communication") or 0.0)
        rest = max(0.0, 1.0 - explained)
    elif not is_finite(rest):
        return None
    return [*out, (UNATTRIBUTED_COMPONENT, float(rest))]


@memoised_chart
def time_decomposition(rows: list[dict]) -> dict:
    """Stacked bars of where a layer type's time goes, a panel per layer type, a bar per run:
    compute, memory stall, inefficiency and overhead where overhead was measured; compute,
    memory stall and one "overhead + inefficiency (not measured apart)" segment where it was
    not; communication too when a multi-rank run's row has it."""
    title = "Where the time goes, by layer type"
    data, dropped, unmeasured = [], 0, []
    communicates = any(is_positive(r.get("communication")) for r in rows)
    for r in rows:
        segments = _segments(r)
        if segments is None:
            dropped += 1
            continue
        if communicates:
            # one process puts nothing on a wire: communication 0 where not recorded
            segments.append((COMMUNICATION_COMPONENT, float(r.get("communication") or 0.0)))
        if any(c is UNATTRIBUTED_COMPONENT for c, _ in segments):
            unmeasured.append(str(r["run"]))
        for component, share in segments:
            data.append(
                {
                    "run": str(r["run"]),
                    "layer_type": str(r["layer_type"]),
                    "component": component[1],
                    "share": share,
                    "order": ALL_COMPONENTS.index(component),
                }
            )
    notes = [f"{plural(dropped, 'row')} with a missing share not shown"] if dropped else []
    if unmeasured:
        notes.append(
            f"overhead not measured for {', '.join(unique_in_order(unmeasured))}: the grey "
            "segment is overhead and inefficiency together, not told apart"
        )
    if not data:
        return no_data_chart(title, notes)
    runs = unique_in_order(d["run"] for d in data)
    layers = sorted({d["layer_type"] for d in data})
    data.sort(key=lambda d: (layers.index(d["layer_type"]), runs.index(d["run"]), d["order"]))
    drawn = {d["order"] for d in data}
    components = [c for i, c in enumerate(ALL_COMPONENTS) if i in drawn]
    names = [name for _, name, _ in components]
    # A panel per layer type, a bar per run, each bar labelled with its run. One column of
    # panels where it fits the page's height; else two, side by side (eleven layer types of
    # six runs were 1,400 px tall, its 10 px labels 4.6 pt in print).
    pitch = DECOMPOSITION_BAR_PX + 2
    one_column = len(layers) * (len(runs) * pitch + FACET_GAP_PX) + DECOMPOSITION_CHROME_PX
    columns = 1 if one_column <= MAX_CHART_HEIGHT_PX else 2
    labels = label_px(runs) + 12  # the run labels and their ticks
    width = (MAX_CHART_WIDTH_PX - 30 - columns * labels - (columns - 1) * 16) // columns
    if columns == 1:
        width -= 110  # the layer-type header beside each panel
    chart = (
        alt.Chart(named_data(data))
        .mark_bar(size=DECOMPOSITION_BAR_PX)
        .encode(
            x=alt.X(
                "share:Q",
                title="Share of layer time (%)",
                stack="zero",
                axis=alt.Axis(format="%"),
            ),
            y=alt.Y("run:N", title=None, sort=runs),
            color=alt.Color(
                "component:N",
                title="component",
                scale=alt.Scale(domain=names, range=[c for _, _, c in components]),
                sort=names,
                # below the plot: "overhead + inefficiency (not measured apart)" needs the room
                legend=alt.Legend(orient="bottom", columns=2, labelLimit=LABEL_LIMIT),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("layer_type:N", title="layer type"),
                alt.Tooltip("component:N"),
                alt.Tooltip("share:Q", title="share", format=".1%"),
            ],
        )
        .properties(width=width, height=alt.Step(pitch))
    )
    if columns == 1:
        chart = chart.facet(
            row=alt.Row(
                "layer_type:N",
                title="Layer type",
                sort=layers,
                header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=110),
            ),
            spacing=FACET_GAP_PX,
        )
    else:
        chart = chart.facet(
            facet=alt.Facet(
                "layer_type:N", title=None, sort=layers, header=alt.Header(labelLimit=width)
            ),
            columns=2,
            spacing={"row": FACET_GAP_PX, "column": 16},
        )
    return finish_chart(chart.properties(title=chart_title(title, notes)))


DECOMPOSITION_BAR_PX = 11  # a bar beside its 10 px run label


FACET_GAP_PX = 8  # between two layer types' panels (each with its header in two columns: +16)


# The title, two subtitle lines, the x axis and the component legend below (two columns of
# up to three rows).
DECOMPOSITION_CHROME_PX = 170


def _thin(samples: list[float], limit: int = MAX_SAMPLES) -> list[float]:
    """Evenly spaced order statistics, both ends included: same input, same output."""
    ordered = sorted(samples)
    n = len(ordered)
    if n <= limit:
        return ordered
    return [ordered[round(i * (n - 1) / (limit - 1))] for i in range(limit)]


@memoised_chart
def latency_distribution(rows: list[dict], max_workloads: int = MAX_WORKLOADS) -> dict:
    """Strips of latency samples per workload and run (ms, log x) with p50/p95/p99 ticks."""
    title = "Latency distribution per workload"
    slowest: dict[str, float] = {}
    for r in rows:
        p50 = r.get("p50_s")
        key = float(p50) if is_finite(p50) else -math.inf
        workload = str(r["workload"])
        slowest[workload] = max(slowest.get(workload, -math.inf), key)
    # Slowest by p50 of any run first; the name breaks ties so the choice is stable.
    workloads = sorted(slowest, key=lambda w: (-slowest[w], w))[:max_workloads]
    notes = []
    if len(slowest) > len(workloads):
        notes.append(f"the {len(workloads)} slowest of {len(slowest)} workloads by p50")

    runs = unique_in_order(str(r["run"]) for r in rows if str(r["workload"]) in workloads)
    samples, ticks = [], []
    thinned = dropped = 0
    chosen = sorted(
        (r for r in rows if str(r["workload"]) in workloads),
        key=lambda r: (workloads.index(str(r["workload"])), runs.index(str(r["run"]))),
    )
    for r in chosen:
        run, workload = str(r["run"]), str(r["workload"])
        raw = r.get("samples_s")
        raw = [] if raw is None else list(raw)  # may be a numpy array: no truth test
        usable = [s for s in raw if is_positive(s)]
        dropped += len(raw) - len(usable)
        kept = _thin(usable)
        thinned += len(usable) > len(kept)
        samples += [
            {"run": run, "workload": workload, "latency_ms": float(s) * MILLI} for s in kept
        ]
        for name in PERCENTILE_COLOURS:
            value = r.get(f"{name}_s")
            if is_positive(value):
                ticks.append(
                    {
                        "run": run,
                        "workload": workload,
                        "percentile": name,
                        "latency_ms": float(value) * MILLI,
                    }
                )
    if thinned:
        notes.append(
            f"{MAX_SAMPLES} evenly spaced order statistics shown where a run has more samples"
        )
    if dropped:
        notes.append(f"{plural(dropped, 'sample')} at or below zero not shown (log axis)")
    if not samples and not ticks:
        return no_data_chart(title, notes)

    width = plot_width(workloads)
    lo, hi = log_domain([r["latency_ms"] for r in samples + ticks], LATENCY_PAD)
    x = alt.X(
        "latency_ms:Q",
        title="Latency (ms, log scale)",
        scale=alt.Scale(type="log", domain=[lo, hi], nice=False),
        axis=log_axis(lo, hi, width),
    )
    # No axis title: the ids name themselves, and a title would crowd the long labels.
    y = alt.Y("workload:N", title=None, sort=workloads, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    y_offset = alt.YOffset("run:N", sort=runs)
    strip = (
        alt.Chart(named_data(samples))
        .mark_circle(size=14, opacity=0.35)
        .encode(
            x=x,
            y=y,
            yOffset=y_offset,
            color=alt.Color(
                "run:N",
                title="run",
                scale=alt.Scale(domain=runs, scheme=CATEGORY_SCHEME),
                # the faint sample dots make a pale key; below the plot, as the percentiles
                # (beside it they took 100 px of a print width the long ids need)
                legend=alt.Legend(symbolOpacity=1, orient="bottom", direction="horizontal"),
            ),
        )
    )
    names = list(PERCENTILE_COLOURS)
    tick_layer = (
        alt.Chart(named_data(ticks))
        .mark_tick(thickness=2, size=_bar_px(len(workloads), len(runs)))
        .encode(
            x=x,
            y=y,
            yOffset=y_offset,
            color=alt.Color(
                "percentile:N",
                title="percentile",
                scale=alt.Scale(domain=names, range=list(PERCENTILE_COLOURS.values())),
                legend=alt.Legend(orient="bottom", direction="horizontal"),
            ),
            tooltip=[
                alt.Tooltip("workload:N"),
                alt.Tooltip("run:N"),
                alt.Tooltip("percentile:N"),
                alt.Tooltip("latency_ms:Q", title="latency (ms)", format=",.4~r"),
            ],
        )
    )
    chart = (
        alt.layer(strip, tick_layer)
        .resolve_scale(color="independent")
        .properties(
            width=width,
            height=grouped_height(len(workloads), len(runs)),
            title=chart_title(title, notes),
        )
    )
    return finish_chart(chart)


LATENCY_PAD = 1.3  # the x axis runs a little past the fastest and slowest sample
