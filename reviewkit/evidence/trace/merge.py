"""Merge trace summaries into one, exactly as if their traces had been imported together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reviewkit.common.errors import InputError
from reviewkit.common.hashing import sha256_file
from reviewkit.evidence.trace.diff import REMEDY, load_summary
from reviewkit.evidence.trace.summary import assemble


@dataclass(frozen=True)
class Merged:
    """The merged summary document and what the merge has to say (traces counted once)."""

    doc: dict
    notes: tuple[str, ...]


def _layer_map_hashes(path: Path, doc: dict) -> list[str]:
    maps = doc.get("layer_map")
    if not isinstance(maps, list) or not all(
        isinstance(m, dict) and isinstance(m.get("sha256"), str) for m in maps
    ):
        raise InputError(
            f"{path}: `layer_map` must be a list of {{path, sha256, rules}} objects; {REMEDY}"
        )
    return [m["sha256"] for m in maps]


def merge(paths: list[Path], created_unix_s: float) -> Merged:
    """One summary of every trace in the summaries at `paths`, in the order given: each trace's
    own summary kept as it is, `combined` worked out again over all of them, so the result
    equals `reviewkit trace import` of all the traces at once. Refused (InputError) for
    summaries of other layer maps or schema versions; a trace in more than one summary (same
    sha256) is kept once and a note says so."""
    if not paths:
        raise InputError("no summary given: pass one or more trace_summary.json files")
    first_path, first = None, None
    traces: list[dict] = []
    failed: list[dict] = []
    seen: dict[str, str] = {}  # trace sha256 -> the summary it was taken from
    notes: list[str] = []
    merged_from = []
    for path in map(Path, paths):
        doc = load_summary(path)
        hashes = _layer_map_hashes(path, doc)
        if first is None:
            first_path, first, first_hashes = path, doc, hashes
        elif doc.get("schema_version") != first.get("schema_version"):
            raise InputError(
                f"{path}: `schema_version` {doc.get('schema_version')!r} differs from "
                f"{first_path}'s {first.get('schema_version')!r}; a merge needs one schema: "
                "re-import the older one's traces with this reviewkit"
            )
        elif hashes != first_hashes:
            raise InputError(
                f"{path}: `layer_map` (sha256 {', '.join(h[:12] for h in hashes)}) differs from "
                f"{first_path}'s ({', '.join(h[:12] for h in first_hashes)}), so their layer "
                "types do not add up; re-import both sets of traces with the same --layer-map"
            )
        kept = 0
        for i, t in enumerate(doc["traces"]):
            sha = t.get("sha256")
            if not isinstance(sha, str) or not sha:
                raise InputError(
                    f"{path}: `traces[{i}].sha256` must be the trace file's sha256 (a string), "
                    f"which the merge counts traces by; {REMEDY}"
                )
            if sha in seen:
                notes.append(
                    f"{path}: trace {t.get('path')} (sha256 {sha[:12]}) is also in "
                    f"{seen[sha]}: counted once"
                )
                continue
            seen[sha] = str(path)
            traces.append(t)
            kept += 1
        more = doc.get("failed_traces") or []
        if not isinstance(more, list) or not all(
            isinstance(f, dict) and isinstance(f.get("reason"), str) for f in more
        ):
            raise InputError(
                f"{path}: `failed_traces` must be a list of {{path, reason}} objects; {REMEDY}"
            )
        failed.extend(more)
        merged_from.append(
            {
                "path": str(path),
                "sha256": sha256_file(path),
                "traces": kept,
                "import_wall_s": doc.get("import_wall_s"),
            }
        )
    merged = assemble(
        traces, failed, first["layer_map"], created_unix_s, None, first.get("definitions")
    )
    merged["merged_from"] = merged_from
    return Merged(merged, tuple(notes))
