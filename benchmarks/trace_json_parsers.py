"""Benchmark: JSON parsers on a trace's event array, against the importer's reader (issue 35).

Reads one Chrome-trace JSON file (e.g. the one `benchmarks/trace_import.py --work-dir DIR`
builds), cuts its `traceEvents` into slices of about --slice-mib MiB at event boundaries, and
times, best of --repeats, in this process with a warm page cache:

- the reader per event (`TraceStream` with msgspec switched off: json's raw_decode one event at
  a time, what `reviewkit trace import` did before issue 35);
- the reader as it is (`TraceStream`: msgspec per slice of each 1 MiB read, json where refused);
- `json.loads`, `msgspec.json.decode` and `orjson.loads` of each slice wrapped in [ ];
- ijson's `items(..., "traceEvents.item")` over the whole file (its C backend, yajl2_c, where
  installed: the streaming parser HTA's ijson backends use).

Each parser's events must equal json's (the check prints any that differ); orjson and ijson
are optional (not dependencies): a parser that is not installed is said and skipped. Also
probes the edge cases where a parser reads a value otherwise than json (big integers, NaN,
lone surrogates): json's reading is the importer's definition.

    .venv/bin/python benchmarks/trace_json_parsers.py TRACE.json [--slice-mib 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

MB = 1e6
BOUNDARY = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")
PROBES = ("123456789012345678901234567890", "-9223372036854775809", "NaN", '"\\ud800"', "1e400")


def event_slices(path: Path, slice_chars: int) -> list[str]:
    """The text of traceEvents cut at event boundaries into slices of about slice_chars."""
    text = path.read_text(encoding="utf-8")
    start = text.index("[", text.index('"traceEvents"')) + 1
    decode = json.JSONDecoder().raw_decode
    # the array's end: decode the array once to find where it closes
    _, end = decode(text, start - 1)
    body = text[start : end - 1].rstrip()
    slices, pos = [], 0
    while pos < len(body):
        m = BOUNDARY.search(body, pos + slice_chars)
        if m is None:
            slices.append(body[pos:])
            break
        slices.append(body[pos : m.start() + 1])
        pos = m.end() - 1
    return slices


def best(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path, help="a plain (not gzip) Chrome-trace JSON file")
    parser.add_argument("--slice-mib", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from reviewkit.evidence.trace import reader

    size = args.trace.stat().st_size
    slices = event_slices(args.trace, int(args.slice_mib * (1 << 20)))
    text_bytes = sum(len(s.encode()) for s in slices)
    print(f"{args.trace}: {size:,} bytes; traceEvents {text_bytes:,} bytes in {len(slices)} slices")

    # Each parser is timed as the importer uses one: events are looked at and let go (kept,
    # half a million dicts would time the garbage collector). Its events are compared with
    # json's afterwards, untimed, one slice at a time.
    def per_slice(loads):
        def events():
            for s in slices:
                yield from loads("[" + s + "]")

        return events

    def stream(batch):
        def events():
            saved = reader._BATCH_DECODE
            reader._BATCH_DECODE = saved if batch else None
            try:
                for _, ev in reader.TraceStream(args.trace).events():
                    yield ev
            finally:
                reader._BATCH_DECODE = saved

        return events

    def count(events) -> int:
        n = 0
        for _ in events():
            n += 1
        return n

    parsers = {
        "reader, per event (json raw_decode; before)": stream(False),
        "reader, msgspec slices (now)": stream(True),
        "json.loads per slice": per_slice(json.loads),
    }
    missing = []
    try:
        import msgspec

        parsers["msgspec.json.decode per slice"] = per_slice(msgspec.json.Decoder().decode)
    except ImportError:
        missing.append("msgspec")
    try:
        import orjson

        parsers["orjson.loads per slice"] = per_slice(orjson.loads)
    except ImportError:
        missing.append("orjson")
    try:
        import ijson

        def items():
            with args.trace.open("rb") as fh:
                yield from ijson.items(fh, "traceEvents.item", use_float=True)

        parsers[f"ijson items ({ijson.backend})"] = items
    except ImportError:
        missing.append("ijson")
    if missing:
        print(f"not installed, skipped: {', '.join(missing)}")
    reference = per_slice(json.loads)
    print(f"\n{'parser':46s} {'best s':>7s} {'MB/s':>7s} {'events':>9s}  equal json's")
    for name, events in parsers.items():
        seconds, n = best(lambda events=events: count(events), args.repeats)
        same = all(a == b for a, b in zip(events(), reference(), strict=True))
        print(f"{name:46s} {seconds:7.2f} {text_bytes / MB / seconds:7.1f} {n:9,d}  {same}")
    print("MB/s over the traceEvents text; the readers also read, hash and decode the file")
    print("\nedge cases read otherwise than json (json's reading is the importer's):")
    for name, fn in (("msgspec", "msgspec"), ("orjson", "orjson")):
        if name in missing:
            continue
        mod = __import__(fn)
        loads = mod.json.Decoder().decode if name == "msgspec" else mod.loads
        for probe in PROBES:
            want = json.loads(probe)
            try:
                got = loads(probe)
            except Exception as exc:  # a refusal: the reader falls back to json
                print(f"  {name} {probe}: refused ({type(exc).__name__}): falls back to json")
                continue
            same = repr(got) == repr(want) and type(got) is type(want)
            print(f"  {name} {probe}: {'same' if same else f'DIFFERS ({got!r} vs {want!r})'}")
    print(f"\nmachine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
