"""The files a review cites, read for the packet through the evidence readers the gate uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from reviewkit.evidence import files as evidence
from reviewkit.review.gate import Report

Record = TypeVar("Record")


def loaded_evidence(report: Report, kind: str, key: str) -> tuple[list, list[str]]:
    """(usable documents with their review-relative path, notes on the files not used)."""
    r = report.review
    docs, notes = [], []
    for x in evidence.read_all(r.evidence.get(key, ()), kind):
        if x.ok:
            docs.append((r.relative(x.path), x.doc))
        else:
            notes.append(f"{r.relative(x.path)}: not used: {x.reason}")
    return docs, notes


def cited_records(
    report: Report, kind: str, key: str, parse: Callable[[evidence.Loaded], Record]
) -> tuple[list[tuple[str, Record]], list[str]]:
    """(review-relative source, typed record) of every cited `kind` file under [evidence].key,
    and a note on each file not used, with the reason the gate gives too."""
    r = report.review
    records, not_used = evidence.read_cited(r.evidence.get(key, ()), kind, parse)
    return (
        [(r.relative(rec.path), rec) for rec in records],
        [f"{r.relative(path)}: not used: {why}" for path, why in not_used],
    )
