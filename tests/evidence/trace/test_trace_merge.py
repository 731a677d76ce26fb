"""A set of traces imported in parallel and merged: `reviewkit trace merge` of per-file summaries
equals the import of the whole set, refusals of other layer maps and schemas, a damaged file
among good ones, and msgspec's slices of the event array read as `json` reads them."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from test_trace import (
    GOOD_EVENTS,
    LM,
    SHARED_TRACES,
    assert_one_line_error,
    kern,
    mk,
    run_cli,
    write_trace,
)

from reviewkit.cli.app import TRACE_SUMMARY_FILE
from reviewkit.evidence import files as evidence
from reviewkit.evidence.trace import reader
from reviewkit.evidence.trace.summary import summarise, summarise_one

# Fields that say when and how a summary was made, not what it summarises.
RUN_FIELDS = ("created_unix_s", "import_wall_s", "command", "merged_from")
REAL_NAMES = (
    "a100-alexnet-train.json.gz",
    "cpu-only-rank34.json.gz",
    "gpu-sampled-rank0.json.gz",
    "mi250-rocm-train.json.gz",
    "v100-ns-resolution.json.gz",
)


def content(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in RUN_FIELDS}


def imported(paths, out: Path, *extra) -> tuple[object, dict | None]:
    r = run_cli("trace", "import", *paths, "--out", out, *extra)
    target = out / TRACE_SUMMARY_FILE
    return r, json.loads(target.read_text()) if target.exists() else None


def merged(summaries, out: Path) -> tuple[object, dict | None]:
    r = run_cli("trace", "merge", *summaries, "--out", out)
    target = out / TRACE_SUMMARY_FILE
    return r, json.loads(target.read_text()) if target.exists() else None


def rank_trace(path: Path, rank: int, slow_us: float = 0.0) -> Path:
    """One rank's hand-made GPU trace: two host ops and two kernels per step."""
    events = []
    for i in range(4):
        t = 1000 * i
        events += [mk("aten::mm", t, 30), mk("aten::relu", t + 40, 10)]
        events += [kern("ampere_sgemm_128x64_tn", t + 5, 50 + slow_us)]
        events += [kern("void at::native::vectorized_elementwise_kernel<4>", t + 60, 8)]
    dist = {"rank": rank, "world_size": 4, "backend": "nccl"}
    return write_trace(path, events, distributedInfo=dist)


@pytest.fixture()
def ranks(tmp_path) -> list[Path]:
    return [rank_trace(tmp_path / f"rank{r}.json", r, slow_us=r) for r in range(4)]


# --- merge ------------------------------------------------------------------------------------


def test_real_traces_merged_one_by_one_equal_the_whole_set(tmp_path):
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"{SHARED_TRACES} is absent: the shared real traces are not on this machine")
    paths = [SHARED_TRACES / n for n in REAL_NAMES]
    r, whole = imported(paths, tmp_path / "whole")
    assert r.exit_code == 0, r.output
    parts = []
    for i, p in enumerate(paths):
        r, _ = imported([p], tmp_path / f"part{i}")
        assert r.exit_code == 0, r.output
        parts.append(tmp_path / f"part{i}" / TRACE_SUMMARY_FILE)
    r, doc = merged(parts, tmp_path / "merged")
    assert r.exit_code == 0, r.output
    assert content(doc) == content(whole)
    assert evidence.read(tmp_path / "merged" / TRACE_SUMMARY_FILE, evidence.TRACE).ok
    # Worked out apart from the merge: each trace is its file, the total is the per-file sum.
    assert [t["sha256"] for t in doc["traces"]] == [
        hashlib.sha256(p.read_bytes()).hexdigest() for p in paths
    ]
    alone = [json.loads(p.read_text())["traces"][0]["op_mix"]["time_s"] for p in parts]
    assert doc["combined"]["time_s"] == pytest.approx(sum(alone), rel=1e-12)
    assert [m["traces"] for m in doc["merged_from"]] == [1] * 5
    # Grouped otherwise (2 + 3 traces), the merge is the same summary again.
    r, _ = imported(paths[:2], tmp_path / "g1")
    r, _ = imported(paths[2:], tmp_path / "g2")
    groups = [tmp_path / g / TRACE_SUMMARY_FILE for g in ("g1", "g2")]
    r, doc2 = merged(groups, tmp_path / "merged2")
    assert r.exit_code == 0, r.output
    assert content(doc2) == content(whole)


def test_a_trace_in_two_summaries_counts_once_and_is_said(tmp_path, ranks):
    a, b = tmp_path / "a", tmp_path / "b"
    assert imported(ranks[:3], a)[0].exit_code == 0
    assert imported(ranks[2:], b)[0].exit_code == 0
    r, doc = merged([a / TRACE_SUMMARY_FILE, b / TRACE_SUMMARY_FILE], tmp_path / "m")
    assert r.exit_code == 0, r.output
    assert [t["path"] for t in doc["traces"]] == [f"rank{r}.json" for r in range(4)]
    assert "rank2.json" in r.stderr and "counted once" in r.stderr
    assert str(a / TRACE_SUMMARY_FILE) in r.stderr
    # By hand: per rank 4 steps of a (50 + rank) us GEMM and an 8 us elementwise kernel.
    gemm_s = sum(4 * (50 + rank) for rank in range(4)) * 1e-6
    assert doc["combined"]["layer_types"]["gemm"]["time_s"] == pytest.approx(gemm_s)
    assert doc["combined"]["time_s"] == pytest.approx(gemm_s + 4 * 4 * 8e-6)
    _, whole = imported(ranks, tmp_path / "whole")
    assert content(doc) == content(whole)


def test_merge_refuses_another_layer_map(tmp_path, ranks):
    team = tmp_path / "team.toml"
    team.write_text('schema_version = 1\n[[rules]]\nlayer_type = "norm"\nops = ["x::op"]\n')
    assert imported(ranks[:1], tmp_path / "a")[0].exit_code == 0
    assert imported(ranks[1:2], tmp_path / "b", "--layer-map", team)[0].exit_code == 0
    second = tmp_path / "b" / TRACE_SUMMARY_FILE
    r, doc = merged([tmp_path / "a" / TRACE_SUMMARY_FILE, second], tmp_path / "m")
    assert_one_line_error(r, str(second), "`layer_map`", "--layer-map")
    assert doc is None


def test_merge_refuses_another_schema_version(tmp_path, ranks, monkeypatch):
    assert imported(ranks[:1], tmp_path / "a")[0].exit_code == 0
    assert imported(ranks[1:2], tmp_path / "b")[0].exit_code == 0
    second = tmp_path / "b" / TRACE_SUMMARY_FILE
    doc = json.loads(second.read_text())
    second.write_text(json.dumps({**doc, "schema_version": 2}))
    # A reviewkit that reads schemas 1 and 2 still refuses to add one to the other.
    monkeypatch.setitem(evidence.SCHEMA_VERSIONS, evidence.TRACE, 2)
    r, out = merged([tmp_path / "a" / TRACE_SUMMARY_FILE, second], tmp_path / "m")
    assert_one_line_error(r, str(second), "`schema_version` 2", "1")
    assert out is None


def test_merge_refuses_a_file_that_is_not_a_summary(tmp_path, ranks):
    assert imported(ranks[:1], tmp_path / "a")[0].exit_code == 0
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"kind": "reviewkit.quality", "schema_version": 2}')
    r, out = merged([tmp_path / "a" / TRACE_SUMMARY_FILE, bogus], tmp_path / "m")
    assert_one_line_error(r, str(bogus))
    assert out is None


# --- a damaged file in a set ------------------------------------------------------------------


def truncated_gzip(path: Path) -> Path:
    events = [mk(f"aten::op{i}", 10 * i + 1, 5, **{"Ev Idx": i}) for i in range(2000)]
    data = gzip.compress(json.dumps({"traceEvents": events}).encode())
    path.write_bytes(data[: len(data) // 2])
    return path


def test_a_damaged_file_is_named_and_the_rest_summarised(tmp_path, ranks):
    bad = truncated_gzip(tmp_path / "rank9.json.gz")
    r, doc = imported([ranks[0], bad, ranks[1]], tmp_path / "out")
    assert r.exit_code == 1, r.output
    assert [t["path"] for t in doc["traces"]] == ["rank0.json", "rank1.json"]
    assert len(doc["failed_traces"]) == 1
    failure = doc["failed_traces"][0]
    assert failure["path"] == "rank9.json.gz"
    assert failure["reason"].startswith(f"{bad}: ")
    assert "gzip stream is truncated" in failure["reason"]
    assert f"{bad}: " in r.stderr and "1 of 3 traces could not be summarised" in r.stderr
    # The rest is exactly what importing the good files alone gives.
    _, good = imported([ranks[0], ranks[1]], tmp_path / "good")
    assert "failed_traces" not in good
    assert content({k: v for k, v in doc.items() if k != "failed_traces"}) == content(good)
    # A merge carries the failure on, and says it again.
    r, m = merged([tmp_path / "out" / TRACE_SUMMARY_FILE], tmp_path / "m")
    assert r.exit_code == 1 and m["failed_traces"] == doc["failed_traces"]


def test_every_file_damaged_writes_nothing(tmp_path):
    bad1 = truncated_gzip(tmp_path / "a.json.gz")
    bad2 = tmp_path / "b.json"
    bad2.write_text('{"traceEvents": [{"ph": "X", "name": ')
    r, doc = imported([bad1, bad2], tmp_path / "out")
    assert_one_line_error(r, "none of the 2 traces", str(bad1), str(bad2), "truncated")
    assert doc is None


# --- parallel import --------------------------------------------------------------------------


def test_parallel_import_equals_one_at_a_time_in_input_order(ranks):
    order = [ranks[2], ranks[0], ranks[3], ranks[1]]
    one_by_one = summarise(order, LM, workers=1)
    parallel = summarise(order, LM, workers=2)
    assert [t["rank"] for t in parallel["traces"]] == [2, 0, 3, 1]
    assert content(parallel) == content(one_by_one)


def test_parallel_progress_reaches_the_set_size(ranks):
    calls = []
    summarise(ranks, LM, on_progress=lambda *a: calls.append(a), workers=2)
    total = sum(p.stat().st_size for p in ranks)
    assert calls and calls[-1][1:] == (total, total)
    assert all(done <= size == total for _, done, size in calls)


# --- msgspec's slices of the event array ------------------------------------------------------


def awkward_trace(path: Path) -> tuple[Path, int]:
    """Enough events for several 1 MiB reads, some that a compiled parser reads otherwise than
    `json` (a shape dimension past 2**64, a name with the event separator in it) or refuses
    (a lone surrogate): the slices holding them must fall back to `json`."""
    long = "x" * 300  # ~400 characters an event: ~9,000 events are ~3.6 MB of text
    events = [mk(f"aten::op{i % 7}", 10 * i + 1, 5, note=long) for i in range(9000)]
    events[3000] = mk("aten::mm", 30001, 4, **{"Input Dims": [[2**70, 3]]})
    events[5000] = mk("odd}, {name", 50001, 4)
    events[7000] = mk("aten::lone", 70001, 4, tag="\ud800")
    path.write_text(json.dumps({"traceEvents": events}))
    return path, len(events)


def test_slices_read_as_json_reads_them(tmp_path, monkeypatch):
    path, n = awkward_trace(tmp_path / "t.json")
    assert path.stat().st_size > 3 * reader.READ_BYTES
    batched = summarise_one(path, LM)
    monkeypatch.setattr(reader, "_BATCH_DECODE", None)
    per_event = summarise_one(path, LM)
    assert batched == per_event
    assert batched["events"]["total"] == n
    ops = {o["name"]: o["count"] for o in batched["ops"]}
    assert ops["odd}, {name"] == 1 and ops["aten::lone"] == 1
    replaced = (3000, 5000, 7000)
    assert ops["aten::op0"] == len([i for i in range(n) if i % 7 == 0 and i not in replaced])
    shapes = [s["dims"] for s in batched["shapes"].get("gemm", {}).get("shapes", [])]
    assert [[2**70, 3]] in shapes  # the exact integer, not a float near it


def test_a_damaged_slice_names_the_event_as_before(tmp_path):
    path, _ = awkward_trace(tmp_path / "t.json")
    text = path.read_text()
    at = text.index('"aten::op2"', 2 * reader.READ_BYTES)
    path.write_text(text[:at] + "NOT JSON" + text[at + len('"aten::op2"'):])
    with pytest.raises(reader.TraceFormatError, match=r"event #\d+ is not valid JSON"):
        summarise_one(path, LM)


def test_good_events_unchanged_by_the_batch_path(tmp_path, monkeypatch):
    path = write_trace(tmp_path / "t.json", GOOD_EVENTS)
    batched = summarise_one(path, LM)
    monkeypatch.setattr(reader, "_BATCH_DECODE", None)
    assert summarise_one(path, LM) == batched


def test_the_same_bytes_under_two_names_count_once_in_an_import_as_in_a_merge(tmp_path, ranks):
    copy = tmp_path / "copy-of-rank1.json"
    copy.write_bytes(ranks[1].read_bytes())
    r, doc = imported([ranks[0], ranks[1], copy], tmp_path / "whole")
    assert r.exit_code == 0, r.output
    assert [t["path"] for t in doc["traces"]] == ["rank0.json", "rank1.json"]
    assert f"{copy}: the same bytes" in r.stderr and "counted once" in r.stderr
    parts = []
    for p in (ranks[0], ranks[1], copy):
        assert imported([p], tmp_path / p.stem)[0].exit_code == 0
        parts.append(tmp_path / p.stem / TRACE_SUMMARY_FILE)
    r, merged_doc = merged(parts, tmp_path / "m")
    assert r.exit_code == 0 and "counted once" in r.stderr
    assert content(merged_doc) == content(doc)
