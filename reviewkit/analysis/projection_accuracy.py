"""The projection's measured error by kind (rubrics/projection_error.toml), shown beside it.

`benchmarks/projection_error.py` projects measured workloads the fit never saw and compares; its
figures are recorded in the table by kind: `measured` (the target device's own efficiency,
held-out shapes on it) and `borrowed` (another device's efficiency, projected across devices).
A packet shows each projection with its kind's figures, so a reader weighs a borrowed 3 s
against what borrowing has been measured to miss by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

from reviewkit.analysis.project import MEASURED
from reviewkit.common.errors import InputError
from reviewkit.common.numbers import finite_number
from reviewkit.common.tomlfile import read_toml

DEFAULT_TABLE = Path(str(files("reviewkit.rubrics").joinpath("projection_error.toml")))
VERSION = 1
KINDS = ("measured", "borrowed")
NUMBERS = ("median_abs_error", "p90_abs_error", "coverage_80")
TEXTS = ("case", "measured_on", "date", "command")


@dataclass(frozen=True)
class MeasuredError:
    """One held-out comparison: its case in words, the errors (|projected / measured - 1|) and
    the share of the 80% intervals that held the measured time."""

    kind: str
    case: str
    held_out: int
    median_abs_error: float
    p90_abs_error: float
    coverage_80: float
    measured_on: str
    date: str
    command: str

    def text(self) -> str:
        return (f"{self.case}: median |error| {self.median_abs_error:.0%}, p90 "
                f"{self.p90_abs_error:.0%}, 80% intervals held {self.coverage_80:.0%} of "
                f"{self.held_out} held-out workloads")  # fmt: skip


def _fail(path: Path, key: str, expected: str) -> InputError:
    return InputError(f"{path}: key {key!r}: expected {expected}; fix the table (its comment "
                      "gives each field's form) or re-run benchmarks/projection_error.py")


def _case(path: Path, kind: str, i: int, doc: object) -> MeasuredError:
    where = f"kinds.{kind}[{i}]"
    if not isinstance(doc, Mapping):
        raise _fail(path, where, "a table")
    for key in NUMBERS:
        value = doc.get(key)
        if not finite_number(value) or value < 0:
            raise _fail(path, f"{where}.{key}", "a number at or above 0 (a fraction)")
    for key in TEXTS:
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise _fail(path, f"{where}.{key}", "a non-empty string")
    held = doc.get("held_out")
    if not isinstance(held, int) or isinstance(held, bool) or held < 1:
        raise _fail(path, f"{where}.held_out", "a positive whole number of workloads")
    return MeasuredError(kind, doc["case"], held, float(doc["median_abs_error"]),
                         float(doc["p90_abs_error"]), float(doc["coverage_80"]),
                         doc["measured_on"], doc["date"], doc["command"])  # fmt: skip


def read_errors(path: Path = DEFAULT_TABLE) -> dict[str, tuple[MeasuredError, ...]]:
    """Every kind's measured cases, as the table holds them."""
    doc = read_toml(path)
    if doc.get("version") != VERSION:
        raise _fail(path, "version", f"{VERSION} (the table version this reviewkit reads)")
    kinds = doc.get("kinds")
    if not isinstance(kinds, Mapping) or set(kinds) != set(KINDS):
        raise _fail(path, "kinds", f"tables {', '.join(KINDS)}, each a list of cases")
    out = {}
    for kind in KINDS:
        cases = kinds[kind]
        if not isinstance(cases, list) or not cases:
            raise _fail(path, f"kinds.{kind}", "a non-empty list of cases ([[kinds.KIND]])")
        out[kind] = tuple(_case(path, kind, i, c) for i, c in enumerate(cases))
    return out


@cache
def shipped_errors() -> dict[str, tuple[MeasuredError, ...]]:
    return read_errors(DEFAULT_TABLE)


def kind_of(efficiency_label: str) -> str:
    """The error kind of a projection labelled `efficiency_label` (MEASURED, or "borrowed from
    <devices>")."""
    return "measured" if efficiency_label == MEASURED else "borrowed"


def error_note(efficiency_label: str, table: Mapping[str, tuple[MeasuredError, ...]] | None = None
               ) -> str:  # fmt: skip
    """What a projection of this label has been measured to miss by, every case of its kind."""
    cases = (table or shipped_errors())[kind_of(efficiency_label)]
    return "; ".join(c.text() for c in cases)


def error_brief(efficiency_label: str,
                table: Mapping[str, tuple[MeasuredError, ...]] | None = None) -> str:  # fmt: skip
    """The range of the kind's median |error| over its cases, short enough for a table cell
    ("median |error| 8%-10% (4 cases)"); error_note says what each case was."""
    cases = (table or shipped_errors())[kind_of(efficiency_label)]
    low, high = (f"{f(c.median_abs_error for c in cases):.0%}" for f in (min, max))
    span = low if low == high else f"{low}-{high}"
    return f"median |error| {span}" + (f" ({len(cases)} cases)" if len(cases) > 1 else "")
