"""A trace diff drawn: where production's time changed, by layer type and by op and shape."""

from __future__ import annotations

from reviewkit.common.format import elided
from reviewkit.render.charts.base import (
    MAX_CHART_WIDTH_PX,
    VERDICT_COLOURS,
    alt,
    chart_title,
    finish_chart,
    is_finite,
    memoised_chart,
    named_data,
    no_data_chart,
)

TITLE = "Where production's time changed: candidate minus base, largest changes first"
ROW_PX = 18  # one bar a row, its 10 px label beside it
LABEL_CHARS = 60  # an op's name and dims cut to this in its label (whole in the tooltip)
# Slower in the candidate in the verdicts' vermillion, faster in their green.
COLOURS = {"slower": VERDICT_COLOURS["slower"], "faster": VERDICT_COLOURS["faster"]}
LABEL_PX_BESIDE = 330  # the y labels' column: 60 characters of a 10 px font


@memoised_chart
def trace_change(layer_rows: list[dict], op_rows: list[dict], op_title: str,
                 notes: list[str] | None = None) -> dict:  # fmt: skip
    """Two panels of horizontal bars, in the diff's ranking order: each layer type's change in
    milliseconds, then each op's (or op and shape's). Rows whose change is unknown (an op below
    a truncated list's cut) are left out and counted in the notes.

    rows: {"key", "delta_s", "share_of_change"} in ranking order."""
    notes = list(notes or [])
    panels, unknown = [], 0
    for title, rows in (("layer type", layer_rows), (op_title, op_rows)):
        drawn = []
        for r in rows:
            if not is_finite(r.get("delta_s")):
                unknown += 1
                continue
            d = float(r["delta_s"]) * 1e3
            share = r.get("share_of_change")
            drawn.append({"key": str(r["key"]), "label": elided(str(r["key"]), LABEL_CHARS),
                          "delta_ms": d, "direction": "slower" if d > 0 else "faster",
                          "share": f"{100 * share:.1f}%" if is_finite(share) else "—",
                          "order": len(drawn)})  # fmt: skip
        if drawn:
            panels.append((title, drawn))
    if unknown:
        notes.append(f"{unknown} row(s) of unknown change (below a truncated list's cut) not drawn")
    if not panels:
        return no_data_chart(TITLE, notes)
    width = MAX_CHART_WIDTH_PX - LABEL_PX_BESIDE
    charts = []
    for title, drawn in panels:
        charts.append(
            alt.Chart(named_data(drawn)).mark_bar().encode(
                x=alt.X("delta_ms:Q", title="change (ms, candidate minus base)"),
                # the panel's name above it: an axis title beside 60-character labels sat on them
                y=alt.Y("label:N", title=None, sort=alt.EncodingSortField("order"),
                        axis=alt.Axis(labelLimit=LABEL_PX_BESIDE)),
                color=alt.Color("direction:N", title="candidate",
                                scale=alt.Scale(domain=list(COLOURS), range=list(COLOURS.values())),
                                legend=alt.Legend(orient="bottom")),
                tooltip=[alt.Tooltip("key:N", title=title),
                         alt.Tooltip("delta_ms:Q", title="change (ms)", format="+.3f"),
                         alt.Tooltip("share:N", title="of the total change")],
            ).properties(width=width, height=ROW_PX * len(drawn),
                         title=alt.TitleParams(f"by {title}", anchor="start", fontSize=11))
        )  # fmt: skip
    return finish_chart(alt.vconcat(*charts).properties(title=chart_title(TITLE, notes)))
