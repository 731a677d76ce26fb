"""Charts of one or more runs: roofline, MFU and memory stall by layer, time split, latency."""

from __future__ import annotations

import math

from reviewkit.render.charts.base import (
    BAR_PX,
    CATEGORY_SCHEME,
    CEILING_COLOUR,
    COMMUNICATION_COMPONENT,
    COMPONENTS,
    GIGA,
    GROUP_GAP_PX,
    HEIGHT,
    LABEL_LIMIT,
    MAX_SAMPLES,
    MAX_WORKLOADS,
    MEASURED_COMPONENTS,
    MILLI,
    NO_DATA_HEIGHT,
    PERCENTILE_COLOURS,
    ROOF_COMPONENTS,
    UNATTRIBUTED_COMPONENT,
    WIDTH,
    _data,
    _finish,
    _finite,
    _memo,
    _no_data,
    _plural,
    _positive,
    _title,
    _unique,
    alt,
)


def _ai_range(xs: list[float]) -> tuple[float, float]:
    """Whole decades around the points and ridge points, a factor of 2 clear of both ends."""
    lo = 10.0 ** math.floor(math.log10(min(xs) / 2))
    hi = 10.0 ** math.ceil(math.log10(max(xs) * 2))
    return lo, hi


@_memo
def roofline(runs: list[dict]) -> dict:
    """Log-log roofline: one point per workload, one ceiling line per run and dtype (main
    memory's slope, then the dtype's peak), and one slope per cache level of the device
    profile (a run's `memory_levels`: level and bytes/s, main memory left out). A point's
    roofline is its own level's: `memory_level` names it."""
    title = "Roofline: achieved throughput against arithmetic intensity"
    points: list[dict] = []
    ceilings: list[tuple[str, str, float, float | None]] = []  # run, dtype, P, W
    level_lines: dict[str, tuple[float, float]] = {}  # "l2 · 190 GB/s" -> (W, highest P)
    skipped = 0
    for run in runs:
        label = str(run["label"])
        peaks = run.get("peak_flops_per_s") or {}
        bandwidth = run.get("peak_bytes_per_s")
        bandwidth = float(bandwidth) if _positive(bandwidth) else None
        level_w = {
            str(lv.get("level")): float(lv["peak_bytes_per_s"])
            for lv in run.get("memory_levels") or []
            if _positive(lv.get("peak_bytes_per_s"))
        }
        top = max((float(p) for p in peaks.values() if _positive(p)), default=None)
        if top is not None:
            # Runs on one device share their levels: one line each, named by level and value.
            for level, w_level in level_w.items():
                gbs = w_level / GIGA
                shown = f"{gbs:,.0f}" if gbs >= 1000 else f"{gbs:.3g}"
                level_lines.setdefault(f"{level} · {shown} GB/s", (w_level, top))
        workloads = sorted(
            run.get("workloads") or [],
            key=lambda w: (str(w.get("layer_type")), str(w.get("id")), str(w.get("dtype"))),
        )
        for w in workloads:
            ai, rate = w.get("arithmetic_intensity"), w.get("achieved_flops_per_s")
            if not (_positive(ai) and _positive(rate)):
                skipped += 1  # log axes cannot place zero, missing or infinite values
                continue
            ai, rate = float(ai), float(rate)
            dtype = str(w.get("dtype"))
            peak = peaks.get(dtype)
            peak = float(peak) if _positive(peak) else None
            attainable = None
            w_point = level_w.get(str(w.get("memory_level")), bandwidth)
            if peak is not None:
                attainable = min(peak, w_point * ai) if w_point else peak
            points.append(
                {
                    "run": label,
                    "id": str(w.get("id")),
                    "layer_type": str(w.get("layer_type")),
                    "dtype": dtype,
                    "arithmetic_intensity": ai,
                    "gflops_per_s": rate / GIGA,
                    "peak_gflops_per_s": peak / GIGA if peak else None,
                    "attainable_gflops_per_s": attainable / GIGA if attainable else None,
                    "memory_level": str(w.get("memory_level") or "main memory"),
                    "mfu": rate / peak if peak else None,
                    "fraction_of_attainable": rate / attainable if attainable else None,
                }
            )
        # Ceilings only for the dtypes the run measured: a peak table lists more than is used.
        dtypes = sorted({str(w.get("dtype")) for w in workloads}) or sorted(map(str, peaks))
        for dtype in dtypes:
            peak = peaks.get(dtype)
            if _positive(peak):
                ceilings.append((label, dtype, float(peak), bandwidth))

    notes = []
    if skipped:
        notes.append(
            f"{_plural(skipped, 'workload')} with zero, missing or infinite FLOP rate or "
            "intensity not shown (log axes)"
        )
    if not points and not ceilings:
        return _no_data(title, notes)

    ridges = [p / w for _, _, p, w in ceilings if w] + [p / w for w, p in level_lines.values()]
    xs = [p["arithmetic_intensity"] for p in points] + ridges or [1.0]
    lo, hi = _ai_range(xs)
    lines = []
    for label, dtype, peak, bandwidth in ceilings:
        name = f"{label} {dtype} ceiling"
        # min(P, W·AI) is two straight segments on log-log axes: its ends and the ridge suffice.
        ais = [lo, peak / bandwidth, hi] if bandwidth else [lo, hi]
        for ai in ais:
            y = min(peak, bandwidth * ai) if bandwidth else peak
            lines.append(
                {
                    "ceiling": name,
                    "arithmetic_intensity": ai,
                    "gflops_per_s": y / GIGA,
                    "peak_gflops_per_s": peak / GIGA,
                    "peak_gbytes_per_s": bandwidth / GIGA if bandwidth else None,
                }
            )
    for name, (w_level, top) in level_lines.items():
        # A cache level's slope up to where it meets the highest compute peak.
        for ai in (lo, top / w_level):
            lines.append(
                {
                    "ceiling": name,
                    "arithmetic_intensity": ai,
                    "gflops_per_s": w_level * ai / GIGA,
                    "peak_gflops_per_s": None,
                    "peak_gbytes_per_s": w_level / GIGA,
                }
            )

    x = alt.X(
        "arithmetic_intensity:Q",
        title="Arithmetic intensity (FLOP/byte, log scale)",
        scale=alt.Scale(type="log", domain=[lo, hi]),
    )
    y = alt.Y(
        "gflops_per_s:Q", title="Throughput (GFLOP/s, log scale)", scale=alt.Scale(type="log")
    )
    ceiling_names = _unique(line["ceiling"] for line in lines)
    ceiling_layer = (
        alt.Chart(_data(lines))
        .mark_line(color=CEILING_COLOUR, strokeWidth=1.5)
        .encode(
            x=x,
            y=y,
            strokeDash=alt.StrokeDash(
                "ceiling:N", title="ceiling", scale=alt.Scale(domain=ceiling_names)
            ),
            detail="ceiling:N",
            tooltip=[
                alt.Tooltip("ceiling:N"),
                alt.Tooltip("peak_gflops_per_s:Q", title="peak (GFLOP/s)", format=",.4~g"),
                alt.Tooltip("peak_gbytes_per_s:Q", title="bandwidth (GB/s)", format=",.4~g"),
            ],
        )
    )
    run_labels = _unique(str(r["label"]) for r in runs)
    layer_types = sorted({p["layer_type"] for p in points})
    point_layer = (
        alt.Chart(_data(points))
        .mark_point(filled=True, size=60, opacity=0.85)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "layer_type:N",
                title="layer type",
                scale=alt.Scale(domain=layer_types, scheme=CATEGORY_SCHEME),
            ),
            shape=alt.Shape("run:N", title="run", scale=alt.Scale(domain=run_labels)),
            tooltip=[
                alt.Tooltip("id:N", title="workload"),
                alt.Tooltip("run:N"),
                alt.Tooltip("layer_type:N", title="layer type"),
                alt.Tooltip("dtype:N"),
                alt.Tooltip("memory_level:N", title="working set in"),
                alt.Tooltip("arithmetic_intensity:Q", title="FLOP/byte", format=",.3~g"),
                alt.Tooltip("gflops_per_s:Q", title="achieved (GFLOP/s)", format=",.4~g"),
                alt.Tooltip("peak_gflops_per_s:Q", title="peak (GFLOP/s)", format=",.4~g"),
                alt.Tooltip(
                    "attainable_gflops_per_s:Q", title="roofline (GFLOP/s)", format=",.4~g"
                ),
                alt.Tooltip("mfu:Q", title="MFU (of peak)", format=".1%"),
                alt.Tooltip("fraction_of_attainable:Q", title="of roofline", format=".1%"),
            ],
        )
    )
    chart = alt.layer(ceiling_layer, point_layer).properties(
        width=WIDTH, height=HEIGHT, title=_title(title, notes)
    )
    return _finish(chart)


def _grouped_height(groups: int, per_group: int) -> int:
    return max(NO_DATA_HEIGHT, groups * (per_group * BAR_PX + GROUP_GAP_PX))


def _bars_by_layer(
    rows: list[dict], field: str, title: str, axis_title: str, what: str, over_note: str = ""
) -> dict:
    data, dropped = [], 0
    for r in rows:
        value = r.get(field)
        if not _finite(value):
            dropped += 1  # a missing value drawn as a zero-length bar would read as 0 %
            continue
        data.append({"run": str(r["run"]), "layer_type": str(r["layer_type"]), field: float(value)})
    notes = [f"{_plural(dropped, 'row')} without a {what} value not shown"] if dropped else []
    if not data:
        return _no_data(title, notes)
    runs = _unique(d["run"] for d in data)
    layers = sorted({d["layer_type"] for d in data})
    data.sort(key=lambda d: (layers.index(d["layer_type"]), runs.index(d["run"])))
    over = sum(1 for d in data if d[field] > 1)
    if over and over_note:
        notes.append(f"{_plural(over, 'bar')} above 100 %: {over_note}")
    chart = (
        alt.Chart(_data(data))
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
            height=_grouped_height(len(layers), len(runs)),
            title=_title(title, notes),
        )
    )
    return _finish(chart)


@_memo
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


@_memo
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
    if not all(_finite(r.get(key)) for key, _, _ in ROOF_COMPONENTS):
        return None
    out = [(c, float(r[c[0]])) for c in ROOF_COMPONENTS]
    if _finite(r.get("overhead")) and _finite(r.get("inefficiency")):
        return out + [(c, float(r[c[0]])) for c in MEASURED_COMPONENTS]
    if r.get("overhead") is not None or r.get("inefficiency") is not None:
        return None  # one measured and not the other: nothing says where the rest goes
    rest = r.get("unattributed")
    if rest is None:
        explained = sum(share for _, share in out) + float(r.get("communication") or 0.0)
        rest = max(0.0, 1.0 - explained)
    elif not _finite(rest):
        return None
    return [*out, (UNATTRIBUTED_COMPONENT, float(rest))]


@_memo
def time_decomposition(rows: list[dict]) -> dict:
    """Stacked bars of where a layer type's time goes, a panel per layer type, a bar per run:
    compute, memory stall, inefficiency and overhead where overhead was measured; compute,
    memory stall and one "overhead + inefficiency (not measured apart)" segment where it was
    not; communication too when a multi-rank run's row has it."""
    title = "Where the time goes, by layer type"
    data, dropped, unmeasured = [], 0, []
    communicates = any(_positive(r.get("communication")) for r in rows)
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
    notes = [f"{_plural(dropped, 'row')} with a missing share not shown"] if dropped else []
    if unmeasured:
        notes.append(
            f"overhead not measured for {', '.join(_unique(unmeasured))}: the grey segment is "
            "overhead and inefficiency together, not told apart"
        )
    if not data:
        return _no_data(title, notes)
    runs = _unique(d["run"] for d in data)
    layers = sorted({d["layer_type"] for d in data})
    data.sort(key=lambda d: (layers.index(d["layer_type"]), runs.index(d["run"]), d["order"]))
    drawn = {d["order"] for d in data}
    components = [c for i, c in enumerate(ALL_COMPONENTS) if i in drawn]
    names = [name for _, name, _ in components]
    chart = (
        alt.Chart(_data(data))
        .mark_bar()
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
                legend=alt.Legend(orient="bottom", columns=3, labelLimit=LABEL_LIMIT),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("layer_type:N", title="layer type"),
                alt.Tooltip("component:N"),
                alt.Tooltip("share:Q", title="share", format=".1%"),
            ],
        )
        .properties(width=WIDTH - 120, height=len(runs) * (BAR_PX + 4))
        .facet(
            row=alt.Row(
                "layer_type:N",
                title="Layer type",
                sort=layers,
                header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=110),
            ),
            spacing=6,
        )
        .properties(title=_title(title, notes))
    )
    return _finish(chart)


def _thin(samples: list[float], limit: int = MAX_SAMPLES) -> list[float]:
    """Evenly spaced order statistics, both ends included: same input, same output."""
    ordered = sorted(samples)
    n = len(ordered)
    if n <= limit:
        return ordered
    return [ordered[round(i * (n - 1) / (limit - 1))] for i in range(limit)]


@_memo
def latency_distribution(rows: list[dict], max_workloads: int = MAX_WORKLOADS) -> dict:
    """Strips of latency samples per workload and run (ms, log x) with p50/p95/p99 ticks."""
    title = "Latency distribution per workload"
    slowest: dict[str, float] = {}
    for r in rows:
        p50 = r.get("p50_s")
        key = float(p50) if _finite(p50) else -math.inf
        workload = str(r["workload"])
        slowest[workload] = max(slowest.get(workload, -math.inf), key)
    # Slowest by p50 of any run first; the name breaks ties so the choice is stable.
    workloads = sorted(slowest, key=lambda w: (-slowest[w], w))[:max_workloads]
    notes = []
    if len(slowest) > len(workloads):
        notes.append(f"the {len(workloads)} slowest of {len(slowest)} workloads by p50")

    runs = _unique(str(r["run"]) for r in rows if str(r["workload"]) in workloads)
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
        usable = [s for s in raw if _positive(s)]
        dropped += len(raw) - len(usable)
        kept = _thin(usable)
        thinned += len(usable) > len(kept)
        samples += [
            {"run": run, "workload": workload, "latency_ms": float(s) * MILLI} for s in kept
        ]
        for name in PERCENTILE_COLOURS:
            value = r.get(f"{name}_s")
            if _positive(value):
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
        notes.append(f"{_plural(dropped, 'sample')} at or below zero not shown (log axis)")
    if not samples and not ticks:
        return _no_data(title, notes)

    x = alt.X("latency_ms:Q", title="Latency (ms, log scale)", scale=alt.Scale(type="log"))
    # No axis title: the ids name themselves, and a title would crowd the long labels.
    y = alt.Y("workload:N", title=None, sort=workloads, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    y_offset = alt.YOffset("run:N", sort=runs)
    strip = (
        alt.Chart(_data(samples))
        .mark_circle(size=14, opacity=0.35)
        .encode(
            x=x,
            y=y,
            yOffset=y_offset,
            color=alt.Color(
                "run:N",
                title="run",
                scale=alt.Scale(domain=runs, scheme=CATEGORY_SCHEME),
                legend=alt.Legend(symbolOpacity=1),  # the faint sample dots make a pale key
            ),
        )
    )
    names = list(PERCENTILE_COLOURS)
    tick_layer = (
        alt.Chart(_data(ticks))
        .mark_tick(thickness=2, size=BAR_PX)
        .encode(
            x=x,
            y=y,
            yOffset=y_offset,
            color=alt.Color(
                "percentile:N",
                title="percentile",
                scale=alt.Scale(domain=names, range=list(PERCENTILE_COLOURS.values())),
            ),
            tooltip=[
                alt.Tooltip("workload:N"),
                alt.Tooltip("run:N"),
                alt.Tooltip("percentile:N"),
                alt.Tooltip("latency_ms:Q", title="latency (ms)", format=",.4~g"),
            ],
        )
    )
    chart = (
        alt.layer(strip, tick_layer)
        .resolve_scale(color="independent")
        .properties(
            width=WIDTH,
            height=_grouped_height(len(workloads), len(runs)),
            title=_title(title, notes),
        )
    )
    return _finish(chart)
