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


@dataclass(frozen=True)
class QualityRow:
    """One (workload, dtype) of a quality result. Only a measured row (`status` ok) carries
    errors; the model rows add top-1 agreement and KL divergence against float64."""

    workload_id: str
    dtype: str
    status: str
    reason: str
    rel_error: float | None = None
    max_abs_error: float | None = None
    top1_agreement: float | None = None
    kl_divergence: float | None = None

    @property
    def measured(self) -> bool:
        return self.status == STATUS_OK

    @property
    def applicable(self) -> bool:
        return self.status != STATUS_NOT_APPLICABLE


@dataclass(frozen=True)
class Quality:
    """A `reviewkit quality` result as the gate and the packet read it."""

    path: Path
    rows: tuple[QualityRow, ...]


class QualityUnusable(EvidenceUnusable):
    """A quality file of the right kind whose fields cannot be read; the message names the key
    (the caller names the file, as the review cites it)."""


_need = functools.partial(need, error=QualityUnusable, kind=QUALITY)


def _measure(raw: dict, name: str, key: str, lo: float, hi: float, required: bool) -> float | None:
    value = raw.get(name)
    if value is None and not required:
        return None
    _need(
        finite_number(value) and lo <= value <= hi, f"{key}.{name}", f"a number in [{lo:g}, {hi:g}]"
    )
    return float(value)


def _row(raw: object, key: str) -> QualityRow:
    _need(isinstance(raw, dict), key, "a table")
    for name in ("id", "dtype"):
        _need(isinstance(raw.get(name), str) and bool(raw[name]), f"{key}.{name}", "a string")
    status = row_status(raw)
    row = QualityRow(raw["id"], raw["dtype"], status, str(raw.get("reason", "")))
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
    )


def read_quality(loaded: Loaded) -> Quality:
    """The typed record of a loaded quality document; QualityUnusable names the first bad key."""
    doc = loaded.doc
    _need(doc is not None, "kind", f"a quality result ({loaded.reason})")
    results = doc.get("results")
    _need(isinstance(results, list), "results", "a list of tables")
    return Quality(loaded.path, tuple(_row(r, f"results[{i}]") for i, r in enumerate(results)))
