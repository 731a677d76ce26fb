"""The packet's sections in page order: the core ones, and each module of this package that
declares `SECTION` placed after the section its `after` names (docs/architecture.md)."""

from __future__ import annotations

import importlib
import pkgutil

from reviewkit.common.errors import ReviewkitError
from reviewkit.render.packet.sections.base import Section
from reviewkit.render.packet.sections.core import CORE

# Modules of this package that declare no section of their own.
NOT_SECTIONS = {"base", "core"}


def _assembled() -> tuple[Section, ...]:
    sections = list(CORE)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in NOT_SECTIONS:
            continue
        section = importlib.import_module(f"{__name__}.{info.name}").SECTION
        ids = [s.id for s in sections]
        if section.id in ids or section.after not in ids:
            raise ReviewkitError(
                f"reviewkit/render/packet/sections/{info.name}.py: section {section.id!r} "
                f"after {section.after!r}: expected a new id placed after one of {ids}"
            )
        sections.insert(ids.index(section.after) + 1, section)
    return tuple(sections)


SECTIONS: tuple[Section, ...] = _assembled()


def shown_sections(model: dict) -> list[Section]:
    """The sections this packet's page has, in order."""
    return [s for s in SECTIONS if s.shown(model)]


__all__ = ["SECTIONS", "Section", "shown_sections"]
