"""The one atomic file writer (a temporary file beside the target, fsync, rename over it), and
write failures as one line."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from reviewkit.common.errors import OutputError


def write_text_atomic(
    path: Path,
    text: str | bytes,
    *,
    mode: int = 0o644,
    check: Callable[[Path], None] | None = None,
) -> None:
    """Write `text` (or bytes) to `path` so a reader sees the old file or the new one, never
    half of one.

    The temporary file lies beside the target (same filesystem, so the rename is atomic) and is
    removed on any failure. `check`, when given, reads the finished temporary file and raises to
    keep the old one (walk validates the edited review this way). OSError propagates: callers
    say what it means for their file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        text_mode = {"encoding": "utf-8", "newline": ""}
        binary = isinstance(text, bytes)
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", **text_mode) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it private; the caller says who may read it
        if check is not None:
            check(Path(tmp))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def output_errors(out_dir: Path, what: str) -> Iterator[None]:
    """Turn an OSError while writing `what` into `out_dir` into one OutputError line that names
    the path and the cause (a full disk, a read-only folder), never a traceback."""
    try:
        yield
    except OSError as exc:
        where = exc.filename or out_dir
        cause = exc.strerror or str(exc)
        raise OutputError(
            f"--out {out_dir}: could not write the {what} ({cause}: {where}); the previous "
            f"{what} is left as it was: free some space or pick a folder you can write to"
        ) from exc
