"""The site's trend chart: a metric over time, one series per device and dtype."""

from __future__ import annotations

from reviewkit.render.charts.base import (
    WIDTH,
    _data,
    _finish,
    _finite,
    _memo,
    _no_data,
    _title,
    _unique,
    alt,
)


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
