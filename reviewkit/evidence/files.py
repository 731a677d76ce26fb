"""Read the evidence files a review cites (quality, sweep, soak, traces, shortlists) by kind."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from reviewkit.bundle.run import STATUS_OK
from reviewkit.common.numbers import finite_number

__all__ = [
    "NO_STATUS",
    "STATUS_NOT_APPLICABLE",
    "STATUS_OK",
    "EvidenceUnusable",
    "finite_number",
    "need",
    "read_cited",
    "row_status",
]

QUALITY, SWEEP, SOAK = "reviewkit.quality", "reviewkit.sweep", "reviewkit.soak"
TRACE = "reviewkit.trace_summary"
TRACE_DIFF = "reviewkit.trace-diff"  # evidence/trace/diff.py's KIND, written by `trace diff`
SHORTLIST = "reviewkit.shortlist"  # analysis/shortlist.py's KIND, written by its command
# The newest schema of each kind this version reads; a newer file is refused with a reason
# rather than half-read, an older one would go through a migration here.
SCHEMA_VERSIONS = {QUALITY: 2, SWEEP: 1, SOAK: 1, TRACE: 1, TRACE_DIFF: 1, SHORTLIST: 1}
# Which command writes each kind, for the reason shown when a file is not of it.
WRITTEN_BY = {
    QUALITY: "reviewkit quality",
    SWEEP: "reviewkit sweep",
    SOAK: "reviewkit soak",
    TRACE: "reviewkit trace import",
    TRACE_DIFF: "reviewkit trace diff",
    SHORTLIST: "reviewkit shortlist",
}


@dataclass(frozen=True)
class Loaded:
    """One cited file: its document when it is of the wanted kind, else why it is not used."""

    path: Path
    doc: dict | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.doc is not None


# A row of a quality or sweep result that is not measured on purpose (int8 on a workload with
# no Linear layer, say): neither counted nor a problem.
STATUS_NOT_APPLICABLE = "not applicable"
# A row with no `status` at all: the file does not say it was measured, so it is not counted as
# measured — by the gate or the packet (the packet used to read it as "ok").
NO_STATUS = "no status recorded"


def row_status(row: dict) -> str:
    """A result row's status as the gate and the packet both read it: its `status`, or
    NO_STATUS when it has none (never taken as ok)."""
    status = row.get("status")
    return status if isinstance(status, str) and status else NO_STATUS


def header(kind: str, created_unix_s: float) -> dict:
    """The fields every evidence document opens with: its kind, schema, tool and time."""
    from reviewkit import __version__

    return {
        "kind": kind,
        "schema_version": SCHEMA_VERSIONS[kind],
        "tool": {"name": "reviewkit", "version": __version__},
        "created_unix_s": round(created_unix_s, 3),
    }


def read(path: Path, kind: str) -> Loaded:
    """The document at path if it is a `kind` result this version reads; never raises."""
    want = WRITTEN_BY[kind]
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return Loaded(Path(path), None, f"not readable as JSON ({type(exc).__name__})")
    if not isinstance(doc, dict) or doc.get("kind") != kind:
        found = doc.get("kind") if isinstance(doc, dict) else None
        what = f"a {found!r} document" if isinstance(found, str) else "not a reviewkit result"
        return Loaded(Path(path), None, f"{what}, not a `{want}` result")
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSIONS[kind] or version < 1:
        return Loaded(
            Path(path),
            None,
            f"schema_version {version!r}; this reviewkit reads `{want}` results up to "
            f"{SCHEMA_VERSIONS[kind]} (upgrade reviewkit, or re-run `{want}`)",
        )
    return Loaded(Path(path), doc)


def read_all(paths: tuple[Path, ...] | list[Path], kind: str) -> list[Loaded]:
    return [read(p, kind) for p in paths]


class EvidenceUnusable(ValueError):
    """A cited file of the right kind whose fields cannot be read into its typed record; the
    message names the key (the caller names the file, as the review cites it)."""


def need(cond: bool, key: str, expected: str, *, error: type[EvidenceUnusable], kind: str) -> None:
    """Raise `error` naming the key and what it must be, and which command writes a good one:
    the one refusal every typed reader gives."""
    if not cond:
        raise error(f"`{key}` must be {expected}; re-run `{WRITTEN_BY[kind]}`")


Record = TypeVar("Record")


def read_cited(
    paths: Sequence[Path], kind: str, parse: Callable[[Loaded], Record]
) -> tuple[list[Record], list[tuple[Path, str]]]:
    """Every cited `kind` file read into its typed record by `parse`, and (path, reason) for
    each file that is not used: the gate and the packet take the same files and give the same
    reasons."""
    records, not_used = [], []
    for loaded in read_all(tuple(paths), kind):
        if not loaded.ok:
            not_used.append((loaded.path, loaded.reason))
            continue
        try:
            records.append(parse(loaded))
        except EvidenceUnusable as exc:
            not_used.append((loaded.path, str(exc)))
    return records, not_used
