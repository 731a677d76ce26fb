"""Content hashes of files and JSON documents: what artifacts are cited, cached and compared by."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

CHUNK_BYTES = 1 << 20  # stream large bundles and traces instead of reading them whole


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes; a run bundle folder hashes as its run.json."""
    path = path / "run.json" if path.is_dir() else path
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_json(obj: object) -> str:
    """Hex sha256 of `obj` as canonical JSON (sorted keys, no spaces): equal data, equal hash."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def content_hash(doc: dict) -> str:
    """A self-hashed document's hash: sha256_json (16 hex digits) of it without its `hash`."""
    return sha256_json({k: v for k, v in doc.items() if k != "hash"})[:16]
