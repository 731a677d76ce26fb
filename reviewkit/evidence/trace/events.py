"""One pass over a trace's events: host operators, threads, devices and data-quality rules."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from reviewkit.evidence import files as evidence
from reviewkit.evidence.trace.layermap import LayerMap
from reviewkit.evidence.trace.reader import TraceFormatError

KIND = evidence.TRACE


SCHEMA_VERSION = evidence.SCHEMA_VERSIONS[KIND]


US = 1e-6  # Chrome-trace ts and dur are microseconds (the format's definition)


HOST_OP_CATEGORIES = ("cpu_op",)


# user_annotation ranges (ProfilerStep#N, "## forward ##") are labels, not work, except the
# communication ranges (nccl:all_reduce, gloo:broadcast) a mapping rule names.
ANNOTATION_CATEGORIES = ("user_annotation",)


DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")


# Rounding in integer-microsecond traces makes a child end up to 1 us after its parent.
NEST_EPSILON_US = 1.0


# Traces with fractional (ns-resolution) ts need no rounding slack, only float64's: two
# units in the last place of the largest ts (0.002 us at ~5e12 us since boot, 0.5 us at
# ~1.7e15 us since the epoch, as the V100 trace has), and at least 0.01 us. 1 us here would
# take a child that starts in its parent's last microsecond (aten::as_strided in
# aten::expand) for a sibling, so self times would disagree with key_averages().
FLOAT_NEST_EPSILON_US = 0.01


HOST_PASS_CHUNK = 1 << 13  # operators converted to Python numbers at a time: ~1.3 MB


# A profiled window longer than a week is not a profile in microseconds: ts was written in
# nanoseconds (or another unit) by whatever produced the file.
MAX_PLAUSIBLE_SPAN_S = 7 * 24 * 3600


MAX_DISTINCT_SHAPES = 50_000  # distinct (dims, types) kept; more are counted as over the cap


MAX_SHAPES_LISTED = 100  # per layer type in the summary, by time; the rest is "other shapes"


MAX_OPS_LISTED = 200  # per-name totals in the summary, by time


MAX_UNMAPPED_LISTED = 25


MAX_EXAMPLES = 3  # offending events quoted per data-quality rule


PROGRESS_EVERY = 50_000  # events between progress callbacks: cheap, still smooth


DEFINITIONS = {
    "time_basis": "device: kernel, memcpy and memset time summed over streams, by kernel name; "
    "host: self time of host operators summed over threads, each attributed to the outermost "
    "mapped operator enclosing it",
    "share": "a layer type's time / all time on the basis (mapped and unmapped)",
    "window_s": "first start to last end of host operators, runtime calls and device events",
    "device_idle_share": "1 - (union of a device's kernel, memcpy and memset intervals) / "
    "window, averaged over devices",
    "host_overhead_share": "share of the window in which a device is idle while the host is "
    "inside an operator or runtime call (the device waits on the host), averaged over devices",
    "numel": "element count of the first tensor argument (Input Dims[0] that is a shape)",
    "shape_op": "a shape entry's op: the outermost mapped host operator that was called with "
    "those Input Dims (its name, dims, types, count and inclusive host time)",
    "shape_device_time_s": "device time of the kernels, memcpys and memsets launched inside that "
    "operator (linked by their External id to an operator it encloses); absent where the "
    "trace links none",
}


@dataclass
class _Quality:
    counts: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)

    def add(self, rule: str, index: int, event: dict, detail: str = "") -> None:
        self.counts[rule] = self.counts.get(rule, 0) + 1
        ex = self.examples.setdefault(rule, [])
        if len(ex) < MAX_EXAMPLES:
            name = event.get("name") if isinstance(event, dict) else None
            # index -1: found after the stream (nesting, overlap), where no index is kept.
            parts = [f"event #{index}"] if index >= 0 else []
            if name is not None:
                parts.append(repr(str(name)[:80]))
            what = " ".join(parts)
            ex.append(f"{what}: {detail}" if what and detail else what or detail)


QUALITY_RULES = {
    "missing-fields": "X events without name, ts, dur, pid or tid: skipped",
    "negative-duration": "X events with dur < 0: skipped",
    "zero-timestamp": "X events at ts 0 (an unset clock): skipped",
    "overlapping-host-ops": "host operators on one thread that overlap without nesting: "
    "clamped to their parent",
    "overlapping-device-events": "device events on one stream that overlap: counted once in "
    "busy time",
    "clock-units": "timestamps that do not look like microseconds",
}


# A microsecond time beyond this (about 31,700 years) is not a clock reading; it would also
# overflow sums into inf.
MAX_PLAUSIBLE_US = 1e18


def _num(v) -> bool:
    """A finite number of plausible size (bool is not a number here, NaN and inf are not)."""
    return (type(v) is int or type(v) is float) and -MAX_PLAUSIBLE_US < v < MAX_PLAUSIBLE_US


def _key(v) -> bool:
    """pid, tid, device and stream become dictionary keys: numbers or strings only."""
    return type(v) is int or type(v) is str


def _id_arg(args: object, key: str) -> int:
    value = args.get(key) if isinstance(args, dict) else None
    return value if type(value) is int and 0 <= value < 2**63 else -1


def _external_id(args: object) -> int:
    """The profiler's External id of an event (in most traces a kernel's is that of the
    operator that launched it), -1 where there is none or it is not a 64-bit count."""
    return _id_arg(args, "External id")


def _correlation(args: object) -> int:
    """The correlation id a runtime call shares with the device events it launched, or -1."""
    return _id_arg(args, "correlation")


def _clean_dims(dims: list) -> list:
    """Input Dims as JSON-safe shapes: each argument a list of ints, anything else (a float, a
    nested list, a string) written as [] so it is no shape rather than a broken summary."""
    return [d if isinstance(d, list) and all(type(x) is int for x in d) else [] for d in dims]


class _Thread:
    """Host operators of one (pid, tid), kept as flat arrays until the nesting pass. The
    duration is kept as written, not the end: ts + dur rounds to float64's unit in the last
    place of ts (0.25 us at epoch-microsecond ts), a large error on a sub-microsecond op."""

    __slots__ = ("durs", "exts", "names", "shapes", "starts")

    def __init__(self):
        self.starts = array("d")
        self.durs = array("d")
        self.names = array("i")
        self.shapes = array("i")
        self.exts = array("q")  # the profiler's External id, -1 where none


class Summariser:
    def __init__(self, layer_map: LayerMap):
        self.map = layer_map
        self.names: dict[str, int] = {}
        self.name_list: list[str] = []
        self.name_layer: list[str | None] = []
        self.shapes: dict[str, int] = {}
        self.shape_list: list[tuple] = []
        self.shapes_over_cap = 0
        self.threads: dict[tuple, _Thread] = {}
        self.device: dict = {}  # device -> {"starts","ends","streams"}
        self.device_layer_us: dict[str, float] = {}
        self.device_unmapped_us: dict[str, float] = {}
        self.device_ops: dict[str, list] = {}  # name -> [count, total_us, category]
        # each device event's correlation id (its runtime call's), External id (in some traces
        # the operator that launched it) and duration: what puts device time on the shapes of
        # the operators that launched it
        self.device_corrs = array("q")
        self.device_exts = array("q")
        self.device_durs = array("d")
        # per thread: runtime calls' starts, ends and correlation ids (-1 where none)
        self.runtime: dict[tuple, tuple[array, array, array]] = {}
        self.runtime_us = 0.0
        self.categories: dict[str, int] = {}
        self._phases: dict[str, int] = {}  # other than "X", counted apart (the common case)
        self._complete_events = 0
        self.quality = _Quality()
        self.first_us = math.inf
        self.last_us = -math.inf
        self.float_ts = False
        self.events = 0

    @property
    def phases(self) -> dict[str, int]:
        """Events by phase ("X": complete events)."""
        out = dict(self._phases)
        if self._complete_events:
            out["X"] = out.get("X", 0) + self._complete_events
        return out

    def _name_id(self, name: str, host: bool) -> int:
        i = self.names.get(name)
        if i is None:
            i = len(self.name_list)
            self.names[name] = i
            self.name_list.append(name)
            self.name_layer.append(self.map.op_layer(name) if host else None)
        return i

    def _shape_id(self, args) -> int:
        if not isinstance(args, dict):
            return -1
        dims = args.get("Input Dims")
        if not isinstance(dims, list):
            return -1
        types = args.get("Input type")
        if isinstance(types, list):
            types = [t if isinstance(t, str) else str(t)[:40] for t in types]
        key = repr(dims) + "|" + repr(types)
        i = self.shapes.get(key)
        if i is None:
            if len(self.shape_list) >= MAX_DISTINCT_SHAPES:
                self.shapes_over_cap += 1
                return -2
            i = len(self.shape_list)
            self.shapes[key] = i
            self.shape_list.append((_clean_dims(dims), types if isinstance(types, list) else None))
        return i

    def add(self, index: int, ev: object, path: Path) -> None:
        self.events += 1
        if type(ev) is not dict:
            raise TraceFormatError(
                f"{path}: event #{index} is a JSON {type(ev).__name__}, not an object; every "
                "element of traceEvents must be an event object"
            )
        ph = ev.get("ph")
        if ph != "X":
            key = ph if isinstance(ph, str) else "(none)"
            self._phases[key] = self._phases.get(key, 0) + 1
            return
        self._complete_events += 1
        cat = ev.get("cat")
        cat = cat if isinstance(cat, str) else "(none)"
        self.categories[cat] = self.categories.get(cat, 0) + 1
        name, ts, dur = ev.get("name"), ev.get("ts"), ev.get("dur")
        pid, tid = ev.get("pid"), ev.get("tid")
        if name is None or ts is None or dur is None or pid is None or tid is None:
            missing = [
                k
                for k, v in (("name", name), ("ts", ts), ("dur", dur), ("pid", pid), ("tid", tid))
                if v is None
            ]
            self.quality.add("missing-fields", index, ev, "no " + ", ".join(missing))
            return
        # _num and _key written out (same tests): this runs for every event, and on a 2-core VM
        # the calls were ~3% of an import's time
        t_ts, t_dur = type(ts), type(dur)
        if not (
            (t_ts is float or t_ts is int)
            and -MAX_PLAUSIBLE_US < ts < MAX_PLAUSIBLE_US
            and (t_dur is float or t_dur is int)
            and -MAX_PLAUSIBLE_US < dur < MAX_PLAUSIBLE_US
        ):
            bad = "ts" if not _num(ts) else "dur"
            value = ev.get(bad)
            what = (
                f"out of range (a finite number of microseconds below {MAX_PLAUSIBLE_US:.0e})"
                if type(value) in (int, float)
                else "not a number"
            )
            raise TraceFormatError(
                f"{path}: event #{index} ({str(name)[:80]!r}) has {bad} = "
                f"{str(value)[:40]!r}, {what}; Chrome-trace ts and dur are numbers of "
                "microseconds"
            )
        if not isinstance(name, str):
            raise TraceFormatError(
                f"{path}: event #{index} has a name of type {type(name).__name__}, not a string"
            )
        t_pid, t_tid = type(pid), type(tid)
        if not ((t_pid is int or t_pid is str) and (t_tid is int or t_tid is str)):
            bad = "pid" if not _key(pid) else "tid"
            raise TraceFormatError(
                f"{path}: event #{index} ({name[:80]!r}) has {bad} = "
                f"{str(ev.get(bad))[:40]!r}; a Chrome-trace pid and tid are numbers or strings"
            )
        if dur < 0:
            self.quality.add("negative-duration", index, ev, f"dur {dur}")
            return
        if ts == 0:
            self.quality.add("zero-timestamp", index, ev)
            return
        if t_ts is float and not self.float_ts and not ts.is_integer():
            self.float_ts = True
        end = ts + dur
        if cat in DEVICE_CATEGORIES:
            self._device(ev, cat, name, ts, end, dur, pid)
        elif cat in HOST_OP_CATEGORIES or (
            cat in ANNOTATION_CATEGORIES and self.map.op_layer(name) is not None
        ):
            t = self.threads.get((pid, tid))
            if t is None:
                t = self.threads[(pid, tid)] = _Thread()
            t.starts.append(ts)
            t.durs.append(dur)
            # the name's id and the External id looked up here, not through a call each: this
            # runs for every host operator (a few percent of an import)
            nid = self.names.get(name)
            t.names.append(self._name_id(name, host=True) if nid is None else nid)
            args = ev.get("args")
            t.shapes.append(self._shape_id(args))
            ext = args.get("External id") if type(args) is dict else None
            t.exts.append(ext if type(ext) is int and 0 <= ext < 2**63 else -1)
        elif cat in RUNTIME_CATEGORIES:
            r = self.runtime.get((pid, tid))
            if r is None:
                r = self.runtime[(pid, tid)] = (array("d"), array("d"), array("q"))
            r[0].append(ts)
            r[1].append(end)
            r[2].append(_correlation(ev.get("args")))
            self.runtime_us += dur
        else:
            return  # python_function, gpu_user_annotation, Trace, ...: not in the op mix
        if ts < self.first_us:
            self.first_us = ts
        if end > self.last_us:
            self.last_us = end

    def _device(self, ev: dict, cat: str, name: str, ts, end, dur, pid) -> None:
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        device = args.get("device", pid)
        stream = args.get("stream", ev.get("tid"))
        # Both become keys and labels: an odd value (a list, an object) is named, not fatal.
        device = device if _key(device) else str(device)[:40]
        stream = stream if _key(stream) else str(stream)[:40]
        d = self.device.get(device)
        if d is None:
            d = self.device[device] = {
                "starts": array("d"),
                "ends": array("d"),
                "streams": {},
                "stream_ids": array("i"),
            }
        d["starts"].append(ts)
        d["ends"].append(end)
        self.device_corrs.append(_correlation(args))
        self.device_exts.append(_external_id(args))
        self.device_durs.append(dur)
        sid = d["streams"].setdefault(str(stream), len(d["streams"]))
        d["stream_ids"].append(sid)
        layer = self.map.kernel_layer(name)
        if layer is None and cat != "kernel":
            layer = "data-movement"  # memcpy / memset move bytes whatever they are named
        if layer is None:
            self.device_unmapped_us[name] = self.device_unmapped_us.get(name, 0.0) + dur
        else:
            self.device_layer_us[layer] = self.device_layer_us.get(layer, 0.0) + dur
        op = self.device_ops.get(name)
        if op is None:
            self.device_ops[name] = [1, dur, cat, layer]
        else:
            op[0] += 1
            op[1] += dur

    # --- after the stream -----------------------------------------------------------------

    def nest_epsilon_us(self) -> float:
        """How far one event may run past another and still count as inside it: the file's
        rounding (1 us when ts is integer; else 2 float64 steps at these timestamps)."""
        if not self.float_ts:
            return NEST_EPSILON_US
        largest = max(abs(self.first_us), abs(self.last_us), 1.0)
        return max(FLOAT_NEST_EPSILON_US, 2 * math.ulp(largest))

    def _device_us_by_key(self, link_exts: array, link_keys: array, mapped: dict,
                          key_ids: dict[tuple, int]) -> dict[tuple, float] | None:  # fmt: skip
        """Device microseconds per (layer, name id, shape id) of the outermost mapped operator
        that launched them: a device event's correlation id names its runtime call, which lies
        inside that operator on its thread; where none does, its External id names an operator
        inside it. None where no device event links to an operator."""
        import numpy as np

        if not len(self.device_durs) or not key_ids:
            return None
        eps = self.nest_epsilon_us()
        corr_ids, corr_keys = [], []
        for thread, (r_s, r_e, r_c) in self.runtime.items():
            m = mapped.get(thread)
            if m is None or not len(m[0]):
                continue
            m_s, m_e = np.frombuffer(m[0]), np.frombuffer(m[1])
            m_k = np.frombuffer(m[2], dtype=np.int64)
            order = np.argsort(m_s, kind="stable")
            m_s, m_e, m_k = m_s[order], m_e[order], m_k[order]
            starts, ends = np.frombuffer(r_s), np.frombuffer(r_e)
            at = np.searchsorted(m_s, starts + eps, side="right") - 1
            inside = at >= 0
            inside[inside] = ends[inside] <= m_e[at[inside]] + eps
            corrs = np.frombuffer(r_c, dtype=np.int64)
            inside &= corrs >= 0
            corr_ids.append(corrs[inside])
            corr_keys.append(m_k[at[inside]])
        keys = np.full(len(self.device_durs), -1, dtype=np.int64)
        if corr_ids:
            _join(np.concatenate(corr_ids), np.concatenate(corr_keys),
                  np.frombuffer(self.device_corrs, dtype=np.int64), keys)  # fmt: skip
        if len(link_exts):
            _join(np.frombuffer(link_exts, dtype=np.int64),
                  np.frombuffer(link_keys, dtype=np.int64),
                  np.frombuffer(self.device_exts, dtype=np.int64), keys)  # fmt: skip
        hit = keys >= 0
        if not hit.any():
            return None
        sums = np.bincount(keys[hit], weights=np.frombuffer(self.device_durs)[hit],
                           minlength=len(key_ids))  # fmt: skip
        return {key: float(sums[i]) for key, i in key_ids.items() if sums[i] > 0}

    def host_pass(self) -> dict:
        """Nest each thread's operators, attribute self time, collect shapes per layer."""
        import numpy as np

        n_names = len(self.name_list)
        count = [0] * n_names
        total_us = [0.0] * n_names
        self_us = [0.0] * n_names
        layer_us: dict[str, float] = {}
        unmapped_us: dict[str, float] = {}
        shape_stats: dict[tuple[str, int, int], list] = {}
        # the operators whose External id a device event carries: (External id, the key of the
        # outermost mapped operator enclosing it), joined with the device events after the pass
        launched = np.unique(np.frombuffer(self.device_exts, dtype=np.int64))
        link_exts, link_keys = array("q"), array("q")
        key_ids: dict[tuple, int] = {}
        # per thread, the outermost mapped operators (disjoint: none encloses another) as
        # starts, ends and key ids, for the runtime calls inside them
        mapped: dict[tuple, tuple[array, array, array]] = {}
        unshaped_us: dict[str, float] = {}
        name_layer = self.name_layer
        host_busy = []
        eps = self.nest_epsilon_us()
        for (pid, tid), t in self.threads.items():
            starts = np.frombuffer(t.starts, dtype=np.float64)
            durs = np.frombuffer(t.durs, dtype=np.float64)
            ends = starts + durs
            # Parents first: by start, then the longer (enclosing) one.
            order = np.lexsort((-ends, starts))
            s_sorted, e_sorted, d_sorted = starts[order], ends[order], durs[order]
            del ends
            names, shapes = t.names, t.shapes
            exts = t.exts
            m_s, m_e, m_k = mapped[(pid, tid)] = (array("d"), array("d"), array("q"))
            # one byte per operator: indexing bytes is cheap in the loop, a numpy bool is not
            linked = (np.isin(np.frombuffer(exts, dtype=np.int64), launched).tobytes()
                      if len(launched) else bytes(len(exts)))  # fmt: skip
            # stack entries: [end_us, name_id, child_us, layer, dur_us, root key id]
            stack: list[list] = []

            def close(entry, layer_us=layer_us, unmapped_us=unmapped_us):
                own = entry[4] - entry[2]
                if own < 0:
                    own = 0.0
                nid = entry[1]
                self_us[nid] += own
                layer = entry[3]
                if layer is None:
                    nm = self.name_list[nid]
                    unmapped_us[nm] = unmapped_us.get(nm, 0.0) + own
                else:
                    layer_us[layer] = layer_us.get(layer, 0.0) + own

            roots_s, roots_e = array("d"), array("d")
            for start, end, dur, i in _chunked(s_sorted, e_sorted, d_sorted, order):
                while stack and start >= stack[-1][0] - eps:
                    close(stack.pop())
                if stack and end > stack[-1][0] + eps:
                    self.quality.add(
                        "overlapping-host-ops",
                        -1,
                        {"name": self.name_list[names[i]]},
                        f"pid {pid} tid {tid} ts {start:.3f}: ends {end - stack[-1][0]:.3f} us "
                        f"after {self.name_list[stack[-1][1]]!r} that encloses its start",
                    )
                    end = stack[-1][0]
                    dur = end - start
                if dur < 0:
                    dur = 0.0
                nid = names[i]
                count[nid] += 1
                total_us[nid] += dur
                root = -1
                if stack:
                    parent = stack[-1]
                    parent[2] += dur
                    layer, root = parent[3], parent[5]
                else:
                    layer = None
                    roots_s.append(start)
                    roots_e.append(end)
                if layer is None:
                    layer = name_layer[nid]
                    if layer is not None:
                        sid = shapes[i]
                        key = (layer, nid, sid if sid >= 0 else -1)
                        root = key_ids.setdefault(key, len(key_ids))
                        m_s.append(start)
                        m_e.append(end)
                        m_k.append(root)
                        if sid >= 0:
                            st = shape_stats.get(key)
                            if st is None:
                                shape_stats[key] = [1, dur]
                            else:
                                st[0] += 1
                                st[1] += dur
                        else:
                            unshaped_us[layer] = unshaped_us.get(layer, 0.0) + dur
                if root >= 0 and linked[i]:
                    link_exts.append(exts[i])
                    link_keys.append(root)
                stack.append([end, nid, 0.0, layer, dur, root])
            while stack:
                close(stack.pop())
            host_busy.append(
                (np.frombuffer(roots_s, dtype=np.float64), np.frombuffer(roots_e, dtype=np.float64))
            )
        ops = {
            self.name_list[i]: {
                "count": count[i],
                "total_s": total_us[i] * US,
                "self_s": self_us[i] * US,
                "layer_type": name_layer[i],
            }
            for i in range(n_names)
            if count[i]
        }
        return {
            "layer_us": layer_us,
            "unmapped_us": unmapped_us,
            "shape_stats": shape_stats,
            "shape_device_us": self._device_us_by_key(link_exts, link_keys, mapped, key_ids),
            "unshaped_us": unshaped_us,
            "ops": ops,
            "host_busy": host_busy,
        }


def _join(ids, keys, wanted, out) -> None:
    """out[j] = the key of wanted[j] among (ids, keys), where out[j] is still -1 and wanted[j]
    is found (ids need not be sorted; an id given twice keeps one of its keys)."""
    import numpy as np

    if not len(ids):
        return
    order = np.argsort(ids, kind="stable")
    ids, keys = ids[order], keys[order]
    at = np.searchsorted(ids, wanted)
    ok = (out < 0) & (wanted >= 0) & (at < len(ids))
    ok[ok] = ids[at[ok]] == wanted[ok]
    out[ok] = keys[at[ok]]


def _chunked(*arrays):
    """The arrays' elements side by side as Python numbers, HOST_PASS_CHUNK at a time:
    indexing numpy arrays per element is slow, converting them whole holds ~40 bytes each."""
    for lo in range(0, len(arrays[0]), HOST_PASS_CHUNK):
        yield from zip(*(a[lo : lo + HOST_PASS_CHUNK].tolist() for a in arrays), strict=True)
