"""A production slice as a user makes one: profile, import, slice; `run --slice` measures it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")


def reviewkit(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "reviewkit", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def sliced(tmp_path_factory):
    """A two-layer MLP profiled with record_shapes, imported and sliced with --cover 1: its
    two nn.Linear calls at (32 x 64) x (256 x 64) and (32 x 256) x (64 x 256), a GELU and a
    softmax over [32, 64]. (folder, the slice document)"""
    tmp_path = tmp_path_factory.mktemp("sliced")
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 64), torch.nn.Softmax(dim=-1))  # fmt: skip
    x = torch.randn(32, 64)
    with torch.no_grad(), torch.profiler.profile(record_shapes=True) as prof:
        for _ in range(20):
            model(x)
    trace = tmp_path / "mlp.json"
    prof.export_chrome_trace(str(trace))
    assert reviewkit("trace", "import", trace, "--out", tmp_path / "sum").returncode == 0
    r = reviewkit("trace", "slice", tmp_path / "sum" / "trace_summary.json", "--cover", "1",
                  "--out", tmp_path / "slice.json", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    return tmp_path, json.loads(r.stdout)


def test_a_profiled_model_becomes_a_slice_that_run_measures(sliced, tmp_path):
    folder, doc = sliced
    ids = {w["id"] for w in doc["workloads"]}
    assert {"gemm.slice-aten-linear.32x64_256x64.fp32",
            "gemm.slice-aten-linear.32x256_64x256.fp32"} <= ids  # fmt: skip
    # cover 1: every reproducible op is in it, 20 calls each
    assert doc["coverage"]["share_of_reproducible"] == pytest.approx(1.0)
    assert all(w["production"]["count"] == 20 for w in doc["workloads"])

    out = tmp_path / "run"
    r = reviewkit("run", "--slice", folder / "slice.json", "--profile", "smoke",
                  "--only", "gemm.*", "--out", out, "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["slice"]["hash"] == doc["hash"]
    measured = {w["id"]: w for w in run["workloads"]}
    assert set(measured) == {i for i in ids if i.startswith("gemm.")}
    w = measured["gemm.slice-aten-linear.32x64_256x64.fp32"]
    assert w["status"] == "ok" and w["flops"] == 2 * 32 * 64 * 256  # 2mkn, by hand
    assert "--slice" in w["reproduce"] and str(folder / "slice.json") in w["reproduce"]

    # production's op mix projected onto the device the run measured: each GEMM shape at its
    # own measured point (distance 0), x its 20 production calls; the GELU and softmax shapes
    # have no measured point of their layer type in this run: not available, said why. A call
    # of ~20 us is mostly fixed cost: its projection adds the layer type's median overhead over
    # both GEMMs, not its own, so it lands within 50% of its measured time, not exactly on it
    r = reviewkit("project", "--from", out, "--trace-summary",
                  folder / "sum" / "trace_summary.json", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    proj = json.loads(r.stdout)
    assert proj["target"]["kind"] == "trace_summary"
    rows = {p["id"]: p for p in proj["workloads"]}
    assert set(rows) == ids
    for wid, m in measured.items():
        t = (m["stats"] or {}).get("p50_s") or sorted(m["samples_s"])[len(m["samples_s"]) // 2]
        assert rows[wid]["count"] == 20 and rows[wid]["label"] == "measured"
        assert rows[wid]["projected_s"] == pytest.approx(t, rel=0.5)
    assert all(rows[i]["label"] == "not available" for i in ids - set(measured))


def test_ab_measures_a_lower_precision_on_productions_own_shapes(sliced, tmp_path):
    # the fp32 slice's GEMMs re-made in bf16 for the candidate: the same shapes, paired by shape
    folder, _ = sliced
    r = reviewkit("ab", "--slice", folder / "slice.json", "--baseline", "dtype=fp32",
                  "--candidate", "dtype=bf16", "--profile", "smoke", "--only", "gemm.*",
                  "--out", tmp_path / "ab", "--json")  # fmt: skip
    assert r.returncode in (0, 1), r.stderr  # 1: a verdict the gate would block, still data
    base = json.loads((tmp_path / "ab" / "baseline" / "run.json").read_text())
    cand = json.loads((tmp_path / "ab" / "candidate" / "run.json").read_text())
    assert sorted(w["id"] for w in cand["workloads"]) == sorted(
        w["id"].replace(".fp32", ".bf16") for w in base["workloads"])  # fmt: skip
    w = next(w for w in cand["workloads"] if "32x64_256x64" in w["id"])
    # bf16: 2 bytes an element, x 32x64 + w 256x64 + out 32x256 = 26,624 elements
    assert w["bytes"] == 2 * 26_624 and w["flops"] == 2 * 32 * 64 * 256
    assert base["slice"]["hash"] == cand["slice"]["hash"]


def _slice_of(prof, tmp_path) -> subprocess.CompletedProcess:
    """`trace slice` of the profile's trace, once imported (which must succeed)."""
    trace = tmp_path / "t.json"
    prof.export_chrome_trace(str(trace))
    assert reviewkit("trace", "import", trace, "--out", tmp_path / "sum").returncode == 0
    return reviewkit("trace", "slice", tmp_path / "sum" / "trace_summary.json", "--out",
                     tmp_path / "s.json")  # fmt: skip


def test_a_trace_without_shapes_cannot_be_sliced(tmp_path):
    with torch.profiler.profile() as prof:  # record_shapes off: no Input Dims
        torch.nn.functional.linear(torch.randn(8, 8), torch.randn(8, 8))
    r = _slice_of(prof, tmp_path)
    assert r.returncode == 2 and "record_shapes=True" in r.stderr
    assert not (tmp_path / "s.json").exists()


def test_a_trace_with_no_reproducible_op_is_refused_with_its_reasons(tmp_path):
    # only a ReLU and a sigmoid: both mapped (elementwise), neither run by a suite kernel
    x = torch.randn(64, 64)
    with torch.profiler.profile(record_shapes=True) as prof:
        for _ in range(5):
            torch.sigmoid(torch.relu(x))
    r = _slice_of(prof, tmp_path)
    assert r.returncode == 2 and "can be reproduced by the suite's kernels" in r.stderr
    assert "ops no suite kernel reproduces" in r.stderr and not (tmp_path / "s.json").exists()
