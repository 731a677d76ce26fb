"""The trace importer: torch.profiler traces checked against key_averages(), the real GPU
traces in ../shared/traces, hand-made traces for every data-quality rule and error, a large
trace streamed under a memory bound, and the nesting rules of host time."""

from __future__ import annotations

import gzip
import itertools
import json
import re
import time
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reviewkit.cli.app import TRACE_SUMMARY_FILE, app
from reviewkit.common.errors import InputError
from reviewkit.evidence import files as evidence
from reviewkit.evidence.trace.layermap import load_layer_map
from reviewkit.evidence.trace.reader import READ_BYTES, TraceFormatError
from reviewkit.evidence.trace.summary import QUALITY_RULES, summarise, summarise_one

SHARED_TRACES = Path(__file__).parents[4] / "shared" / "traces"
LM = load_layer_map()
T0 = 1_000_000.0  # a base clock: ts 0 is itself a data-quality finding (an unset clock)
FIXED_CLOCK = lambda: 1_700_000_000.0  # noqa: E731 - same inputs, same created_unix_s


def mk(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    """One complete ("X") event; `ts` is relative to T0, in us."""
    ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur}
    if args:
        ev["args"] = args
    return ev


def kern(name, ts, dur, device=0, stream=7, cat="kernel"):
    return mk(name, ts, dur, cat=cat, pid=device, tid=stream, device=device, stream=stream)


def write_trace(path: Path, events: list, **top) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return path


def one(path: Path, layer_map=LM) -> dict:
    return summarise_one(path, layer_map)


def ops_by_name(summary: dict) -> dict:
    return {o["name"]: o for o in summary["ops"]}


def rules(summary: dict) -> dict:
    return {q["rule"]: q for q in summary["quality"]}


def mix_total_share(mix: dict) -> float:
    return sum(v["share"] for v in mix["layer_types"].values()) + mix["unmapped"]["share"]


def run_cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_one_line_error(result, *needles):
    """The CLI's contract for a user error: exit 2, one line on stderr, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    err = result.stderr.strip()
    assert err.startswith("reviewkit: error:"), err
    assert err.count("\n") == 0, err
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in err, (needle, err)


# --- 1. real traces made here with torch.profiler --------------------------------------------

ITERS = 3
# Hand-known from the model definitions below: (batch, features) into each nn.Linear.
MLP_LINEAR_DIMS = [[[4, 16], [32, 16], [32]], [[4, 32], [8, 32], [8]]]
CONV_LINEAR_DIMS = [[[2, 36], [5, 36], [5]]]  # 8x8 -conv3-> 6x6 -pool2-> 3x3, x4 ch = 36
CONV_INPUT_DIMS = [[2, 3, 8, 8], [4, 3, 3, 3], [4]]  # input, weight, bias of the Conv2d


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """Two tiny models profiled on the CPU with record_shapes, exported as .json and .json.gz;
    per model: the trace paths and torch's own totals (key_averages) to check against."""
    torch = pytest.importorskip("torch")
    from torch import nn
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    models = {
        "mlp": (
            nn.Sequential(
                nn.Linear(16, 32),
                nn.LayerNorm(32),
                nn.GELU(),
                nn.Linear(32, 8),
                nn.Softmax(dim=-1),
            ),
            torch.randn(4, 16),
        ),
        "conv": (
            nn.Sequential(
                nn.Conv2d(3, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(36, 5)
            ),
            torch.randn(2, 3, 8, 8),
        ),
    }
    folder = tmp_path_factory.mktemp("profiled")
    out = {}
    for name, (model, x) in models.items():
        model(x)  # the first call allocates and picks kernels: keep that out of the profile
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(ITERS):
                model(x)
        path = folder / f"{name}.json"
        prof.export_chrome_trace(str(path))
        gz = folder / f"{name}.json.gz"
        gz.write_bytes(gzip.compress(path.read_bytes()))
        children = {}
        for e in prof.events():
            children[e.key] = children.get(e.key, 0) + len(e.cpu_children)
        torch_ops = {
            e.key: {
                "count": e.count,
                "total_us": e.cpu_time_total,
                "self_us": e.self_cpu_time_total,
                "children": children.get(e.key, 0),
            }
            for e in prof.key_averages()
        }
        out[name] = {"json": path, "gz": gz, "torch": torch_ops}
    return out


def _tolerance_us(events: int) -> float:
    # export_chrome_trace writes ts and dur as the profiler's exact nanoseconds (3 decimals
    # of us) and key_averages() sums the same intervals (kept relative to the profile's
    # start, exact to ~1e-10 us); the importer adds the written durs in another order, so the
    # two agree to float64 rounding, ~1e-11 us per event at these sizes. 1e-6 us per event
    # is that with a wide margin, and far below any real disagreement: a child moved to the
    # wrong parent shifts two self times by its whole duration (>= ~0.1 us), and taking a
    # duration as (ts + dur) - ts at ts ~ 5e12 us would be off by up to 0.0005 us per event.
    return 1e-6 * max(events, 1)


@pytest.mark.parametrize("model", ["mlp", "conv"])
def test_profiled_ops_match_key_averages(profiled, model):
    p = profiled[model]
    summary = one(p["json"])
    ours = ops_by_name(summary)
    assert summary["ops_listed_of"] == len(ours)  # nothing cut at MAX_OPS_LISTED here
    assert set(ours) == set(p["torch"])
    for name, t in p["torch"].items():
        o = ours[name]
        assert o["count"] == t["count"], name
        tol_total = _tolerance_us(t["count"])
        tol_self = _tolerance_us(t["count"] + t["children"])
        assert o["total_s"] * 1e6 == pytest.approx(t["total_us"], abs=tol_total), name
        assert o["self_s"] * 1e6 == pytest.approx(t["self_us"], abs=tol_self), name
    assert summary["time_basis"] == "host" and summary["device"]["available"] is False
    assert summary["record_shapes"] is True
    assert summary["quality"] == []  # a clean profile raises no data-quality finding
    assert summary["clock"]["resolution"].startswith("sub-microsecond")


def test_profiled_mlp_layer_types_and_shapes(profiled):
    p = profiled["mlp"]
    summary = one(p["json"])
    mix = summary["op_mix"]
    assert mix_total_share(mix) == pytest.approx(1.0, abs=1e-12)
    t = p["torch"]
    tol = _tolerance_us(sum(o["count"] for o in p["torch"].values()))
    # Each module's top-level op (with everything it calls) lands in its layer type.
    expect_us = {
        "gemm": t["aten::linear"]["total_us"],  # aten::addmm, aten::t, ... inside it too
        "norm": t["aten::layer_norm"]["total_us"],
        "elementwise": t["aten::gelu"]["total_us"],
        "softmax": t["aten::softmax"]["total_us"],
    }
    assert set(mix["layer_types"]) == set(expect_us)
    for lt, us in expect_us.items():
        assert mix["layer_types"][lt]["time_s"] * 1e6 == pytest.approx(us, abs=tol), lt
    assert mix["unmapped"]["time_s"] == 0 and mix["unmapped"]["top"] == []
    assert mix["time_s"] * 1e6 == pytest.approx(sum(expect_us.values()), abs=tol)
    # Shapes of the gemm layer type: the outermost op's (aten::linear's) Input Dims, which
    # are the real (batch, in) x (out, in) + (out,) of the two nn.Linear layers.
    gemm = summary["shapes"]["gemm"]
    assert sorted(s["dims"] for s in gemm["shapes"]) == sorted(MLP_LINEAR_DIMS)
    assert all(s["count"] == ITERS for s in gemm["shapes"])
    assert {s["numel"] for s in gemm["shapes"]} == {4 * 16, 4 * 32}
    assert gemm["shaped_time_s"] * 1e6 == pytest.approx(expect_us["gemm"], abs=tol)
    assert summary["shapes"]["softmax"]["shapes"][0]["dims"][0] == [4, 8]
    # each shape names its op: the outermost mapped operator called with those dims
    assert {s["op"] for s in gemm["shapes"]} == {"aten::linear"}
    assert "device_time_s" not in gemm["shapes"][0]  # a CPU profile: no device events


def test_profiled_conv_net_names_its_unmapped_remainder(profiled):
    p = profiled["conv"]
    summary = one(p["json"])
    mix = summary["op_mix"]
    t = p["torch"]
    tol = _tolerance_us(sum(o["count"] for o in p["torch"].values()))
    assert mix_total_share(mix) == pytest.approx(1.0, abs=1e-12)
    assert mix["layer_types"]["conv"]["time_s"] * 1e6 == pytest.approx(
        t["aten::conv2d"]["total_us"], abs=tol
    )
    assert mix["layer_types"]["gemm"]["time_s"] * 1e6 == pytest.approx(
        t["aten::linear"]["total_us"], abs=tol
    )
    # nn.Flatten's aten::flatten (and the aten::view it calls) maps to no layer type: it is
    # the named remainder, not folded into a guess.
    unmapped = mix["unmapped"]
    assert "aten::flatten" in {u["name"] for u in unmapped["top"]}
    assert unmapped["time_s"] * 1e6 == pytest.approx(t["aten::flatten"]["total_us"], abs=tol)
    assert unmapped["share"] > 0
    assert [s["dims"] for s in summary["shapes"]["gemm"]["shapes"]] == CONV_LINEAR_DIMS
    conv_dims = summary["shapes"]["conv"]["shapes"][0]["dims"]
    assert conv_dims[:3] == CONV_INPUT_DIMS


@pytest.mark.parametrize("model", ["mlp", "conv"])
def test_json_and_gzip_give_the_same_summary(profiled, model):
    p = profiled[model]
    plain = summarise([p["json"]], LM, clock=FIXED_CLOCK)
    packed = summarise([p["gz"]], LM, clock=FIXED_CLOCK)
    a, b = plain["traces"][0], packed["traces"][0]
    assert (a["gzip"], b["gzip"]) == (False, True)
    assert a["sha256"] != b["sha256"] and a["size_bytes"] > b["size_bytes"]
    assert a["text_chars"] == b["text_chars"]
    for key in ("path", "sha256", "size_bytes", "gzip"):
        a.pop(key), b.pop(key)
    assert a == b
    assert plain["combined"] == packed["combined"]


# --- 2. the real traces in ../shared/traces ---------------------------------------------------

REAL = {
    "a100": "a100-alexnet-train.json.gz",
    "cpu": "cpu-only-rank34.json.gz",
    "sampled": "gpu-sampled-rank0.json.gz",
    "mi250": "mi250-rocm-train.json.gz",
    "v100": "v100-ns-resolution.json.gz",
}
GPU_REAL = ("a100", "sampled", "mi250", "v100")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
COLLECTIVE_ANNOTATION = re.compile(r"(nccl|gloo):")


@pytest.fixture(scope="module")
def real():
    """name -> (summary, raw JSON document) of each shared trace."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"{SHARED_TRACES} is absent: the shared real traces are not on this machine")
    out = {}
    for key, name in REAL.items():
        path = SHARED_TRACES / name
        if not path.is_file():
            pytest.skip(f"{path} is absent from the shared traces")
        out[key] = (one(path), json.loads(gzip.decompress(path.read_bytes())))
    return out


def _x(raw: dict, cats) -> list[dict]:
    return [e for e in raw["traceEvents"] if e.get("ph") == "X" and e.get("cat") in cats]


def _union(intervals) -> list[tuple[float, float]]:
    """Plain-Python interval union, independent of the importer's numpy one."""
    merged: list[list[float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def _length(intervals) -> float:
    return sum(e - s for s, e in intervals)


def _overlap(a, b) -> float:
    """Length of the intersection of two sorted disjoint interval lists (a linear merge)."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def test_real_traces_read_and_serialise(real):
    for key, (summary, raw) in real.items():
        assert summary["path"] == REAL[key]
        assert summary["events"]["total"] == len(raw["traceEvents"]), key
        json.dumps(summary, allow_nan=False)  # the evidence file is strict JSON
        assert mix_total_share(summary["op_mix"]) == pytest.approx(1.0, abs=1e-9), key
        assert summary["quality"] == [], (key, summary["quality"])


def test_real_traces_rank_world_and_devices(real):
    cpu = real["cpu"][0]
    assert (cpu["rank"], cpu["world_size"], cpu["backend"]) == (34, 300, "gloo")
    assert cpu["rank_source"] == "distributedInfo"
    mi = real["mi250"][0]
    assert "distributedInfo" not in real["mi250"][1]
    assert mi["rank"] == 0 and mi["rank_source"].startswith("default")
    sampled = real["sampled"][0]
    assert (sampled["rank"], sampled["world_size"]) == (0, 128)
    assert real["a100"][0]["rank"] == 0 and real["a100"][0]["rank_source"] == "distributedInfo"
    # Device names straight from deviceProperties, one per GPU the trace lists.
    for key, needle in (("a100", "A100"), ("v100", "V100"), ("mi250", "AMD Radeon Graphics")):
        summary, raw = real[key]
        assert len(summary["devices"]) == len(raw["deviceProperties"]) > 0
        assert all(needle in d for d in summary["devices"]), (key, summary["devices"])
    assert sampled["devices"] == [] and "deviceProperties" not in real["sampled"][1]


def test_real_cpu_only_trace_has_no_device_metrics(real):
    summary, raw = real["cpu"]
    assert summary["device"]["available"] is False
    assert "CPU-only" in summary["device"]["reason"]
    assert summary["time_basis"] == "host"
    # Host time recomputed from the JSON: the gloo:all_reduce ranges (mapped communication
    # annotations, on two threads) and the four top-level aten::empty ops.
    gloo = [e["dur"] for e in _x(raw, ("user_annotation",)) if e["name"] == "gloo:all_reduce"]
    empty = [e["dur"] for e in _x(raw, ("cpu_op",)) if e["name"] == "aten::empty"]
    mix = summary["op_mix"]
    assert mix["layer_types"]["collective"]["time_s"] == pytest.approx(sum(gloo) * 1e-6)
    assert mix["unmapped"]["top"][0]["name"] == "aten::empty"
    assert mix["unmapped"]["time_s"] == pytest.approx(sum(empty) * 1e-6)
    assert ops_by_name(summary)["gloo:all_reduce"]["count"] == len(gloo) == 10


@pytest.mark.parametrize("key", GPU_REAL)
def test_real_gpu_trace_device_numbers_from_the_json(real, key):
    summary, raw = real[key]
    device = summary["device"]
    assert device["available"] is True
    dev_events = _x(raw, DEVICE_CATS)
    host_events = _x(raw, ("cpu_op", "cuda_runtime", "cuda_driver")) + [
        e for e in _x(raw, ("user_annotation",)) if COLLECTIVE_ANNOTATION.match(e["name"])
    ]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in dev_events + host_events]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    assert summary["window_s"] == pytest.approx((hi - lo) * 1e-6, rel=1e-12)
    host_busy = _union((e["ts"], e["ts"] + e["dur"]) for e in host_events)
    idle_shares, overhead_shares = [], []
    for d in device["devices"]:
        mine = [e for e in dev_events if str(e["args"].get("device", e["pid"])) == d["device"]]
        busy = _union((e["ts"], e["ts"] + e["dur"]) for e in mine)
        assert d["events"] == len(mine)
        assert d["busy_s"] == pytest.approx(_length(busy) * 1e-6, rel=1e-9)
        idle = _union(
            [(lo, busy[0][0])]
            + [(a[1], b[0]) for a, b in itertools.pairwise(busy)]
            + [(busy[-1][1], hi)]
        )
        idle_shares.append(1 - _length(busy) / (hi - lo))
        overhead_shares.append(_overlap(idle, host_busy) / (hi - lo))
        assert d["idle_share"] == pytest.approx(idle_shares[-1], abs=1e-9)
        assert d["host_overhead_share"] == pytest.approx(overhead_shares[-1], abs=1e-6)
    assert 0 <= device["idle_share"] <= 1
    assert device["host_overhead_share"] <= device["idle_share"]
    assert device["idle_share"] == pytest.approx(sum(idle_shares) / len(idle_shares))
    # Per-kernel totals, recomputed by name.
    totals: dict[str, list] = {}
    for e in dev_events:
        t = totals.setdefault(e["name"], [0, 0.0])
        t[0] += 1
        t[1] += e["dur"]
    assert summary["kernels_listed_of"] == len(totals)
    for k in summary["kernels"]:
        assert k["count"] == totals[k["name"]][0], k["name"]
        assert k["total_s"] == pytest.approx(totals[k["name"]][1] * 1e-6, rel=1e-9)
    dev_total_s = sum(t[1] for t in totals.values()) * 1e-6
    assert summary["time_basis"] == "device"
    assert summary["op_mix"]["time_s"] == pytest.approx(dev_total_s, rel=1e-9)


def test_real_sampled_trace_shapes_and_collective_share(real):
    summary, raw = real["sampled"]
    assert summary["record_shapes"] is True
    # NCCL kernels' share of all device time, recomputed from the JSON.
    dev = _x(raw, DEVICE_CATS)
    nccl_us = sum(e["dur"] for e in dev if e["name"].lower().startswith("nccl"))
    share = nccl_us / sum(e["dur"] for e in dev)
    collective = summary["op_mix"]["layer_types"]["collective"]
    assert collective["share"] == pytest.approx(share, rel=1e-9)
    assert share > 0.5  # a sampled NCCL rank: communication dominates its device time
    # Every gemm shape listed was recorded on some host op of the trace.
    recorded = [e["args"]["Input Dims"] for e in _x(raw, ("cpu_op",))
                if "Input Dims" in e.get("args", {})]  # fmt: skip
    gemm = summary["shapes"]["gemm"]["shapes"]
    assert gemm and all(s["dims"] in recorded for s in gemm)
    assert summary["shapes"]["gemm"]["shaped_time_s"] > 0


@pytest.mark.parametrize("key", ("sampled", "v100"))
def test_real_unmapped_remainder_is_named(real, key):
    summary, raw = real[key]
    mix = summary["op_mix"]
    mapped = sum(v["time_s"] for v in mix["layer_types"].values())
    assert mix["unmapped"]["time_s"] == pytest.approx(mix["time_s"] - mapped, rel=1e-9)
    assert mix["unmapped"]["time_s"] > 0 and mix["unmapped"]["top"]
    by_name: dict[str, float] = {}
    for e in _x(raw, DEVICE_CATS):
        by_name[e["name"]] = by_name.get(e["name"], 0.0) + e["dur"]
    for u in mix["unmapped"]["top"]:
        assert u["time_s"] == pytest.approx(by_name[u["name"]] * 1e-6, rel=1e-9), u["name"]


def test_real_v100_clock_is_sub_microsecond(real):
    summary, raw = real["v100"]
    assert any(not float(e["ts"]).is_integer() for e in _x(raw, ("cpu_op",)))
    assert summary["clock"]["resolution"].startswith("sub-microsecond")
    assert summary["clock"]["display_time_unit"] == "ns"
    a100 = real["a100"][0]
    assert all(float(e["ts"]).is_integer() for e in _x(real["a100"][1], ("cpu_op",)))
    assert a100["clock"]["resolution"] == "1 us (integer)"


def test_real_traces_through_the_cli(real, tmp_path):
    """All five ranks in one import: one evidence file a review can cite."""
    paths = [SHARED_TRACES / name for name in REAL.values()]
    out = tmp_path / "out"
    r = run_cli("trace", "import", *paths, "--out", out)
    assert r.exit_code == 0, r.output
    doc = json.loads((out / TRACE_SUMMARY_FILE).read_text())
    loaded = evidence.read(out / TRACE_SUMMARY_FILE, evidence.TRACE)
    assert loaded.ok, loaded.reason
    assert [t["rank"] for t in doc["traces"]] == [real[k][0]["rank"] for k in REAL]
    assert doc["combined"]["time_basis"].startswith("mixed")
    assert "rank 34 of 300" in r.stdout and "device: not available" in r.stdout


# --- 3. malformed traces and the data-quality rules -------------------------------------------

GOOD_EVENTS = [mk(f"aten::op{i}", 10 * i + 1, 5) for i in range(6)]


def _text(events) -> tuple[str, list[int]]:
    """A trace's JSON text and where each event starts in it."""
    head = '{"schemaVersion": 1, "traceEvents": ['
    parts, offsets, at = [], [], len(head)
    for ev in events:
        s = json.dumps(ev)
        offsets.append(at)
        parts.append(s)
        at += len(s) + 2
    return head + ", ".join(parts) + "]}", offsets


def _truncated_plain(path):
    text, offsets = _text(GOOD_EVENTS)
    path.write_text(text[: offsets[4] + 20])  # inside event #4
    return path, ["event #4", "not valid JSON", "after event #3"]


def _truncated_gzip_text(path):
    text, offsets = _text(GOOD_EVENTS)
    path.write_bytes(gzip.compress(text[: offsets[4] + 20].encode()))  # complete gzip
    return path, ["event #4", "not valid JSON"]


def _truncated_gzip_stream(path):
    events = [mk(f"aten::op{i}", 10 * i + 1, 5, **{"Ev Idx": i}) for i in range(2000)]
    data = gzip.compress(_text(events)[0].encode())
    path.write_bytes(data[: len(data) // 2])
    return path, ["gzip stream is truncated"]


def _invalid_event_past_the_first_read(path):
    stack = "torch/nn/modules/linear.py(125): forward; " * 10  # with_stack's long args
    events = [mk(f"aten::op{i}", 10 * i + 1, 5, **{"Call stack": stack}) for i in range(8000)]
    text, offsets = _text(events)
    assert offsets[6000] > 2 * READ_BYTES  # the reader has refilled its buffer by then
    bad = text[: offsets[6000]] + '{"ph": X}' + text[offsets[6001] - 2 :]
    path.write_text(bad)
    return path, ["event #6000", "not valid JSON", "after event #5999"]


def _gzip_trailing_garbage(path):
    path.write_bytes(gzip.compress(_text(GOOD_EVENTS)[0].encode()) + b"not gzip")
    return path, ["damaged gzip data"]


def _write(content, needles):
    def make(path):
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path, needles

    return make


TS_STRING = {"traceEvents": [*GOOD_EVENTS[:2], {**mk("aten::mm", 50, 5), "ts": "1000050"}]}
DUR_STRING = {"traceEvents": [*GOOD_EVENTS[:3], {**mk("aten::bmm", 50, 5), "dur": "5"}]}
# name -> (file content, what the message must say)
CASES = {
    "not-json": ("this is not JSON", ["expected '{'", "found 't'"]),
    "top-level-array": (json.dumps([mk("aten::mm", 1, 1)]), ["expected '{'", "found '['"]),
    "top-level-number": ("42", ["expected '{'"]),
    "empty-file": ("", ["expected '{'", "the end of the file"]),
    "no-trace-events": (
        json.dumps({"schemaVersion": 1, "deviceProperties": []}),
        ["no `traceEvents` array"],
    ),
    "trace-events-not-list": (
        json.dumps({"traceEvents": {"0": mk("aten::mm", 1, 1)}}),
        ["`traceEvents` is not an array"],
    ),
    "event-not-object": (
        json.dumps({"traceEvents": [mk("aten::mm", 1, 1), [1, 2]]}),
        ["event #1 is a JSON list, not an object"],
    ),
    "ts-string": (
        json.dumps(TS_STRING),
        ["event #2", "'aten::mm'", "ts = '1000050'", "not a number"],
    ),
    "dur-string": (
        json.dumps(DUR_STRING),
        ["event #3", "'aten::bmm'", "dur = '5'", "not a number"],
    ),
    "name-not-string": (
        json.dumps({"traceEvents": [{**mk("x", 1, 1), "name": 7}]}),
        ["event #0", "name of type int"],
    ),
    "not-utf8": (
        b'{"traceEvents": [{"ph": "X", "name": "caf\xe9", "ts": 1, "dur": 1}]}',
        ["not UTF-8"],
    ),
    "two-documents": (
        json.dumps({"traceEvents": []}) + ' {"traceEvents": []}',
        ["text after the end of the JSON object"],
    ),
}
MALFORMED = {
    **{name: _write(content, needles) for name, (content, needles) in CASES.items()},
    "truncated-json": _truncated_plain,
    "truncated-json-in-gzip": _truncated_gzip_text,
    "truncated-gzip-stream": _truncated_gzip_stream,
    "invalid-event-past-the-first-read": _invalid_event_past_the_first_read,
    "gzip-trailing-garbage": _gzip_trailing_garbage,
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_trace_is_an_input_error_naming_file_and_event(tmp_path, case):
    suffix = ".json.gz" if "gzip" in case else ".json"
    path, needles = MALFORMED[case](tmp_path / f"{case}{suffix}")
    with pytest.raises(TraceFormatError) as err:
        one(path)
    assert isinstance(err.value, InputError) and err.value.exit_code == 2
    message = str(err.value)
    assert message.startswith(f"{path}: "), message
    for needle in needles:
        assert needle in message, (needle, message)


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_trace_via_the_cli(tmp_path, case):
    suffix = ".json.gz" if "gzip" in case else ".json"
    path, needles = MALFORMED[case](tmp_path / f"{case}{suffix}")
    out = tmp_path / "out"
    r = run_cli("trace", "import", path, "--out", out)
    assert_one_line_error(r, str(path), *needles)
    assert not (out / TRACE_SUMMARY_FILE).exists()


def test_concatenated_gzip_members_read_as_one_stream(tmp_path):
    # gzip allows several members back to back (`cat a.gz b.gz`); the text runs across them.
    text = _text(GOOD_EVENTS)[0].encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:50]) + gzip.compress(text[50:]))
    summary = one(path)
    assert summary["gzip"] is True and summary["text_chars"] == len(text)
    assert summary["ops_listed_of"] == len(GOOD_EVENTS)


def test_missing_trace_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match=r"nope\.json: cannot be read"):
        one(tmp_path / "nope.json")
    with pytest.raises(InputError, match="no trace given"):
        summarise([], LM)


def test_progress_reaches_the_file_size(tmp_path):
    path = write_trace(tmp_path / "t.json", GOOD_EVENTS)
    calls = []
    summarise([path], LM, on_progress=lambda *a: calls.append(a))
    size = path.stat().st_size
    assert calls and calls[-1] == ("t.json", size, size)
    assert all(done <= total == size for _, done, total in calls)


def test_a_malformed_rank_among_good_ones_is_named_and_the_rest_written(tmp_path):
    good = write_trace(tmp_path / "good.json", GOOD_EVENTS)
    bad, _ = _truncated_plain(tmp_path / "bad.json")
    out = tmp_path / "out"
    r = run_cli("trace", "import", good, bad, "--out", out)
    assert r.exit_code == 1, r.output
    assert f"reviewkit: error: {bad}: " in r.stderr and "event #4" in r.stderr
    doc = json.loads((out / TRACE_SUMMARY_FILE).read_text())
    assert [t["path"] for t in doc["traces"]] == ["good.json"]
    assert [f["path"] for f in doc["failed_traces"]] == ["bad.json"]
    assert "event #4" in doc["failed_traces"][0]["reason"]


def test_cli_refuses_a_missing_trace(tmp_path):
    r = run_cli("trace", "import", tmp_path / "nope.json", "--out", tmp_path / "out")
    assert_one_line_error(r, "nope.json", "no such trace file")
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_trace_given_twice(tmp_path):
    path = write_trace(tmp_path / "t.json", GOOD_EVENTS)
    again = tmp_path / "sub" / ".." / "t.json"  # another spelling of the same file
    (tmp_path / "sub").mkdir()
    r = run_cli("trace", "import", path, again, "--out", tmp_path / "out")
    assert_one_line_error(r, "given twice")
    assert not (tmp_path / "out" / TRACE_SUMMARY_FILE).exists()


def test_cli_refuses_out_that_is_a_file(tmp_path):
    path = write_trace(tmp_path / "t.json", GOOD_EVENTS)
    out = tmp_path / "out"
    out.write_text("not a folder")
    r = run_cli("trace", "import", path, "--out", out)
    assert_one_line_error(r, "is a file")
    assert out.read_text() == "not a folder"


def test_cli_writes_a_versioned_summary(tmp_path):
    path = write_trace(tmp_path / "t.json", GOOD_EVENTS)
    r = run_cli("trace", "import", path, "--out", tmp_path / "out", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == evidence.TRACE and doc["schema_version"] == 1
    assert doc == json.loads((tmp_path / "out" / TRACE_SUMMARY_FILE).read_text())


@pytest.mark.parametrize("field", ["name", "ts", "dur", "pid", "tid"])
def test_quality_missing_fields_skip_the_event(tmp_path, field):
    bad = mk("aten::mm", 100, 7)
    del bad[field]
    path = write_trace(tmp_path / "t.json", [mk("aten::add", 1, 3), bad])
    summary = one(path)
    q = rules(summary)["missing-fields"]
    assert q["count"] == 1 and q["description"] == QUALITY_RULES["missing-fields"]
    assert q["examples"][0].startswith("event #1") and f"no {field}" in q["examples"][0]
    assert set(ops_by_name(summary)) == {"aten::add"}  # the event was skipped
    assert summary["op_mix"]["time_s"] == pytest.approx(3e-6)


def test_quality_negative_duration_skips_the_event(tmp_path):
    path = write_trace(tmp_path / "t.json", [mk("aten::add", 1, 3), mk("aten::mm", 10, -4)])
    summary = one(path)
    q = rules(summary)["negative-duration"]
    assert q["count"] == 1 and q["examples"] == ["event #1 'aten::mm': dur -4"]
    assert "aten::mm" not in ops_by_name(summary)


def test_quality_zero_timestamp_skips_the_event(tmp_path):
    zero = {**mk("aten::mm", 0, 4), "ts": 0}
    path = write_trace(tmp_path / "t.json", [mk("aten::add", 1, 3), zero])
    summary = one(path)
    q = rules(summary)["zero-timestamp"]
    assert q["count"] == 1 and q["examples"] == ["event #1 'aten::mm'"]
    assert "aten::mm" not in ops_by_name(summary)
    assert summary["window_s"] == pytest.approx(3e-6)  # ts 0 does not stretch the window


def test_quality_partially_overlapping_host_ops(tmp_path):
    events = [
        mk("aten::add", 0, 50),  # 0..50
        mk("aten::mul", 20, 60),  # 20..80: starts inside aten::add, ends 30 us after it
        mk("aten::linear", 100, 50),  # 100..150 encloses 110..140: nesting, not an overlap
        mk("aten::addmm", 110, 30),
        mk("aten::sub", 0, 10, tid=2),  # another thread: never an overlap with tid 1
    ]
    summary = one(write_trace(tmp_path / "t.json", events))
    q = rules(summary)["overlapping-host-ops"]
    assert q["count"] == 1
    assert "'aten::mul'" in q["examples"][0] and "'aten::add'" in q["examples"][0]
    assert "ends 30.000 us after" in q["examples"][0] and "tid 1" in q["examples"][0]
    ops = ops_by_name(summary)
    # Clamped to its parent: aten::mul counts 20..50 (30 us), aten::add keeps 20 us of self.
    assert ops["aten::mul"]["total_s"] == pytest.approx(30e-6)
    assert ops["aten::add"]["self_s"] == pytest.approx(20e-6)
    assert ops["aten::add"]["total_s"] == pytest.approx(50e-6)
    assert ops["aten::linear"]["self_s"] == pytest.approx(20e-6)


def test_no_overlap_reported_for_exact_nesting_or_back_to_back_ops(tmp_path):
    events = [
        mk("aten::linear", 0, 100),
        mk("aten::addmm", 0, 100),  # same span as its parent
        mk("aten::empty", 90, 10),  # ends exactly where both end
        mk("aten::add", 100, 5),  # starts exactly where they end: a sibling
    ]
    summary = one(write_trace(tmp_path / "t.json", events))
    assert summary["quality"] == []
    ops = ops_by_name(summary)
    assert ops["aten::add"]["self_s"] == pytest.approx(5e-6)
    assert ops["aten::addmm"]["self_s"] == pytest.approx(90e-6)


def test_quality_overlapping_device_events_on_one_stream(tmp_path):
    events = [
        mk("aten::mm", 0, 5),
        kern("ampere_sgemm_128x64_tn", 10, 50, stream=7),  # 10..60
        kern("ampere_sgemm_128x64_tn", 40, 30, stream=7),  # 40..70: overlaps on stream 7
        kern("ampere_sgemm_128x64_tn", 40, 30, stream=8),  # another stream: concurrency
    ]
    summary = one(write_trace(tmp_path / "t.json", events))
    q = rules(summary)["overlapping-device-events"]
    assert q["count"] == 1
    assert q["description"] == QUALITY_RULES["overlapping-device-events"]
    # The stream as the trace names it (7), not the importer's own index of it.
    assert q["examples"][0].startswith("device 0 stream 7: an event at ts 1000040.000")
    # Counted once in busy time: the union 10..70 is 60 us, not 50 + 30 + 30.
    assert summary["device"]["devices"][0]["busy_s"] == pytest.approx(60e-6)
    # The op mix still adds every kernel's own time (110 us of gemm).
    assert summary["op_mix"]["layer_types"]["gemm"]["time_s"] == pytest.approx(110e-6)


def test_quality_clock_span_over_a_week(tmp_path):
    eight_days_us = 8 * 86400 * 1e6
    events = [mk("aten::add", 1, 3), mk("aten::mul", eight_days_us, 3)]
    summary = one(write_trace(tmp_path / "t.json", events))
    q = rules(summary)["clock-units"]
    assert q["count"] == 1 and "8.0 days" in q["examples"][0] and "nanoseconds" in q["examples"][0]
    week = [mk("aten::add", 1, 3), mk("aten::mul", 6 * 86400 * 1e6, 3)]
    assert "clock-units" not in rules(one(write_trace(tmp_path / "ok.json", week)))


@pytest.mark.parametrize(("unit", "flagged"), [("ms", False), ("ns", False), ("s", True),
                                                ("us", True), (3, True)])  # fmt: skip
def test_quality_display_time_unit(tmp_path, unit, flagged):
    path = write_trace(tmp_path / "t.json", GOOD_EVENTS, displayTimeUnit=unit)
    summary = one(path)
    assert ("clock-units" in rules(summary)) is flagged
    if flagged:
        assert "displayTimeUnit" in rules(summary)["clock-units"]["examples"][0]
    assert summary["clock"]["ts_unit"] == "us"


def test_every_quality_rule_is_exercised():
    # The tests above cover each rule the importer knows; a new rule needs its own test.
    assert set(QUALITY_RULES) == {
        "missing-fields", "negative-duration", "zero-timestamp", "overlapping-host-ops",
        "overlapping-device-events", "clock-units",
    }  # fmt: skip


# --- 4. a large trace streamed under a memory bound -------------------------------------------

GEMM_KERNEL = (
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>"
    "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8::Params)"
)
# Kineto's layout: one event over several indented lines; host ops with record_shapes args.
HOST_EVENT = (
    '  {{\n    "ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 7, "tid": 7,\n'
    '    "ts": {ts}, "dur": {dur},\n    "args": {{\n      "External id": {ext},\n'
    '      "Record function id": 0, "Concrete Inputs": ["", "", ""], "Input type": '
    '["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"],\n      "Input Strides": '
    '[[4096, 1], [4096, 1], [1]], "Input Dims": [[8192, 4096], [4096, 4096], [4096]], '
    '"Ev Idx": {ext}\n    }}\n  }},\n'
)
RUNTIME_EVENT = (
    '  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, '
    '"tid": 7,\n    "ts": {ts}, "dur": {dur},\n    "args": {{\n      "External id": {ext}, '
    '"cbid": 211, "correlation": {ext}\n    }}\n  }},\n'
)
KERNEL_EVENT = (
    '  {{\n    "ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7,\n'
    '    "ts": {ts}, "dur": {dur},\n    "args": {{\n      "External id": {ext}, "queued": 0, '
    '"device": 0, "context": 1, "stream": 7, "correlation": {ext},\n      "registers per '
    'thread": 168, "shared memory": 73728, "blocks per SM": 0.5, "warps per SM": 4.0,\n'
    '      "grid": [64, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %": 12\n'
    "    }}\n  }},\n"
)
STEP_US = 100  # per step: linear 0..40 encloses addmm 5..35; launch 10..20; kernel 30..80


def _write_large_trace(path: Path, steps: int, kernel_name: str) -> None:
    """Written event by event into a gzip stream: never held whole in memory."""
    with gzip.open(path, "wt", compresslevel=1, encoding="utf-8") as f:
        f.write('{\n  "schemaVersion": 1,\n  "traceEvents": [\n')
        for i in range(steps):
            t = 1_000_000_000 + i * STEP_US
            f.write(HOST_EVENT.format(name="aten::linear", ts=t, dur=40, ext=3 * i))
            f.write(HOST_EVENT.format(name="aten::addmm", ts=t + 5, dur=30, ext=3 * i + 1))
            f.write(RUNTIME_EVENT.format(ts=t + 10, dur=10, ext=3 * i + 2))
            f.write(KERNEL_EVENT.format(name=kernel_name, ts=t + 30, dur=50, ext=3 * i + 2))
        f.write('  {"ph": "i", "name": "Record Window End", "pid": 7, "tid": 7, "ts": 1}\n')
        f.write("  ]\n}\n")


# Why the bound holds: while streaming, the reader holds one 1 MiB read, one inflated piece
# (<= READ_BYTES), its decoded text and the parse buffer with its compaction copy (each
# <= 2 x READ_BYTES): under 8 x READ_BYTES. Per event the importer keeps 24 bytes per host
# op, 20 per device event and 16 per runtime call; after the stream the nesting pass adds
# ends, a sort order and sorted copies (~56 bytes per host op, plus 16 per top-level op; its
# Python numbers a fixed chunk at a time) and the device pass sorts and merges device and
# host-busy intervals (~50 bytes each). 128 bytes per event covers all of it with room; the
# file's text is ~1200 bytes per event. Before the importer inflated gzip in bounded pieces,
# one 1 MiB read of this 40x-compressible file became ~40 MB of text at once: >100 MB peak.
STREAM_BUFFER_BYTES = 8 * READ_BYTES
BYTES_PER_EVENT = 128


def test_large_trace_streams_under_a_memory_bound(tmp_path):
    import numpy  # noqa: F401 - imported before measuring: a module import is not the importer's

    # A kernel name as long as real templated ones (the A100 trace's longest is ~5000 chars),
    # so the file reaches ~54 MB of text with few enough events to parse in seconds.
    steps = 11_000
    kernel_name = GEMM_KERNEL + " " + ", ".join(f"cute::C<{i}>" for i in range(240))
    path = tmp_path / "large.json.gz"
    _write_large_trace(path, steps, kernel_name)
    events = 4 * steps
    one(write_trace(tmp_path / "warm.json", GOOD_EVENTS))  # first-call caches, lazy imports
    started = time.perf_counter()
    tracemalloc.start()
    try:
        summary = one(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    wall_s = time.perf_counter() - started
    text_bytes = summary["text_chars"]
    assert text_bytes > 50e6, text_bytes
    bound = STREAM_BUFFER_BYTES + BYTES_PER_EVENT * events
    assert peak < bound, (peak, bound, wall_s)
    assert peak < text_bytes / 4, (peak, text_bytes)
    # And it was read right: every event, the nesting and the device idle worked by hand.
    assert summary["events"]["total"] == events + 1
    ops = ops_by_name(summary)
    assert ops["aten::linear"]["count"] == ops["aten::addmm"]["count"] == steps
    assert ops["aten::linear"]["self_s"] == pytest.approx(steps * 10e-6)  # 40 - 30 per step
    window_us = (steps - 1) * STEP_US + 80  # first linear start to last kernel end
    assert summary["window_s"] == pytest.approx(window_us * 1e-6)
    device = summary["device"]
    assert device["idle_share"] == pytest.approx(1 - steps * 50 / window_us)
    # Per step the device idles 80..130 (next step's 30) while the host is busy 0..40: 30 us.
    assert device["host_overhead_share"] == pytest.approx(steps * 30 / window_us)
    assert summary["op_mix"]["layer_types"]["gemm"]["share"] == 1.0


# --- 6. nesting semantics of host time, and device idle worked by hand ------------------------


def test_host_time_goes_to_the_outermost_mapped_op(tmp_path):
    linear_dims = [[4, 16], [32, 16], [32]]
    events = [
        mk("aten::linear", 0, 100, **{"Input Dims": linear_dims, "Input type": ["float"] * 3}),
        mk("aten::addmm", 10, 80, **{"Input Dims": [[32], [4, 16], [16, 32]]}),
        mk("aten::empty", 20, 10, **{"Input Dims": [[], []]}),
        mk("myteam::fused_thing", 200, 50),  # top level, matches no rule
        mk("myteam::block", 300, 100),  # unmapped, enclosing a mapped op
        mk("aten::mm", 310, 40),
    ]
    summary = one(write_trace(tmp_path / "t.json", events))
    ops = ops_by_name(summary)
    # Self time = own duration - direct children's: linear 100 - 80, addmm 80 - 10, empty 10.
    assert ops["aten::linear"]["self_s"] == pytest.approx(20e-6)
    assert ops["aten::addmm"]["self_s"] == pytest.approx(70e-6)
    assert ops["aten::empty"]["self_s"] == pytest.approx(10e-6)
    assert ops["aten::linear"]["total_s"] == pytest.approx(100e-6)
    assert ops["aten::empty"]["layer_type"] is None  # unmapped by name, gemm by enclosure
    mix = summary["op_mix"]
    # gemm: all 100 us of linear (its addmm and empty with it) + aten::mm's 40 inside the
    # unmapped block; unmapped: fused_thing's 50 + block's own 60 (100 - 40).
    assert mix["layer_types"]["gemm"]["time_s"] == pytest.approx(140e-6)
    assert mix["time_s"] == pytest.approx(250e-6)
    assert mix["layer_types"]["gemm"]["share"] == pytest.approx(140 / 250)
    unmapped = {u["name"]: u["time_s"] for u in mix["unmapped"]["top"]}
    assert unmapped == pytest.approx({"myteam::fused_thing": 50e-6, "myteam::block": 60e-6})
    assert mix["unmapped"]["distinct_names"] == 2
    assert mix_total_share(mix) == pytest.approx(1.0)
    # Shapes: the outermost mapped op's Input Dims only (aten::linear's, not its addmm's);
    # aten::mm had none, so its 40 us are gemm time without a shape.
    gemm = summary["shapes"]["gemm"]
    assert [s["dims"] for s in gemm["shapes"]] == [linear_dims]
    assert gemm["shapes"][0]["numel"] == 64 and gemm["shapes"][0]["types"] == ["float"] * 3
    assert gemm["unshaped_time_s"] == pytest.approx(40e-6)


def test_host_time_is_summed_over_threads(tmp_path):
    events = [mk("aten::linear", 0, 100, tid=1), mk("aten::linear", 0, 100, tid=2),
              mk("aten::softmax", 50, 10, tid=2)]  # fmt: skip
    mix = one(write_trace(tmp_path / "t.json", events))["op_mix"]
    # Thread 2's softmax starts inside thread 2's linear: gemm gets it; thread 1 does not nest.
    assert mix["layer_types"]["gemm"]["time_s"] == pytest.approx(200e-6)
    assert "softmax" not in mix["layer_types"]


def test_device_idle_and_host_overhead_by_hand(tmp_path):
    events = [
        mk("aten::mm", 0, 40),  # host 0..40
        mk("cudaLaunchKernel", 10, 10, cat="cuda_runtime"),  # 10..20 (inside aten::mm)
        mk("aten::relu", 100, 10),  # host 100..110
        mk("cudaLaunchKernel", 102, 4, cat="cuda_runtime"),
        kern("ampere_sgemm_128x64_tn", 30, 50),  # device 0: 30..80
        kern("void at::native::vectorized_elementwise_kernel<4>", 110, 10),  # 110..120
        kern("Memcpy HtoD (Pageable -> Device)", 130, 10, stream=8, cat="gpu_memcpy"),
        kern("ampere_sgemm_128x64_tn", 50, 10, device=1),  # device 1: 50..60
    ]
    summary = one(write_trace(tmp_path / "t.json", events))
    dev = summary["device"]
    # Window: first start (aten::mm at 0) to last end (the memcpy at 140): 140 us.
    assert summary["window_s"] == pytest.approx(140e-6)
    assert dev["window_s"] == pytest.approx(140e-6)
    d0, d1 = dev["devices"]
    # Device 0 busy 30..80, 110..120, 130..140 = 70 us: idle 1 - 70/140 = 0.5. Its idle
    # 0..30, 80..110, 120..130 against host busy 0..40 and 100..110: 30 + 10 + 0 = 40 us,
    # a host-overhead share of 40/140.
    assert (d0["device"], d0["events"], d0["streams"]) == ("0", 3, 2)
    assert d0["busy_s"] == pytest.approx(70e-6)
    assert d0["idle_share"] == pytest.approx(0.5)
    assert d0["host_overhead_share"] == pytest.approx(40 / 140)
    # Device 1 busy 50..60: idle 1 - 10/140 = 13/14; idle 0..50 and 60..140 meet host busy
    # for 40 + 10 = 50 us: 50/140.
    assert d1["idle_share"] == pytest.approx(13 / 14)
    assert d1["host_overhead_share"] == pytest.approx(50 / 140)
    # The trace's figures average the devices: (0.5 + 13/14) / 2 = 5/7, (40 + 50) / 2 / 140.
    assert dev["idle_share"] == pytest.approx(5 / 7)
    assert dev["host_overhead_share"] == pytest.approx(45 / 140)
    assert dev["runtime_s"] == pytest.approx(14e-6)
    # Device time basis: gemm 50 + 10, elementwise 10, memcpy 10 as data-movement: 80 us.
    mix = summary["op_mix"]
    assert summary["time_basis"] == "device" and mix["time_s"] == pytest.approx(80e-6)
    assert mix["layer_types"]["gemm"]["share"] == pytest.approx(60 / 80)
    assert mix["layer_types"]["elementwise"]["share"] == pytest.approx(10 / 80)
    assert mix["layer_types"]["data-movement"]["share"] == pytest.approx(10 / 80)
    # The host mix is kept beside it: aten::mm 40 us gemm, aten::relu 10 us elementwise.
    assert summary["host"]["layer_types"]["gemm"]["time_s"] == pytest.approx(40e-6)
    assert summary["host"]["layer_types"]["elementwise"]["time_s"] == pytest.approx(10e-6)


def test_ranks_combine_on_their_own_time_basis(tmp_path):
    host = write_trace(tmp_path / "r0.json", [mk("aten::mm", 0, 100)], distributedInfo={"rank": 0})
    gpu = write_trace(
        tmp_path / "r1.json",
        [mk("aten::mm", 0, 5, pid=2), kern("ampere_sgemm_128x64_tn", 10, 50),
         kern("my_custom_kernel", 60, 50)],
        distributedInfo={"rank": 1, "world_size": 2},
        deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
    )  # fmt: skip
    doc = summarise([host, gpu], LM, clock=FIXED_CLOCK)
    assert [t["rank"] for t in doc["traces"]] == [0, 1]
    assert [t["time_basis"] for t in doc["traces"]] == ["host", "device"]
    assert doc["traces"][1]["devices"] == ["NVIDIA H100 80GB HBM3"]
    combined = doc["combined"]
    # Rank 0's 100 us of host gemm + rank 1's 50 us of gemm kernel and 50 us unmapped kernel.
    assert combined["time_basis"].startswith("mixed")
    assert combined["time_s"] == pytest.approx(200e-6)
    assert combined["layer_types"]["gemm"]["share"] == pytest.approx(0.75)
    assert combined["unmapped"]["share"] == pytest.approx(0.25)
    assert combined["unmapped"]["top"][0]["name"] == "my_custom_kernel"
    assert doc["created_unix_s"] == FIXED_CLOCK()


def test_non_complete_events_are_counted_not_summarised(tmp_path):
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": T0, "args": {}},
        {"ph": "s", "name": "ac2g", "pid": 1, "tid": 1, "ts": T0 + 1, "id": 3},
        {"ph": "i", "name": "Record Window End", "pid": "", "tid": "", "ts": T0 + 10},
        mk("PyTorch Profiler (0)", 0, 1e6, cat="Trace"),  # the profiler's own span
        mk("ProfilerStep#3", 0, 100, cat="user_annotation"),  # a label, not work
        mk("nccl:all_reduce", 10, 30, cat="user_annotation"),  # communication: work
        mk("forward", 0, 100, cat="python_function"),
    ]
    summary = one(write_trace(tmp_path / "t.json", events))
    assert summary["events"]["by_phase"] == {"M": 1, "X": 4, "i": 1, "s": 1}
    assert summary["op_mix"]["layer_types"] == {
        "collective": {"time_s": pytest.approx(30e-6), "share": 1.0}
    }
    assert summary["window_s"] == pytest.approx(30e-6)  # only the work, not the labels
    assert summary["record_shapes"] is False


def test_device_time_lands_on_the_shape_of_the_operator_that_launched_it(tmp_path):
    # aten::linear (100 us) encloses aten::addmm, which calls cudaLaunchKernel (correlation 7);
    # the GEMM kernel of correlation 7 runs 40 us on the device. aten::layer_norm's kernel
    # carries no correlation but the External id (21) of the op inside it: linked that way.
    # A kernel of correlation 9, whose runtime call lies outside any mapped op, links nowhere.
    events = [
        mk("aten::linear", 0, 100, **{"Input Dims": [[8, 16], [32, 16]],
                                      "Input type": ["float", "float"], "External id": 10}),
        mk("aten::addmm", 10, 80, **{"External id": 11}),
        mk("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=7),
        mk("aten::layer_norm", 200, 50, **{"Input Dims": [[8, 32]], "Input type": ["float"],
                                           "External id": 20}),
        mk("aten::native_layer_norm", 205, 40, **{"External id": 21}),
        mk("cudaLaunchKernel", 400, 5, cat="cuda_runtime", correlation=9),
        {**kern("sm90_gemm", 30, 40), "args": {"device": 0, "stream": 7, "correlation": 7}},
        {**kern("layer_norm_kernel", 220, 12), "args": {"device": 0, "stream": 7,
                                                        "External id": 21}},
        {**kern("other", 420, 3), "args": {"device": 0, "stream": 7, "correlation": 9}},
    ]  # fmt: skip
    summary = one(write_trace(tmp_path / "t.json", events))
    (gemm,) = summary["shapes"]["gemm"]["shapes"]
    assert gemm["op"] == "aten::linear" and gemm["dims"] == [[8, 16], [32, 16]]
    assert gemm["device_time_s"] == pytest.approx(40e-6) and gemm["time_s"] == pytest.approx(100e-6)
    (norm,) = summary["shapes"]["norm"]["shapes"]
    assert norm["op"] == "aten::layer_norm" and norm["device_time_s"] == pytest.approx(12e-6)
    assert summary["shapes"]["gemm"]["shaped_device_time_s"] == pytest.approx(40e-6)
