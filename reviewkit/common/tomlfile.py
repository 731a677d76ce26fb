"""Read TOML input with errors that name the file, line and column, and suggest close keys."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable
from pathlib import Path

from reviewkit.common.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


def read_toml(path: Path) -> dict:
    if not path.exists():
        raise InputError(f"{path}: file not found; check the path")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; pass the TOML file itself")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot be read as UTF-8 text ({exc})") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The message carries "(at line L, column C)"; keep it whole.
        raise InputError(f"{path}: malformed TOML: {exc}; fix the file and re-run") from exc


def closest(word: str, choices: Iterable[str]) -> str:
    """A ' (did you mean X?)' hint, or '' when nothing is close."""
    match = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""
