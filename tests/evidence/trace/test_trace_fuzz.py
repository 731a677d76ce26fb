"""Untrusted traces and layer maps: whatever the events or the rules hold, the importer gives a
JSON-safe summary or an InputError naming the file, never another exception (issue 18).
REVIEWKIT_FUZZ_EXAMPLES=N runs a long fuzz."""

import json
import os

import pytest
import tomlkit
from fuzzing import leaves, replaced
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reviewkit.common.errors import InputError
from reviewkit.common.tomlfile import read_toml
from reviewkit.evidence.trace.layermap import DEFAULT_LAYER_MAP, load_layer_map
from reviewkit.evidence.trace.summary import summarise

pytestmark = pytest.mark.fuzz  # `pytest -m fuzz` runs these alone (a long run: see above)

LAYER_MAP = load_layer_map()
EXAMPLES = int(os.environ.get("REVIEWKIT_FUZZ_EXAMPLES", "300"))

# Values of every JSON type, including the ones a profiler never writes in that field.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and infinities too: Python's json writes and reads them
    st.text(max_size=8),
    st.sampled_from(["<script>alert(1)</script>", "[red]x[/] [/]", "\u202e", "a\x00b"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
times = st.one_of(st.integers(0, 10**16), st.floats(0, 1e16), values)
names = st.one_of(
    st.sampled_from(["aten::linear", "aten::mm", "nccl:all_reduce", "sgemm_kernel", "x"]),
    values,
)
categories = st.sampled_from(
    ["cpu_op", "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation",
     "python_function", None, 3]
)  # fmt: skip
args = st.one_of(
    values,
    st.fixed_dictionaries(
        {},
        optional={
            "Input Dims": values,
            "Input type": values,
            "device": values,
            "stream": values,
            "External id": values,
        },
    ),
)
good_events = st.fixed_dictionaries(
    {
        "ph": st.just("X"),
        "cat": categories,
        "name": names,
        "ts": times,
        "dur": times,
        "pid": st.one_of(st.integers(0, 3), values),
        "tid": st.one_of(st.integers(0, 3), values),
        "args": args,
    }
)
# Some events lose fields or carry odd ones: a missing field is data quality, not a crash.
events = st.one_of(
    good_events,
    st.builds(lambda e, k: {x: v for x, v in e.items() if x != k}, good_events,
              st.sampled_from(["name", "ts", "dur", "pid", "tid", "args", "ph"])),
)  # fmt: skip
documents = st.fixed_dictionaries(
    {"traceEvents": st.lists(st.one_of(events, values), max_size=12)},
    optional={
        "distributedInfo": st.one_of(values, st.fixed_dictionaries({"rank": values})),
        "deviceProperties": st.one_of(values, st.lists(st.fixed_dictionaries({"name": values}))),
        "displayTimeUnit": values,
        "baseTimeNanoseconds": values,
    },
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # a fixed seed: the same examples on every run
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(doc=documents)
def test_any_trace_gives_a_json_safe_summary_or_an_input_error(tmp_path, doc):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    try:
        summary = summarise([path], LAYER_MAP)
    except InputError as exc:
        assert str(path) in str(exc)
        return
    json.dumps(summary, allow_nan=False)  # what write_json_atomic will ask of it
    for t in summary["traces"]:
        mix = t["op_mix"]
        shares = sum(v["share"] for v in mix["layer_types"].values()) + mix["unmapped"]["share"]
        assert mix["time_s"] == 0 or abs(shares - 1) < 1e-9


VALID = json.dumps(
    {
        "schemaVersion": 1,
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1,
             "ts": 100, "dur": 50, "args": {"Input Dims": [[4, 8], [16, 8]]}},
            {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 120,
             "dur": 20, "args": {"device": 0, "stream": 7}},
        ],
        "traceName": "t",
    }
).encode()  # fmt: skip


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(VALID)), st.integers(0, 3), st.binary(max_size=3)),
        min_size=1,
        max_size=4,
    ),
    compress=st.booleans(),
)
# Found by this test: a file ending inside a multi-byte UTF-8 character.
@example(edits=[(len(VALID), 0, b"\xc2")], compress=False)
def test_damaged_bytes_give_an_input_error_or_a_summary(tmp_path, edits, compress):
    import gzip

    data = bytearray(VALID)
    for at, cut, insert in edits:  # delete `cut` bytes at `at`, insert `insert` there
        data[at : at + cut] = insert
    blob = gzip.compress(bytes(data)) if compress else bytes(data)
    path = tmp_path / ("trace.json.gz" if compress else "trace.json")
    path.write_bytes(blob)
    try:
        summary = summarise([path], LAYER_MAP)
    except InputError as exc:
        assert str(path) in str(exc)
        return
    json.dumps(summary, allow_nan=False)


DEFAULT_MAP = read_toml(DEFAULT_LAYER_MAP)
MAP_LEAVES = sorted(leaves(DEFAULT_MAP), key=str)


@settings(
    max_examples=EXAMPLES // 2,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    path=st.sampled_from(MAP_LEAVES),
    value=st.one_of(
        scalars,
        st.sampled_from(["*", "[", "[!]", "**" * 500 + "x", "(?P<x>", "gemm", "model", ""]),
        st.lists(st.sampled_from(["*", "[", "aten::mm", 1, None]), max_size=3),
    ),
)
def test_a_hostile_layer_map_gives_a_summary_or_an_error_naming_it(tmp_path, path, value):
    """One value of the default layer map, as a team file that replaces it, changed."""
    doc = {**replaced(DEFAULT_MAP, path, value), "replace_default": True}
    try:
        text = tomlkit.dumps(doc)
    except Exception:  # a value TOML cannot hold (None) is not a file anyone can send
        return
    team = tmp_path / "team.toml"
    team.write_text(text, encoding="utf-8")
    trace = tmp_path / "trace.json"
    trace.write_bytes(VALID)
    try:
        mapping = load_layer_map([team])
    except InputError as exc:
        message = str(exc)
        assert message.startswith(str(team)) and "\n" not in message, message[:300]
        assert len(message) < 2_000, message[:300]
        return
    json.dumps(summarise([trace], mapping), allow_nan=False)
