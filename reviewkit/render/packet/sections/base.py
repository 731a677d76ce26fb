"""What a packet section declares: anchor, heading, the fields it owns, its charts, its partial."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reviewkit.render.packet.fields import Inputs


def _always(model: dict) -> bool:
    return True


@dataclass(frozen=True)
class Section:
    """One section of the packet. Its partial is `report_templates/packet/<id>.html.j2`; the
    page includes the partials, and lists them in the contents, in SECTIONS' order."""

    id: str  # the section's anchor (`#id`) and its partial's name
    title: str  # its heading, and its line in the contents
    fields: tuple[str, ...] = ()  # the packet.json fields it owns: `build` returns exactly these
    build: Callable[[Inputs], dict] | None = None
    # the charts its partial places by name: always drawn (with nothing to draw, as a line that
    # says what is missing); a chart too tall for a page continues as NAME_2, NAME_3, ...
    charts: tuple[str, ...] = ()
    optional_charts: tuple[str, ...] = ()  # drawn only when the review holds what they show
    draw: Callable[[Inputs], dict] | None = None  # its chart specs, by name
    # built after every other section: its fields summarise theirs (the brief)
    summarise: Callable[[Inputs, dict], dict] | None = None
    listed: bool = True  # a line in the contents (the brief comes before the contents)
    shown: Callable[[dict], bool] = _always  # whether the page has it, from the model
    # A section in a module of its own (sections/<name>.py, `SECTION = Section(...)`): the id
    # of the section it follows on the page. The core sections are in page order already.
    after: str | None = None

    @property
    def partial(self) -> str:
        return f"packet/{self.id}.html.j2"
