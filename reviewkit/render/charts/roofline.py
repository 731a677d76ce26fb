"""The roofline: achieved FLOP rate against arithmetic intensity, one panel per device, with the
ceilings its workloads meet and no others."""

from __future__ import annotations

from reviewkit.render.charts.axes import decade_domain, log_axis, log_domain
from reviewkit.render.charts.base import (
    CATEGORY_SCHEME,
    GIGA,
    HEIGHT,
    MAX_CHART_HEIGHT_PX,
    alt,
    chart_title,
    finish_chart,
    fmt_readable,
    is_positive,
    memoised_chart,
    named_data,
    no_data_chart,
    plural,
    unique_in_order,
)

# The plot beside its legends: 710 px less the padding (19), the y axis (~65) and the ceiling
# legend (its longest entry, "bf16, fp16 peak 989 TFLOP/s", ~200 px at 10 px with its symbol).
ROOFLINE_WIDTH = 400


# A one-line title longer than this widens the chart past the print width (a fingerprint label
# "AMD EPYC · Zen 4 · AVX-512 BF16 · 2 cores" set it 819 px wide: 6.4 pt text on A4).
TITLE_CHARS = 76
PANEL_CHROME_PX = 95  # a device panel's title, x axis and spacing beside its plot


MIN_PANEL_HEIGHT = 160  # below this the ceilings of a panel crowd into one band


# One colour and one dash per ceiling, both in the legend: the lines stay apart in greyscale
# print and for colour-vision deficiencies. Dark tones, apart from tableau10's mid-tone points.
CEILING_COLOURS = ("#000000", "#5E3C99", "#8C510A", "#01665E", "#B2182B", "#666666")


COMPUTE_DASHES = ([1, 0], [9, 3], [9, 3, 2, 3])  # peaks: solid first


MEMORY_DASHES = ([5, 3], [2, 2], [6, 2, 1, 2], [1, 3], [10, 2, 2, 2, 2, 2])


PAD = 2.0  # the axes run at least a factor of 2 clear of every point and peak


def _rate(x: float, unit: str) -> str:
    """A rate in the largest prefix that keeps it at least 1: 4.45e11 FLOP/s -> "445 GFLOP/s"."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if x >= factor:
            return f"{fmt_readable(x / factor, 3)} {prefix}{unit}"
    return f"{fmt_readable(x, 3)} {unit}"


def _level_name(level: str) -> str:
    # Device profiles name levels in lower case ("l2", "llc", "dram", "hbm"): as printed.
    return level.upper() if len(level) <= 4 else level


def _group(runs: list[dict]) -> list[tuple[str | None, list[dict]]]:
    """Runs by device, in the runs' order: `device` where given, else runs with the same peaks,
    bandwidth and cache levels are taken for one device (the same profile)."""
    groups: dict[object, tuple[str | None, list[dict]]] = {}
    for run in runs:
        device = run.get("device")
        levels = [(lv.get("level"), lv.get("peak_bytes_per_s"))
                  for lv in run.get("memory_levels") or []]  # fmt: skip
        peaks = sorted((str(k), v) for k, v in (run.get("peak_flops_per_s") or {}).items())
        key = str(device) if device else repr((peaks, run.get("peak_bytes_per_s"), levels))
        groups.setdefault(key, (str(device) if device else None, []))[1].append(run)
    return list(groups.values())


def _panel_data(runs: list[dict]) -> tuple[list[dict], dict, dict, int, list[str]]:
    """One device's points, its compute ceilings ({FLOP/s: dtypes}), the memory ceilings that
    are some point's roof ({(name, bytes/s): runs}), the count of workloads log axes cannot
    show, and the memory levels left out (named with their bandwidth)."""
    points, peaks, used, skipped = [], {}, {}, 0
    offered: dict[tuple[str | None, float], None] = {}  # None: main memory, named below
    main_names: set[str] = set()
    for run in runs:
        label = str(run["label"])
        table = run.get("peak_flops_per_s") or {}
        main = float(run["peak_bytes_per_s"]) if is_positive(run.get("peak_bytes_per_s")) else None
        levels = {
            str(lv.get("level")): float(lv["peak_bytes_per_s"])
            for lv in run.get("memory_levels") or []
            if is_positive(lv.get("peak_bytes_per_s"))
        }
        offered.update({(level, w): None for level, w in levels.items()})
        if main is not None:
            offered[(None, main)] = None
        for w in sorted(run.get("workloads") or [],
                        key=lambda w: (str(w.get("layer_type")), str(w.get("id")))):  # fmt: skip
            ai, rate = w.get("arithmetic_intensity"), w.get("achieved_flops_per_s")
            if not (is_positive(ai) and is_positive(rate)):
                skipped += 1  # log axes cannot place zero, missing or infinite values
                continue
            ai, rate, dtype = float(ai), float(rate), str(w.get("dtype"))
            peak = float(table[dtype]) if is_positive(table.get(dtype)) else None
            # Its working set's cache level, or main memory: the profile lists cache levels
            # only, and a workload names main memory as it likes ("dram", "hbm").
            named = str(w.get("memory_level") or "")
            level = named if named in levels else None
            bandwidth = levels[level] if level else main
            if level is None and named:
                main_names.add(named)
            attainable = peak
            if bandwidth is not None and (peak is None or bandwidth * ai < peak):
                used.setdefault((level, bandwidth), set()).add(label)  # this slope is its roof
                attainable = bandwidth * ai
            if peak is not None:
                peaks.setdefault(peak, set()).add(dtype)
            points.append({
                "run": label, "id": str(w.get("id")), "layer_type": str(w.get("layer_type")),
                "dtype": dtype, "arithmetic_intensity": ai, "gflops_per_s": rate / GIGA,
                "peak_gflops_per_s": peak / GIGA if peak else None,
                "attainable_gflops_per_s": attainable / GIGA if attainable else None,
                "memory_level": level or named or "main memory",
                "mfu": rate / peak if peak else None,
                "fraction_of_attainable": rate / attainable if attainable else None,
            })  # fmt: skip
    main_name = _level_name(next(iter(main_names))) if len(main_names) == 1 else "main memory"

    def name(level: str | None) -> str:
        return _level_name(level) if level else main_name

    unused = [f"{name(lv)} {_rate(w, 'B/s')}" for lv, w in offered if (lv, w) not in used]
    return points, peaks, {(name(lv), w): r for (lv, w), r in used.items()}, skipped, unused


def _ceiling_rows(peaks: dict, used: dict, lo: float, hi: float) -> list[dict]:
    """Two ends per ceiling line (straight on log-log axes). A peak runs flat from where the
    fastest memory slope drawn meets it; a slope rises from the left edge to the highest peak."""
    rows = []
    top = max(peaks, default=None)
    fastest = max((w for _, w in used), default=None)
    for peak in sorted(peaks, reverse=True):
        name = f"{', '.join(sorted(peaks[peak]))} peak {_rate(peak, 'FLOP/s')}"
        start = max(lo, peak / fastest) if fastest else lo
        for ai in (start, hi):
            rows.append({"ceiling": name, "kind": "compute", "arithmetic_intensity": ai,
                         "gflops_per_s": peak / GIGA, "value": _rate(peak, "FLOP/s")})  # fmt: skip
    for level, w in sorted(used, key=lambda k: -k[1]):
        name = f"{level} {_rate(w, 'B/s')}"
        end = min(hi, top / w) if top else hi
        for ai in (lo, end):
            rows.append({"ceiling": name, "kind": "memory", "arithmetic_intensity": ai,
                         "gflops_per_s": w * ai / GIGA, "value": _rate(w, "B/s")})  # fmt: skip
    return rows


def _panel(data: tuple, keys: tuple[list[str], list[str]], height: int, title) -> alt.LayerChart:
    """One device's plot. `keys`: every panel's runs and layer types, so that a shape or a
    colour means the same in each."""
    points, peaks, used, _, _ = data
    run_labels, layer_types = keys
    ridges = [p / w for p in peaks for _, w in used]
    lo, hi = decade_domain([p["arithmetic_intensity"] for p in points] + ridges, PAD)
    rows = _ceiling_rows(peaks, used, lo, hi)
    # Throughput: the points and peaks a factor PAD clear, out to a whole decade only when one
    # is near (a 989 TFLOP/s peak had a decade of empty plot above it); the slopes enter from
    # below, clipped.
    y_lo, y_hi = log_domain([p["gflops_per_s"] for p in points] + [p / GIGA for p in peaks], PAD)
    x = alt.X(
        "arithmetic_intensity:Q",
        title="Arithmetic intensity (FLOP/byte, log scale)",
        scale=alt.Scale(type="log", domain=[lo, hi], nice=False),
        axis=log_axis(lo, hi, ROOFLINE_WIDTH, decades_only=True),
    )
    y = alt.Y(
        "gflops_per_s:Q",
        title="Throughput (GFLOP/s, log scale)",
        scale=alt.Scale(type="log", domain=[y_lo, y_hi], nice=False),
        axis=log_axis(y_lo, y_hi, height, horizontal=False, decades_only=True),
    )
    names = unique_in_order(r["ceiling"] for r in rows)
    kinds = {r["ceiling"]: r["kind"] for r in rows}
    compute = [n for n in names if kinds[n] == "compute"]
    memory = [n for n in names if kinds[n] == "memory"]
    dashes = [COMPUTE_DASHES[i % len(COMPUTE_DASHES)] for i in range(len(compute))] + [
        MEMORY_DASHES[i % len(MEMORY_DASHES)] for i in range(len(memory))
    ]
    colours = [CEILING_COLOURS[i % len(CEILING_COLOURS)] for i in range(len(names))]
    legend = alt.Legend(title="ceiling", symbolStrokeWidth=2, symbolSize=300, labelLimit=240)
    ceilings = (
        alt.Chart(named_data(rows))
        .mark_line(strokeWidth=1.5, clip=True)
        .encode(
            x=x,
            y=y,
            color=alt.Color("ceiling:N", scale=alt.Scale(domain=names, range=colours),
                            legend=legend),
            strokeDash=alt.StrokeDash("ceiling:N", scale=alt.Scale(domain=names, range=dashes),
                                      legend=legend),
            detail="ceiling:N",
            tooltip=[alt.Tooltip("ceiling:N"), alt.Tooltip("value:N", title="ceiling value")],
        )
    )  # fmt: skip
    dots = (
        alt.Chart(named_data(points))
        .mark_point(filled=True, size=60, opacity=0.85)
        .encode(
            x=x,
            y=y,
            fill=alt.Fill(
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
                alt.Tooltip("arithmetic_intensity:Q", title="FLOP/byte", format=",.3~r"),
                alt.Tooltip("gflops_per_s:Q", title="achieved (GFLOP/s)", format=",.4~r"),
                alt.Tooltip("peak_gflops_per_s:Q", title="peak (GFLOP/s)", format=",.4~r"),
                alt.Tooltip(
                    "attainable_gflops_per_s:Q", title="roofline (GFLOP/s)", format=",.4~r"
                ),
                alt.Tooltip("mfu:Q", title="MFU (of peak)", format=".1%"),
                alt.Tooltip("fraction_of_attainable:Q", title="of roofline", format=".1%"),
            ],
        )
    )
    chart = alt.layer(ceilings, dots).properties(width=ROOFLINE_WIDTH, height=height)
    return chart if title is None else chart.properties(title=title)


@memoised_chart
def roofline(runs: list[dict]) -> dict:
    """Log-log roofline, a panel per device: one point per workload, the compute peak of each
    dtype plotted, and the memory levels that are the roof of at least one plotted workload.

    runs: {"label", "device" (optional: the device's name, for the title; runs without it are
    grouped by their ceilings), "peak_flops_per_s": {dtype: FLOP/s}, "peak_bytes_per_s" (main
    memory), "memory_levels": [{"level", "peak_bytes_per_s"}] (cache levels), "workloads":
    [{"id", "layer_type", "dtype", "arithmetic_intensity", "achieved_flops_per_s",
    "memory_level"}]}.

    Which ceilings: a device profile lists every cache level and a peak for every dtype it
    calibrated, and drawing them all put ten near-parallel dashed lines on the bf16 review's
    chart. A level is drawn when it bounds a plotted workload: the workload's working set is
    in it (`memory_level`; main memory when none is named) and its slope there lies below the
    dtype's peak at the workload's intensity, so the slope is the roof the point is measured
    against. A level no workload lives in, or one whose workloads are all compute-bound, tells
    the reader nothing about these points and is named in a note instead. Each plotted
    dtype's peak is drawn (MFU is read against it); dtypes sharing a peak share a line."""
    groups = [(device, grp, _panel_data(grp)) for device, grp in _group(runs)]
    keys = (
        unique_in_order(p["run"] for *_, data in groups for p in data[0]),
        sorted({p["layer_type"] for *_, data in groups for p in data[0]}),
    )
    drawn = sum(1 for *_, data in groups if data[0])
    height = HEIGHT
    if drawn > 1:  # the device panels share one page
        share = (MAX_CHART_HEIGHT_PX - 80) // drawn - PANEL_CHROME_PX  # 80: the title
        height = max(MIN_PANEL_HEIGHT, min(HEIGHT, share))
    skipped, unused, panels = 0, [], []
    for device, grp, data in groups:
        skipped += data[3]
        labels = " and ".join(unique_in_order(str(r["label"]) for r in grp))
        where = device or f"the device of {labels}"
        unused += [f"{u} ({where})" if len(groups) > 1 else u for u in data[4]]
        if data[0]:
            heading = chart_title(f"{device}: {labels}" if device else where) if drawn > 1 else None
            panels.append(_panel(data, keys, height, heading))
    notes = []
    if skipped:
        notes.append(
            f"{plural(skipped, 'workload')} with zero, missing or infinite FLOP rate or "
            "intensity not shown (log axes)"
        )
    if unused:
        notes.append("memory levels that bound no plotted workload not drawn: " + ", ".join(unused))
    devices = [d for d, *_ in groups if d]
    if len(groups) == 1:
        title = (f"Roofline of the {devices[0]}" if devices else "Roofline") + (
            ": achieved throughput against arithmetic intensity")  # fmt: skip
        if len(title) > TITLE_CHARS:  # the device's label on a line of its own
            title = [f"Roofline of the {devices[0]}:",
                     "achieved throughput against arithmetic intensity"]  # fmt: skip
    else:
        title = "Rooflines, one per device: achieved throughput against arithmetic intensity"
    if not panels:
        return no_data_chart(title, notes)
    if len(panels) == 1:
        chart = panels[0].properties(title=chart_title(title, notes))
    else:
        chart = (
            alt.vconcat(*panels, spacing=24)
            # each panel its own axes and legends, stacked beside it: shared legends made a
            # second column that pushed the chart past the print width
            .resolve_scale(
                x="independent",
                y="independent",
                color="independent",
                strokeDash="independent",
                fill="independent",
                shape="independent",
            )
            .properties(title=chart_title(title, notes))
        )
    return finish_chart(chart)
