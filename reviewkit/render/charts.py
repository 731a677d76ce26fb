"""Turn analysed data into Vega-Lite chart specs (via altair) and convert specs to SVG."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import numbers
from collections.abc import Iterable
from pathlib import Path

import altair as alt

from reviewkit.evidence.trace import fit as fitmatrix

# vl-convert lays text out with its own font set and WeasyPrint with fontconfig's: DejaVu Sans
# is on both sides, so the SVG in the PDF measures and draws with the same glyphs.
FONT = "DejaVu Sans"
# A4 minus 20 mm margins leaves ~170 mm ≈ 640 px at 96 dpi; 560 px of plot leaves room for the
# axis labels and legend beside it.
WIDTH = 560
HEIGHT = 320
NO_DATA_HEIGHT = 120  # a visible box for the "no data" message without wasting a page
# altair 6.3 builds specs against schema v6.4.1; vl-convert 1.9 bundles Vega-Lite 6.4, so
# conversion and the interactive bundle use the same version the specs were written for.
VEGALITE_VERSION = "6.4"
CATEGORY_SCHEME = "tableau10"  # distinguishable under the common colour-vision deficiencies
GIGA = 1e9  # FLOP/s are shown as GFLOP/s: device rates sit between 1e9 and 1e15
MILLI = 1e3  # seconds shown as milliseconds: kernel latencies sit between 1e-6 s and 1 s
# 60 evenly spaced order statistics keep the shape and both ends of a distribution while a
# 12-workload, 2-run chart stays under 0.1 MB and quick to draw in the PDF (~0.3 s at 400).
MAX_SAMPLES = 60
MAX_WORKLOADS = 12
LABEL_LIMIT = 300  # px: full workload ids (up to ~50 characters at 10 px) instead of "gemm.bert-b…"
# Okabe-Ito bluish green / vermillion / grey: safe for deuteranopia and protanopia.
VERDICT_COLOURS = {
    "faster": "#009E73",
    "slower": "#D55E00",
    "no significant difference": "#999999",
}
VERDICT_SHAPES = {  # shape repeats the colour so the verdict survives greyscale printing
    "faster": "triangle-left",
    "slower": "triangle-right",
    "no significant difference": "circle",
}
# Time components in stack order, with fixed tableau10 colours so every chart reads alike.
COMPONENTS = (
    ("compute", "compute", "#4C78A8"),
    ("memory_stall", "memory stall", "#F58518"),
    ("overhead", "overhead", "#BAB0AC"),
)
PERCENTILE_COLOURS = {"p50": "#000000", "p95": "#6A3D9A", "p99": "#C51B7D"}  # apart in lightness
CEILING_COLOUR = "#4D4D4D"  # neutral: the colour channel is taken by layer type
BAR_PX = 14  # one bar per run; thick enough for a 10 px label beside it
GROUP_GAP_PX = 10  # space between layer-type groups
RISK_LEVELS = ("unrated", "low", "medium", "high")  # axis order; "" maps to "unrated"
RISK_CELL_FILL = {0: "#F7F7F7", 1: "#EFEFEF", 2: "#E3E3E3", 3: "#D4D4D4"}  # by severity band
OWNER_COLOURS = {"owner named": "#0072B2", "no owner": "#D55E00"}  # Okabe-Ito blue/vermillion
OWNER_SHAPES = {"owner named": "circle", "no owner": "triangle-up"}
RISK_LABEL_LIMIT_PX = 108  # cell width (560 / 4) less the point and its margin: labels stay in
FOREST_PAD = 1.1  # factor of x range beyond the outermost interval end
TRADE_PANEL_WIDTH = 200  # two panels side by side fit the A4 width with candidate labels
TRADE_BAR_PX = 22


def _finite(x: object) -> bool:
    """A real number (numpy scalars included); None, NaN, inf and booleans are not."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _positive(x: object) -> bool:
    """A number a log axis can show: finite and above zero."""
    return _finite(x) and x > 0


def _unique(values: Iterable[str]) -> list[str]:
    """First-seen order: the caller's order of runs (baseline first) is meaningful."""
    return list(dict.fromkeys(values))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _title(text: str, notes: list[str] | None = None) -> alt.TitleParams:
    if notes:
        return alt.TitleParams(text=text, subtitle=notes)
    return alt.TitleParams(text=text)


# Charts reference their rows by name and the rows are attached to the finished spec as
# top-level "datasets" (still inline, no URL): altair deep-copies inline values at every
# layer and encoding, which cost ~0.6 s a packet for the latency samples alone.
_PENDING: dict[str, list] = {}


def _data(values: Iterable[dict]) -> alt.NamedData:
    rows = list(values)
    text = json.dumps(rows, sort_keys=True, separators=(",", ":"), default=float)
    name = "rows-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    _PENDING[name] = rows
    return alt.NamedData(name=name)


def _dataset_names(node: object, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        data = node.get("data")
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            found.add(data["name"])
        for value in node.values():
            _dataset_names(value, found)
    elif isinstance(node, list):
        for value in node:
            _dataset_names(value, found)
    return found


_SPEC_MEMO: dict[str, dict] = {}
SPEC_MEMO_ENTRIES = 256  # a site of many decisions repeats the same charts of shared runs


def _memo(fn):
    """Memoise a chart builder on its JSON-encoded arguments: building through altair costs
    20-90 ms a chart, and a decisions log draws the same runs' charts many times. The spec
    returned is shared: callers read it and never modify it."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        key = (
            fn.__name__
            + hashlib.sha256(
                json.dumps([args, kwargs], sort_keys=True, default=float).encode()
            ).hexdigest()
        )
        if key not in _SPEC_MEMO:
            if len(_SPEC_MEMO) >= SPEC_MEMO_ENTRIES:
                _SPEC_MEMO.pop(next(iter(_SPEC_MEMO)))
            _SPEC_MEMO[key] = fn(*args, **kwargs)
        return _SPEC_MEMO[key]

    return wrapper


def _finish(chart: alt.TopLevelMixin) -> dict:
    """Apply the shared look and return the plain dict, with its rows attached."""
    configured = (
        chart.configure(font=FONT)
        .configure_axis(labelFont=FONT, titleFont=FONT)
        .configure_legend(labelFont=FONT, titleFont=FONT)
        .configure_title(font=FONT, subtitleFont=FONT, anchor="start")
        .configure_header(labelFont=FONT, titleFont=FONT)
        .configure_text(font=FONT)
        .configure_range(category={"scheme": CATEGORY_SCHEME})
    )
    # altair's own validation costs ~50 ms a chart; tests validate every chart kind instead.
    spec = configured.to_dict(validate=False)
    # Room on the left: WeasyPrint draws DejaVu a hair wider than vl-convert measures it, and
    # the first letters of long axis labels were clipped in the PDF.
    spec["padding"] = {"left": 14, "top": 5, "right": 5, "bottom": 5}
    names = sorted(_dataset_names(spec, set()))
    spec["datasets"] = {name: _PENDING[name] for name in names}
    return spec


def _no_data(title: str, notes: list[str] | None = None) -> dict:
    """A visible "no data" message: an empty plot would read as a rendering failure."""
    chart = (
        alt.Chart(_data([{"message": "no data"}]))
        .mark_text(fontSize=16, color="#555555")
        .encode(text="message:N")
        .properties(width=WIDTH, height=NO_DATA_HEIGHT, title=_title(title, notes))
    )
    return _finish(chart)


# --- roofline --------------------------------------------------------------------------------


def _ai_range(xs: list[float]) -> tuple[float, float]:
    """Whole decades around the points and ridge points, a factor of 2 clear of both ends."""
    lo = 10.0 ** math.floor(math.log10(min(xs) / 2))
    hi = 10.0 ** math.ceil(math.log10(max(xs) * 2))
    return lo, hi


@_memo
def roofline(runs: list[dict]) -> dict:
    """Log-log roofline: one point per workload, one ceiling line per run and dtype."""
    title = "Roofline: achieved throughput against arithmetic intensity"
    points: list[dict] = []
    ceilings: list[tuple[str, str, float, float | None]] = []  # run, dtype, P, W
    skipped = 0
    for run in runs:
        label = str(run["label"])
        peaks = run.get("peak_flops_per_s") or {}
        bandwidth = run.get("peak_bytes_per_s")
        bandwidth = float(bandwidth) if _positive(bandwidth) else None
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
            if peak is not None:
                attainable = min(peak, bandwidth * ai) if bandwidth else peak
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

    ridges = [p / w for _, _, p, w in ceilings if w]
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


# --- per-layer bars --------------------------------------------------------------------------


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


@_memo
def time_decomposition(rows: list[dict]) -> dict:
    """Stacked bars of compute / memory stall / overhead, a panel per layer type, a bar per run."""
    title = "Where the time goes, by layer type"
    data, dropped = [], 0
    for r in rows:
        if not all(_finite(r.get(key)) for key, _, _ in COMPONENTS):
            dropped += 1  # a partial stack would look like a complete one
            continue
        for order, (key, name, _) in enumerate(COMPONENTS):
            data.append(
                {
                    "run": str(r["run"]),
                    "layer_type": str(r["layer_type"]),
                    "component": name,
                    "share": float(r[key]),
                    "order": order,
                }
            )
    notes = [f"{_plural(dropped, 'row')} with a missing share not shown"] if dropped else []
    if not data:
        return _no_data(title, notes)
    runs = _unique(d["run"] for d in data)
    layers = sorted({d["layer_type"] for d in data})
    data.sort(key=lambda d: (layers.index(d["layer_type"]), runs.index(d["run"]), d["order"]))
    names = [name for _, name, _ in COMPONENTS]
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
                scale=alt.Scale(domain=names, range=[c for _, _, c in COMPONENTS]),
                sort=names,
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


# --- latency ---------------------------------------------------------------------------------


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


# --- forest ----------------------------------------------------------------------------------


@_memo
def forest(rows: list[dict], *, item: str = "workload") -> dict:
    """Forest plot of candidate/baseline median ratios with intervals; rows may be layer types."""
    title = f"Median latency ratio per {item}, candidate / baseline"
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
    points.sort(key=lambda p: (p["ratio"], p["workload"]))
    order = _unique(p["workload"] for p in points)
    intervals = [p for p in points if p["low"] is not None]

    # Log "nice" rounds out to whole decades, which squeezes ratios near 1 into a sliver: pad
    # the data (and the rule at 1) by 10 % either side instead.
    ends = (
        [1.0] + [p["ratio"] for p in points] + [v for p in intervals for v in (p["low"], p["high"])]
    )
    x_scale = alt.Scale(
        type="log", domain=[min(ends) / FOREST_PAD, max(ends) * FOREST_PAD], nice=False
    )
    x_title = "Ratio of medians, candidate / baseline (log scale; below 1 is faster)"
    y = alt.Y("workload:N", title=None, sort=order, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    verdicts = list(VERDICT_COLOURS)
    colour_scale = alt.Scale(domain=verdicts, range=list(VERDICT_COLOURS.values()))
    one = (
        alt.Chart(_data([{"ratio": 1.0}]))
        .mark_rule(color="#333333", strokeDash=[4, 3])
        .encode(x=alt.X("ratio:Q", title=x_title, scale=x_scale))
    )
    bars = (
        alt.Chart(_data(intervals))
        .mark_rule(strokeWidth=1.5)
        .encode(
            x=alt.X("low:Q", title=x_title, scale=x_scale),
            x2="high:Q",
            y=y,
            color=alt.Color("verdict:N", legend=None, scale=colour_scale),
        )
    )
    dots = (
        alt.Chart(_data(points))
        .mark_point(filled=True, size=70, opacity=1)
        .encode(
            x=alt.X("ratio:Q", title=x_title, scale=x_scale),
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
    chart = alt.layer(one, bars, dots).properties(
        width=WIDTH,
        height=max(NO_DATA_HEIGHT, len(order) * (BAR_PX + 8)),
        title=_title(title, notes),
    )
    return _finish(chart)


# --- risk map --------------------------------------------------------------------------------


def _risk_index(value: object, what: str, description: str) -> int:
    text = str(value or "").strip().lower()
    if text in ("", "unrated"):
        return 0
    if text not in RISK_LEVELS:
        raise ValueError(f"risk_map: {what} {value!r} of {description!r} is not low/medium/high")
    return RISK_LEVELS.index(text)


@_memo
def risk_map(risks: list[dict]) -> dict:
    """Likelihood x impact grid, one labelled point per risk, coloured by owner presence."""
    title = "Risk map: likelihood against impact"
    if not risks:
        return _no_data(title)
    cells: dict[tuple[int, int], list[int]] = {}
    placed = []
    for i, r in enumerate(risks):
        description = str(r.get("description") or "").strip() or f"risk {i + 1}"
        col = _risk_index(r.get("likelihood"), "likelihood", description)
        row = _risk_index(r.get("level"), "level", description)
        cells.setdefault((col, row), []).append(i)
        owner = str(r.get("owner") or "").strip()
        placed.append((i, description, col, row, owner))
    points = []
    for i, description, col, row, owner in placed:
        members = cells[(col, row)]
        k, m = members.index(i), len(members)
        points.append(
            {
                "description": description,
                "likelihood": RISK_LEVELS[col],
                "level": RISK_LEVELS[row],
                "owner": owner or "none",
                "owner_status": "owner named" if owner else "no owner",
                # Left of the cell centre so the label fits to the right; risks sharing a cell
                # are spread top to bottom in input order (deterministic jitter).
                "x": col - 0.38,
                "y": row + 0.4 - (k + 0.5) * 0.8 / m,
            }
        )
    grid = [
        {
            "x": col - 0.5,
            "x2": col + 0.5,
            "y": row - 0.5,
            "y2": row + 0.5,
            # Severity band: likelihood x impact of the rated cells, 0 for an unrated axis.
            "fill": RISK_CELL_FILL[min(3, math.ceil(col * row / 3))],
        }
        for col in range(len(RISK_LEVELS))
        for row in range(len(RISK_LEVELS))
    ]
    ticks = list(range(len(RISK_LEVELS)))
    label_expr = f"{json.dumps(list(RISK_LEVELS))}[datum.value]"
    domain = [-0.5, len(RISK_LEVELS) - 0.5]
    x = alt.X(
        "x:Q",
        title="Likelihood",
        scale=alt.Scale(domain=domain, nice=False, zero=False),
        axis=alt.Axis(values=ticks, labelExpr=label_expr, grid=False, ticks=False),
    )
    y = alt.Y(
        "y:Q",
        title="Impact (level)",
        scale=alt.Scale(domain=domain, nice=False, zero=False),
        axis=alt.Axis(values=ticks, labelExpr=label_expr, grid=False, ticks=False),
    )
    background = (
        alt.Chart(_data(grid))
        .mark_rect(stroke="#FFFFFF", strokeWidth=2)
        .encode(x=x, x2="x2:Q", y=y, y2="y2:Q", fill=alt.Fill("fill:N", scale=None))
    )
    statuses = list(OWNER_COLOURS)
    marks = (
        alt.Chart(_data(points))
        .mark_point(filled=True, size=60, opacity=1)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "owner_status:N",
                title="owner",
                scale=alt.Scale(domain=statuses, range=list(OWNER_COLOURS.values())),
            ),
            shape=alt.Shape(
                "owner_status:N",
                title="owner",
                scale=alt.Scale(domain=statuses, range=list(OWNER_SHAPES.values())),
            ),
            tooltip=[
                alt.Tooltip("description:N", title="risk"),
                alt.Tooltip("likelihood:N"),
                alt.Tooltip("level:N", title="impact"),
                alt.Tooltip("owner:N"),
            ],
        )
    )
    labels = (
        alt.Chart(_data(points))
        .mark_text(align="left", baseline="middle", dx=7, fontSize=10, limit=RISK_LABEL_LIMIT_PX)
        .encode(x=x, y=y, text="description:N")
    )
    chart = alt.layer(background, marks, labels).properties(
        width=WIDTH, height=HEIGHT + 80, title=_title(title)
    )
    return _finish(chart)


# --- trade view ------------------------------------------------------------------------------

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


# --- platforms side by side ------------------------------------------------------------------

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
                "workload_id": str(c.get("workload_id") or "—"),
                "device": str(c.get("device_name") or ""),
                "dtype": str(c.get("dtype") or ""),
                "mfu_text": (f"{100 * mfu:.1f}% of the {c.get('peak_source')} peak"
                             if _finite(mfu) else str(c.get("reason") or "no MFU")),
                "p99_text": f"{_fmt(float(p99) * MILLI)} ms" if _finite(p99) else "—",
                "sla_text": sla + (f": {c['sla_reason']}" if c.get("sla_reason") else "")
                + (f" [{c['sla_target']}]" if c.get("sla_target") else ""),
                "throughput_text": (f"{_fmt(float(rate))} calls/s"
                                    + (f" at batch {c['batch']}" if c.get("batch") else "")
                                    if _finite(rate) else "—"),
                "perf_w_text": (f"{_fmt(float(energy) / GIGA)} GFLOP/J, "
                                f"{_fmt(float(c.get('avg_watts') or 0.0))} W average"
                                if _finite(energy) else
                                f"not measured: {c.get('energy_reason') or 'no energy'}"),
                "status_text": "measured" if measured else f"not measured: {c.get('reason')}",
            }
        )  # fmt: skip
    if not data:
        return _no_data(title, _notes(notes))
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
        title=_title(title, _notes(lead + notes)),
    )
    return _finish(chart)


# --- production-like evidence: shared helpers ------------------------------------------------

NOTE_CHARS = 96  # a subtitle line wider than the plot runs off the A4 page: wrap it
NOTE_MAX_CHARS = 400  # a reason read from a file is shown, not a whole file pasted into a chart
MUTED_COLOUR = "#9E9E9E"  # invalid levels, partial sub-windows: present but not a result
RULE_COLOUR = "#333333"  # SLA, offline and tolerance rules: neutral against data colours
KNEE_COLOUR = "#E69F00"  # Okabe-Ito orange: apart from the p50/p99 and verdict colours
SWEEP_PANEL_HEIGHT = 220
MAX_SWEEP_PANELS = 8  # a sweep of every workload would fill pages: the first ones, said so
HEAT_STEP_PX = 74  # a heatmap cell fits two 9 px text lines ("MFU 41.2%", "p99 0.736 ms")
HEAT_COLUMNS = 3  # three panels of up to three sequence lengths fit the A4 width
HEAT_FASTER, HEAT_EVEN, HEAT_SLOWER = "#009E73", "#F7F7F7", "#D55E00"  # verdict colours
HEAT_MIN_SPREAD = 1.25  # colour domain at least 0.8x..1.25x, so noise is not painted vivid
MISSING_CELL = "#DDDDDD"  # measured shape with no ratio (not comparable)
STABILITY_PANEL_HEIGHT = 180
SENSOR_PANEL_HEIGHT = 110
ENERGY_PANEL_WIDTH = 230
MAX_QUALITY_WORKLOADS = 40


def _notes(lines: Iterable[str]) -> list[str]:
    """Subtitle lines, each cut to a sane length and wrapped to the plot width."""
    import textwrap

    out: list[str] = []
    for line in lines:
        text = " ".join(str(line).split())
        if len(text) > NOTE_MAX_CHARS:
            text = text[: NOTE_MAX_CHARS - 1] + "…"
        out += textwrap.wrap(text, NOTE_CHARS) or [""]
    return out


def _fmt(x: float) -> str:
    """Four significant digits without exponent noise for the sizes shown (1e-3 to 1e6)."""
    return f"{x:,.4g}"


# --- latency-throughput curve ----------------------------------------------------------------


def _x_rule(x: alt.X, value: float, label: str, what: str, dash: list[int]) -> list[alt.Chart]:
    """A vertical rule with its label upright beside it, mid-height: the panel's corners are
    where the knee and the p50 line sit."""
    rows = [{"achieved_rate_per_s": value, "label": label}]
    return [
        alt.Chart(_data(rows))
        .mark_rule(color=RULE_COLOUR, strokeDash=dash)
        .encode(x=x, tooltip=[alt.Tooltip("label:N", title=what)]),
        alt.Chart(_data(rows))
        .mark_text(angle=270, baseline="bottom", dy=-3, fontSize=9, color=RULE_COLOUR)
        .encode(x=x, y=alt.value(SWEEP_PANEL_HEIGHT // 2), text="label:N"),
    ]


def _sweep_panel(p: dict) -> alt.LayerChart:
    """One workload: p50/p99 against achieved rate, SLA and offline rules, the knee marked."""
    rows = []
    for lv in p.get("levels") or []:
        rate = lv.get("achieved_rate_per_s")
        if not _positive(rate):
            continue
        reasons = "; ".join(map(str, lv.get("invalid_reasons") or [])) or "valid"
        for name in ("p50", "p99"):
            value = lv.get(f"{name}_s")
            if not _positive(value):
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
    sla_ms = float(p["sla_p99_s"]) * MILLI if _positive(p.get("sla_p99_s")) else None
    offline = float(p["offline_rate_per_s"]) if _positive(p.get("offline_rate_per_s")) else None
    knee = p.get("knee") or {}
    ys = [r["latency_ms"] for r in rows] + ([sla_ms] if sla_ms else [])
    log_y = bool(ys) and max(ys) / min(ys) > 10  # queueing blows p99 up by orders of magnitude
    y_title = "Latency (ms" + (", log scale)" if log_y else ")")
    extra_x = [v for v in (offline, p.get("sla_min_rate_per_s")) if _positive(v)]
    x_top = max([r["achieved_rate_per_s"] for r in rows] + [float(v) for v in extra_x] + [1e-9])
    x = alt.X(
        "achieved_rate_per_s:Q",
        title="Achieved throughput (queries/s)",
        scale=alt.Scale(domain=[0, x_top * 1.08], nice=False),
    )
    y = alt.Y(
        "latency_ms:Q",
        title=y_title,
        scale=alt.Scale(type="log") if log_y else alt.Scale(zero=True),
    )
    names = ["p50", "p99"]
    colour = alt.Color(
        "percentile:N",
        title="percentile",
        scale=alt.Scale(domain=names, range=[PERCENTILE_COLOURS[n] for n in names]),
    )
    tooltip = [
        alt.Tooltip("percentile:N"),
        alt.Tooltip("latency_ms:Q", title="latency (ms)", format=",.4~g"),
        alt.Tooltip("achieved_rate_per_s:Q", title="achieved (queries/s)", format=",.4~g"),
        alt.Tooltip("target_rate_per_s:Q", title="offered (queries/s)", format=",.4~g"),
        alt.Tooltip("load_fraction:Q", title="of offline", format=".0%"),
        alt.Tooltip("status:N", title="level"),
        alt.Tooltip("reasons:N", title="why"),
    ]
    valid = [r for r in rows if r["valid"]]
    invalid = [r for r in rows if not r["valid"]]
    layers = [
        alt.Chart(_data(valid))
        .mark_line(strokeWidth=1.5)
        .encode(x=x, y=y, color=colour, detail="percentile:N"),
        alt.Chart(_data(valid))
        .mark_point(filled=True, size=40, opacity=1)
        .encode(x=x, y=y, color=colour, tooltip=tooltip),
    ]
    # Only the layers with rows: altair copies every layer's encodings on combining them (~10 ms
    # a layer), and a packet draws this chart cold on every render.
    if invalid:  # not results: hollow and grey, their reasons in the tooltip
        layers.append(
            alt.Chart(_data(invalid))
            .mark_point(filled=False, size=50, color=MUTED_COLOUR, strokeWidth=1.5)
            .encode(x=x, y=y, shape=alt.value("circle"), tooltip=tooltip)
        )
    if sla_ms is not None:
        sla = [
            {"latency_ms": sla_ms, "label": f"SLA p99 {_fmt(sla_ms)} ms ({p.get('sla_source')})"}
        ]
        layers += [
            alt.Chart(_data(sla))
            .mark_rule(color=RULE_COLOUR, strokeDash=[6, 3])
            .encode(y=y, tooltip=[alt.Tooltip("label:N", title="SLA")]),
            alt.Chart(_data(sla))
            .mark_text(align="left", baseline="bottom", dx=4, dy=-2, fontSize=9, color=RULE_COLOUR)
            .encode(x=alt.value(0), y=y, text="label:N"),
        ]
    if offline is not None:
        layers += _x_rule(x, offline, f"offline {_fmt(offline)}/s", "offline throughput", [2, 2])
    min_rate = p.get("sla_min_rate_per_s")
    if _positive(min_rate):
        layers += _x_rule(x, float(min_rate), f"SLA ≥ {_fmt(min_rate)}/s", "SLA", [6, 3])
    point = knee.get("point")
    if point and _positive(point.get("achieved_rate_per_s")) and _positive(point.get("p99_s")):
        mark = [
            {
                "achieved_rate_per_s": float(point["achieved_rate_per_s"]),
                "latency_ms": float(point["p99_s"]) * MILLI,
                "knee_rate_per_s": knee.get("rate_per_s"),
                "label": f"knee: {_fmt(float(knee['rate_per_s']))}/s offered",
                "rule": str(knee.get("rule") or ""),
            }
        ]
        layers += [
            alt.Chart(_data(mark))
            .mark_point(shape="diamond", size=160, filled=False, strokeWidth=2, color=KNEE_COLOUR)
            .encode(
                x=x,
                y=y,
                tooltip=[
                    alt.Tooltip("label:N", title="knee"),
                    alt.Tooltip("latency_ms:Q", title="p99 (ms)", format=",.4~g"),
                    alt.Tooltip("rule:N"),
                ],
            ),
            alt.Chart(_data(mark))
            .mark_text(align="right", baseline="middle", dx=-10, fontSize=10, color="#8A5C00")
            .encode(x=x, y=y, text="label:N"),
        ]
    return alt.layer(*layers).properties(
        width=WIDTH,
        height=SWEEP_PANEL_HEIGHT,
        title=_title(str(p["workload"]), _notes(p.get("notes") or [])),
    )


@_memo
def latency_throughput(panels: list[dict], notes: list[str] | None = None) -> dict:
    """A latency-throughput curve per swept workload: where latency bends, against the SLA.

    panels: {"workload", "levels": [{achieved_rate_per_s, target_rate_per_s, load_fraction,
    p50_s, p99_s, valid, invalid_reasons}], "offline_rate_per_s", "sla_p99_s", "sla_source",
    "knee": {found, rate_per_s, rule, point: {achieved_rate_per_s, p99_s}}, "notes": [str]}.
    """
    title = "Latency against throughput (server scenario, Poisson arrivals)"
    notes = list(notes or [])
    usable = [p for p in panels if any(_positive(lv.get("achieved_rate_per_s"))
                                       for lv in p.get("levels") or [])]  # fmt: skip
    if len(usable) < len(panels):
        notes.append(f"{_plural(len(panels) - len(usable), 'workload')} with no level to draw")
    if len(usable) > MAX_SWEEP_PANELS:
        notes.append(f"the first {MAX_SWEEP_PANELS} of {len(usable)} workloads; all are in "
                     "packet.json and the sweep file")  # fmt: skip
        usable = usable[:MAX_SWEEP_PANELS]
    if not usable:
        return _no_data(title, _notes(notes))
    chart = (
        alt.vconcat(*[_sweep_panel(p) for p in usable], spacing=28)
        .resolve_scale(x="independent", y="independent")
        .properties(title=_title(title, _notes(notes)))
    )
    return _finish(chart)


# --- shape portability -----------------------------------------------------------------------


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
        return _no_data(title, _notes(notes))
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
        .properties(title=_title(title, _notes([lead, "text: candidate MFU and p99", *notes])))
    )
    return _finish(chart)


# --- production fit --------------------------------------------------------------------------

FIT_TAIL_BANDS = fitmatrix.TAIL_BANDS  # drawn after the decades, in this order
FIT_UNMAPPED = fitmatrix.UNMAPPED  # its own row, last, whatever its share
FIT_ROW_PX = 34  # two 9 px text lines ("12.3%", "80% covered") and their margins
FIT_MIN_COLUMN_PX = 104  # "shape not recorded" at 9 px is ~100 px: narrower clips the label
MAX_FIT_LAYERS = 16  # with the caption, one A4 page; the table and packet.json have every row
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


def _share_text(x: float) -> str:
    return "<0.1%" if 0 < x < 5e-4 else f"{100 * x:.1f}%"


def _covered_pct(covered: float, share: float, uncovered: bool) -> str:
    """The covered part of a cell; never "100%" on an outlined cell, nor "0%" on a covered one."""
    if share <= 0:
        return "—"
    pct = 100 * covered / share
    if not uncovered:
        return "100%"
    if 0 < pct < 1:
        return "<1%"
    return f"{min(pct, 99.0):.0f}%"


@_memo
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
    if _finite(score):
        title = f"Production fit: the suite covers {100 * score:.1f}% of production time"
        if _finite(threshold):
            met = "met" if score >= threshold else "NOT met"
            title += f" (rubric: at least {100 * threshold:.3g}%, {met})"
        else:
            title += " (the rubric sets no threshold)"
    cells, dropped = [], 0
    for r in rows:
        share, covered = r.get("share"), r.get("covered_share")
        if not (_finite(share) and _finite(covered)) or share < 0:
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
                "column": band.removesuffix(" elements"),
                "order": float(low) if _finite(low) else None,
                "share": share,
                "covered_share": covered,
                "uncovered": uncovered,
                "line1": _share_text(share),
                "line2": f"{_covered_pct(covered, share, uncovered)} covered",
                "share_text": f"{_share_text(share)} of production time",
                "covered_text": f"{_share_text(covered)} of production time"
                + (f" ({_covered_pct(covered, share, uncovered)} of the cell)" if share else ""),
                "workloads_text": shown or "none",
                "why": " ".join(str(r.get("note") or FIT_BAND_WHY.get(band, "")).split()),
            }
        )
    if dropped:
        notes.append(f"{_plural(dropped, 'row')} without a share not shown")
    if not cells:
        return _no_data(title, _notes(notes))
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
    if _finite(summary.get("layer_coverage")):
        lead.append(f"layer-type coverage {100 * summary['layer_coverage']:.1f}% (production time "
                    "whose layer type the suite measures at any shape)")  # fmt: skip
    if _finite(summary.get("shape_range_factor")):
        factor = summary["shape_range_factor"]
        lead.append(f"covered: a suite workload of the layer type within {factor:g}x the "
                    "shape's first-input elements")  # fmt: skip
    basis = str(summary.get("time_basis") or "")
    if basis:
        lead.append(f"time basis: {TIME_BASIS_WORDS.get(basis, basis)}")
    lead.append("colour: share of production time; text: that share and the part of it a suite "
                "workload covers")  # fmt: skip
    outlined = [c for c in cells if c["uncovered"]]
    if outlined:
        lead.append(f"{_plural(len(outlined), 'cell')} outlined in vermillion: production time no "
                    "suite workload covers")  # fmt: skip
    column_px = max(FIT_MIN_COLUMN_PX, WIDTH // max(1, len(columns)))
    x = alt.X("column:N", title="Elements in the first input", sort=columns,
              axis=alt.Axis(orient="top", labelAngle=0, labelLimit=column_px - 6,
                            labelFontSize=9))  # fmt: skip
    y = alt.Y("layer_type:N", title=None, sort=layers, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    tooltip = [
        alt.Tooltip("layer_type:N", title="layer type"),
        alt.Tooltip("band:N", title="shape band"),
        alt.Tooltip("share_text:N", title="time"),
        alt.Tooltip("covered_text:N", title="covered"),
        alt.Tooltip("workloads_text:N", title="covering suite workloads"),
        alt.Tooltip("why:N", title="note"),
    ]
    base = alt.Chart(_data(cells))
    rect = base.mark_rect(stroke="#FFFFFF", strokeWidth=1).encode(
        x=x,
        y=y,
        color=alt.Color("share:Q", title=["share of", "production time"],
                        scale=alt.Scale(domain=[0, top], scheme="blues"),
                        legend=alt.Legend(format="%")),
        tooltip=tooltip,
    )  # fmt: skip
    ink = alt.Fill("ink:N", scale=None)  # its own channel: the rect owns the colour scale
    # The text and the outline carry the tooltip too: the topmost mark under the pointer is the
    # one asked, and text covers the middle of every cell.
    layers_drawn = [rect] + [
        base.mark_text(fontSize=9, dy=dy).encode(
            x=x, y=y, fill=ink, text=f"{field}:N", tooltip=tooltip
        )
        for field, dy in (("line1", -6), ("line2", 7))
    ]
    if outlined:  # drawn last, unfilled: a neighbour cell drawn later would cover half the line
        layers_drawn.append(
            alt.Chart(_data(outlined))
            .mark_rect(filled=False, stroke=UNCOVERED_COLOUR, strokeWidth=UNCOVERED_STROKE_PX)
            .encode(x=x, y=y, tooltip=tooltip)
        )
    chart = alt.layer(*layers_drawn).properties(
        width=alt.Step(column_px),
        height=alt.Step(FIT_ROW_PX),
        title=_title(title, _notes(lead + notes)),
    )
    return _finish(chart)


# --- stability timeline ----------------------------------------------------------------------


def _sensor_panel(points: list[dict], unit: str, title: str, x_scale: alt.Scale) -> alt.Chart:
    return (
        alt.Chart(_data(points))
        .mark_line(point=True, strokeWidth=1.2)
        .encode(
            x=alt.X("time_s:Q", title="Time into the window (s)", scale=x_scale),
            y=alt.Y("value:Q", title=unit, scale=alt.Scale(zero=False)),
            color=alt.Color("series:N", title="sensor", sort=_unique(p["series"] for p in points)),
            tooltip=[
                alt.Tooltip("series:N", title="sensor"),
                alt.Tooltip("time_s:Q", title="time (s)", format=",.4~g"),
                alt.Tooltip("value:Q", title=unit, format=",.4~g"),
            ],
        )
        .properties(width=WIDTH, height=SENSOR_PANEL_HEIGHT, title=title)
    )


def _soak_panels(s: dict) -> list[alt.TopLevelMixin]:
    windows = []
    for w in s.get("subwindows") or []:
        rate, start, end = w.get("calls_per_s"), w.get("start_s"), w.get("end_s")
        if not (_finite(rate) and _finite(start) and _finite(end)):
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
    if full and _finite(slope) and _finite(mean):
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
        alt.Tooltip("start_s:Q", title="from (s)", format=",.4~g"),
        alt.Tooltip("end_s:Q", title="to (s)", format=",.4~g"),
        alt.Tooltip("calls_per_s:Q", title="calls/s", format=",.4~g"),
        alt.Tooltip("status:N", title="sub-window"),
    ]
    layers = [
        alt.Chart(_data(full)).mark_line(color="#4C78A8", strokeWidth=1.5).encode(x=x, y=y),
        alt.Chart(_data(full))
        .mark_point(filled=True, size=30, color="#4C78A8", opacity=1)
        .encode(x=x, y=y, tooltip=tooltip),
    ]
    partial_windows = [w for w in windows if w["partial"]]
    if partial_windows:  # measured but cut short: hollow and grey, outside the trend
        layers.append(
            alt.Chart(_data(partial_windows))
            .mark_point(filled=False, size=60, color=MUTED_COLOUR, strokeWidth=1.5)
            .encode(x=x, y=y, tooltip=tooltip)
        )
    if fit:
        layers.append(
            alt.Chart(_data(fit))
            .mark_line(color=KNEE_COLOUR, strokeDash=[6, 3], strokeWidth=2)
            .encode(x=x, y=y, tooltip=[alt.Tooltip("label:N")])
        )
    verdict = str(s.get("verdict") or "no verdict")
    change, ci = trend.get("relative_change"), trend.get("relative_change_ci")
    lines = [f"verdict: {verdict}"]
    if _finite(change):
        text = f"trend {change:+.1%} over the window"
        if ci and len(ci) == 2 and all(_finite(v) for v in ci):
            text += f" (95% CI {ci[0]:+.1%} .. {ci[1]:+.1%})"
        lines.append(text + "; dashed: the fitted line")
    elif trend.get("reason"):
        lines.append(f"no trend: {trend['reason']}")
    lines += [str(r) for r in s.get("reasons") or []]
    throttling = s.get("throttling") or {}
    if throttling:
        lines.append(f"throttling: {throttling.get('status', '?')}: {throttling.get('reason', '')}")
    partial = len(partial_windows)
    if partial:
        lines.append(f"{_plural(partial, 'partial sub-window')} (hollow, grey): not in the trend")
    lines += [str(n) for n in s.get("sensor_notes") or []]
    panels: list[alt.TopLevelMixin] = [
        alt.layer(*layers).properties(
            width=WIDTH,
            height=STABILITY_PANEL_HEIGHT,
            title=_title(f"Throughput over the soak of {s.get('workload')}", _notes(lines)),
        )
    ]
    if s.get("clocks"):
        panels.append(_sensor_panel(s["clocks"], "Clock (MHz)", "Clocks", x_scale))
    if s.get("temperatures"):
        panels.append(_sensor_panel(s["temperatures"], "Temperature (°C)", "Temperatures", x_scale))
    return panels


@_memo
def stability(soaks: list[dict], notes: list[str] | None = None) -> dict:
    """Throughput per sub-window over a soak with its fitted trend; clocks and temperatures.

    soaks: {"workload", "verdict", "reasons", "trend": {mean, slope_per_s, relative_change,
    relative_change_ci, reason}, "throttling": {status, reason}, "subwindows": [{index,
    start_s, end_s, calls_per_s, partial}], "clocks"/"temperatures": [{time_s, series, value}],
    "sensor_notes": [str]}.
    """
    title = "Stability over a long window"
    notes = list(notes or [])
    usable = [s for s in soaks if any(_finite(w.get("calls_per_s"))
                                      for w in s.get("subwindows") or [])]  # fmt: skip
    if len(usable) < len(soaks):
        notes.append(f"{_plural(len(soaks) - len(usable), 'soak')} with no measured sub-window")
    if not usable:
        return _no_data(title, _notes(notes))
    panels = [p for s in usable for p in _soak_panels(s)]
    chart = (
        alt.vconcat(*panels, spacing=22)
        .resolve_scale(color="independent", x="independent", y="independent")
        .properties(title=_title(title, _notes(notes)))
    )
    return _finish(chart)


# --- perf per watt ---------------------------------------------------------------------------


@_memo
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
            "joules": float(r["joules"]) if _finite(r.get("joules")) else None,
            "window_s": float(r["window_s"]) if _finite(r.get("window_s")) else None,
            "confidence": str(r.get("confidence") or ""),
        }
        for r in rows
        if _positive(r.get("flops_per_joule")) and _positive(r.get("avg_watts"))
    ]
    if not data:
        return _no_data(title, _notes(notes))
    runs = _unique(d["run"] for d in data)
    layers = sorted({d["layer_type"] for d in data})
    data.sort(key=lambda d: (layers.index(d["layer_type"]), runs.index(d["run"])))
    low = sum(d["confidence"] == "low" for d in data)
    if low:
        notes.append(f"{_plural(low, 'bar')} from low-confidence readings (short windows)")
    y = alt.Y("layer_type:N", title="Layer type", sort=layers)
    colour = alt.Color("run:N", title="run", scale=alt.Scale(domain=runs, scheme=CATEGORY_SCHEME))
    tooltip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("layer_type:N", title="layer type"),
        alt.Tooltip("gflops_per_joule:Q", title="GFLOP/J", format=",.4~g"),
        alt.Tooltip("avg_watts:Q", title="average W", format=",.4~g"),
        alt.Tooltip("joules:Q", title="J", format=",.4~g"),
        alt.Tooltip("window_s:Q", title="window (s)", format=",.4~g"),
        alt.Tooltip("confidence:N"),
    ]
    height = _grouped_height(len(layers), len(runs))

    def panel(field: str, axis_title: str, better: str) -> alt.Chart:
        return (
            alt.Chart(_data(data))
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
    ).properties(title=_title(title, _notes(notes)))
    return _finish(chart)


# --- quality drift ---------------------------------------------------------------------------


@_memo
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
        if not _positive(rel):
            dropped += 1  # zero (bit-exact) or missing: a log axis has no place for it
            continue
        dtype = str(r.get("dtype"))
        tol = tolerances.get(dtype)
        tol = float(tol) if _positive(tol) else None
        over = tol is not None and float(rel) > tol
        top1, kl = r.get("top1_agreement"), r.get("kl_divergence")
        points.append(
            {
                "workload": str(r["workload"]),
                "dtype": dtype,
                "rel_error": float(rel),
                "max_abs_error": float(r["max_abs_error"]) if _finite(r.get("max_abs_error"))
                else None,
                "top1_agreement": float(top1) if _finite(top1) else None,
                "kl_divergence": float(kl) if _finite(kl) else None,
                "tolerance": tol,
                "within": "over tolerance" if over else
                ("within tolerance" if tol is not None else "no tolerance"),
                "source": str(r.get("source") or ""),
            }
        )  # fmt: skip
    if dropped:
        notes.append(f"{_plural(dropped, 'row')} with a zero or missing relative error not shown "
                     "(log axis)")  # fmt: skip
    if not points:
        return _no_data(title, _notes(notes))
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
        notes.append(f"{_plural(over, 'result')} over the rubric's tolerance (large crosses)")
    dtypes = sorted({p["dtype"] for p in points})
    untolerated = [d for d in dtypes if d not in tolerances]
    if untolerated:
        notes.append(f"no rubric tolerance for {', '.join(untolerated)}")
    rules = [
        {"dtype": d, "rel_error": float(tolerances[d]), "label": f"{d} tolerance {tolerances[d]:g}"}
        for d in dtypes
        if _positive(tolerances.get(d))
    ]
    ends = [p["rel_error"] for p in points] + [r["rel_error"] for r in rules]
    lo = 10.0 ** math.floor(math.log10(min(ends) / 1.5))
    hi = 10.0 ** math.ceil(math.log10(max(ends) * 1.5))
    x = alt.X(
        "rel_error:Q",
        title="Relative error against float64 (log scale)",
        scale=alt.Scale(type="log", domain=[lo, hi]),
    )
    y = alt.Y("workload:N", title=None, sort=order, axis=alt.Axis(labelLimit=LABEL_LIMIT))
    colour = alt.Color(
        "dtype:N", title="dtype", scale=alt.Scale(domain=dtypes, scheme=CATEGORY_SCHEME)
    )
    states = ["within tolerance", "over tolerance", "no tolerance"]
    dots = (
        alt.Chart(_data(points))
        .mark_point(filled=True, opacity=0.9)
        .encode(
            x=x,
            y=y,
            color=colour,
            shape=alt.Shape(
                "within:N",
                title="rubric",
                scale=alt.Scale(domain=states, range=["circle", "cross", "square"]),
            ),
            size=alt.Size(
                "within:N", legend=None, scale=alt.Scale(domain=states, range=[45, 150, 45])
            ),
            tooltip=[
                alt.Tooltip("workload:N"),
                alt.Tooltip("dtype:N"),
                alt.Tooltip("rel_error:Q", title="relative error", format=".3e"),
                alt.Tooltip("tolerance:Q", format="g"),
                alt.Tooltip("within:N", title="rubric"),
                alt.Tooltip("max_abs_error:Q", title="max abs error", format=".3e"),
                alt.Tooltip("top1_agreement:Q", title="top-1 agreement", format=".2%"),
                alt.Tooltip("kl_divergence:Q", title="KL (nats)", format=".3e"),
                alt.Tooltip("source:N", title="file"),
            ],
        )
    )
    rule_layer = (
        alt.Chart(_data(rules))
        .mark_rule(strokeDash=[5, 3], strokeWidth=1.5)
        .encode(x=x, color=colour, tooltip=[alt.Tooltip("label:N", title="rubric")])
    )
    labels = (
        alt.Chart(_data(rules))
        .mark_text(align="left", baseline="top", dx=3, fontSize=9, angle=0)
        .encode(x=x, y=alt.value(2), text="label:N", color=colour)
    )
    chart = alt.layer(*([rule_layer, labels] if rules else []), dots).properties(
        width=WIDTH,
        height=max(NO_DATA_HEIGHT, len(order) * (BAR_PX + 4)),
        title=_title(title, _notes(notes)),
    )
    return _finish(chart)


# --- conversion and validation ---------------------------------------------------------------

_SVG_CACHE: dict[str, str] = {}


@_memo
def trend(rows: list[dict], metric: str, title: str, axis_title: str) -> dict:
    """A metric over time, one series per device and dtype (airspeed velocity's graphs).

    rows: {"time": ISO date-time string, "series": "device · dtype", "value": fraction,
    "run": label, "decision": slug}. Values are fractions shown as percentages.
    """
    points = sorted(
        ({**r, "value": float(r["value"])} for r in rows if _finite(r.get("value"))),
        key=lambda r: (r["series"], r["time"], r["run"]),
    )
    if not points:
        return _no_data(title)
    chart = (
        alt.Chart(_data(points))
        .mark_line(point=True)
        .encode(
            x=alt.X("time:T", title="Run date (UTC)"),
            y=alt.Y("value:Q", title=axis_title, axis=alt.Axis(format="%")),
            color=alt.Color(
                "series:N", title="Device · dtype", sort=_unique(p["series"] for p in points)
            ),
            tooltip=[
                alt.Tooltip("series:N", title="series"),
                alt.Tooltip("time:T", title="run date", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("value:Q", title=metric, format=".1%"),
                alt.Tooltip("run:N", title="run"),
                alt.Tooltip("decision:N", title="decision"),
            ],
        )
        .properties(title=_title(title), width=WIDTH, height=240)
    )
    return _finish(chart)


def _spec_key(spec: dict) -> str:
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def to_svg(spec: dict) -> str:
    """The spec as an SVG string, cached in memory and on disk by spec hash and versions.

    vl-convert is the slow step (~0.5 s to start, 0.1-0.6 s a chart) and its output is stable
    for the same spec, so re-rendering a packet whose data did not change converts nothing.
    """
    key = _spec_key(spec)
    svg = _SVG_CACHE.get(key)
    if svg is not None:
        return svg
    cached = _cache_dir() / "svg" / f"{key}.svg"
    try:
        svg = cached.read_text(encoding="utf-8")
    except OSError:
        import vl_convert

        # Serial on purpose (see the engineering notes: threads crash V8, forks hang), and
        # no base URL is allowed so an external data reference fails instead of drawing empty.
        svg = vl_convert.vegalite_to_svg(spec, vl_version=VEGALITE_VERSION, allowed_base_urls=[])
        _write_cache(cached, svg)
    _SVG_CACHE[key] = svg
    return svg


def _cache_dir() -> Path:
    """The user's cache folder for reviewkit, per vl-convert and Vega-Lite version."""
    import os

    import vl_convert

    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = getattr(vl_convert, "__version__", "unknown")
    return root / "reviewkit" / f"vlc{version}-vl{VEGALITE_VERSION}"


def _write_cache(path: Path, text: str) -> None:
    """Write atomically; a read-only home still renders, just without the cache."""
    import os

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


@functools.cache
def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one classic script defining window.vegaEmbed.

    Bundling takes ~1.4 s and depends only on the versions, so it is cached on disk too.
    """
    import vl_convert

    cached = _cache_dir() / "vega-bundle.js"
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    bundle = vl_convert.javascript_bundle(vl_version=VEGALITE_VERSION)
    _write_cache(cached, bundle)
    return bundle


@functools.cache
def _validator():
    import jsonschema
    from altair.vegalite.v6.schema import load_schema

    schema = load_schema()  # the vega-lite-schema.json altair ships and builds specs from
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def validate(spec: dict) -> None:
    """Raise ValueError if the spec does not satisfy altair's bundled Vega-Lite schema."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(spec))
    if error is not None:
        raise ValueError(f"invalid Vega-Lite spec at {error.json_path}: {error.message}")
