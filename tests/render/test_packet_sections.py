"""The packet's sections are declared once: each declaration matches its partial, builds the
fields it names and draws the charts it names, and the model is the sections' fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reviewkit import templates
from reviewkit.render.packet.fields import Inputs, header_fields
from reviewkit.render.packet.model import build_model
from reviewkit.render.packet.sections import SECTIONS, shown_sections
from reviewkit.review.gate import run_check

SAMPLES = Path(__file__).parents[2] / "samples"
PARTIALS = Path(templates.FOLDER) / "packet"
# a chart too tall for a page continues as NAME_2, NAME_3, ... (comparison, production fit)
PART = re.compile(r"_\d+$")
# a chart a partial places by its literal name: {{ chart("roofline", ...) }}
PLACED = re.compile(r"""chart\("(\w+)\"""")


@pytest.fixture(scope="module", params=["review-bf16-transformer", "review-cpu-to-h200"])
def sample(request):
    report = run_check(SAMPLES / request.param / "review.toml")
    return Inputs(report), build_model(report)


def test_every_partial_is_a_declared_section_and_names_its_charts():
    partials = {p.name for p in PARTIALS.glob("*.html.j2")} - {"macros.html.j2"}
    assert partials == {Path(s.partial).name for s in SECTIONS}
    assert len({s.id for s in SECTIONS}) == len(SECTIONS)
    for s in SECTIONS:
        text = (PARTIALS.parent / s.partial).read_text()
        assert '<section id="{{ section.id }}"' in text, s.id  # the id and title said once
        assert set(PLACED.findall(text)) <= {*s.charts, *s.optional_charts}, s.id
        for name in s.charts:
            assert f'"{name}"' in text, (s.id, name)


def test_each_section_builds_the_fields_it_declares_and_the_model_is_theirs(sample):
    inputs, model = sample
    owned = [name for s in SECTIONS for name in s.fields]
    assert len(owned) == len(set(owned)), "a field declared by two sections"
    for s in SECTIONS:
        if s.build is not None:
            assert set(s.build(inputs)) == set(s.fields), s.id
        if s.summarise is not None:
            assert set(s.summarise(inputs, model)) == set(s.fields), s.id
    assert set(model) == set(header_fields(inputs)) | set(owned) | {"charts", "no_data"}


def test_each_section_draws_only_the_charts_it_declares(sample):
    inputs, model = sample
    drawn = {}
    for s in SECTIONS:
        names = set(s.draw(inputs)) if s.draw is not None else set()
        assert {PART.sub("", n) for n in names} <= {*s.charts, *s.optional_charts}, s.id
        drawn |= dict.fromkeys(names, s.id)
    assert set(drawn) == set(model["charts"])
    for s in shown_sections(model):
        assert set(s.charts) <= set(model["charts"]), s.id


def test_a_section_in_a_module_of_its_own_is_placed_after_the_one_it_names():
    import pkgutil

    from reviewkit.render.packet import sections

    ids = [s.id for s in SECTIONS]
    # sections/communication.py declares `after="layers"`: the core list does not hold it
    assert ids[ids.index("layers") + 1] == "communication"
    assert "communication" not in [s.id for s in sections.CORE]
    own = [m.name for m in pkgutil.iter_modules(sections.__path__)
           if m.name not in sections.NOT_SECTIONS]  # fmt: skip
    assert own and len(ids) == len(set(ids)) == len(sections.CORE) + len(own)
