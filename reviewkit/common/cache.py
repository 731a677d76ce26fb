"""The user's cache folder for reviewkit: device profiles, run-to-run figures, schema markers."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "REVIEWKIT_CACHE_DIR"


def cache_dir() -> Path:
    """$REVIEWKIT_CACHE_DIR, else $XDG_CACHE_HOME/reviewkit, else ~/.cache/reviewkit."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reviewkit"
