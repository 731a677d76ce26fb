"""Stream the events of a Chrome-trace JSON file (plain or gzip) in bounded memory."""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import zlib
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from reviewkit.common.errors import InputError

try:  # a compiled JSON parser (a dependency); without it every event goes through `json`
    import msgspec

    _BATCH_DECODE = msgspec.json.Decoder().decode
    _BATCH_ERRORS: tuple = (msgspec.MsgspecError,)
except ImportError:  # pragma: no cover - msgspec is in pyproject's dependencies
    _BATCH_DECODE, _BATCH_ERRORS = None, ()

READ_BYTES = 1 << 20  # 1 MiB reads: large enough that per-read overhead is noise
# A single event (or top-level value other than traceEvents) longer than this is not a
# profiler event; refusing it keeps a damaged file from being buffered whole.
MAX_VALUE_CHARS = 16 << 20
GZIP_MAGIC = b"\x1f\x8b"
# Top-level keys kept for the summary; others (job names, user names) are parsed and dropped.
KEPT_KEYS = (
    "schemaVersion",
    "distributedInfo",
    "deviceProperties",
    "displayTimeUnit",
    "baseTimeNanoseconds",
    "record_shapes",
    "traceName",
)
_SPACE = re.compile(r"[ \t\n\r]*")
# The separator after an event and the blanks around it, so the next decode starts at a value.
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")
_DECODE = json.JSONDecoder().raw_decode
# Where one event ends and the next begins ("},<blanks>{"). The text from the cursor to such a
# place goes to msgspec in one call (2.4x json's speed on a real trace: docs/benchmarks.md). A
# match inside a string or a nested array of objects leaves brackets or a string open, so the
# slice does not parse and the per-event path reads it instead: a wrong cut is never silent.
_BOUNDARY = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")
# The last boundary is looked for in the buffer's last 64 KiB only: a 1 MiB read holds ~4,000
# profiler events of ~250 characters, so one lies in that tail unless events are huge.
BATCH_TAIL_CHARS = 64 << 10


class TraceFormatError(InputError):
    """The file is not a Chrome trace this importer can read; the message names where."""


class TraceStream:
    """Iterate a trace's events with `events()`; afterwards `metadata` holds the top-level
    keys, `sha256` the file's hash and `bytes_read`/`text_chars` its sizes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.metadata: dict = {}
        self.sha256 = ""
        self.bytes_read = 0
        self.text_chars = 0
        self.gzip = False
        self.has_trace_events = False
        self._buf = ""
        self._pos = 0
        self._base = 0  # characters of the decompressed text before _buf[0]
        self._eof = False
        self._chunks: Iterator[str] | None = None
        self._event_index = -1
        self._inflater = None
        self._per_event_until = -1  # text position before which events are read one by one

    # --- reading text ---------------------------------------------------------------------

    def _text_chunks(self) -> Iterator[str]:
        digest = hashlib.sha256()
        utf8 = codecs.getincrementaldecoder("utf-8")()
        try:
            fh = self.path.open("rb")
        except OSError as exc:
            raise TraceFormatError(f"{self.path}: cannot be opened ({exc.strerror})") from exc
        with fh:
            first = fh.read(READ_BYTES)
            self.gzip = first[:2] == GZIP_MAGIC
            self._inflater = zlib.decompressobj(wbits=31) if self.gzip else None
            block = first
            while block:
                digest.update(block)
                self.bytes_read += len(block)
                for data in self._inflated(block) if self.gzip else (block,):
                    try:
                        text = utf8.decode(data)
                    except UnicodeDecodeError as exc:
                        raise TraceFormatError(
                            f"{self.path}: not UTF-8 text near byte {self.bytes_read}; "
                            "a Chrome trace is UTF-8 JSON"
                        ) from exc
                    if text:
                        yield text
                block = fh.read(READ_BYTES)
            inflate = self._inflater
            if inflate is not None and not inflate.eof:
                raise TraceFormatError(
                    f"{self.path}: the gzip stream is truncated (ends before its trailer); "
                    "the file was cut short: copy it again from where it was recorded"
                )
            try:
                tail = utf8.decode(b"", final=True)
            except UnicodeDecodeError as exc:  # a multi-byte character cut at the very end
                raise TraceFormatError(
                    f"{self.path}: ends inside a UTF-8 character (byte {self.bytes_read}); the "
                    "file was cut short or is not UTF-8 text"
                ) from exc
            if tail:
                yield tail
        self.sha256 = digest.hexdigest()

    def _inflated(self, block: bytes) -> Iterator[bytes]:
        """The decompressed bytes of one read, in pieces of at most READ_BYTES: a profiler
        trace compresses 10-50x, so inflating a whole read at once would hold tens of MB."""
        data = block
        while True:
            try:
                out = self._inflater.decompress(data, READ_BYTES)
            except zlib.error as exc:
                raise TraceFormatError(
                    f"{self.path}: damaged gzip data near byte {self.bytes_read} ({exc})"
                ) from exc
            if out:
                yield out
            if self._inflater.eof:
                data = self._inflater.unused_data
                if not data:
                    return
                self._inflater = zlib.decompressobj(wbits=31)  # a concatenated gzip member
                continue
            data = self._inflater.unconsumed_tail
            # A full piece with no input left may still have output pending inside zlib.
            if not data and len(out) < READ_BYTES:
                return

    def _more(self) -> bool:
        """Append the next text chunk to the buffer; False at the end of the file."""
        if self._eof:
            return False
        chunk = next(self._chunks, None)
        if chunk is None:
            self._eof = True
            return False
        self.text_chars += len(chunk)
        if self._pos:
            self._base += self._pos
            self._buf = self._buf[self._pos :] + chunk
            self._pos = 0
        else:
            self._buf += chunk
        return True

    def _skip_space(self) -> str:
        """The next non-space character (not consumed), '' at the end of the file."""
        while True:
            self._pos = _SPACE.match(self._buf, self._pos).end()
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                return ""

    def _expect(self, chars: str, what: str) -> str:
        c = self._skip_space()
        if not c or c not in chars:
            found = "the end of the file" if not c else repr(c)
            raise TraceFormatError(
                f"{self.path}: expected {what} at character {self._base + self._pos} of the "
                f"JSON text, found {found}{self._where()}; the file is not a complete Chrome "
                "trace (truncated or edited?)"
            )
        self._pos += 1
        return c

    def _where(self) -> str:
        return f" (after event #{self._event_index})" if self._event_index >= 0 else ""

    def _value(self, what: str):
        """Decode one JSON value at the cursor, reading more text while it is incomplete."""
        self._skip_space()
        last_error_at = -1
        while True:
            try:
                value, end = _DECODE(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                at = self._base + exc.pos
                complete = self._eof or (
                    at == last_error_at and len(self._buf) - exc.pos > READ_BYTES
                )
                if complete or len(self._buf) - self._pos > MAX_VALUE_CHARS:
                    if len(self._buf) - self._pos > MAX_VALUE_CHARS:
                        reason = f"longer than {MAX_VALUE_CHARS} characters"
                    else:
                        reason = f"{exc.msg} at character {at}"
                    raise TraceFormatError(
                        f"{self.path}: {what} is not valid JSON ({reason}){self._where()}; "
                        "the file is damaged or cut short"
                    ) from None
                last_error_at = at
                self._more()
                continue
            # A number at the very end of the buffer may continue in the next chunk.
            if end >= len(self._buf) and not self._eof and self._more():
                continue
            self._pos = end
            return value

    # --- the document ---------------------------------------------------------------------

    def events(self) -> Iterator[tuple[int, object]]:
        """(index, event) for every element of traceEvents, in file order."""
        self._chunks = self._text_chunks()
        self._expect("{", "'{' (a JSON object with traceEvents)")
        if self._skip_space() == "}":
            self._pos += 1
        else:
            while True:
                key = self._value("a top-level key")
                if not isinstance(key, str):
                    raise TraceFormatError(
                        f"{self.path}: a top-level key is not a string; not a Chrome trace"
                    )
                self._expect(":", "':' after a top-level key")
                if key == "traceEvents":
                    self.has_trace_events = True
                    yield from self._event_array()
                else:
                    value = self._value(f"the top-level value of {key!r}")
                    if key in KEPT_KEYS:
                        self.metadata[key] = value
                if self._expect(",}", "',' or '}' between top-level keys") == "}":
                    break
        if self._skip_space():
            raise TraceFormatError(
                f"{self.path}: text after the end of the JSON object at character "
                f"{self._base + self._pos}; the file holds more than one document"
            )
        if not self.has_trace_events:
            raise TraceFormatError(
                f"{self.path}: no `traceEvents` array; this is not a PyTorch profiler "
                "(Chrome-trace) file: export it with `prof.export_chrome_trace(path)` or "
                "torch.profiler.tensorboard_trace_handler"
            )

    def _event_array(self) -> Iterator[tuple[int, object]]:
        if self._skip_space() != "[":
            raise TraceFormatError(
                f"{self.path}: `traceEvents` is not an array (at character "
                f"{self._base + self._pos}); a Chrome trace's traceEvents is a list of events"
            )
        self._pos += 1
        if self._skip_space() == "]":
            self._pos += 1
            return
        index = 0
        decode, separator, space = _DECODE, _SEPARATOR.match, _SPACE.match
        while True:
            if _BATCH_DECODE is not None and self._base + self._pos >= self._per_event_until:
                batch = self._batch()
                if batch:
                    for event in batch:
                        self._event_index = index
                        yield index, event
                        index += 1
                    continue
            # Fast path: the event and the separator after it lie whole in the buffer, which
            # holds for all but the one event per chunk that straddles a chunk boundary.
            buf = self._buf
            pos = space(buf, self._pos).end()
            try:
                event, end = decode(buf, pos)
                sep = separator(buf, end)
            except json.JSONDecodeError:
                sep = None
            if sep is not None and sep.end() < len(buf):
                self._pos = sep.end()
                self._event_index = index
                yield index, event
                index += 1
                if sep.group(1) == "]":
                    self._pos = sep.start(1) + 1
                    return
                continue
            # Slow path: read on until the event is complete, or say where it is broken.
            event = self._value(f"event #{index}")
            self._event_index = index
            yield index, event
            index += 1
            if self._expect(",]", "',' or ']' between events") == "]":
                return

    def _batch(self) -> list | None:
        """The events from the cursor to the buffer's last event boundary, parsed in one call,
        the cursor moved past them; None where the buffer holds no boundary or the slice does
        not parse as events the way `json` reads them (msgspec refuses NaN, lone surrogates,
        out-of-range floats and broken text alike): those are read one by one up to the cut,
        where `json` decides, and its error names the event."""
        buf, pos = self._buf, self._pos
        matches = deque(_BOUNDARY.finditer(buf, max(pos, len(buf) - BATCH_TAIL_CHARS)), 1)
        if not matches:
            return None
        last = matches[0]
        cut = last.start() + 1
        try:
            events = _BATCH_DECODE("[" + buf[pos:cut] + "]")
        except _BATCH_ERRORS:
            self._per_event_until = self._base + cut
            return None
        self._pos = last.end() - 1  # at the next event's '{'
        return events
