"""The one reading of a cited platform shortlist: validated at load into a typed record."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from reviewkit.evidence.files import SHORTLIST, EvidenceUnusable, Loaded, finite_number, need


class ShortlistUnusable(EvidenceUnusable):
    """A shortlist file of the right kind whose fields cannot be read; the message names the key
    (the caller names the file, as the review cites it)."""


_need = functools.partial(need, error=ShortlistUnusable, kind=SHORTLIST)


@dataclass(frozen=True)
class ShortlistRow:
    """One platform as the shortlist ranked it: its numbers (None: not available), each risk
    item with its weight, the reason for its rank and the commands that benchmark it."""

    key: str
    name: str
    rank: int
    status: str
    rank_reason: str
    tp: int | None
    efficiency: str
    latency_s: float | None
    latency_low_s: float | None
    latency_high_s: float | None
    decode_tokens_per_s: float | None
    energy_j: float | None  # per output token
    energy_low_j: float | None
    energy_high_j: float | None
    risk: float
    risk_items: tuple[tuple[str, float, str], ...]  # (key, weight, reason)
    commands: tuple[str, ...]


@dataclass(frozen=True)
class CitedShortlist:
    """A `reviewkit shortlist` result as the gate and the packet read it."""

    path: Path
    model: str
    batch: int
    context: int
    dtype: str
    output_tokens: int
    sla_p99_s: float
    latency_note: str  # what the latency is: one request's service time, no queueing
    summary: tuple[str, ...]
    shortlisted: tuple[str, ...]
    rows: tuple[ShortlistRow, ...]  # in ranking order


def _number(table: dict, name: str, key: str) -> float | None:
    value = table.get(name)
    _need(value is None or finite_number(value), f"{key}.{name}", "a finite number or null")
    return None if value is None else float(value)


def _span(c: dict, name: str, key: str) -> tuple[float | None, float | None, float | None]:
    span = c.get(name)
    _need(isinstance(span, dict), f"{key}.{name}", "a table of value, low and high")
    return tuple(_number(span, part, f"{key}.{name}") for part in ("value", "low", "high"))  # type: ignore[return-value]


def _text(table: dict, name: str, key: str) -> str:
    value = table.get(name)
    _need(isinstance(value, str), f"{key}.{name}", "text")
    return value


def _row(c: object, i: int) -> ShortlistRow:
    key = f"candidates[{i}]"
    _need(isinstance(c, dict), key, "a table")
    assert isinstance(c, dict)
    rank, tp = c.get("rank"), c.get("tp")
    _need(type(rank) is int and rank >= 1, f"{key}.rank", "a whole number, 1 or more")
    _need(tp is None or (type(tp) is int and tp >= 1), f"{key}.tp", "a whole number or null")
    items = c.get("risk_items")
    _need(isinstance(items, list), f"{key}.risk_items", "a list")
    risks = []
    for j, item in enumerate(items):  # type: ignore[arg-type]
        where = f"{key}.risk_items[{j}]"
        _need(isinstance(item, dict), where, "a table of key, weight and reason")
        weight = _number(item, "weight", where)
        _need(weight is not None, f"{where}.weight", "a finite number")
        risks.append((_text(item, "key", where), float(weight), _text(item, "reason", where)))  # type: ignore[arg-type]
    commands = c.get("commands")
    _need(isinstance(commands, list) and all(isinstance(x, str) for x in commands),
          f"{key}.commands", "a list of command lines")  # fmt: skip
    risk = _number(c, "risk", key)
    _need(risk is not None, f"{key}.risk", "a finite number")
    return ShortlistRow(
        _text(c, "key", key), _text(c, "name", key), rank, _text(c, "status", key),
        _text(c, "rank_reason", key), tp, _text(c, "efficiency", key),
        *_span(c, "latency_s", key), _number(c, "decode_tokens_per_s", key),
        *_span(c, "energy_j_per_output_token", key), float(risk), tuple(risks),  # type: ignore[arg-type]
        tuple(commands),  # type: ignore[arg-type]
    )  # fmt: skip


def read_shortlist(loaded: Loaded) -> CitedShortlist:
    """The typed record of a loaded shortlist document; ShortlistUnusable names the first bad
    key. Every field the packet reads is checked here once."""
    doc = loaded.doc
    _need(doc is not None, "kind", f"a shortlist result ({loaded.reason})")
    assert doc is not None
    req, method = doc.get("request"), doc.get("method")
    _need(isinstance(req, dict), "request", "a table")
    _need(isinstance(method, dict), "method", "a table")
    for name in ("batch", "context", "output_tokens"):
        value = req.get(name)
        _need(type(value) is int and value >= 1, f"request.{name}", "a whole number, 1 or more")
    sla = _number(req, "sla_p99_s", "request")
    _need(sla is not None and sla > 0, "request.sla_p99_s", "a positive number of seconds")
    summary, shortlisted = doc.get("summary"), doc.get("shortlist")
    for name, value in (("summary", summary), ("shortlist", shortlisted)):
        _need(isinstance(value, list) and all(isinstance(x, str) for x in value), name,
              "a list of text")  # fmt: skip
    candidates = doc.get("candidates")
    _need(isinstance(candidates, list), "candidates", "a list of tables")
    return CitedShortlist(
        loaded.path, _text(req, "model", "request"), req["batch"], req["context"],
        _text(req, "dtype", "request"), req["output_tokens"], float(sla),  # type: ignore[arg-type]
        _text(method, "latency", "method"), tuple(summary), tuple(shortlisted),  # type: ignore[arg-type]
        tuple(_row(c, i) for i, c in enumerate(candidates)),  # type: ignore[arg-type]
    )  # fmt: skip
