"""What the fuzz suites share: the leaves of a nested document, and a copy with one replaced."""

from __future__ import annotations

import copy


def leaves(doc, path=()):
    """Every leaf's path in a nested document (keys and list indices)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from leaves(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from leaves(value, (*path, i))
    else:
        yield path


def replaced(doc: dict, path: tuple, value) -> dict:
    """A deep copy of `doc` with the leaf at `path` set to `value`."""
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out
