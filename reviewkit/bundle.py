"""The run bundle on disk: a folder with run.json (versioned schema), written atomically."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from reviewkit.errors import BundleError

SCHEMA_VERSION = 1
RUN_FILE = "run.json"
KIND = "reviewkit.run"


def write_json_atomic(path: Path, document: dict) -> None:
    """Write to a temporary file beside the target, fsync, then rename over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(document, indent=1, sort_keys=False, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a bundle is meant to be shared
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_run(out_dir: Path, doc: dict) -> Path:
    doc = {**doc, "schema_version": SCHEMA_VERSION, "kind": KIND}
    path = Path(out_dir) / RUN_FILE
    write_json_atomic(path, _finite(doc))
    return path


def _finite(obj):
    """JSON has no inf/NaN: write them as null (an infinite tail ratio, say)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def load_run(path: Path | str) -> dict:
    """Read a run bundle (its folder or its run.json); refuse foreign or other-version files."""
    path = Path(path)
    file = path / RUN_FILE if path.is_dir() else path
    if not file.exists():
        raise BundleError(
            f"{file}: no run bundle here; pass a folder written by `reviewkit run --out DIR`"
        )
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{file}: not readable as JSON ({exc}); re-run `reviewkit run`") from exc
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise BundleError(
            f'{file}: not a reviewkit run bundle (expected "kind": "{KIND}"); '
            "pass the run.json that `reviewkit run` wrote"
        )
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise BundleError(
            f"{file}: schema_version {version!r} but this reviewkit reads version "
            f"{SCHEMA_VERSION}; re-measure with `reviewkit run` or use the reviewkit release "
            "that wrote it"
        )
    for key in ("suite", "environment", "knobs", "ceilings", "workloads"):
        if key not in doc:
            raise BundleError(f"{file}: key {key!r} is missing; the bundle is damaged, re-run it")
    return doc
