"""The risk map: each stated risk by impact and likelihood, marked by whether it has an owner."""

from __future__ import annotations

import json
import math

from reviewkit.render.charts.base import (
    HEIGHT,
    LABEL_PX,
    alt,
    chart_title,
    finish_chart,
    memoised_chart,
    named_data,
    no_data_chart,
)

RISK_LEVELS = ("unrated", "low", "medium", "high")  # axis order; "" maps to "unrated"
RISK_CELL_FILL = {0: "#F7F7F7", 1: "#EFEFEF", 2: "#E3E3E3", 3: "#D4D4D4"}  # by severity band
OWNER_COLOURS = {"owner named": "#0072B2", "no owner": "#D55E00"}  # Okabe-Ito blue/vermillion
OWNER_SHAPES = {"owner named": "circle", "no owner": "triangle-up"}
RISK_WIDTH = 560  # with the axis (~80 px) and the legend below: ~660 px, within the print width


RISK_LABEL_LIMIT_PX = 108  # cell width (560 / 4) less the point and its margin: labels stay in


def _risk_index(value: object, what: str, description: str) -> int:
    text = str(value or "").strip().lower()
    if text in ("", "unrated"):
        return 0
    if text not in RISK_LEVELS:
        raise ValueError(f"risk_map: {what} {value!r} of {description!r} is not low/medium/high")
    return RISK_LEVELS.index(text)


@memoised_chart
def risk_map(risks: list[dict]) -> dict:
    """Likelihood x impact grid, one labelled point per risk, coloured by owner presence."""
    title = "Risk map: likelihood against impact"
    if not risks:
        return no_data_chart(title)
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
        alt.Chart(named_data(grid))
        .mark_rect(stroke="#FFFFFF", strokeWidth=2)
        .encode(x=x, x2="x2:Q", y=y, y2="y2:Q", fill=alt.Fill("fill:N", scale=None))
    )
    statuses = list(OWNER_COLOURS)
    marks = (
        alt.Chart(named_data(points))
        .mark_point(filled=True, size=60, opacity=1)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "owner_status:N",
                title="owner",
                scale=alt.Scale(domain=statuses, range=list(OWNER_COLOURS.values())),
                legend=alt.Legend(orient="bottom", direction="horizontal"),
            ),
            shape=alt.Shape(
                "owner_status:N",
                title="owner",
                scale=alt.Scale(domain=statuses, range=list(OWNER_SHAPES.values())),
                legend=alt.Legend(orient="bottom", direction="horizontal"),
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
        alt.Chart(named_data(points))
        .mark_text(
            align="left", baseline="middle", dx=7, fontSize=LABEL_PX, limit=RISK_LABEL_LIMIT_PX
        )
        .encode(x=x, y=y, text="description:N")
    )
    chart = alt.layer(background, marks, labels).properties(
        width=RISK_WIDTH, height=HEIGHT + 80, title=chart_title(title)
    )
    return finish_chart(chart)
