"""The packet's view model: the header, then each declared section's fields and charts."""

from __future__ import annotations

from reviewkit.render import charts
from reviewkit.render.packet.fields import Inputs, header_fields
from reviewkit.render.packet.sections import SECTIONS
from reviewkit.review.gate import Report


def build_model(report: Report) -> dict:
    """Every value the templates show, JSON-serialisable and in a stable order."""
    p = Inputs(report)
    model = header_fields(p)
    for section in SECTIONS:
        if section.build is not None:
            model.update(section.build(p))
    model["charts"] = draw_charts(p)
    # a chart with nothing to draw is one line saying what is missing, not an empty plot
    model["no_data"] = {
        name: {"title": meta.get("title", name), "reason": meta.get("reason", "")}
        for name, spec in model["charts"].items()
        for meta in [spec.get("usermeta") or {}]
        if meta.get(charts.NO_DATA_KEY)
    }
    for section in SECTIONS:
        if section.summarise is not None:
            model.update(section.summarise(p, model))
    return model


def draw_charts(p: Inputs) -> dict:
    """Every section's chart specs, by the names its template partial places them under."""
    return {name: spec for s in SECTIONS if s.draw is not None for name, spec in s.draw(p).items()}
