"""Validation of chart specs against the Vega-Lite schema altair ships (used by tests)."""

from __future__ import annotations

import functools


@functools.cache
def _validator():
    import jsonschema
    from altair.vegalite.v6.schema import load_schema

    schema = load_schema()  # the vega-lite-schema.json altair ships and builds specs from
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def validate(spec: dict) -> None:
    """Raise ValueError if the spec does not satisfy altair's bundled Vega-Lite schema."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(spec))
    if error is not None:
        raise ValueError(f"invalid Vega-Lite spec at {error.json_path}: {error.message}")
