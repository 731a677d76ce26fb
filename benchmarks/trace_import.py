"""Benchmark: `reviewkit trace import` against HolisticTraceAnalysis's parser on a large trace.

Builds a trace of at least `--size-mb` MB (10^6 bytes) of uncompressed Chrome-trace JSON by
replicating a real Kineto trace (the V100 trace in ../shared/traces) end to end: each copy's
timestamps move past the previous copy's window, and its `External id`, `correlation` and flow
`id` values move past the previous copy's, so copies do not collide; the event text is kept
byte for byte otherwise, and process/thread metadata events appear once. The trace is streamed
to disk (and to a .json.gz with `--gzip`).

Then, in fresh subprocesses, N times each (interleaved): our importer (`reviewkit trace
import TRACE --out DIR`, the whole command) and HolisticTraceAnalysis's parser as its
TraceAnalysis parses one rank (`hta.common.trace.Trace(...).parse_traces()`: the default
ParserConfig, whose default backend is the plain `json` one, ns rounding as HTA does it),
run with the Python of a separate venv (`--hta-python`; HTA is not a dependency of this
project). Per tool: the median wall time, MB/s of uncompressed JSON, and the peak RSS of its
process (its own rusage, from os.wait4 in a small launcher process: Linux carries peak RSS
across fork and exec, so a child of this process would inherit its peak). Then the op totals
of both: per host operator name and per kernel name the count and the summed duration.
Targets (issue 7): HTA / ours wall >= 3, ours / HTA peak RSS <= 0.25, equal totals.

    .venv/bin/python benchmarks/trace_import.py [--size-mb 220] [--repeats 3] [--gzip]
        [--work-dir DIR] [--hta-python /tmp/hta-venv/bin/python] [--quick]

HTA's venv: python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "traces" / "v100-ns-resolution.json.gz"
DEFAULT_HTA_PYTHON = Path("/tmp/hta-venv/bin/python")
MB = 1e6
GAP_US = 1000  # between one copy's window and the next
# Integer fields a copy offsets; ts keeps its fractional digits (Kineto writes ns as .nnn).
ID_FIELDS = ("External id", "correlation", "id")
_FIELD = re.compile(r'"(ts|External id|correlation|id)":(\s*)(-?\d+)(?![\deE])')
TARGET_SPEEDUP = 3.0
# Issue 35 item 4: a multi-file set on this 2-core VM, warm page cache, whole command.
TARGET_SET_MBPS = 100.0
TARGET_SET_PEAK_MB = 500.0
TARGET_MEMORY = 0.25
REL_TOL = 1e-6  # "equal within rounding": float sums in another order, JSON round trips

# Starts a command, waits for it, and writes its wall time, its own peak RSS (wait4: the largest
# single process of its tree) and the peak of its whole tree's RSS summed, sampled every
# TREE_SAMPLE_S (a parallel import's workers are separate processes; summed RSS counts the pages
# they share with the parent once per process, so it is an upper bound).
LAUNCHER = r"""
import glob, json, os, subprocess, sys, time
PAGE = os.sysconf("SC_PAGE_SIZE")
def tree(pid):
    pids = [pid]
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(path) as fh:
                kids = fh.read().split()
        except OSError:
            continue
        for kid in kids:
            pids += tree(int(kid))
    return pids
def rss(pid):
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[3:])
tree_peak = 0
while True:
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if pid:
        break
    tree_peak = max(tree_peak, sum(rss(p) for p in tree(proc.pid)))
    time.sleep(float(sys.argv[2]))
wall = time.perf_counter() - start
with open(sys.argv[1], "w") as fh:
    json.dump({"wall_s": wall, "maxrss_kib": usage.ru_maxrss, "tree_peak_bytes": tree_peak}, fh)
sys.exit(os.waitstatus_to_exitcode(status))
"""
TREE_SAMPLE_S = 0.02

# Runs in HTA's venv: parse one rank the way TraceAnalysis does, then write the totals.
# round_down_time_stamps (HTA ceils ts and floors ts + dur of ns-resolution traces) is wrapped
# to keep a copy of the raw durations (8 bytes an event), so totals compare on the file's dur.
HTA_CHILD = r"""
import json, os, resource, sys, time
t0 = time.perf_counter()
from hta.common import trace_parser
from hta.common.trace import Trace
from hta.configs.parser_config import ParserBackend, ParserConfig
import_s = time.perf_counter() - t0
path, out, backend = sys.argv[1:4]
raw = {}
_round = trace_parser.round_down_time_stamps
def keep_raw_dur(df):
    raw["dur"] = df["dur"].to_numpy(dtype="float64", copy=True)
    _round(df)
trace_parser.round_down_time_stamps = keep_raw_dur
cfg = None
if backend != "default":
    cfg = ParserConfig.get_default_cfg()
    cfg.set_parser_backend(ParserBackend[backend.upper()])
t1 = time.perf_counter()
t = Trace(trace_files={0: path}, trace_dir=os.path.dirname(path), parser_config=cfg)
t.parse_traces()
parse_s = time.perf_counter() - t1
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t2 = time.perf_counter()
df = t.traces[0]
sym = t.symbol_table.get_sym_table()
ids = t.symbol_table.get_sym_id_map()
backend_used = str(cfg.parser_backend if cfg else trace_parser.get_default_trace_parsing_backend())
totals = {}
for cat in ("cpu_op", "user_annotation", "kernel", "gpu_memcpy", "gpu_memset"):
    if cat not in ids:
        continue
    sub = df.loc[df["cat"] == ids[cat], ["name", "dur", "index"]]
    raw_dur = raw["dur"][sub["index"].to_numpy()] if "dur" in raw else sub["dur"].to_numpy()
    sub = sub.assign(raw_dur=raw_dur)
    g = sub.groupby("name").agg(n=("dur", "size"), dur=("dur", "sum"), raw=("raw_dur", "sum"))
    totals[cat] = {sym[int(k)]: [int(r.n), float(r.raw), float(r.dur)] for k, r in g.iterrows()}
doc = {"import_s": import_s, "parse_s": parse_s, "totals_s": time.perf_counter() - t2,
       "rss_at_parse_kb": rss_kb, "rows": len(df), "backend": backend_used,
       "ns_rounding": os.environ.get("HTA_DISABLE_NS_ROUNDING", "0") in ("0", ""),
       "raw_dur_kept": "dur" in raw, "totals": totals}
with open(out, "w") as fh:
    json.dump(doc, fh)
"""


# --- building the trace -------------------------------------------------------------------


def _split(text: str) -> tuple[int, int, list[tuple[int, int]]]:
    """(start of the first event, end of the last, event spans) of a trace's traceEvents."""
    decode = json.JSONDecoder().raw_decode
    space = re.compile(r"\s*")
    pos = space.match(text, 0).end()
    if text[pos] != "{":
        raise SystemExit(f"{SOURCE}: not a JSON object")
    pos += 1
    while True:
        pos = space.match(text, pos).end()
        key, pos = decode(text, pos)
        pos = space.match(text, pos).end() + 1  # the ':'
        pos = space.match(text, pos).end()
        if key != "traceEvents":
            _, pos = decode(text, pos)
            pos = space.match(text, pos).end() + 1  # the ','
            continue
        pos += 1  # the '['
        spans = []
        while True:
            pos = space.match(text, pos).end()
            if text[pos] == "]":
                return spans[0][0], spans[-1][1], spans
            _, end = decode(text, pos)
            spans.append((pos, end))
            pos = space.match(text, end).end()
            if text[pos] == ",":
                pos += 1


def _shifted(text: str, k: int, shift: dict) -> str:
    if k == 0:
        return text

    def sub(m: re.Match) -> str:
        value = int(m.group(3))
        if m.group(1) != "ts" and value <= 0:  # -1 / 0 mean "none" in Kineto's args
            return m.group(0)
        return f'"{m.group(1)}":{m.group(2)}{value + k * shift[m.group(1)]}'

    return _FIELD.sub(sub, text)


def _check_copy(events: list[dict], copy_text: str, shift: dict) -> None:
    """Copy 1 must be copy 0 with exactly ts and the id fields moved."""
    again = json.loads("[" + copy_text + "]")
    if len(again) != len(events):
        raise SystemExit(f"copy check: {len(again)} events, expected {len(events)}")
    for a, b in zip(events, again, strict=True):
        moved = {**a}
        if "ts" in a:
            moved["ts"] = a["ts"] + shift["ts"]
        for field in ID_FIELDS:
            holder = moved if field == "id" else moved.get("args")
            if isinstance(holder, dict) and isinstance(holder.get(field), int):
                if holder is not moved:
                    holder = moved["args"] = {**holder}
                if holder[field] > 0:
                    holder[field] += shift[field]
        if moved != b:
            raise SystemExit(f"copy check: event {a.get('name')!r} changed beyond ts and ids")


def build_trace(target_bytes: int, folder: Path, with_gzip: bool) -> dict:
    """Write copies of the source trace until the JSON holds at least target_bytes."""
    raw = SOURCE.read_bytes()
    text = gzip.decompress(raw).decode("utf-8")
    first, last, spans = _split(text)
    events = [json.loads(text[a:b]) for a, b in spans]
    keep = [i for i, e in enumerate(events) if e.get("ph") != "M"]  # metadata: copy 0 only
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span_us = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed)
    shift = {"ts": math.ceil(span_us) + GAP_US}
    for field in ID_FIELDS:
        values = [e.get("args", {}).get(field) if field != "id" else e.get("id") for e in events]
        shift[field] = max([v for v in values if isinstance(v, int)], default=0) + 1
    key = {
        "source_sha256": hashlib.sha256(raw).hexdigest(),
        "target_bytes": target_bytes,
        "shift": shift,
        "gzip": with_gzip,
        "format": 2,
    }
    meta_path = folder / f"v100-{target_bytes}.meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        info = {**meta["info"], "path": folder / meta["info"]["path"], "reused": True}
        gz_path = folder / meta["info"]["gz_path"] if meta["info"]["gz_path"] else None
        info["gz_path"] = gz_path
        if (
            meta.get("key") == key
            and info["path"].exists()
            and info["path"].stat().st_size == info["bytes"]
            and (gz_path is None or gz_path.exists())
        ):
            return info
    start = time.perf_counter()
    head, tail = text[:first], text[last:]
    rest = ",\n  ".join(text[spans[i][0] : spans[i][1]] for i in keep)
    _check_copy([events[i] for i in keep], _shifted(rest, 1, shift), shift)
    partial = folder / "v100-partial.pt.trace.json"
    partial_gz = partial.with_name(partial.name + ".gz")
    tail_bytes = len(tail.encode())
    with contextlib.ExitStack() as files:
        fh = files.enter_context(partial.open("w", encoding="utf-8"))
        gz = None
        if with_gzip:
            gz = files.enter_context(gzip.open(partial_gz, "wt", encoding="utf-8", compresslevel=6))
        size = _write(fh, gz, head + text[first:last])
        copies = 1
        while size + tail_bytes < target_bytes:
            size += _write(fh, gz, ",\n  " + _shifted(rest, copies, shift))
            copies += 1
        size += _write(fh, gz, tail)
    path = folder / f"v100x{copies}.pt.trace.json"
    partial.replace(path)
    gz_path = None
    if with_gzip:
        gz_path = path.with_name(path.name + ".gz")
        partial_gz.replace(gz_path)
    if path.stat().st_size != size:
        raise SystemExit(f"{path}: {path.stat().st_size} bytes on disk, {size} written")
    info = {
        "path": path.name,
        "gz_path": gz_path.name if gz_path else None,
        "copies": copies,
        "events": len(events) + (copies - 1) * len(keep),
        "bytes": size,
        "gz_bytes": gz_path.stat().st_size if gz_path else None,
        "source_events": len(events),
        "shift": shift,
    }
    meta_path.write_text(json.dumps({"key": key, "info": info}))
    return {**info, "path": path, "gz_path": gz_path, "reused": False,
            "build_s": time.perf_counter() - start}  # fmt: skip


def build_set(path: Path, files: int, folder: Path) -> list[Path]:
    """`files` copies of one trace, each its own file on disk (reused when already there)."""
    out = folder / f"set-{path.name}"
    out.mkdir(exist_ok=True)
    paths = []
    for i in range(files):
        copy = out / f"rank{i}-{path.name}"
        if not (copy.exists() and copy.stat().st_size == path.stat().st_size):
            shutil.copyfile(path, copy)
        paths.append(copy)
    return paths


def warm_page_cache(paths: list[Path]) -> None:
    """Read every file once, so each timed run reads from the page cache (the target's)."""
    for p in paths:
        with p.open("rb") as fh:
            while fh.read(1 << 24):
                pass


def _write(fh, gz, part: str) -> int:
    """Write to the .json (and the .json.gz); the UTF-8 bytes written."""
    fh.write(part)
    if gz is not None:
        gz.write(part)
    return len(part.encode("utf-8"))


# --- running the tools --------------------------------------------------------------------


def run_child(argv: list[str], log: Path, env: dict | None = None) -> tuple[float, int]:
    """(wall s, peak RSS bytes of it and its children together) of one subprocess, started from
    a small launcher process.

    Linux carries a process's peak RSS across fork and exec, so a child started straight
    from this process (which holds the trace it built) would report this one's peak; the
    launcher is a fresh interpreter, and the tool it forks starts from its small footprint."""
    report = log.with_suffix(".rusage.json")
    with log.open("w") as out:
        proc = subprocess.run(
            [sys.executable, "-c", LAUNCHER, str(report), str(TREE_SAMPLE_S), *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )
    if proc.returncode != 0:
        tail = log.read_text()[-3000:]
        raise SystemExit(f"{argv[0]} exited {proc.returncode}:\n{tail}")
    got = json.loads(report.read_text())
    # Linux reports KiB; a process that ends between two samples is covered by wait4's figure.
    return got["wall_s"], max(got["maxrss_kib"] * 1024, got["tree_peak_bytes"])


def run_ours(traces: Path | list[Path], work: Path, i: int) -> dict:
    out = work / f"ours-{i}"
    paths = [str(t) for t in (traces if isinstance(traces, list) else [traces])]
    argv = [sys.executable, "-m", "reviewkit", "trace", "import", *paths, "--out", str(out)]
    wall, rss = run_child(argv, work / f"ours-{i}.log")
    doc = json.loads((out / "trace_summary.json").read_text())
    return {"wall_s": wall, "rss": rss, "inner_s": doc["import_wall_s"], "doc": doc}


def run_hta(python: Path, trace: Path, work: Path, i: int, backend: str, rounding: bool) -> dict:
    out = work / f"hta-{i}.json"
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "0" if rounding else "1"}
    argv = [str(python), "-c", HTA_CHILD, str(trace), str(out), backend]
    wall, rss = run_child(argv, work / f"hta-{i}.log", env)
    doc = json.loads(out.read_text())
    # The totals written after the parse are this benchmark's, not HTA's: not timed.
    return {"wall_s": wall - doc["totals_s"], "rss": rss, "inner_s": doc["parse_s"], "doc": doc}


# --- comparing the totals -----------------------------------------------------------------


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b)) if a or b else 0.0


def compare(ours: dict, hta: dict) -> dict:
    """Per host op and kernel name: counts equal, max relative difference of summed dur."""
    t = ours["traces"][0]
    tot = hta["totals"]
    result = {}
    ours_ops = {o["name"]: o for o in t["ops"]}
    hta_ops: dict[str, list] = {}
    for name, (n, raw_us, dur_us) in tot.get("cpu_op", {}).items():
        hta_ops[name] = [n, raw_us, dur_us]
    # A user_annotation counts as a host op in ours only when the layer map names it.
    for name, (n, raw_us, dur_us) in tot.get("user_annotation", {}).items():
        if ours_ops.get(name, {}).get("layer_type") is not None:
            acc = hta_ops.setdefault(name, [0, 0.0, 0.0])
            acc[0] += n
            acc[1] += raw_us
            acc[2] += dur_us
    ours_k = {k["name"]: k for k in t["kernels"]}
    hta_k: dict[str, list] = {}
    for cat in ("kernel", "gpu_memcpy", "gpu_memset"):
        for name, (n, raw_us, dur_us) in tot.get(cat, {}).items():
            acc = hta_k.setdefault(name, [0, 0.0, 0.0])
            acc[0] += n
            acc[1] += raw_us
            acc[2] += dur_us
    for kind, mine, theirs, listed_of in (
        ("host ops", ours_ops, hta_ops, t["ops_listed_of"]),
        ("kernels", ours_k, hta_k, t["kernels_listed_of"]),
    ):
        complete = listed_of == len(mine)
        names = set(mine) | set(theirs) if complete else set(mine)
        counts_differ, worst, worst_rounded = [], (0.0, ""), (0.0, "")
        missing = sorted(n for n in names if n not in mine or n not in theirs)
        for name in names - set(missing):
            m, h = mine[name], theirs[name]
            if m["count"] != h[0]:
                counts_differ.append(name)
            d = _rel(m["total_s"], h[1] * 1e-6)
            worst = max(worst, (d, name))
            worst_rounded = max(worst_rounded, (_rel(m["total_s"], h[2] * 1e-6), name))
        sum_ours = sum(mine[n]["total_s"] for n in names - set(missing))
        sum_hta = sum(theirs[n][1] for n in names - set(missing)) * 1e-6
        result[kind] = {
            "names": len(names),
            "listed_of": listed_of,
            "complete": complete,
            "missing": missing,
            "counts_differ": sorted(counts_differ),
            "max_rel": worst,
            "max_rel_vs_rounded": worst_rounded,
            "sum_ours_s": sum_ours,
            "sum_hta_s": sum_hta,
            "equal": not missing and not counts_differ and worst[0] <= REL_TOL,
        }
    return result


# --- the report ---------------------------------------------------------------------------


def _row(label: str, runs: list[dict], text_bytes: int) -> str:
    walls = [r["wall_s"] for r in runs]
    med = statistics.median(walls)
    inner = statistics.median(r["inner_s"] for r in runs)
    rss = max(r["rss"] for r in runs) / 2**20
    return (
        f"{label:34s} {med:8.2f} {min(walls):7.2f} {max(walls):7.2f} {inner:8.2f} "
        f"{text_bytes / MB / med:7.1f} {rss:9.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=220.0, help="at least this many MB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gzip", action="store_true", help="also measure a .json.gz of it")
    parser.add_argument("--work-dir", type=Path, help="keep (and reuse) the trace here")
    parser.add_argument("--hta-python", type=Path,
                        default=DEFAULT_HTA_PYTHON if DEFAULT_HTA_PYTHON.exists() else None,
                        help="python of a venv with HolisticTraceAnalysis (default: "
                        f"{DEFAULT_HTA_PYTHON} if it exists)")  # fmt: skip
    parser.add_argument("--hta-backend", default="default",
                        help="default (HTA's own: json), json, ijson, ijson_batched, "
                        "ijson_batch_and_compress (the ijson ones need ijson)")  # fmt: skip
    parser.add_argument("--hta-ns-rounding", choices=("on", "off"), default="on",
                        help="HTA's rounding of ns timestamps (on: its default)")  # fmt: skip
    parser.add_argument("--files", type=int, default=1,
                        help="time an import of a set of this many files: the --size-mb split "
                        "into N byte-for-byte copies of one trace of size-mb / N")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="a sanity run: >= 20 MB (2 copies, 31 MB), 1 repeat")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.size_mb, args.repeats = 20.0, 1
    hta_python = args.hta_python
    if hta_python is not None and not hta_python.exists():
        print(f"--hta-python {hta_python}: no such file; measuring reviewkit only")
        hta_python = None

    with tempfile.TemporaryDirectory(prefix="trace-import-bench-") as tmp:
        folder = args.work_dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        info = build_trace(int(args.size_mb * MB / args.files), folder, args.gzip)
        how = "reused" if info["reused"] else f"built in {info['build_s']:.1f} s"
        print(
            f"trace: {info['path']} ({how})\n"
            f"  {info['bytes']:,} bytes ({info['bytes'] / MB:.1f} MB) of JSON: "
            f"{info['copies']} copies of {SOURCE.name} ({info['source_events']:,} events), "
            f"{info['events']:,} events; each copy +{info['shift']['ts']:,} us, ids "
            + ", ".join(f"{f} +{info['shift'][f]:,}" for f in ID_FIELDS)
        )
        if info["gz_path"]:
            print(f"  {info['gz_path'].name}: {info['gz_bytes']:,} bytes (gzip level 6)")
        files = [("json", [info["path"]])]
        files += [("gz", [info["gz_path"]])] if info["gz_path"] else []
        if args.files > 1:
            files = [(kind, build_set(paths[0], args.files, folder)) for kind, paths in files]
            print(f"  a set of {args.files} files, each a byte-for-byte copy of it: "
                  f"{args.files * info['bytes'] / MB:.1f} MB of JSON in all")  # fmt: skip
            if hta_python is not None:
                print("  HTA's parser reads one rank a run: not run on a set")
                hta_python = None
        text_bytes = info["bytes"] * args.files
        for _, paths in files:
            warm_page_cache(paths)
        work = Path(tmp)
        runs: dict[tuple[str, str], list[dict]] = {}
        for kind, paths in files:
            for i in range(args.repeats):
                runs.setdefault(("ours", kind), []).append(run_ours(paths, work, i))
                if hta_python is not None:
                    rounding = args.hta_ns_rounding == "on"
                    hta = run_hta(hta_python, paths[0], work, i, args.hta_backend, rounding)
                    runs.setdefault(("hta", kind), []).append(hta)

    from reviewkit.measure.environment import cpu_model

    cpu = cpu_model()
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} now")
    print(f"reviewkit: {_git_state()}")
    print(f"parallel workers: {min(args.files, len(os.sched_getaffinity(0)))} (one per core, "
          "at most one per file)")  # fmt: skip
    print(f"repeats: {args.repeats} each, interleaved; MB/s over the uncompressed JSON bytes")
    print(
        f"\n{'tool':34s} {'median s':>8s} {'min s':>7s} {'max s':>7s} {'inner s':>8s} "
        f"{'MB/s':>7s} {'peak MiB':>9s}"
    )
    hta_label = ""
    if hta_python is not None:
        d = runs[("hta", "json")][0]["doc"]
        hta_label = f"HTA parse ({d['backend'].split('.')[-1].lower()})"
    for kind, _ in files:
        label = f"reviewkit trace import (.{kind})"
        if args.files > 1:
            label = f"reviewkit trace import {args.files}x.{kind}"
        print(_row(label, runs[("ours", kind)], text_bytes))
        if hta_python is not None:
            print(_row(f"{hta_label} (.{kind})", runs[("hta", kind)], text_bytes))
    print(
        "inner s: ours, the summary's import_wall_s (reading and summarising); HTA, "
        "Trace.parse_traces() alone. wall: the whole subprocess (interpreter start, imports)"
        ". peak MiB: the command's processes' RSS summed (sampled), or its largest one's"
    )
    if args.files > 1:
        for kind, _ in files:
            med = statistics.median(r["wall_s"] for r in runs[("ours", kind)])
            peak = max(r["rss"] for r in runs[("ours", kind)])
            rate = text_bytes / MB / med
            print(
                f"  .{kind} set: {rate:.1f} MB/s (target >= {TARGET_SET_MBPS:g}: "
                f"{'met' if rate >= TARGET_SET_MBPS else 'NOT met'}), peak {peak / MB:.0f} MB "
                f"(target < {TARGET_SET_PEAK_MB:g}: "
                f"{'met' if peak / MB < TARGET_SET_PEAK_MB else 'NOT met'})"
            )
    if hta_python is None:
        print("\nHTA was not available (pass --hta-python): no side-by-side figures")
        return
    d = runs[("hta", "json")][0]["doc"]
    print(
        f"HTA config: default ParserConfig, backend {d['backend']}, ns rounding "
        f"{'on (its default)' if d['ns_rounding'] else 'off'}, {d['rows']:,} rows; "
        f"imports {d['import_s']:.2f} s"
    )
    print("\nagainst the targets")
    for kind, _ in files:
        ours = runs[("ours", kind)]
        hta = runs[("hta", kind)]
        speed = statistics.median(r["wall_s"] for r in hta) / statistics.median(
            r["wall_s"] for r in ours
        )
        mem = max(r["rss"] for r in ours) / max(r["rss"] for r in hta)
        inner = statistics.median(r["inner_s"] for r in hta) / statistics.median(
            r["inner_s"] for r in ours
        )
        print(
            f"  .{kind}: HTA / ours wall {speed:.2f}x (target >= {TARGET_SPEEDUP:g}x: "
            f"{'met' if speed >= TARGET_SPEEDUP else 'NOT met'}; inner {inner:.2f}x); "
            f"ours / HTA peak RSS {mem:.3f} (target <= {TARGET_MEMORY:g}: "
            f"{'met' if mem <= TARGET_MEMORY else 'NOT met'})"
        )
    print("\nop totals (per name: count and summed dur; ours from trace_summary.json)")
    for kind, _ in files:
        cmp = compare(runs[("ours", kind)][-1]["doc"], runs[("hta", kind)][-1]["doc"])
        for what, c in cmp.items():
            rel, name = c["max_rel"]
            rel_r, name_r = c["max_rel_vs_rounded"]
            listed = "" if c["complete"] else f" (ours lists {c['names']} of {c['listed_of']})"
            n_diff = len(c["counts_differ"])
            print(
                f"  .{kind} {what}: {c['names']} names{listed}; counts "
                f"{'equal' if not n_diff else f'differ for {n_diff}'}"
                f"; only in one: {len(c['missing'])}; summed {c['sum_ours_s']:.6f} s ours, "
                f"{c['sum_hta_s']:.6f} s HTA; max rel diff {rel:.2e} ({name[:60]!r}); "
                f"{'equal' if c['equal'] else 'NOT equal'} within {REL_TOL:g}"
            )
            print(
                f"      against HTA's ns-rounded dur instead: max rel diff {rel_r:.2e} "
                f"({name_r[:60]!r})"
            )
            for n in c["missing"][:5]:
                print(f"      only in one tool: {n[:100]!r}")
            for n in c["counts_differ"][:5]:
                print(f"      count differs: {n[:100]!r}")
        q = runs[("ours", kind)][-1]["doc"]["traces"][0]["quality"]
        if q:
            print("  ours data quality: " + "; ".join(f"{x['rule']} {x['count']}" for x in q))


def _git_state() -> str:
    """Which reviewkit the timed commands import (this environment's), its commit, and whether
    its reviewkit/ has uncommitted changes: what was measured."""
    try:
        where = subprocess.run(
            [sys.executable, "-c", "import reviewkit; print(reviewkit.__file__)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        root = Path(where).parents[1]
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "reviewkit"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return f"{root} at commit {head}" + (" + uncommitted changes in reviewkit/" if dirty else "")


if __name__ == "__main__":
    main()
