"""Content hashes of files: the identity artifacts are cited, cached and compared by."""

from __future__ import annotations

import hashlib
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
