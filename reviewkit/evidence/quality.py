"""The one reading of a cited quality result: validated at load into typed records, or why not."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from reviewkit.evidence.files import (
    QUALITY,
    STATUS_NOT_APPLICABLE,
    STATUS_OK,
    EvidenceUnusable,
    Loaded,
    finite_number,
    need,
    row_status,
)

# Where a row's figures come from: the suite's own workloads (its decoder has random weights,
# so its top-1 and KL are a smoke check), or a team's exported program (`quality --model`).
SOURCE_SUITE, SOURCE_MODEL = "suite", "model"
SOURCES = (SOURCE_SUITE, SOURCE_MODEL)
# Schema 1 recorded only a dtype per row; its int8 was dynamic quantisation of nn.Linear.
V1_MAPPINGS = {"int8": (("quantization", "int8-dynamic"),)}


@dataclass(frozen=True)
class QualityRow:
    """One (workload, mapping) of a quality result. Only a measured row (`status` ok) carries
    errors; the model rows add top-1 agreement and KL divergence against the reference.

    `dtype` is the narrowest precision the mapping computes in (int8 for int8 quantisation,
    bf16 for fp32 matmuls at `medium`): the key of the rubric's tolerances. `mapping` is the
    knob settings the row ran under, as `reviewkit run --knob` spells them."""

    workload_id: str
    dtype: str
    status: str
    reason: str
    rel_error: float | None = None
    max_abs_error: float | None = None
    top1_agreement: float | None = None
    kl_divergence: float | None = None
    mapping: tuple[tuple[str, str], ...] = ()
    source: str = SOURCE_SUITE

    @property
    def measured(self) -> bool:
        return self.status == STATUS_OK

    @property
    def applicable(self) -> bool:
        return self.status != STATUS_NOT_APPLICABLE

    @property
    def from_model(self) -> bool:
        """A team's own model measured it: only such figures clear a model-quality question."""
        return self.source == SOURCE_MODEL

    @property
    def tolerance_key(self) -> str | None:
        """The rubric tolerance this row's relative error is held to, None when none applies:
        pruning changes the function on purpose, so a sparse row is judged on its model
        figures only, never on a rounding tolerance."""
        return None if dict(self.mapping).get("sparsity", "dense") != "dense" else self.dtype

    def matches(self, knob: str, value: object) -> bool:
        """Whether this row ran with `knob` set to `value` (as the run records it)."""
        return dict(self.mapping).get(knob) == _text(value)


@dataclass(frozen=True)
class Quality:
    """A `reviewkit quality` result as the gate and the packet read it."""

    path: Path
    rows: tuple[QualityRow, ...]


class QualityUnusable(EvidenceUnusable):
    """A quality file of the right kind whose fields cannot be read; the message names the key
    (the caller names the file, as the review cites it)."""


_need = functools.partial(need, error=QualityUnusable, kind=QUALITY)


def _text(value: object) -> str:
    # JSON keeps a knob's int and bool; a run's knobs compare with it as text either way
    return str(value).lower() if isinstance(value, bool) else str(value)


def _measure(raw: dict, name: str, key: str, lo: float, hi: float, required: bool) -> float | None:
    value = raw.get(name)
    if value is None and not required:
        return None
    _need(
        finite_number(value) and lo <= value <= hi, f"{key}.{name}", f"a number in [{lo:g}, {hi:g}]"
    )
    return float(value)


def _mapping(raw: dict, key: str, version: int) -> tuple[tuple[str, str], ...]:
    if version < 2:
        return V1_MAPPINGS.get(raw["dtype"], (("dtype", raw["dtype"]),))
    mapping = raw.get("mapping")
    _need(isinstance(mapping, dict), f"{key}.mapping", "a table of knob settings")
    for name, value in mapping.items():
        _need(isinstance(value, str | int), f"{key}.mapping.{name}", "a string, integer or boolean")
    return tuple((str(k), _text(v)) for k, v in mapping.items())


def _row(raw: object, key: str, version: int) -> QualityRow:
    _need(isinstance(raw, dict), key, "a table")
    for name in ("id", "dtype"):
        _need(isinstance(raw.get(name), str) and bool(raw[name]), f"{key}.{name}", "a string")
    source = raw.get("source", SOURCE_SUITE) if version >= 2 else SOURCE_SUITE
    _need(source in SOURCES, f"{key}.source", f"one of {', '.join(SOURCES)}")
    status = row_status(raw)
    row = QualityRow(raw["id"], raw["dtype"], status, str(raw.get("reason", "")),
                     mapping=_mapping(raw, key, version), source=source)  # fmt: skip
    if status != STATUS_OK:
        return row
    # A measured row is judged on its relative error: without one it is not a result.
    return QualityRow(
        row.workload_id,
        row.dtype,
        status,
        row.reason,
        rel_error=_measure(raw, "rel_error", key, 0.0, math.inf, required=True),
        max_abs_error=_measure(raw, "max_abs_error", key, 0.0, math.inf, required=False),
        top1_agreement=_measure(raw, "top1_agreement", key, 0.0, 1.0, required=False),
        kl_divergence=_measure(raw, "kl_divergence", key, 0.0, math.inf, required=False),
        mapping=row.mapping,
        source=row.source,
    )


def read_quality(loaded: Loaded) -> Quality:
    """The typed record of a loaded quality document; QualityUnusable names the first bad key.
    Schema 1 (no mapping, no source) reads as the suite's rows, each mapping its dtype."""
    doc = loaded.doc
    _need(doc is not None, "kind", f"a quality result ({loaded.reason})")
    version = doc.get("schema_version")
    results = doc.get("results")
    _need(isinstance(results, list), "results", "a list of tables")
    return Quality(
        loaded.path, tuple(_row(r, f"results[{i}]", version) for i, r in enumerate(results))
    )
