"""Checks a parsed run bundle against run.schema.json and names the first key that is wrong."""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from pathlib import Path

from reviewkit.common.cache import cache_dir
from reviewkit.common.errors import BundleError

SCHEMA_FILE = "run.schema.json"


class NonFinite(float):
    """A NaN or infinity read from the file: kept apart from a number the writer could make
    (reviewkit writes a non-finite value as null), so it is refused naming its key."""

    def __new__(cls, token: str) -> NonFinite:
        value = super().__new__(cls, float(token))
        value.token = token
        return value


def parse(text: str):
    """JSON as Python reads it, with NaN/Infinity kept as NonFinite rather than floats."""
    return json.loads(text, parse_constant=NonFinite)


BUNDLE_REMEDY = "the bundle is damaged: re-run `reviewkit run` or restore it"


@functools.cache
def _validator(part: str = ""):
    """The validator of the whole bundle, or of one top-level key's value (`ceilings`, which a
    device profile holds too)."""
    from jsonschema import Draft202012Validator

    schema = json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text("utf-8"))
    node = schema["properties"][part] if part else schema
    return Draft202012Validator(_inlined(node, schema["$defs"]))


def _inlined(node, defs: dict):
    """The schema with each local $ref replaced by its definition: resolving a reference per
    value is most of jsonschema's time on a bundle of a hundred workloads."""
    if isinstance(node, dict):
        ref = node.get("$ref", "")
        if ref.startswith("#/$defs/"):
            return _inlined(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: (v if k == "$defs" else _inlined(v, defs)) for k, v in node.items()}
    if isinstance(node, list):
        return [_inlined(v, defs) for v in node]
    return node


# A bundle's bytes, once checked against this schema, need no second check: a marker named
# by the hash of both sits in the cache (jsonschema walks every sample of every workload, about
# 0.1 s a bundle, most of `reviewkit check` beyond its imports). A marker that cannot be
# written is only a missed saving.
VALID_MARKERS = "valid-bundles"


@functools.cache
def _schema_digest() -> str:
    return hashlib.sha256(resources.files(__package__).joinpath(SCHEMA_FILE).read_bytes()
                          ).hexdigest()[:16]  # fmt: skip


def _marker(text: str) -> Path:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return cache_dir() / VALID_MARKERS / f"{_schema_digest()}-{digest}"


def check_once(doc: object, text: str, file: Path) -> None:
    """check(doc, file), skipped when these exact bytes passed it before under this schema."""
    marker = _marker(text)
    if marker.exists():
        return
    check(doc, file)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass


def key_name(path) -> str:
    """workloads[3].samples_s[0] for the path ("workloads", 3, "samples_s", 0)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _non_finite_at(doc, path=()):
    if isinstance(doc, NonFinite):
        return path
    children = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(
        doc, list) else ()  # fmt: skip
    for key, value in children:
        found = _non_finite_at(value, (*path, key))
        if found is not None:
            return found
    return None


def refuse(
    file: Path, key: str, value: object, expected: str, *,
    remedy: str = BUNDLE_REMEDY, error: type[Exception] = BundleError,
) -> None:  # fmt: skip
    from reviewkit.common.format import shown

    raise error(f"{file}: key {key!r} is {shown(value)}; expected {expected}; {remedy}")


def check(
    doc: object, file: Path, *, part: str = "",
    remedy: str = BUNDLE_REMEDY, error: type[Exception] = BundleError,
) -> None:  # fmt: skip
    """An `error` naming the file, the key, its value and what was expected, for the first
    wrong value (in document order), or nothing. `part` checks one top-level key's value
    alone (a device profile's ceilings against the bundle's `ceilings`)."""
    how = {"remedy": remedy, "error": error}
    where = _non_finite_at(doc)
    if where is not None:
        expected = "a finite number or null (reviewkit never writes NaN or infinity)"
        refuse(file, key_name(where), _get(doc, where).token, expected, **how)
    errors = sorted(_validator(part).iter_errors(doc), key=lambda e: [str(p) for p in e.path])
    if errors:
        from jsonschema.exceptions import best_match

        # the first wrong key in document order; inside an anyOf (null or a table, say) the
        # branch it came closest to, so a table's bad key is named rather than the table
        first = best_match([errors[0]])
        expected = describe(first.schema)
        path = tuple(first.absolute_path)
        if first.validator == "required":
            missing = next(k for k in first.validator_value if k not in first.instance)
            raise error(
                f"{file}: key {key_name((*path, missing))!r} is missing ({expected}); {remedy}"
            )
        refuse(file, key_name(path), first.instance, expected, **how)


def describe(schema: object) -> str:
    """What a (sub)schema accepts, in words: its description, else its type or its choices;
    never the offending value (which can be 10,000 characters long)."""
    if not isinstance(schema, dict):
        return "a value of another kind"
    if "description" in schema:
        return schema["description"]
    if "anyOf" in schema:
        return " or ".join(describe(s) for s in schema["anyOf"])
    if "const" in schema:
        return repr(schema["const"])
    parts = [str(schema.get("type", "a value"))]
    if "minimum" in schema or "exclusiveMinimum" in schema:
        parts.append(f"from {schema.get('minimum', schema.get('exclusiveMinimum'))}")
    if "maximum" in schema:
        parts.append(f"to {schema['maximum']}")
    return " ".join(parts)


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc
