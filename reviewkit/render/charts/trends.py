"""The site's trend chart: a metric over time, one series per device and dtype."""

from __future__ import annotations

from reviewkit.render.charts.base import (
    WIDTH,
    alt,
    chart_title,
    finish_chart,
    is_finite,
    memoised_chart,
    named_data,
    no_data_chart,
    unique_in_order,
)


@memoised_chart
def trend(rows: list[dict], metric: str, title: str, axis_title: str) -> dict:
    """A metric over time, one series per device and dtype (airspeed velocity's graphs).

    rows: {"time": ISO date-time string, "series": "device · dtype", "value": fraction,
    "run": label, "decision": slug}. Values are fractions shown as percentages.
    """
    points = sorted(
        ({**r, "value": float(r["value"])} for r in rows if is_finite(r.get("value"))),
        key=lambda r: (r["series"], r["time"], r["run"]),
    )
    if not points:
        return no_data_chart(title)
    chart = (
        alt.Chart(named_data(points))
        .mark_line(point=True)
        .encode(
            x=alt.X("time:T", title="Run date (UTC)"),
            y=alt.Y("value:Q", title=axis_title, axis=alt.Axis(format="%")),
            color=alt.Color(
                "series:N",
                title="Device · dtype",
                sort=unique_in_order(p["series"] for p in points),
            ),
            tooltip=[
                alt.Tooltip("series:N", title="series"),
                alt.Tooltip("time:T", title="run date", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("value:Q", title=metric, format=".1%"),
                alt.Tooltip("run:N", title="run"),
                alt.Tooltip("decision:N", title="decision"),
            ],
        )
        .properties(title=chart_title(title), width=WIDTH, height=240)
    )
    return finish_chart(chart)
