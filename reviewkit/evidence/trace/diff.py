"""The diff of two trace summaries: time and count change per layer type and per op, ranked."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit.common.errors import InputError
from reviewkit.common.numbers import finite_number
from reviewkit.evidence import files as evidence

KIND = evidence.TRACE_DIFF
SCHEMA_VERSION = evidence.SCHEMA_VERSIONS[KIND]
CITED_ROWS = 10  # the ops and layer types a cited diff keeps: the largest changes
UNMAPPED = "unmapped"
# Row statuses. An op missing from one side's top-N list is only "new" or "vanished" when that
# side's list was complete; otherwise it may simply have fallen below the cut.
BOTH, NEW, VANISHED = "both", "new", "vanished"
NOT_LISTED_BASE, NOT_LISTED_CAND = "not listed in base", "not listed in candidate"
OP_KEY_NOTE = (
    "op rows are keyed by name (kernels on the device basis, operators on the host's); shape "
    "rows by the outermost mapped operator and its Input Dims and types"
)
SHAPE_KEY = "op and Input Dims"
REMEDY = "pass a trace_summary.json written by `reviewkit trace import`"


@dataclass(frozen=True)
class DiffRow:
    """One layer type or op: its time and count in base and candidate, and its share of the
    total change (None where a side's value is unknown: an op below a truncated list's cut)."""

    key: str
    layer_type: str | None
    status: str
    base_time_s: float | None
    cand_time_s: float | None
    base_count: int | None
    cand_count: int | None

    @property
    def delta_s(self) -> float | None:
        if self.base_time_s is None or self.cand_time_s is None:
            return None
        return self.cand_time_s - self.base_time_s

    def to_json(self, total_delta_s: float) -> dict:
        d = self.delta_s
        return {
            "key": self.key,
            "layer_type": self.layer_type,
            "status": self.status,
            "base_time_s": self.base_time_s,
            "cand_time_s": self.cand_time_s,
            "delta_s": d,
            "share_of_change": None if d is None or total_delta_s == 0 else d / total_delta_s,
            "base_count": self.base_count,
            "cand_count": self.cand_count,
        }


@dataclass(frozen=True)
class SharePair:
    """A device share (idle, host overhead) before and after; None where no device was traced."""

    name: str
    base: float | None
    cand: float | None

    def to_json(self) -> dict:
        delta = None if self.base is None or self.cand is None else self.cand - self.base
        return {"name": self.name, "base": self.base, "cand": self.cand, "delta": delta}


@dataclass(frozen=True)
class Side:
    """One summary as the diff reads it: its file, traces and op list on the chosen basis."""

    path: str
    ranks: tuple[int, ...]
    total_s: float
    layer_s: dict
    ops: dict  # name -> (time_s, count, layer_type), summed over ranks
    ops_complete: bool  # every rank's list held all its distinct names
    # "op dims types" -> (time_s, count, layer_type): the summaries' shape entries, on the basis
    shapes: dict = field(default_factory=dict)
    shapes_complete: bool = True  # every layer type listed all its shapes


@dataclass(frozen=True)
class TraceDiff:
    """The whole diff, ranked by each row's contribution to the total change."""

    base: Side
    cand: Side
    time_basis: str
    basis_reason: str
    op_list: str
    layer_types: tuple[DiffRow, ...]
    ops: tuple[DiffRow, ...]
    shares: tuple[SharePair, ...]
    notes: tuple[str, ...]
    shapes: tuple[DiffRow, ...] = ()

    @property
    def delta_s(self) -> float:
        return self.cand.total_s - self.base.total_s

    def to_json(self, created_unix_s: float) -> dict:
        d = self.delta_s
        return {
            **evidence.header(KIND, created_unix_s),
            "base": {"path": self.base.path, "ranks": list(self.base.ranks)},
            "cand": {"path": self.cand.path, "ranks": list(self.cand.ranks)},
            "time_basis": self.time_basis,
            "basis_reason": self.basis_reason,
            "op_key": "name",
            "op_list": self.op_list,
            "ops_list_complete": {
                "base": self.base.ops_complete,
                "cand": self.cand.ops_complete,
            },
            "base_time_s": self.base.total_s,
            "cand_time_s": self.cand.total_s,
            "delta_s": d,
            "layer_types": [r.to_json(d) for r in self.layer_types],
            "ops": [r.to_json(d) for r in self.ops],
            "shape_key": SHAPE_KEY,
            "shapes": [r.to_json(d) for r in self.shapes],
            "device_shares": [s.to_json() for s in self.shares],
            "notes": list(self.notes),
        }


def _fail(path: Path, key: str, expected: str) -> InputError:
    return InputError(f"{path}: `{key}` must be {expected}; {REMEDY}")


def load_summary(path: Path) -> dict:
    """A trace summary document, checked for every field the diff reads; the error names the
    file, the key and what it must be."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file; {REMEDY}")
    loaded = evidence.read(path, evidence.TRACE)
    if not loaded.ok:
        raise InputError(f"{path}: {loaded.reason}; {REMEDY}")
    doc = loaded.doc
    traces = doc.get("traces")
    if not isinstance(traces, list) or not traces:
        raise _fail(path, "traces", "a non-empty list")
    for i, t in enumerate(traces):
        where = f"traces[{i}]"
        if not isinstance(t, dict):
            raise _fail(path, where, "an object")
        if t.get("time_basis") not in ("device", "host"):
            raise _fail(path, f"{where}.time_basis", '"device" or "host"')
        for mix in ("op_mix", "host"):
            m = t.get(mix)
            ok = isinstance(m, dict) and finite_number(m.get("time_s"))
            ok = ok and isinstance(m.get("layer_types"), dict)
            unmapped = m.get("unmapped") if ok else None
            ok = ok and isinstance(unmapped, dict) and finite_number(unmapped.get("time_s"))
            if not ok:
                raise _fail(path, f"{where}.{mix}", "an op mix with time_s, layer_types, unmapped")
            for k, v in m["layer_types"].items():
                if not isinstance(v, dict) or not finite_number(v.get("time_s")):
                    raise _fail(path, f"{where}.{mix}.layer_types.{k}.time_s", "a number")
        for lst, time_key in (("ops", "self_s"), ("kernels", "total_s")):
            rows = t.get(lst)
            if not isinstance(rows, list) or not isinstance(t.get(f"{lst}_listed_of"), int):
                raise _fail(path, f"{where}.{lst}", f"a list with {lst}_listed_of")
            for j, r in enumerate(rows):
                ok = isinstance(r, dict) and isinstance(r.get("name"), str)
                if not (ok and finite_number(r.get(time_key)) and isinstance(r.get("count"), int)):
                    raise _fail(
                        path, f"{where}.{lst}[{j}]", f"an object with name, count, {time_key}"
                    )
        if not isinstance(t.get("device"), dict):
            raise _fail(path, f"{where}.device", "an object")
    return doc


def _layer_maps(doc: dict) -> list:
    return sorted(str(m.get("sha256")) for m in doc.get("layer_map") or [] if isinstance(m, dict))


def _side(path: Path, doc: dict, basis: str) -> Side:
    mix_key, list_key, time_key = (
        ("op_mix", "kernels", "total_s") if basis == "device" else ("host", "ops", "self_s")
    )
    layer_s: dict[str, float] = {}
    ops: dict[str, tuple[float, int, str | None]] = {}
    total_s, complete = 0.0, True
    for t in doc["traces"]:
        mix = t[mix_key]
        total_s += mix["time_s"]
        for k, v in mix["layer_types"].items():
            layer_s[k] = layer_s.get(k, 0.0) + v["time_s"]
        layer_s[UNMAPPED] = layer_s.get(UNMAPPED, 0.0) + mix["unmapped"]["time_s"]
        rows = t[list_key]
        complete = complete and t[f"{list_key}_listed_of"] <= len(rows)
        for r in rows:
            time_s, count, _ = ops.get(r["name"], (0.0, 0, None))
            ops[r["name"]] = (time_s + r[time_key], count + r["count"], r.get("layer_type"))
    ranks = tuple(t.get("rank", 0) for t in doc["traces"])
    shapes, shapes_complete = _shapes(doc, basis)
    return Side(str(path), ranks, total_s, layer_s, ops, complete, shapes, shapes_complete)


def shape_label(shape: dict) -> str:
    """A shape entry's key: its op, then each argument's dims, with the first type."""
    dims = " ".join("x".join(map(str, d)) if d else "-" for d in shape.get("dims") or [])
    types = shape.get("types") or []
    return f"{shape.get('op', '?')} [{dims}] {types[0] if types else ''}".rstrip()


def _shapes(doc: dict, basis: str) -> tuple[dict, bool]:
    """The summaries' shape entries summed over ranks on the basis (device time where it is
    the basis and the entry has it), and whether every layer type listed all of them."""
    out: dict[str, tuple[float, int, str | None]] = {}
    complete = True
    for t in doc["traces"]:
        for layer, entry in (t.get("shapes") or {}).items():
            if not isinstance(entry, dict):
                continue
            complete = complete and not (entry.get("other_shapes") or {}).get("count")
            for x in entry.get("shapes") or []:
                if not isinstance(x, dict) or not isinstance(x.get("op"), str):
                    complete = False  # a summary from before shapes named their op
                    continue
                v = x.get("device_time_s") if basis == "device" else x.get("time_s")
                key = shape_label(x)
                time_s, count, _ = out.get(key, (0.0, 0, None))
                out[key] = (time_s + (float(v) if finite_number(v) else 0.0),
                            count + int(x.get("count") or 0), layer)  # fmt: skip
    return out, complete


def _choose_basis(base: dict, cand: dict) -> tuple[str, str]:
    bases = {t["time_basis"] for d in (base, cand) for t in d["traces"]}
    if bases == {"device"}:
        return "device", "both summaries have device time on every trace"
    if bases == {"host"}:
        return "host", "neither summary has device time"
    return "host", (
        "device time is missing from some trace on one side: both compared on host self time "
        "(device time of one side against host time of the other would not compare)"
    )


def _mean_share(doc: dict, key: str) -> float | None:
    vals = [
        t["device"][key]
        for t in doc["traces"]
        if t["device"].get("available") and finite_number(t["device"].get(key))
    ]
    return sum(vals) / len(vals) if vals else None


def _layer_counts(side: Side) -> dict[str, int] | None:
    if not side.ops_complete:
        return None
    counts: dict[str, int] = {}
    for _, count, lt in side.ops.values():
        k = lt or UNMAPPED
        counts[k] = counts.get(k, 0) + count
    return counts


def _rank(rows: list[DiffRow]) -> tuple[DiffRow, ...]:
    """By absolute contribution to the total change; rows of unknown change last, by time."""
    known = [r for r in rows if r.delta_s is not None]
    unknown = [r for r in rows if r.delta_s is None]
    # Ties (an unchanged trace) go by time, so the heaviest rows still come first.
    known.sort(key=lambda r: (-abs(r.delta_s), -(r.base_time_s + r.cand_time_s), r.key))
    unknown.sort(key=lambda r: (-((r.base_time_s or 0.0) + (r.cand_time_s or 0.0)), r.key))
    return tuple(known + unknown)


def _op_rows(base: Side, cand: Side, shapes: bool = False) -> list[DiffRow]:
    rows = []
    b_ops, c_ops = (base.shapes, cand.shapes) if shapes else (base.ops, cand.ops)
    b_all, c_all = ((base.shapes_complete, cand.shapes_complete) if shapes
                    else (base.ops_complete, cand.ops_complete))  # fmt: skip
    for name in sorted(set(b_ops) | set(c_ops)):
        b, c = b_ops.get(name), c_ops.get(name)
        if b and c:
            status = BOTH
        elif c:
            status = NEW if b_all else NOT_LISTED_BASE
        else:
            status = VANISHED if c_all else NOT_LISTED_CAND
        # An op absent from a complete list ran zero times there; from a truncated one, unknown.
        zero = (0.0, 0, None)
        b = b or (zero if b_all else None)
        c = c or (zero if c_all else None)
        lt = c[2] if c and c[2] else b[2] if b else None
        rows.append(
            DiffRow(
                name,
                lt,
                status,
                b[0] if b else None,
                c[0] if c else None,
                b[1] if b else None,
                c[1] if c else None,
            )
        )
    return rows


def diff(base_path: Path, cand_path: Path) -> TraceDiff:
    """Diff two trace summaries; refused with the reason when they cannot be compared."""
    base_doc, cand_doc = load_summary(base_path), load_summary(cand_path)
    if _layer_maps(base_doc) != _layer_maps(cand_doc):
        raise InputError(
            f"{cand_path}: `layer_map` differs from {base_path}'s (other layer-map files or "
            "versions), so the layer types do not compare; re-import both traces with the "
            "same --layer-map"
        )
    nb, nc = len(base_doc["traces"]), len(cand_doc["traces"])
    if nb != nc:
        # Times are summed over ranks: a different number of ranks changes the sum by itself.
        raise InputError(
            f"{cand_path}: `traces` holds {nc} trace(s) (ranks), {base_path} holds {nb}; "
            "expected the same number, as times are summed over ranks; import the same ranks "
            "on both sides"
        )
    basis, reason = _choose_basis(base_doc, cand_doc)
    base, cand = _side(base_path, base_doc, basis), _side(cand_path, cand_doc, basis)
    bc, cc = _layer_counts(base), _layer_counts(cand)
    layer_rows = [
        DiffRow(
            k,
            k,
            BOTH
            if k in base.layer_s and k in cand.layer_s
            else NEW
            if k in cand.layer_s
            else VANISHED,
            base.layer_s.get(k, 0.0),
            cand.layer_s.get(k, 0.0),
            None if bc is None or cc is None else bc.get(k, 0),
            None if bc is None or cc is None else cc.get(k, 0),
        )
        for k in sorted(set(base.layer_s) | set(cand.layer_s))
    ]
    notes = [OP_KEY_NOTE]
    if basis == "host":
        notes.append(
            "host basis: an op's time is its self time; a layer type's is the self time of the "
            "outermost mapped operator's subtree, so op rows need not add up to layer rows"
        )
    for side, label in ((base, "base"), (cand, "candidate")):
        if not side.ops_complete:
            notes.append(
                f"the {label}'s op list is truncated (top by time): an op missing from it is "
                f"'{NOT_LISTED_BASE if label == 'base' else NOT_LISTED_CAND}', not new or vanished"
            )
    if base.ranks != cand.ranks:
        notes.append(f"ranks differ: base {list(base.ranks)}, candidate {list(cand.ranks)}")
    shares = tuple(
        SharePair(k, _mean_share(base_doc, k), _mean_share(cand_doc, k))
        for k in ("idle_share", "host_overhead_share")
    )
    return TraceDiff(
        base=base,
        cand=cand,
        time_basis=basis,
        basis_reason=reason,
        op_list="kernels" if basis == "device" else "ops",
        layer_types=_rank(layer_rows),
        ops=_rank(_op_rows(base, cand)),
        shares=shares,
        notes=tuple(notes),
        shapes=_rank(_op_rows(base, cand, shapes=True)),
    )


# --- the diff as a review cites it ------------------------------------------------------------


class TraceDiffUnusable(evidence.EvidenceUnusable):
    """A trace diff file of the right kind whose fields cannot be read; the message names the
    key (the caller names the file, as the review cites it)."""


_need = functools.partial(evidence.need, error=TraceDiffUnusable, kind=KIND)


@dataclass(frozen=True)
class CitedRow:
    """One row of a cited diff: a layer type or op and its change (None: unknown)."""

    key: str
    layer_type: str | None
    status: str
    delta_s: float | None
    share_of_change: float | None


@dataclass(frozen=True)
class CitedTraceDiff:
    """A `reviewkit trace diff` result as the packet reads it: the totals, the shares, and the
    largest changes (CITED_ROWS of each table, in the file's ranking order)."""

    path: Path
    base_path: str
    cand_path: str
    time_basis: str
    base_time_s: float
    cand_time_s: float
    delta_s: float
    layer_types: tuple[CitedRow, ...]
    ops: tuple[CitedRow, ...]
    shares: tuple[tuple[str, float | None, float | None], ...]  # (name, base, cand)
    notes: tuple[str, ...]
    shapes: tuple[CitedRow, ...] = ()  # by op and Input Dims (a diff of older summaries: none)


def _opt_number(table: dict, name: str, key: str) -> float | None:
    v = table.get(name)
    _need(v is None or finite_number(v), f"{key}.{name}", "a finite number or null")
    return None if v is None else float(v)


def _cited_rows(doc: dict, table: str) -> tuple[CitedRow, ...]:
    rows = doc.get(table)
    _need(isinstance(rows, list), table, "a list of rows")
    out = []
    for i, r in enumerate(rows[:CITED_ROWS]):
        key = f"{table}[{i}]"
        _need(isinstance(r, dict) and isinstance(r.get("key"), str), f"{key}.key", "text")
        _need(isinstance(r.get("status"), str), f"{key}.status", "text")
        lt = r.get("layer_type")
        _need(lt is None or isinstance(lt, str), f"{key}.layer_type", "text or null")
        out.append(
            CitedRow(
                r["key"],
                lt,
                r["status"],
                _opt_number(r, "delta_s", key),
                _opt_number(r, "share_of_change", key),
            )
        )
    return tuple(out)


def read_trace_diff(loaded: evidence.Loaded) -> CitedTraceDiff:
    """A cited trace diff into its record; a bad key raises TraceDiffUnusable naming it."""
    doc = loaded.doc or {}
    totals = {}
    for name in ("base_time_s", "cand_time_s", "delta_s"):
        _need(finite_number(doc.get(name)), name, "a finite number")
        totals[name] = float(doc[name])
    _need(doc.get("time_basis") in ("device", "host"), "time_basis", '"device" or "host"')
    paths = []
    for side in ("base", "cand"):
        v = doc.get(side)
        _need(isinstance(v, dict) and isinstance(v.get("path"), str), f"{side}.path", "text")
        paths.append(v["path"])
    shares_raw = doc.get("device_shares")
    _need(isinstance(shares_raw, list), "device_shares", "a list of shares")
    shares = []
    for i, sh in enumerate(shares_raw):
        key = f"device_shares[{i}]"
        _need(isinstance(sh, dict) and isinstance(sh.get("name"), str), f"{key}.name", "text")
        shares.append((sh["name"], _opt_number(sh, "base", key), _opt_number(sh, "cand", key)))
    notes = doc.get("notes", [])
    _need(isinstance(notes, list) and all(isinstance(n, str) for n in notes), "notes", "text")
    return CitedTraceDiff(
        path=loaded.path,
        base_path=paths[0],
        cand_path=paths[1],
        time_basis=doc["time_basis"],
        layer_types=_cited_rows(doc, "layer_types"),
        ops=_cited_rows(doc, "ops"),
        shares=tuple(shares),
        notes=tuple(notes),
        shapes=_cited_rows(doc, "shapes") if "shapes" in doc else (),
        **totals,
    )
