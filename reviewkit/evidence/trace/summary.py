"""The trace summary: device busy and idle time, op mix, shapes, clock, per rank and combined."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from reviewkit.common.errors import InputError
from reviewkit.evidence import files as evidence
from reviewkit.evidence.trace.events import (
    DEFINITIONS,
    KIND,
    MAX_EXAMPLES,
    MAX_OPS_LISTED,
    MAX_PLAUSIBLE_SPAN_S,
    MAX_SHAPES_LISTED,
    MAX_UNMAPPED_LISTED,
    PROGRESS_EVERY,
    QUALITY_RULES,
    US,
    Summariser,
)
from reviewkit.evidence.trace.layermap import LayerMap
from reviewkit.evidence.trace.reader import TraceStream

PROGRESS_POLL_S = 0.1  # how often the parent of parallel workers redraws their progress


def _union(parts: list[tuple]) -> tuple:
    """Merge intervals (arrays of starts, ends) into sorted disjoint ones."""
    import numpy as np

    if not parts:
        return np.empty(0), np.empty(0)
    s = np.concatenate([p[0] for p in parts]) if parts else np.empty(0)
    e = np.concatenate([p[1] for p in parts]) if parts else np.empty(0)
    if not len(s):
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    # A new interval starts where the start is past every earlier end.
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    starts = s[new]
    idx = np.flatnonzero(new)
    ends = np.maximum.reduceat(e, idx)
    return starts, ends


def _total(u: tuple) -> float:
    return float((u[1] - u[0]).sum()) if len(u[0]) else 0.0


def _intersection_us(a: tuple, b: tuple) -> float:
    """Total length of the intersection of two sorted disjoint interval sets:
    |A and B| = |A| + |B| - |A or B|, in numpy (a Python merge held ~80 bytes per interval)."""
    return max(0.0, _total(a) + _total(b) - _total(_union([a, b])))


def _complement(u: tuple, lo: float, hi: float) -> tuple:
    import numpy as np

    starts = np.concatenate(([lo], u[1]))
    ends = np.concatenate((u[0], [hi]))
    keep = ends > starts
    return starts[keep], ends[keep]


def _numel(dims) -> int | None:
    """Element count of the first argument that is a tensor shape (a list of ints, none
    negative); 0 for an empty tensor."""
    for d in dims or ():
        if isinstance(d, list) and d and all(type(x) is int and x >= 0 for x in d):
            n = 1
            for x in d:
                n *= x
            return n
    return None


def _shares(times_s: dict[str, float], total_s: float) -> dict:
    return {
        k: {"time_s": v, "share": (v / total_s) if total_s > 0 else 0.0}
        for k, v in sorted(times_s.items(), key=lambda kv: -kv[1])
    }


def _unmapped_list(unmapped_us: dict[str, float], total_s: float) -> dict:
    total_unmapped_s = sum(unmapped_us.values()) * US
    top = sorted(unmapped_us.items(), key=lambda kv: -kv[1])[:MAX_UNMAPPED_LISTED]
    return {
        "time_s": total_unmapped_s,
        "share": total_unmapped_s / total_s if total_s > 0 else 0.0,
        "distinct_names": len(unmapped_us),
        "top": [
            {"name": n, "time_s": t * US, "share": (t * US / total_s) if total_s > 0 else 0.0}
            for n, t in top
        ],
    }


def _device_summary(s: Summariser, host: dict, window: tuple[float, float]) -> dict:
    import numpy as np

    if not s.device:
        return {
            "available": False,
            "reason": "no GPU events (kernel, gpu_memcpy, gpu_memset) in the trace: a "
            "CPU-only profile has no device idle or host-overhead share",
        }
    lo, hi = window
    span = hi - lo
    host_busy = _union(host["host_busy"] + list(s.runtime.values()))
    per_device, idle_shares, overhead_shares = [], [], []
    for device, d in sorted(s.device.items(), key=lambda kv: str(kv[0])):
        starts = np.frombuffer(d["starts"], dtype=np.float64)
        ends = np.frombuffer(d["ends"], dtype=np.float64)
        busy = _union([(starts, ends)])
        busy_us = _total(busy)
        idle = _complement(busy, lo, hi)
        waiting_us = _intersection_us(idle, host_busy)
        streams = np.frombuffer(d["stream_ids"], dtype=np.int32)
        stream_names = {i: name for name, i in d["streams"].items()}  # index -> trace's id
        for sid in np.unique(streams).tolist():
            sel = streams == sid
            ss, ee = starts[sel], ends[sel]
            order = np.argsort(ss, kind="stable")
            ss, ee = ss[order], ee[order]
            run_end = np.maximum.accumulate(ee)
            over = np.flatnonzero(ss[1:] < run_end[:-1] - s.nest_epsilon_us())
            for k in over[:MAX_EXAMPLES].tolist():
                s.quality.add(
                    "overlapping-device-events",
                    -1,
                    {},
                    f"device {device} stream {stream_names[sid]}: an event at ts "
                    f"{ss[k + 1]:.3f} starts before the previous one ends ({run_end[k]:.3f})",
                )
            extra = len(over) - min(len(over), MAX_EXAMPLES)
            if extra:
                s.quality.counts["overlapping-device-events"] += extra
        idle_share = 1 - busy_us / span if span > 0 else 0.0
        overhead_share = waiting_us / span if span > 0 else 0.0
        idle_shares.append(idle_share)
        overhead_shares.append(overhead_share)
        per_device.append(
            {
                "device": str(device),
                "events": len(starts),
                "streams": len(d["streams"]),
                "busy_s": busy_us * US,
                "idle_share": idle_share,
                "host_overhead_share": overhead_share,
            }
        )
    return {
        "available": True,
        "window_s": span * US,
        "idle_share": sum(idle_shares) / len(idle_shares),
        "host_overhead_share": sum(overhead_shares) / len(overhead_shares),
        "runtime_s": s.runtime_us * US,
        "devices": per_device,
    }


def _shapes_by_layer(s: Summariser, host: dict) -> dict:
    out: dict[str, dict] = {}
    device_us = host.get("shape_device_us")
    for key, (n, dur_us) in host["shape_stats"].items():
        layer, nid, sid = key
        dims, types = s.shape_list[sid]
        entry = out.setdefault(layer, {"shapes": [], "unshaped_time_s": 0.0})
        shape = {
            "op": s.name_list[nid],
            "dims": dims,
            "types": types,
            "numel": _numel(dims),
            "count": n,
            "time_s": dur_us * US,
        }
        if device_us is not None:
            shape["device_time_s"] = device_us.get(key, 0.0) * US
        entry["shapes"].append(shape)
    for layer, us in host["unshaped_us"].items():
        out.setdefault(layer, {"shapes": [], "unshaped_time_s": 0.0})["unshaped_time_s"] = us * US
    if device_us is not None:
        for layer, entry in out.items():
            entry["shaped_device_time_s"] = sum(x["device_time_s"] for x in entry["shapes"])
            entry["unshaped_device_time_s"] = US * sum(
                us for (lt, _, sid), us in device_us.items() if lt == layer and sid < 0)
    for entry in out.values():
        # the device's time first where kernels link to their operators: it is the op mix's
        entry["shapes"].sort(key=lambda x: (-x.get("device_time_s", 0.0), -x["time_s"]))
        entry["distinct"] = len(entry["shapes"])
        entry["shaped_time_s"] = sum(x["time_s"] for x in entry["shapes"])
        listed = entry["shapes"][:MAX_SHAPES_LISTED]
        rest = entry["shapes"][MAX_SHAPES_LISTED:]
        entry["shapes"] = listed
        entry["other_shapes"] = {
            "count": len(rest),
            "time_s": sum(x["time_s"] for x in rest),
            "numel_min": min((x["numel"] for x in rest if x["numel"]), default=None),
            "numel_max": max((x["numel"] for x in rest if x["numel"]), default=None),
        }
        if device_us is not None:
            entry["other_shapes"]["device_time_s"] = sum(x["device_time_s"] for x in rest)
    return dict(sorted(out.items()))


def _clock(s: Summariser, meta: dict, window: tuple[float, float]) -> dict:
    unit = meta.get("displayTimeUnit")
    base_ns = meta.get("baseTimeNanoseconds")  # a profiler writes an integer; keep only that
    span_s = (window[1] - window[0]) * US if window[1] > window[0] else 0.0
    clock = {
        "ts_unit": "us",
        "display_time_unit": unit if isinstance(unit, str) else None,
        "resolution": "sub-microsecond (fractional us)" if s.float_ts else "1 us (integer)",
        "base_time_ns": base_ns if type(base_ns) is int else None,
    }
    if span_s > MAX_PLAUSIBLE_SPAN_S:
        s.quality.counts["clock-units"] = s.quality.counts.get("clock-units", 0) + 1
        s.quality.examples.setdefault("clock-units", []).append(
            f"the events span {span_s / 86400:.1f} days read as microseconds: ts is probably "
            "in nanoseconds; re-export the trace with the profiler"
        )
    if unit is not None and unit not in ("ms", "ns"):
        s.quality.counts["clock-units"] = s.quality.counts.get("clock-units", 0) + 1
        s.quality.examples.setdefault("clock-units", []).append(
            f"displayTimeUnit {str(unit)[:20]!r} is neither 'ms' nor 'ns' (it only sets the "
            "viewer's display; ts stays in us)"
        )
    return clock


def summarise_one(path: Path, layer_map: LayerMap, on_progress: Callable | None = None) -> dict:
    """The summary of one trace file (one rank)."""
    path = Path(path)
    stream = TraceStream(path)
    s = Summariser(layer_map)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}); check the path") from exc
    add = s.add
    for index, ev in stream.events():
        add(index, ev, path)
        if on_progress is not None and index % PROGRESS_EVERY == 0:
            on_progress(path.name, stream.bytes_read, size)
    host = s.host_pass()
    meta = stream.metadata
    window = (s.first_us, s.last_us) if s.last_us >= s.first_us else (0.0, 0.0)
    host_total_s = (sum(host["layer_us"].values()) + sum(host["unmapped_us"].values())) * US
    host_mix = {
        "time_s": host_total_s,
        "layer_types": _shares({k: v * US for k, v in host["layer_us"].items()}, host_total_s),
        "unmapped": _unmapped_list(host["unmapped_us"], host_total_s),
    }
    device_mix = None
    if s.device:
        dev_total_s = (sum(s.device_layer_us.values()) + sum(s.device_unmapped_us.values())) * US
        device_mix = {
            "time_s": dev_total_s,
            "layer_types": _shares({k: v * US for k, v in s.device_layer_us.items()}, dev_total_s),
            "unmapped": _unmapped_list(s.device_unmapped_us, dev_total_s),
        }
    dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
    rank = dist.get("rank", 0)
    props = meta.get("deviceProperties")
    devices = (
        [str(p.get("name"))[:120] for p in props if isinstance(p, dict) and p.get("name")]
        if isinstance(props, list)
        else []
    )
    ops_sorted = sorted(host["ops"].items(), key=lambda kv: -kv[1]["total_s"])
    device_ops = sorted(s.device_ops.items(), key=lambda kv: -kv[1][1])
    summary = {
        "path": path.name,
        "sha256": stream.sha256,
        "size_bytes": stream.bytes_read,
        "text_chars": stream.text_chars,
        "gzip": stream.gzip,
        "rank": rank if isinstance(rank, int) and not isinstance(rank, bool) else 0,
        "rank_source": "distributedInfo"
        if isinstance(rank, int) and not isinstance(rank, bool) and "rank" in dist
        else "default 0 (no integer rank in distributedInfo)",
        "world_size": dist.get("world_size") if isinstance(dist.get("world_size"), int) else None,
        "backend": dist.get("backend") if isinstance(dist.get("backend"), str) else None,
        "devices": devices,
        "record_shapes": bool(s.shape_list),
        "events": {
            "total": s.events,
            "by_phase": dict(sorted(s.phases.items())),
            "by_category": dict(sorted(s.categories.items())),
        },
        "window_s": (window[1] - window[0]) * US,
        "time_basis": "device" if device_mix else "host",
        "op_mix": device_mix or host_mix,
        "host": host_mix,
        "device": _device_summary(s, host, window),
        "shapes": _shapes_by_layer(s, host),
        "shapes_over_cap": s.shapes_over_cap,
        "ops": [{"name": n, **v} for n, v in ops_sorted[:MAX_OPS_LISTED]],
        "ops_listed_of": len(ops_sorted),
        "kernels": [
            {"name": n, "count": v[0], "total_s": v[1] * US, "category": v[2], "layer_type": v[3]}
            for n, v in device_ops[:MAX_OPS_LISTED]
        ],
        "kernels_listed_of": len(device_ops),
    }
    summary["clock"] = _clock(s, meta, window)
    summary["quality"] = [
        {
            "rule": rule,
            "count": s.quality.counts[rule],
            "description": QUALITY_RULES[rule],
            "examples": s.quality.examples.get(rule, [])[:MAX_EXAMPLES],
        }
        for rule in QUALITY_RULES
        if s.quality.counts.get(rule)
    ]
    if on_progress is not None:
        on_progress(path.name, stream.bytes_read, size)
    return summary


def _combine(traces: list[dict]) -> dict:
    """The op mix of all traces together: each trace's basis time added up."""
    bases = sorted({t["time_basis"] for t in traces})
    layer_s: dict[str, float] = {}
    unmapped_s: dict[str, float] = {}
    total_s = 0.0
    for t in traces:
        mix = t["op_mix"]
        total_s += mix["time_s"]
        for k, v in mix["layer_types"].items():
            layer_s[k] = layer_s.get(k, 0.0) + v["time_s"]
        for u in mix["unmapped"]["top"]:
            unmapped_s[u["name"]] = unmapped_s.get(u["name"], 0.0) + u["time_s"]
    unmapped_total = sum(t["op_mix"]["unmapped"]["time_s"] for t in traces)
    listed = sorted(unmapped_s.items(), key=lambda kv: -kv[1])[:MAX_UNMAPPED_LISTED]
    return {
        "time_basis": bases[0] if len(bases) == 1 else "mixed (device where recorded, else host)",
        "time_s": total_s,
        "layer_types": _shares(layer_s, total_s),
        "unmapped": {
            "time_s": unmapped_total,
            "share": unmapped_total / total_s if total_s > 0 else 0.0,
            "top": [
                {"name": n, "time_s": v, "share": v / total_s if total_s > 0 else 0.0}
                for n, v in listed
            ],
        },
    }


# Files summarised at once: one process per core this process may run on, never more than the
# files. Each worker holds one trace's state (~90 MiB peak for a 310 MB trace), so memory grows
# with the cores and the largest file, not with the set.
def default_workers(files: int) -> int:
    """Worker processes for `files` traces: one per usable core, at most one per file."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, files))


def _failure(path: Path, exc: BaseException) -> dict:
    """A trace that could not be summarised: its name and why, as the summary records it."""
    reason = str(exc) if isinstance(exc, InputError) else f"{path}: cannot be read ({exc})"
    return {"path": path.name, "reason": reason}


_worker: dict = {}  # a worker process's layer map and progress queue, set by _start_worker


def _start_worker(layer_map: LayerMap, queue) -> None:
    _worker["map"], _worker["queue"] = layer_map, queue


def _summarise_in_worker(i: int, path: Path) -> tuple[bool, dict]:
    """(True, summary) or (False, failure) of one trace, in a worker process."""
    queue = _worker["queue"]

    def progress(_name: str, done: int, _total: int) -> None:
        queue.put((i, done))

    try:
        return True, summarise_one(path, _worker["map"], progress)
    except (InputError, OSError) as exc:
        return False, _failure(path, exc)


def _summarise_parallel(
    paths: list[Path], layer_map: LayerMap, workers: int, on_progress: Callable | None
) -> list[tuple[bool, dict]]:
    """Every trace summarised in worker processes, results in input order; progress is the
    bytes read of all files together."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool
    from queue import Empty

    # fork where the platform has it: a worker starts in milliseconds with this process's
    # imports; elsewhere a fresh interpreter imports them (~0.3 s).
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    queue = context.SimpleQueue()
    sizes = [p.stat().st_size if p.is_file() else 0 for p in paths]
    done = [0] * len(paths)
    label = f"{len(paths)} traces, {workers} at a time"
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=(layer_map, queue)
    ) as pool:
        futures = [pool.submit(_summarise_in_worker, i, p) for i, p in enumerate(paths)]
        pending = set(futures)
        while pending:
            _, pending = wait(pending, timeout=PROGRESS_POLL_S, return_when=FIRST_COMPLETED)
            try:
                while not queue.empty():
                    i, n = queue.get()
                    done[i] = n
            except (Empty, OSError, EOFError):
                pass
            if on_progress is not None:
                on_progress(label, sum(done), sum(sizes))
        results = []
        for path, future in zip(paths, futures, strict=True):
            try:
                results.append(future.result())
            except BrokenProcessPool as exc:
                reason = f"{path}: the worker process summarising it died ({exc}): out of memory?"
                results.append((False, {"path": path.name, "reason": reason}))
    return results


def summarise(
    paths: list[Path],
    layer_map: LayerMap,
    on_progress: Callable | None = None,
    clock: Callable[[], float] = time.time,
    workers: int | None = None,
    notes: list[str] | None = None,
) -> dict:
    """The versioned trace summary of one or more trace files (ranks), files summarised in
    parallel (`workers` processes, default one per core). A file that cannot be read is
    recorded in `failed_traces` with its reason and the rest still summarised; when every file
    fails, the InputError says why (the file's own error when there is one file). A file with
    the same bytes (sha256) as an earlier one counts once, as in a merge; `notes` gets why."""
    if not paths:
        raise InputError("no trace given: pass one or more .json or .json.gz trace files")
    started = time.perf_counter()
    paths = [Path(p) for p in paths]
    workers = default_workers(len(paths)) if workers is None else max(1, min(workers, len(paths)))
    if workers == 1:
        results = []
        for p in paths:
            try:
                results.append((True, summarise_one(p, layer_map, on_progress)))
            except (InputError, OSError) as exc:
                if len(paths) == 1:
                    raise
                results.append((False, _failure(p, exc)))
    else:
        results = _summarise_parallel(paths, layer_map, workers, on_progress)
    traces, failed, first_of = [], [], {}
    for (ok, r), p in zip(results, paths, strict=True):
        if not ok:
            failed.append(r)
        elif r["sha256"] in first_of:
            if notes is not None:
                sha = r["sha256"]
                note = f"{p}: the same bytes (sha256 {sha[:12]}) as {first_of[sha]}: counted once"
                notes.append(note)
        else:
            first_of[r["sha256"]] = p
            traces.append(r)
    if not traces:
        if len(failed) == 1:
            raise InputError(failed[0]["reason"])
        raise InputError(
            f"none of the {len(failed)} traces could be summarised: "
            + "; ".join(f["reason"] for f in failed)
        )
    wall_s = round(time.perf_counter() - started, 3)
    return assemble(traces, failed, layer_map.sources, clock(), wall_s)


def assemble(
    traces: list[dict],
    failed: list[dict],
    layer_map_sources,
    created_unix_s: float,
    import_wall_s: float | None,
    definitions: dict | None = None,
) -> dict:
    """The summary document of per-trace summaries: what `summarise` writes, and what
    `reviewkit trace merge` rebuilds from several summaries' traces."""
    doc = evidence.header(KIND, created_unix_s)
    doc.update(
        {
            "definitions": DEFINITIONS if definitions is None else definitions,
            "layer_map": list(layer_map_sources),
            "traces": traces,
            "combined": _combine(traces),
        }
    )
    if failed:  # only where a file failed: summaries of complete sets read as they always did
        doc["failed_traces"] = failed
    if import_wall_s is not None:
        doc["import_wall_s"] = import_wall_s
    return doc
