"""Charts of multi-rank runs: collective time against bytes on the wire with the link ceiling,
and the skew across ranks."""

from __future__ import annotations

from reviewkit.render.charts.axes import log_axis, log_domain
from reviewkit.render.charts.base import (
    CATEGORY_SCHEME,
    CEILING_COLOUR,
    GIGA,
    HEIGHT,
    LABEL_LIMIT,
    MAX_CHART_HEIGHT_PX,
    MAX_CHART_WIDTH_PX,
    MILLI,
    WIDTH,
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


@memoised_chart
def collective_times(runs: list[dict]) -> dict:
    """Log-log: one point per collective (p50, the slowest rank per call; its p99 as a tick
    above), x the bytes each rank puts on the wire, and per run the link ceiling's line
    t = bytes / link bandwidth: a point on the line moves its bytes at the link's rate, the
    distance above it is the per-call cost beyond t_comm.

    `runs`: [{"label", "link_bytes_per_s" (or None), "collectives": [{"id", "op",
    "wire_bytes", "p50_s", "p99_s", "busbw_bytes_per_s", "skew"}]}]."""
    title = "Collectives: time per call against bytes on the wire, with the link ceiling"
    points, lines, skipped = [], [], 0
    for run in runs:
        label = str(run["label"])
        for c in run.get("collectives") or []:
            wire, p50, p99 = c.get("wire_bytes"), c.get("p50_s"), c.get("p99_s")
            if not (is_positive(wire) and is_positive(p50)):
                skipped += 1  # one rank, or nothing measured: no place on log axes
                continue
            points.append({
                "run": label, "id": str(c["id"]), "op": str(c["op"]),
                "wire_mib": float(wire) / (1 << 20), "p50_ms": float(p50) * MILLI,
                "p99_ms": float(p99) * MILLI if is_positive(p99) else None,
                "busbw_gbs": (c.get("busbw_bytes_per_s") or 0.0) / GIGA,
                "skew": c.get("skew"),
            })  # fmt: skip
        link = run.get("link_bytes_per_s")
        if is_positive(link) and points:
            wires = [p["wire_mib"] for p in points if p["run"] == label]
            for mib in (min(wires) / 2, max(wires) * 2):
                lines.append({
                    "ceiling": f"{label} link {fmt_readable(float(link) / GIGA, 3)} GB/s",
                    "wire_mib": mib, "ms": mib * (1 << 20) / float(link) * MILLI,
                })  # fmt: skip
    notes = [f"{plural(skipped, 'collective')} with nothing on the wire not shown"] * bool(skipped)
    if not points:
        return no_data_chart(title, notes)
    notes.append("a point's height above its run's line is the per-call cost beyond t_comm")
    # Explicit ends and ticks: Vega's 1..9 of each decade collide on a log axis (axes.py).
    x_lo, x_hi = log_domain([p["wire_mib"] for p in points] + [r["wire_mib"] for r in lines])
    y_lo, y_hi = log_domain([p["p50_ms"] for p in points] + [r["ms"] for r in lines]
                            + [p["p99_ms"] for p in points if p["p99_ms"]])  # fmt: skip
    x_scale = alt.Scale(type="log", domain=[x_lo, x_hi], nice=False)
    y_scale = alt.Scale(type="log", domain=[y_lo, y_hi], nice=False)
    x = alt.X("wire_mib:Q", title="Bytes on the wire per rank (MiB)", scale=x_scale,
              axis=log_axis(x_lo, x_hi, WIDTH))  # fmt: skip
    y = alt.Y("p50_ms:Q", title="Time per call (ms, slowest rank)", scale=y_scale,
              axis=log_axis(y_lo, y_hi, HEIGHT, horizontal=False))  # fmt: skip
    layers = []
    if lines:
        layers.append(
            alt.Chart(named_data(lines))
            .mark_line(color=CEILING_COLOUR, strokeDash=[4, 3])
            .encode(
                x=x,
                y=alt.Y("ms:Q", scale=y_scale),
                detail="ceiling:N",
                tooltip=[alt.Tooltip("ceiling:N")],
            )
        )
    runs_seen = unique_in_order(p["run"] for p in points)
    layers.append(
        alt.Chart(named_data(points))
        .mark_point(filled=True, size=70)
        .encode(
            x=x,
            y=y,
            color=alt.Color("op:N", title="collective", scale=alt.Scale(scheme=CATEGORY_SCHEME)),
            shape=alt.Shape("run:N", title="run", scale=alt.Scale(domain=runs_seen)),
            tooltip=[
                alt.Tooltip("id:N", title="workload"),
                alt.Tooltip("run:N"),
                alt.Tooltip("wire_mib:Q", title="on the wire (MiB)", format=",.4~r"),
                alt.Tooltip("p50_ms:Q", title="p50 (ms)", format=",.4~r"),
                alt.Tooltip("p99_ms:Q", title="p99 (ms)", format=",.4~r"),
                alt.Tooltip("busbw_gbs:Q", title="busbw (GB/s)", format=",.3~r"),
                alt.Tooltip("skew:Q", title="slowest / median rank", format=".2f"),
            ],
        )
    )
    chart = alt.layer(*layers).properties(
        width=WIDTH, height=HEIGHT, title=chart_title(title, notes)
    )
    return finish_chart(chart)


@memoised_chart
def rank_skew(rows: list[dict]) -> dict:
    """Per workload and rank, the rank's median over the other ranks' median (1.0: no skew):
    a straggler is a column of cells above 1 on the compute workloads. A row is named by its
    workload, after its run when the run is not empty.

    `rows`: [{"run", "workload", "rank", "ratio"}]."""
    title = "Skew across ranks: each rank's median over the other ranks' median"
    data = [r for r in rows if is_positive(r.get("ratio"))]
    if not data:
        return no_data_chart(title)

    def row(r: dict) -> str:
        return f"{r['run']} · {r['workload']}" if r.get("run") else str(r["workload"])

    workloads = unique_in_order(row(r) for r in data)
    cells = [{**r, "row": row(r), "rank": f"rank {r['rank']}"} for r in data]
    by_rank = sorted(cells, key=lambda c: int(c["rank"].split()[1]))
    ranks = unique_in_order(c["rank"] for c in by_rank)
    chart = (
        alt.Chart(named_data(cells))
        .mark_rect()
        .encode(
            x=alt.X("rank:N", title=None, sort=ranks),
            y=alt.Y("row:N", title=None, sort=workloads, axis=alt.Axis(labelLimit=LABEL_LIMIT)),
            color=alt.Color(
                "ratio:Q", title="x other ranks",
                scale=alt.Scale(scheme="blueorange", domainMid=1.0),
            ),
            tooltip=[alt.Tooltip("row:N", title="workload"), alt.Tooltip("rank:N"),
                     alt.Tooltip("ratio:Q", title="x other ranks", format=".3f")],
        )
        .properties(width=min(MAX_CHART_WIDTH_PX - LABEL_LIMIT - 150, 40 * len(ranks)),
                    height=max(12, min(14, (MAX_CHART_HEIGHT_PX - 80) // len(workloads)))
                    * len(workloads),
                    title=chart_title(title))
    )  # fmt: skip
    return finish_chart(chart)
