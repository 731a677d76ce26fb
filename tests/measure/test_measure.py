"""The measuring stage on the real CPU: failures as data, budgets, interruption, device errors."""

import platform
import re

import pytest

torch = pytest.importorskip("torch")

from reviewkit.common.errors import DeviceUnavailableError, UsageError  # noqa: E402
from reviewkit.measure import calibration  # noqa: E402
from reviewkit.measure import runner as measure  # noqa: E402
from reviewkit.suite import kernels  # noqa: E402
from reviewkit.suite import workloads as suite  # noqa: E402
from reviewkit.suite.profiles import suite_profile  # noqa: E402


def test_smoke_run_measures_every_workload(smoke_run):
    run, _ = smoke_run
    assert run.complete
    specs = suite.workloads("smoke", ["fp32", "bf16"])
    assert [w.id for w in run.workloads] == [s.id for s in specs]
    for w in run.workloads:
        assert w.status == "ok", (w.id, w.reason)
        assert len(w.samples_s) >= 1 and all(s > 0 for s in w.samples_s)
        d = w.decomposition
        o = w.overhead
        if o["available"]:  # measured by a floor call: the five fractions sum to 1
            assert o["method"] == "floor-call" and o["ops"]["match"]
            assert (d.compute_fraction + d.memory_stall_fraction + d.overhead_fraction
                    + d.inefficiency_fraction) == pytest.approx(1)  # fmt: skip
        else:  # refused (another kernel path) or failed: said why, never guessed
            assert o["reason"] and d.overhead_fraction is None
        assert w.bottleneck in ("compute-bound", "memory-bound", "overhead-bound",
                                "unclassified")  # fmt: skip
        assert w.stats.p50_s <= w.stats.p99_s <= w.stats.max_s
        assert w.reproduce.endswith(f"--only '{w.id}'")
    for dtype in ("fp32", "bf16"):
        c = run.ceilings["compute"][dtype]
        assert c["source"] == "measured" and c["measured"] > 0
        if c.get("raised_by"):  # a workload beat the calibrated peak (a busy calibration): the
            # peak is that workload's median rate, the calibrated one kept beside it
            w = run.workload_by_id[c["raised_by"]]
            assert c["calibrated_peak"] == c["measured"] < c["peak"]
            assert c["peak"] == pytest.approx(w.flops / w.stats.p50_s)
        else:
            assert c["peak"] == c["measured"]
    assert run.ceilings["bandwidth"]["peak"] > 0
    shares = sum(a.time_share for a in run.layer_types.values())
    assert shares == pytest.approx(1)
    # most floors are measured, and the run says where its time went
    measured = [w for w in run.workloads if w.overhead["available"]]
    assert len(measured) >= 0.8 * len(run.workloads)
    assert set(run.phases_s) == {"ceilings", "workloads", "overhead", "device_time"}
    assert run.overhead_probe["median_s"] > 0


def test_environment_and_knobs_recorded(smoke_run):
    run, _ = smoke_run
    env, knobs = run.environment, run.knobs
    assert env["torch_version"] == torch.__version__
    assert env["cpu_logical_cores"] >= 1 and env["os"]
    # what the run did with glibc's heap while it measured, or why it left it (measure/allocator)
    libc, version = platform.libc_ver()
    expected = f"glibc {version}" if libc == "glibc" else (libc or "an unknown C library")
    assert env["cpu_allocator"].startswith(expected)
    assert knobs["threads"] == torch.get_num_threads()
    assert knobs["dtypes"] == ["fp32", "bf16"]
    assert knobs["compile_mode"] == "eager" and knobs["device"] == "cpu"
    assert run.suite == suite.suite_identity().to_json()


def _one_spec():
    return suite.workloads("smoke", ["fp32"])[0]


CEILINGS = {
    "compute": {"fp32": {"measured": 1e11, "peak": 1e11}},
    "bandwidth": {"measured": 1e10, "peak": 1e10},
}


@pytest.mark.parametrize(
    "exc,status",
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "out-of-memory"),
        (NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Half'"), "unsupported"),
        (RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'"), "unsupported"),
        (RuntimeError("something else broke"), "error"),
    ],
)
def test_failures_are_recorded_not_raised(monkeypatch, exc, status):
    def broken(spec, device):
        raise exc

    monkeypatch.setattr(kernels, "build", broken)
    rec = measure.measure_workload(
        _one_spec(), torch.device("cpu"), suite_profile("smoke").sampling, CEILINGS, "cmd"
    )
    assert rec["status"] == status
    assert rec["reason"].startswith(type(exc).__name__)
    assert rec["samples_s"] == []


def test_over_budget_workload_is_not_run(monkeypatch):
    # 1e9 FLOP at a measured 1e9 FLOP/s: 1 s per call, 2 calls against a 0.5 s budget.
    spec = _one_spec()
    monkeypatch.setattr(kernels, "build", lambda *a: pytest.fail("must not build"))
    slow = {"compute": {"fp32": {"measured": spec.flops / 1.0}}, "bandwidth": {"measured": 1e12}}
    smoke = suite_profile("smoke").sampling
    rec = measure.measure_workload(spec, torch.device("cpu"), smoke, slow, "c")
    assert rec["status"] == "over-budget"
    assert "at least 1 s" in rec["reason"] and "0.5 s budget" in rec["reason"]


def test_ctrl_c_keeps_what_was_measured(monkeypatch):
    real = measure.measure_workload
    calls = []

    def interrupted(spec, *args, **kwargs):
        calls.append(spec.id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(measure, "measure_workload", interrupted)
    request = measure.RunRequest(profile="smoke", dtypes=("fp32",), only="norm.*,gemm.*")
    doc = measure.run(request)
    assert not doc["complete"] and "Ctrl-C" in doc["interrupted"]
    # The first round's random order reached two workloads: they keep their one round.
    status = {w["id"]: w["status"] for w in doc["workloads"]}
    assert [status[i] for i in calls[:2]] == ["ok", "ok"]
    assert {s for i, s in status.items() if i not in calls[:2]} == {"not-run"}
    assert all(len(w["round_sizes"]) == 1 for w in doc["workloads"] if w["id"] in calls[:2])


def test_unknown_device_names_the_choices():
    with pytest.raises(UsageError, match="cpu, cuda, mps, xpu"):
        measure.resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_absent_cuda_is_a_clear_error():
    with pytest.raises(DeviceUnavailableError, match="no cuda device is available"):
        measure.resolve_device("cuda")


def test_calibration_gives_real_rates_per_dtype_and_level():
    caches = {"L1d": 32 << 10, "L2": 1 << 20, "L3": 8 << 20}
    doc = calibration.calibrate(torch.device("cpu"), ["fp32"], "smoke", caches)
    fp32 = doc["compute"]["fp32"]
    # torch.mm fp32 on any CPU that runs the tests: between 1 GFLOP/s and 100 TFLOP/s.
    assert 1e9 < fp32["peak"] < 1e14
    assert fp32["low"] <= fp32["peak"] <= fp32["high"] and len(fp32["trials"]) == 3
    # the method names the winning config: a GEMM size, or (at smoke's small sizes on a busy
    # host, seen in CI) one of the 3x3 convolutions screened beside them
    assert re.search(r"best at (n=\d+|conv3x3 c=\d+ \d+x\d+)", fp32["measured_method"])
    levels = doc["memory"]
    assert [lv["level"] for lv in levels] == ["l1", "l2", "llc", "dram"]
    assert [lv["capacity_bytes"] for lv in levels] == [32 << 10, 1 << 20, 8 << 20, None]
    # A cache is never slower than what backs it (raised where a stream did not show it).
    peaks = [lv["peak"] for lv in levels]
    assert peaks == sorted(peaks, reverse=True)
    # Any memory system of the last 20 years: between 1 GB/s and 10 TB/s.
    assert all(1e9 < p < 1e13 for p in peaks)
    assert doc["bandwidth"]["peak"] == levels[-1]["peak"] and doc["bandwidth"]["level"] == "dram"


def test_run_holds_its_knobs_for_the_whole_run_and_says_where_one_does_not_apply():
    before = torch.get_float32_matmul_precision()
    request = measure.RunRequest(
        profile="smoke", dtypes=("fp32",), only="norm.bert*,conv.*", rounds=1,
        settings={"float32_matmul_precision": "high", "memory_format": "channels_last"},
    )  # fmt: skip
    doc = measure.run(request)
    assert doc["complete"]
    # read back from torch while the mapping held, and restored after it
    assert doc["knobs"]["float32_matmul_precision"] == "high"
    assert doc["knobs"]["memory_format"] == "channels_last"
    assert torch.get_float32_matmul_precision() == before
    # the ceilings were taken at the run's own precision (a device profile is keyed by it)
    assert doc["ceilings"]["profile"]["settings"]["float32_matmul_precision"] == "high"
    by_kernel = {w["kernel"]: w for w in doc["workloads"]}
    norm, conv = by_kernel["layer_norm"], by_kernel["conv2d"]
    assert set(norm["knobs_not_applicable"]) == {"float32_matmul_precision", "memory_format"}
    assert "knobs_not_applicable" not in conv  # both knobs change how a convolution runs
    assert "--knob 'float32_matmul_precision=high,memory_format=channels_last'" in conv["reproduce"]
    assert all(w["status"] == "ok" for w in doc["workloads"])
