"""A serving cell that does not fit memory is skipped with its reason; a long run asks first."""

import pytest
import torch

from reviewkit.common.errors import UsageError
from reviewkit.measure import memory_fit, projection, runner
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import suite_profile

CPU = torch.device("cpu")
GB = 10**9


def _decode(batch: int, ctx: int) -> suite.WorkloadSpec:
    cell = f"attention.llama-3-8b-decode-sdpa-gqa.b{batch}ctx{ctx}.bf16"
    (spec,) = suite.select(suite.workloads("serving", ["bf16"]), cell)
    return spec


def test_available_bytes_reads_memavailable(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n")
    assert memory_fit.available_bytes(CPU, meminfo) == (20_480_000_000,
                                                        f"MemAvailable in {meminfo}")  # fmt: skip
    meminfo.write_text("MemTotal:       24000000 kB\n")
    assert memory_fit.available_bytes(CPU, meminfo)[0] is None


def test_the_largest_decode_cell_does_not_fit_20_gb():
    spec = _decode(256, 32768)
    # KV cache 2 x 256 x 32768 x 8 x 128 x 2 = 34,359,738,368 bytes; q and out 2 x 2,097,152
    assert spec.bytes == 34_359_738_368 + 2 * 256 * 32 * 128 * 2
    why = memory_fit.does_not_fit(spec, 20 * GB, "MemAvailable")
    # 34.36 GB x 1.5 = 51.5 GB
    assert why.startswith("not run: its working set of 51.5 GB (34.4 GB read and written")
    assert "20 GB free on this device (MemAvailable)" in why
    assert memory_fit.does_not_fit(_decode(1, 1024), 20 * GB, "MemAvailable") == ""
    assert memory_fit.does_not_fit(spec, None, "unknown") == ""  # unknown: measured, not guessed


def test_a_workload_that_does_not_fit_is_not_run_with_its_reason(monkeypatch):
    monkeypatch.setattr(memory_fit, "available_bytes", lambda device: (GB, "a test's figure"))
    ceilings = {"compute": {"bf16": {"measured": 1e12}}, "bandwidth": {"measured": 1e11}}
    record = runner.measure_workload(_decode(256, 32768), CPU, suite_profile("serving").sampling,
                                     ceilings, "reproduce")  # fmt: skip
    assert record["status"] == "not-run"
    assert "does not fit the 1 GB free on this device (a test's figure)" in record["reason"]
    assert record["samples_s"] == []


SERVING = suite_profile("serving").sampling  # 2 warm-up calls, 10 samples, 0.25 s, 6 s


def test_projection_of_one_workload_by_hand():
    # 0.1 s calls, 3 rounds. Round 1: warm-up max(2 x 0.1, 0.02 / 3) = 0.2 s, then
    # ceil(10 / 3) = 4 samples (0.4 s, over 0.25 / 3 s): 0.6 s. Rounds 2 and 3: one warm-up
    # call, 4 samples: 0.5 s each. 1.6 s in all.
    assert projection.workload_s(0.1, SERVING, 3) == pytest.approx(1.6)
    # 1.9 s calls: round 1 warms up 3.8 s, past its 2 s share, then takes one sample (5.7 s);
    # round 2 one warm-up call and one sample (3.8 s); 9.5 s is past the 6 s budget: no round 3
    assert projection.workload_s(1.9, SERVING, 3) == pytest.approx(9.5)
    # 2.5 s: 3 calls are 7.5 s > 6 s, the slow-path guard skips it
    assert projection.workload_s(2.5, SERVING, 3) is None
    assert projection.workload_s(None, SERVING, 3) == 6.0  # no ceiling: its whole budget


def test_projection_totals_and_says_what_it_left_out():
    p = projection.project([0.1, 2.5, None, 0.1], [False, False, False, True], SERVING, 3)
    assert (p.workloads, p.skipped, p.unknown) == (4, 2, 1)
    # the 0.1 s workload's later phases: t_device windows of 0.1 s within max(0.5, 3 x 0.1) =
    # 0.5 s, the last overrunning: min(11 x 0.1, 0.5 + 0.1) = 0.6 s; the overhead phase's one
    # profiled call, 0.1 s. The unknown one has no call time to price them at.
    assert projection.later_phases_s(0.1) == pytest.approx(0.7)
    assert p.total_s == pytest.approx(1.6 + 0.7 + 6.0) and p.later_s == pytest.approx(0.7)
    assert p.text() == (
        "projected time at least 0.1 min from the device profile's ceilings (0.0 of it the "
        "t_device and overhead phases), 0.2 min if every workload used its whole sampling "
        "budget; building inputs comes on top (2 of 4 workloads measured; 2 skipped (over "
        "budget or not fitting memory); 1 without a ceiling taken at their whole budget)"
    )


def test_the_later_phases_are_priced_with_the_device_time_phase_s_own_constants():
    from reviewkit.measure import device_time

    assert projection.DEVICE_TIME_WINDOW_S == device_time.TARGET_WINDOW_S
    assert projection.DEVICE_TIME_MIN_WINDOWS == device_time.MIN_BUDGET_WINDOWS
    policy = device_time.DEVICE_TIME_POLICY
    assert projection.DEVICE_TIME_SAMPLES == policy.max_samples == policy.min_samples
    assert policy.budget_s == projection.DEVICE_TIME_BUDGET_S
    assert policy.warmup_calls == 1  # the one warm-up window later_phases_s counts
    # a 3 s call (a CPU's MoE block): t_device budget max(0.5, 9) = 9 s, + the overrun 3 s =
    # 12 s (under 11 windows' 33 s), and one profiled call: 15 s after its sampling
    assert projection.later_phases_s(3.0) == pytest.approx(15.0)
    # a 10 us call: windows of 2 ms, 11 of them (22 ms) inside the 0.5 s budget
    assert projection.later_phases_s(10e-6) == pytest.approx(0.022 + 10e-6)


def test_a_run_projected_past_30_minutes_needs_yes(monkeypatch):
    monkeypatch.setattr(memory_fit, "available_bytes", lambda device: (None, "unknown"))
    # every call 1 s: round 1 warms up 2 s (its 2 s share spent) and takes one sample, 3 s;
    # round 2 one warm-up call and one sample, 2 s (5 s < 6 s); round 3 2 s: 7 s of sampling a
    # workload, then t_device min(11, max(0.5, 3) + 1) = 4 s and one profiled call: 12 s
    monkeypatch.setattr(runner, "predicted_call_s", lambda *args: 1.0)
    assert projection.workload_s(1.0, SERVING, 3) == pytest.approx(7.0)
    specs = suite.workloads("serving", ["bf16"])  # 129 x 12 s = 25.8 min: under the limit
    told = []
    runner.confirm_projection(runner.RunRequest(profile="serving"), specs, {}, CPU, {}, 3,
                              told.append)  # fmt: skip
    # 129 x 5 s = 10.75 min of later phases; 129 x 6 s + 10.75 min = 23.65 min at the whole
    # budget: a 7 s workload passes its 6 s by its last round's 1 s
    assert told == ["serving on cpu: projected time at least 25.8 min from the device "
                    "profile's ceilings (10.8 of it the t_device and overhead phases), 23.6 min "
                    "if every workload used its whole sampling budget; building inputs comes on "
                    "top (129 of 129 workloads measured)"]  # fmt: skip
    three = specs * 3  # 387 x 12 s = 77.4 min
    with pytest.raises(UsageError, match=r"at least 77.4 min .* over the 30 min this profile "
                       r"runs without asking; pass --yes"):  # fmt: skip
        runner.confirm_projection(runner.RunRequest(profile="serving"), three, {}, CPU, {}, 3,
                                  told.append)  # fmt: skip
    runner.confirm_projection(runner.RunRequest(profile="serving", yes=True), three, {}, CPU,
                              {}, 3, told.append)  # fmt: skip
