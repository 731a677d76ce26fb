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


def replaced(doc: dict, path: tuple, value, removed: object = None) -> dict:
    """A deep copy of `doc` with the leaf at `path` set to `value` (deleted when `value` is
    the `removed` sentinel)."""
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    if removed is not None and value is removed:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def field_paths(doc) -> dict[tuple, list[tuple]]:
    """The leaves grouped by field: list indices made None, so a field repeated in each of
    200 samples or 50 workloads is drawn as often as a field that occurs once."""
    fields: dict[tuple, list[tuple]] = {}
    for path in leaves(doc):
        key = tuple(None if isinstance(p, int) else p for p in path)
        fields.setdefault(key, []).append(path)
    return fields
