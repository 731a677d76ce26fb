"""`reviewkit trace diff` on summaries the real importer wrote from hand-made traces: an injected
slowdown ranks first, new and vanished ops against truncated lists, device shares, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_trace import FIXED_CLOCK, LM, assert_one_line_error, kern, mk, run_cli, write_trace

from reviewkit.common.errors import InputError
from reviewkit.evidence.trace import diff as tdiff
from reviewkit.evidence.trace.summary import summarise

SAMPLE = Path(__file__).parents[3] / "samples" / "trace-gpu-sampled-rank0" / "trace_summary.json"
GEMM = "ampere_sgemm_128x64_tn"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4>"
SOFTMAX = "void at::native::softmax_warp_forward<float>"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"
STEPS = 5
STEP_US = 400


def gpu_events(slow: str | None = None, jitter_us: float = 0.0, drop=(), add=()) -> list:
    """STEPS steps of host ops and their kernels; `slow` names the kernel whose duration is
    doubled (the injected slowdown), `jitter_us` nudges every other kernel (noise)."""
    events = []
    for i in range(STEPS):
        t = i * STEP_US
        kernels = [(GEMM, 20, 60), (ELEMENTWISE, 90, 20), (SOFTMAX, 120, 15), (MEMCPY, 150, 10)]
        kernels += [(name, 170, 12) for name in add]
        events += [mk("aten::mm", t, 15), mk("aten::relu", t + 30, 10)]
        events += [mk("cudaLaunchKernel", t + 5, 5, cat="cuda_runtime")]
        for name, at, dur in kernels:
            if name in drop:
                continue
            dur = 2 * dur if name == slow else dur + (jitter_us if i % 2 else -jitter_us / 2)
            cat = "gpu_memcpy" if "Memcpy" in name else "kernel"
            events.append(kern(name, t + at, dur, cat=cat))
    return events


def summary_file(folder: Path, name: str, *traces: list, edit=None) -> Path:
    """The importer's summary of the traces (one per rank), optionally edited, as a file."""
    paths = [
        write_trace(folder / f"{name}-r{i}.json", ev, distributedInfo={"rank": i})
        for i, ev in enumerate(traces)
    ]
    doc = summarise(paths, LM, clock=FIXED_CLOCK)
    if edit is not None:
        edit(doc)
    out = folder / f"{name}.json"
    out.write_text(json.dumps(doc))
    return out


def rows(d: dict, table: str = "ops") -> dict:
    return {r["key"]: r for r in d[table]}


def test_injected_slowdown_ranks_first_and_explains_the_change(tmp_path):
    base = summary_file(tmp_path, "base", gpu_events())
    cand = summary_file(tmp_path, "cand", gpu_events(slow=ELEMENTWISE, jitter_us=1.0))
    d = tdiff.diff(base, cand).to_json(0.0)
    assert d["kind"] == "reviewkit.trace-diff" and d["schema_version"] == 1
    assert d["time_basis"] == "device" and d["op_list"] == "kernels"
    top = d["ops"][0]
    assert top["key"] == ELEMENTWISE and top["status"] == "both"
    assert top["delta_s"] == pytest.approx(STEPS * 20e-6)
    assert top["share_of_change"] >= 0.8
    assert (top["base_count"], top["cand_count"]) == (STEPS, STEPS)
    assert d["layer_types"][0]["key"] == "elementwise"
    # The layer-type rows (unmapped among them) add up to the total change, and so do the op
    # rows when both kernel lists are complete.
    assert sum(r["delta_s"] for r in d["layer_types"]) == pytest.approx(d["delta_s"])
    assert sum(r["delta_s"] for r in d["ops"]) == pytest.approx(d["delta_s"])
    assert d["delta_s"] == pytest.approx(d["cand_time_s"] - d["base_time_s"])
    assert any("keyed by name" in n for n in d["notes"])


def test_device_shares_before_and_after(tmp_path):
    base = summary_file(tmp_path, "base", gpu_events())
    cand = summary_file(tmp_path, "cand", gpu_events(slow=GEMM))
    d = tdiff.diff(base, cand).to_json(0.0)
    shares = {s["name"]: s for s in d["device_shares"]}
    for name, path in (("base", base), ("cand", cand)):
        dev = json.loads(path.read_text())["traces"][0]["device"]
        assert shares["idle_share"][name] == pytest.approx(dev["idle_share"])
        assert shares["host_overhead_share"][name] == pytest.approx(dev["host_overhead_share"])
    # A longer GEMM keeps the device busy longer: less idle.
    assert shares["idle_share"]["delta"] < 0


def test_new_and_vanished_ops_when_lists_are_complete(tmp_path):
    base = summary_file(tmp_path, "base", gpu_events())
    cand = summary_file(tmp_path, "cand", gpu_events(drop=(SOFTMAX,), add=("my_new_kernel",)))
    r = rows(tdiff.diff(base, cand).to_json(0.0))
    assert r["my_new_kernel"]["status"] == "new"
    assert r["my_new_kernel"]["base_time_s"] == 0 and r["my_new_kernel"]["base_count"] == 0
    assert r["my_new_kernel"]["delta_s"] == pytest.approx(STEPS * 12e-6)
    assert r[SOFTMAX]["status"] == "vanished" and r[SOFTMAX]["cand_count"] == 0
    assert r[SOFTMAX]["delta_s"] == pytest.approx(-STEPS * 15e-6)


def _truncate(name):
    """Drop `name` from the kernel list, as the importer's top-N cut would, keeping listed_of."""

    def edit(doc):
        t = doc["traces"][0]
        t["kernels"] = [k for k in t["kernels"] if k["name"] != name]

    return edit


def test_an_op_below_a_truncated_list_is_not_listed_not_new(tmp_path):
    # Base's list lost MEMCPY to the cut: in the candidate it is "not listed in base", not new.
    base = summary_file(tmp_path, "base", gpu_events(), edit=_truncate(MEMCPY))
    cand = summary_file(tmp_path, "cand", gpu_events(drop=(SOFTMAX,)))
    d = tdiff.diff(base, cand).to_json(0.0)
    assert d["ops_list_complete"] == {"base": False, "cand": True}
    r = rows(d)
    assert r[MEMCPY]["status"] == "not listed in base"
    assert r[MEMCPY]["base_time_s"] is None and r[MEMCPY]["delta_s"] is None
    assert r[MEMCPY]["share_of_change"] is None
    assert r[SOFTMAX]["status"] == "vanished"  # the candidate's list is complete
    assert d["ops"][-1]["key"] == MEMCPY  # unknown change ranks after every known one
    # Layer-type counts need complete lists on both sides.
    assert all(lt["base_count"] is None for lt in d["layer_types"])
    # And the other way round: candidate truncated, an op gone from its list is not vanished.
    cand2 = summary_file(tmp_path, "cand2", gpu_events(), edit=_truncate(SOFTMAX))
    r2 = rows(tdiff.diff(summary_file(tmp_path, "b2", gpu_events()), cand2).to_json(0.0))
    assert r2[SOFTMAX]["status"] == "not listed in candidate" and r2[SOFTMAX]["delta_s"] is None


def test_host_basis_when_one_side_has_no_device_time(tmp_path):
    cpu = [mk("aten::mm", i * 100, 40) for i in range(4)] + [mk("aten::relu", 50, 10)]
    base = summary_file(tmp_path, "base", cpu)
    cand = summary_file(tmp_path, "cand", gpu_events())
    d = tdiff.diff(base, cand).to_json(0.0)
    assert d["time_basis"] == "host" and d["op_list"] == "ops"
    assert "host" in d["basis_reason"]
    assert rows(d)["aten::mm"]["base_count"] == 4
    shares = {s["name"]: s for s in d["device_shares"]}
    assert shares["idle_share"]["base"] is None and shares["idle_share"]["delta"] is None


def test_refuses_summaries_of_different_ranks_or_layer_maps(tmp_path):
    one_rank = summary_file(tmp_path, "one", gpu_events())
    two_ranks = summary_file(tmp_path, "two", gpu_events(), gpu_events())
    with pytest.raises(InputError, match=r"two\.json.*2 trace.*same number"):
        tdiff.diff(one_rank, two_ranks)

    def other_map(doc):
        doc["layer_map"][0]["sha256"] = "0" * 64

    other = summary_file(tmp_path, "other", gpu_events(), edit=other_map)
    with pytest.raises(InputError, match=r"other\.json.*layer_map.*same --layer-map"):
        tdiff.diff(one_rank, other)


def test_bad_input_names_the_file_and_key(tmp_path):
    good = summary_file(tmp_path, "good", gpu_events())
    with pytest.raises(InputError, match=r"missing\.json: no such file.*trace import"):
        tdiff.diff(good, tmp_path / "missing.json")
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"kind": "reviewkit.sweep", "schema_version": 1}))
    with pytest.raises(InputError, match=r"sweep\.json: a 'reviewkit.sweep' document"):
        tdiff.diff(sweep, good)
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    with pytest.raises(InputError, match=r"junk\.json: not readable as JSON"):
        tdiff.diff(junk, good)

    def no_kernels(doc):
        del doc["traces"][0]["kernels"]

    broken = summary_file(tmp_path, "broken", gpu_events(), edit=no_kernels)
    with pytest.raises(InputError, match=r"broken\.json: `traces\[0\]\.kernels` must be"):
        tdiff.diff(good, broken)

    def text_time(doc):
        doc["traces"][0]["op_mix"]["layer_types"]["gemm"]["time_s"] = "1 ms"

    texty = summary_file(tmp_path, "texty", gpu_events(), edit=text_time)
    with pytest.raises(InputError, match=r"texty\.json: `traces\[0\]\.op_mix\.layer_types\.gemm"):
        tdiff.diff(texty, good)
    result = run_cli("trace", "diff", good, tmp_path / "missing.json")
    assert_one_line_error(result, "missing.json", "no such file")


def test_cli_json_out_and_an_unchanged_sample(tmp_path):
    out = tmp_path / "diff.json"
    result = run_cli("trace", "diff", SAMPLE, SAMPLE, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert json.loads(out.read_text()) == printed
    assert printed["delta_s"] == 0 and all(r["delta_s"] == 0 for r in printed["ops"])
    assert all(r["share_of_change"] is None for r in printed["layer_types"])
    assert {s["delta"] for s in printed["device_shares"]} == {0}
    text = run_cli("trace", "diff", SAMPLE, SAMPLE)
    assert text.exit_code == 0, text.output
    assert "+0.000 ms" in text.stdout and "By layer type" in text.stdout


def test_a_cited_diff_reads_into_its_record_and_a_bad_key_is_named(tmp_path):
    from reviewkit.evidence.files import TRACE_DIFF, read_cited

    base = summary_file(tmp_path, "base", gpu_events())
    cand = summary_file(tmp_path, "cand", gpu_events(slow=ELEMENTWISE))
    doc = tdiff.diff(base, cand).to_json(FIXED_CLOCK())
    good, bad, summary = tmp_path / "good.json", tmp_path / "bad.json", base
    good.write_text(json.dumps(doc))
    doc["ops"][0]["delta_s"] = "slower"
    bad.write_text(json.dumps(doc))
    (record,), not_used = read_cited([good, bad, summary], TRACE_DIFF, tdiff.read_trace_diff)
    assert record.ops[0].key == ELEMENTWISE
    assert record.ops[0].share_of_change == pytest.approx(1.0)
    assert record.delta_s == pytest.approx(STEPS * 20e-6) and record.time_basis == "device"
    assert len(record.ops) <= tdiff.CITED_ROWS
    assert dict((n, (b, c)) for n, b, c in record.shares).keys() == {
        "idle_share", "host_overhead_share"}  # fmt: skip
    reasons = dict(not_used)
    assert reasons[bad] == ("`ops[0].delta_s` must be a finite number or null; re-run "
                            "`reviewkit trace diff`")  # fmt: skip
    assert "not a `reviewkit trace diff` result" in reasons[summary]


def cpu_linears(slow_small: bool = False) -> list:
    """STEPS steps of two aten::linear calls of one op name and two shapes: 8 x 16 by 32 x 16
    (50 us, 100 us when `slow_small`) and 64 x 16 by 32 x 16 (100 us)."""
    events = []
    for i in range(STEPS):
        t = i * STEP_US
        small = {"Input Dims": [[8, 16], [32, 16]], "Input type": ["float", "float"]}
        large = {"Input Dims": [[64, 16], [32, 16]], "Input type": ["float", "float"]}
        events += [mk("aten::linear", t, 100 if slow_small else 50, **small),
                   mk("aten::linear", t + 150, 100, **large)]  # fmt: skip
    return events


def test_a_slowdown_at_one_shape_ranks_that_shape_first(tmp_path):
    base = summary_file(tmp_path, "base", cpu_linears())
    cand = summary_file(tmp_path, "cand", cpu_linears(slow_small=True))
    d = tdiff.diff(base, cand).to_json(0.0)
    assert d["time_basis"] == "host" and d["shape_key"] == "op and Input Dims"
    # by name the two shapes are one row; by shape the 8 x 16 call carries all of the change:
    # STEPS x 50 us = 250 us, 100% of it, and the 64 x 16 call none
    top, other = d["shapes"][0], d["shapes"][1]
    assert top["key"] == "aten::linear [8x16 32x16] float"
    assert top["delta_s"] == pytest.approx(STEPS * 50e-6) and top["share_of_change"] >= 0.8
    assert other["key"] == "aten::linear [64x16 32x16] float" and other["delta_s"] == 0
    assert (top["base_count"], top["cand_count"]) == (STEPS, STEPS)
