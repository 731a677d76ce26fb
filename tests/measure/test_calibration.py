"""Calibration trials on a fake clock, the memory hierarchy's levels, and the profile cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from reviewkit.analysis.roofline import level_for, memory_level, roofline
from reviewkit.bundle import profile as profiles
from reviewkit.measure import device_profile as obtaining
from reviewkit.measure import hierarchy
from reviewkit.measure.timing import SamplingPolicy, timed_call
from reviewkit.measure.trials import BEST, MEDIAN, TrialRates, run_trials
from reviewkit.suite.profiles import suite_profile

# --- trials on a fake clock -------------------------------------------------------------------


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# Exactly three calls per trial after one warm-up (min = max = 3), no time target.
THREE_CALLS = SamplingPolicy(
    warmup_calls=1, warmup_s=0.0, min_samples=3, min_time_s=0.0, max_samples=3, budget_s=100
)


def _scripted(clock: FakeClock, durations_per_build: list[list[float]], log: list, name: str):
    """A maker whose k-th build runs calls of durations_per_build[k] (warm-up first)."""
    builds = iter(durations_per_build)

    def make():
        durations = iter(next(builds))

        def fn():
            log.append(name)
            clock.now += next(durations)

        return timed_call(fn, clock)

    return make


def test_a_trial_is_rated_at_its_fastest_call_and_the_ceiling_is_the_best_trial():
    clock, log = FakeClock(), []
    # Work 8 units per call. Trial k's calls (after a 1.0 s warm-up): the fastest is 1/8, 1/4,
    # 1/2, 1/4 s -> rates 64, 32, 16, 32 work/s. A neighbour slowed trial 3 (rate 16).
    durations = [[1.0, 1 / 8, 1, 1], [1.0, 1, 1 / 4, 1], [1.0, 1, 1, 1 / 2], [1.0, 1 / 4, 1, 1]]
    makers = {"gemm": _scripted(clock, durations, log, "gemm")}
    result = run_trials(makers, {"gemm": 8.0}, 4, THREE_CALLS, clock,
                        quantiles={"gemm": BEST})["gemm"]  # fmt: skip
    assert result.rates == (64.0, 32.0, 16.0, 32.0)
    assert result.peak == 64.0
    assert (result.low, result.high) == (16.0, 64.0)
    assert result.spread == 3.0  # 64 / 16 - 1
    assert result.confidence is None  # the best trial is an end of the range, not inside it
    # The median of the same trials: (32 + 32) / 2; P(min < median < max) = 1 - 2 x 0.5^4.
    median = TrialRates("gemm", result.rates, MEDIAN)
    assert median.peak == 32.0 and median.confidence == pytest.approx(0.875)
    # A 0.75 quantile: nearest rank ceil(0.75 x 4) = 3rd lowest of (16, 32, 32, 64) = 32;
    # P(min < x_0.75 < max) = 1 - 0.75^4 - 0.25^4 = 1 - 0.31640625 - 0.00390625.
    upper = TrialRates("gemm", result.rates, 0.75)
    assert upper.peak == 32.0 and upper.confidence == pytest.approx(0.6796875)


def test_quantiles_by_hand():
    nine = tuple(float(r) for r in (5, 1, 9, 3, 7, 2, 8, 4, 6))
    assert TrialRates("x", nine, 0.75).peak == 7.0  # ceil(6.75) = 7th lowest
    assert TrialRates("x", nine, BEST).peak == 9.0
    assert TrialRates("x", nine, MEDIAN).peak == 5.0
    assert TrialRates("x", (1.0, 2.0, 3.0), 0.75).peak == 3.0  # ceil(2.25) = 3rd
    assert TrialRates("x", (1.0, 2.0, 3.0, 4.0), MEDIAN).peak == 2.5
    assert TrialRates("x", nine, MEDIAN).confidence == pytest.approx(1 - 2 * 0.5**9)


def test_trials_interleave_and_rotate_so_no_configuration_always_goes_first():
    clock, log = FakeClock(), []
    names = ("a", "b", "c")
    makers = {n: _scripted(clock, [[1.0] * 4] * 3, log, n) for n in names}
    run_trials(makers, dict.fromkeys(names, 1.0), 3, THREE_CALLS, clock)
    firsts = [log[i * 12] for i in range(3)]  # each trial: 3 configurations x 4 calls
    assert firsts == ["a", "b", "c"]


def test_each_trial_builds_its_configuration_afresh():
    clock, builds = FakeClock(), []

    def make():
        builds.append(1)
        return timed_call(lambda: setattr(clock, "now", clock.now + 1.0), clock)

    run_trials({"copy": make}, {"copy": 1.0}, 5, THREE_CALLS, clock)
    assert len(builds) == 5


def test_a_neighbour_for_a_third_of_the_calibration_does_not_move_the_ceiling():
    """Nine trials; a neighbour halves the rate during trials 0-2. The best trial and the
    median are both undisturbed trials: both read 100."""
    clock, log = FakeClock(), []
    slow, fast = [1.0, 0.02, 0.02, 0.02], [1.0, 0.01, 0.01, 0.01]
    durations = [slow] * 3 + [fast] * 6
    makers = {"gemm": _scripted(clock, durations, log, "gemm")}
    result = run_trials(makers, {"gemm": 1.0}, 9, THREE_CALLS, clock,
                        quantiles={"gemm": BEST})["gemm"]  # fmt: skip
    assert result.peak == pytest.approx(100.0)
    assert TrialRates("gemm", result.rates, MEDIAN).peak == pytest.approx(100.0)
    assert result.low == pytest.approx(50.0)


def test_a_run_of_lucky_trials_on_a_shared_level_is_outvoted_by_the_median():
    """DRAM shared with neighbours: 4 of 9 trials saw 1.5x while they idled. The median keeps
    the typical share; the best trial would have taken the lucky state."""
    clock, log = FakeClock(), []
    lucky, usual = [1.0, 1 / 1.5, 1 / 1.5, 1 / 1.5], [1.0, 1.0, 1.0, 1.0]
    durations = [lucky] * 4 + [usual] * 5
    shared = run_trials({"dram": _scripted(clock, durations, log, "dram")}, {"dram": 30.0}, 9,
                        THREE_CALLS, clock, quantiles={"dram": MEDIAN})["dram"]  # fmt: skip
    assert shared.peak == pytest.approx(30.0)
    assert TrialRates("dram", shared.rates, BEST).peak == pytest.approx(45.0)


# --- the memory hierarchy ---------------------------------------------------------------------

ZEN3 = {"L1d": 32 << 10, "L1i": 32 << 10, "L2": 512 << 10, "L3": 32 << 20}
NEOVERSE_N1_NO_L3 = {"L1d": 64 << 10, "L1i": 64 << 10, "L2": 1 << 20}


def test_cpu_levels_from_sysfs_cache_sizes():
    levels = hierarchy.cpu_levels(ZEN3)
    assert [(lv.name, lv.capacity_bytes) for lv in levels] == [
        ("l1", 32 << 10), ("l2", 512 << 10), ("llc", 32 << 20), ("dram", None),
    ]  # fmt: skip
    # Streams sized to half of each cache: 16 KiB, 256 KiB, 16 MiB; DRAM has no size.
    assert [lv.calibration_bytes for lv in levels] == [16 << 10, 256 << 10, 16 << 20, None]
    # Only DRAM's bandwidth is a pool shared with other tenants; a cache is each core's own.
    assert [lv.shared for lv in levels] == [False, False, False, True]
    # No L3: the L2 is the last level.
    arm = hierarchy.cpu_levels(NEOVERSE_N1_NO_L3)
    assert [(lv.name, lv.capacity_bytes) for lv in arm] == [
        ("l1", 64 << 10), ("llc", 1 << 20), ("dram", None),
    ]  # fmt: skip
    assert [lv.name for lv in hierarchy.cpu_levels({})] == ["dram"]
    assert [lv.name for lv in hierarchy.gpu_levels(50 << 20)] == ["l2", "hbm"]


LEVELS = [
    {"level": "l1", "capacity_bytes": 32 << 10, "peak": 300e9},
    {"level": "l2", "capacity_bytes": 1 << 20, "peak": 200e9},
    {"level": "llc", "capacity_bytes": 32 << 20, "peak": 130e9},
    {"level": "dram", "capacity_bytes": None, "peak": 31e9},
]


@pytest.mark.parametrize(
    ("working_set", "level"),
    [
        (24 << 10, "l1"),
        (32 << 10, "l1"),  # exactly the capacity still fits
        ((32 << 10) + 1, "l2"),
        (600 << 10, "l2"),
        (3 << 20, "llc"),  # a 1x512x12x64 fp32 transpose: 1.5 MiB in, 1.5 MiB out
        (24 << 20, "llc"),  # a 512x4096 fp32 residual add: 3 x 8 MiB
        (40 << 20, "dram"),
    ],
)
def test_the_smallest_level_that_holds_the_working_set(working_set, level):
    assert level_for(working_set, LEVELS)["level"] == level


def test_cache_aware_roofline_by_hand():
    """A 512x4096 fp32 residual add: 2 reads + 1 write of 8 MiB = 24 MiB, F = 2^21 FLOP, fits
    the 32 MiB LLC at 130 GB/s. Measured 0.2 ms; fp32 peak 200 GFLOP/s.
    t_m = 25165824 / 130e9 = 193.58 us; t_c = 2097152 / 200e9 = 10.49 us.
    Against DRAM (31 GB/s) t_m would be 811.8 us: four times the measured time."""
    ceilings = {"compute": {"fp32": {"peak": 200e9}}, "bandwidth": {"peak": 31e9},
                "memory": LEVELS}  # fmt: skip
    name, w = memory_level(ceilings, 24 << 20)
    assert (name, w) == ("llc", 130e9)
    r = roofline(2**21, 24 << 20, 0.2e-3, 200e9, w, overhead_s=5e-6)  # a 5 us floor call
    assert r.memory_time_s == pytest.approx(193.58e-6, rel=1e-4)
    assert not r.faster_than_roofline
    # 10.49 + 183.09 + 5 = 198.58 us of 200: inefficiency 1.42 us
    assert r.inefficiency_fraction == pytest.approx(1.42e-6 / 0.2e-3, rel=1e-2)
    # (193.58 - 10.49) / 200 = 0.9155 of the time stalled on the LLC
    assert r.memory_stall_fraction == pytest.approx(0.91545, rel=1e-3)
    assert roofline(2**21, 24 << 20, 0.2e-3, 200e9, 31e9).faster_than_roofline


def test_main_memory_keeps_the_bandwidth_ceiling_and_old_bundles_have_one_level():
    # The last level's W is `bandwidth.peak`: a datasheet GPU keeps its datasheet figure.
    ceilings = {"bandwidth": {"peak": 4.8e12, "source": "datasheet"},
                "memory": [{"level": "l2", "capacity_bytes": 50 << 20, "peak": 10e12},
                           {"level": "hbm", "capacity_bytes": None, "peak": 4.1e12}]}  # fmt: skip
    assert memory_level(ceilings, 1 << 30) == ("hbm", 4.8e12)
    assert memory_level(ceilings, 1 << 20) == ("l2", 10e12)
    assert memory_level({"bandwidth": {"peak": 3e10}}, 1 << 10) == ("main memory", 3e10)


# --- the profile cache ------------------------------------------------------------------------

HERE = {"hash": "aaaa1111", "label": "AMD EPYC · Zen 3 · AVX2 · 2 cores", "facts": {}}
ELSEWHERE = {"hash": "bbbb2222", "label": "AMD EPYC · Zen 5 · AVX-512 BF16 · 2 cores"}


def _now() -> dict:
    """The settings this test process holds (what obtain keys the cache by)."""
    return {"threads": torch.get_num_threads(),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}  # fmt: skip


def _profile(fingerprint=HERE, torch_version=torch.__version__, dtypes=("fp32",),
             calibration="quick", settings=None) -> dict:  # fmt: skip
    compute = {d: {"peak": 1e11, "source": "measured", "measured": 1e11} for d in dtypes}
    memory = [{"level": "l1", "capacity_bytes": 32768, "peak": 2e11},
              {"level": "dram", "capacity_bytes": None, "peak": 3e10}]  # fmt: skip
    calibrated = {
        "compute": compute,
        "memory": memory,
        "threads": 2,
        "settings": settings or _now(),
        "bandwidth": {"peak": 3e10, "source": "measured"},
    }
    return profiles.build(
        calibrated=calibrated,
        fingerprint=fingerprint,
        torch_build={"torch_version": torch_version},
        device="cpu",
        device_name="AMD EPYC",
        calibration=calibration,
        created_unix_s=1.0,
        wall_s=10.0,
    )


def _rehashed(doc: dict) -> dict:
    return {**doc, "hash": profiles.content_hash(doc)}


@pytest.fixture
def here(monkeypatch, tmp_path):
    """This machine is HERE; the cache is a temporary folder; calibrating records its call."""
    monkeypatch.setenv(profiles.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(obtaining, "device_fingerprint", lambda device: HERE)
    calls = []

    def calibrate(device, dtypes, calibration, on_step=None):
        calls.append(list(dtypes))
        return _profile(dtypes=tuple(dtypes), calibration=calibration)

    monkeypatch.setattr(obtaining, "new_profile", calibrate)
    return calls


def _cache(doc: dict, calibration: str = "quick"):
    path = profiles.cache_path("cpu", HERE["hash"], calibration, _now())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


CPU = torch.device("cpu")


def test_first_run_calibrates_and_caches_then_the_next_reuses(here):
    first = obtaining.obtain(CPU, ["fp32"], "quick")
    assert first.source == "calibrated" and here == [["fp32"]]
    second = obtaining.obtain(CPU, ["fp32"], "quick")
    assert second.source == "cached" and here == [["fp32"]]  # not measured again
    assert second.doc["hash"] == first.doc["hash"]
    ceilings = second.ceilings()
    assert ceilings["profile"]["hash"] == first.doc["hash"]
    # keys a reader can find: the fp32 peak, and DRAM by name
    assert second.doc["compute"]["fp32"]["peak"] == 1e11
    assert second.doc["bandwidth_by_level_bytes_per_s"] == {"l1": 2e11, "dram": 3e10}
    assert ceilings["profile"]["path"] is None  # the user's cache folder stays out of bundles
    assert ceilings["memory"][-1]["level"] == "dram"


def test_a_more_thorough_profile_serves_a_lighter_run_not_the_reverse(here):
    _cache(_profile(calibration="full"), "full")
    assert obtaining.obtain(CPU, ["fp32"], "quick").source == "cached"
    _cache(_profile(calibration="smoke"), "smoke")
    assert obtaining.obtain(CPU, ["fp32"], "quick").source == "cached"  # still the full one
    assert obtaining.obtain(CPU, ["fp32"], "full").doc["calibration"] == "full"


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        (_profile(fingerprint=ELSEWHERE), "fingerprint bbbb2222"),
        (_profile(torch_version="2.0.0"), "taken under torch 2.0.0, older than this torch"),
        (_rehashed({**_profile(), "method": 1}), "calibration method 1, but this reviewkit"),
    ],
)
def test_stale_or_foreign_cached_profiles_are_measured_again(here, stored, reason):
    _cache(stored)
    got = obtaining.obtain(CPU, ["fp32"], "quick")
    assert got.source == "calibrated" and here == [["fp32"]]
    assert reason in got.renewed_because
    assert got.ceilings()["profile"]["renewed_because"] == got.renewed_because
    # and the cache now holds the new one
    cached = profiles.load(profiles.cache_path("cpu", HERE["hash"], "quick", _now()))
    assert cached["hash"] == got.doc["hash"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "`(top level)` must be a JSON object"),
        (json.dumps({**_profile(), "version": 99}), "`version` must be 1"),
        (json.dumps({**_profile(), "memory": []}), "`memory` must list the memory levels"),
        # edited after it was written: a ceiling raised by hand
        (json.dumps({**_profile(), "compute": {"fp32": {"peak": 9e15}}}), "`hash` must match"),
        (json.dumps({**_profile(), "compute": {"fp32": {"peak": -1}}}), "compute.fp32.peak"),
        # found by the profile fuzz: held to what a run bundle's ceilings must be, or the run
        # would write a bundle the next command refuses
        (json.dumps(_rehashed({**_profile(), "threads": "two"})), "key 'threads' is 'two'"),
        (json.dumps(_rehashed({**_profile(), "wall_s": "10 s"})), "`wall_s` must be a finite"),
    ],
)
def test_a_corrupt_cached_profile_is_recalibrated_never_a_crash(here, text, reason):
    path = profiles.cache_path("cpu", HERE["hash"], "quick", _now())
    path.parent.mkdir(parents=True)
    path.write_text(text)
    got = obtaining.obtain(CPU, ["fp32"], "quick")
    assert got.source == "calibrated"
    assert "the cached device profile" in got.renewed_because and reason in got.renewed_because
    assert str(path) not in got.renewed_because  # the user's cache folder stays out of bundles


def test_a_dtype_missing_from_the_cache_is_measured_with_the_ones_it_had(here):
    _cache(_profile(dtypes=("fp32",)))
    got = obtaining.obtain(CPU, ["bf16"], "quick")
    assert got.source == "calibrated" and here == [["fp32", "bf16"]]
    assert set(got.doc["compute"]) == {"fp32", "bf16"}


def test_recalibrate_renews_a_good_cached_profile(here):
    _cache(_profile())
    got = obtaining.obtain(CPU, ["fp32"], "quick", recalibrate=True)
    assert got.source == "calibrated" and got.renewed_because == "--recalibrate"


def test_a_pinned_profile_is_used_as_is_or_refused_with_the_remedy(here, tmp_path):
    good = tmp_path / "mine.json"
    profiles.save(_profile(dtypes=("fp32", "bf16")), good)
    got = obtaining.obtain(CPU, ["bf16"], "quick", pinned=good)
    assert got.source == "pinned" and here == []
    assert got.ceilings()["profile"]["path"] == str(good)

    foreign = tmp_path / "foreign.json"
    profiles.save(_profile(fingerprint=ELSEWHERE), foreign)
    with pytest.raises(profiles.ProfileError) as info:
        obtaining.obtain(CPU, ["fp32"], "quick", pinned=foreign)
    message = str(info.value)
    assert str(foreign) in message and "Zen 5" in message and "Zen 3" in message
    assert "reviewkit calibrate" in message and "drop --device-profile" in message
    assert "--recalibrate" not in message  # which a pinned profile ignores

    old = tmp_path / "old.json"
    profiles.save(_profile(torch_version="2.0.0"), old)
    with pytest.raises(profiles.ProfileError, match="older than this torch build"):
        obtaining.obtain(CPU, ["fp32"], "quick", pinned=old)

    with pytest.raises(profiles.ProfileError, match=r"has no fp16 ceiling.*--dtype fp32,bf16,fp16"):
        obtaining.obtain(CPU, ["fp16"], "quick", pinned=good)
    with pytest.raises(profiles.ProfileError, match="no such device profile"):
        obtaining.obtain(CPU, ["fp32"], "quick", pinned=tmp_path / "absent.json")


def test_a_cache_that_cannot_be_written_costs_a_calibration_never_the_run(here, monkeypatch,
                                                                          tmp_path):  # fmt: skip
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go\n")
    monkeypatch.setenv(profiles.CACHE_ENV, str(blocker))
    steps = []
    got = obtaining.obtain(CPU, ["fp32"], "quick", on_step=steps.append)
    assert got.source == "calibrated" and got.path is None
    assert any("not cached" in s and "cannot write the device profile" in s for s in steps)


# --- ceilings keyed by the settings that move them --------------------------------------------


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_a_run_at_other_settings_is_calibrated_at_its_own_and_cached_apart(here, one_thread):
    torch.set_num_threads(1)
    first = obtaining.obtain(CPU, ["fp32"], "quick")
    assert first.source == "calibrated" and first.doc["settings"]["threads"] == 1
    torch.set_num_threads(3)
    second = obtaining.obtain(CPU, ["fp32"], "quick")
    # a 3-thread run is not served the 1-thread profile: a second calibration, its own file
    assert second.source == "calibrated" and here == [["fp32"], ["fp32"]]
    assert second.doc["settings"]["threads"] == 3 and second.path != first.path
    assert second.path.name.endswith("-quick-t3-highest.json")
    torch.set_num_threads(1)
    again = obtaining.obtain(CPU, ["fp32"], "quick")
    assert again.source == "cached" and again.path == first.path and len(here) == 2
    # the run records which settings its ceilings belong to
    assert again.ceilings()["profile"]["settings"] == {
        "threads": 1, "float32_matmul_precision": "highest"}  # fmt: skip


def test_a_pinned_profile_of_other_settings_is_refused_with_the_command_to_fix_it(
    here, one_thread, tmp_path
):
    pinned = tmp_path / "pinned.json"
    pinned.write_text(json.dumps(_profile(
        settings={"threads": 2, "float32_matmul_precision": "high"})))  # fmt: skip
    with pytest.raises(profiles.ProfileError) as caught:
        obtaining.obtain(CPU, ["fp32"], "quick", pinned=pinned)
    said = str(caught.value)
    assert f"{pinned}: calibrated at 2 threads, float32 matmul precision high" in said
    assert "this run uses 1 thread, float32 matmul precision highest" in said
    assert "`reviewkit calibrate --threads 1 --float32-matmul-precision highest`" in said
    assert said.endswith("or drop --device-profile") and here == []  # nothing calibrated


def test_gpu_profiles_are_keyed_by_precision_only_and_renewed_when_the_power_limit_moves():
    gpu = {"threads": 8, "float32_matmul_precision": "high"}
    assert profiles.settings_slug("cuda", gpu) == "high"  # the host's threads do not key it
    assert profiles.settings_slug("cpu", gpu) == "t8-high"
    doc = {"device": "cuda", "settings": {"threads": 2, "float32_matmul_precision": "high"},
           "conditions": {"available": True, "power_limit_w": 700.0,
                          "applications_sm_clock_mhz": 1980,
                          "applications_memory_clock_mhz": 3201}}  # fmt: skip
    path = Path("p.json")
    assert profiles.settings_refusal(doc, path, gpu) == ""
    now = {**doc["conditions"], "power_limit_w": 500.0}
    said = profiles.conditions_refusal(doc, path, now)
    assert "power_limit_w 700.0 -> 500.0" in said and "applications_sm_clock" not in said
    assert profiles.conditions_refusal(doc, path, doc["conditions"]) == ""
    # conditions NVML could not read renew nothing: nothing to compare
    assert profiles.conditions_refusal(doc, path, {"available": False, "reason": "x"}) == ""
    assert profiles.conditions_refusal(doc, path, None) == ""


class FakeNvml:
    """pynvml's calls gpu_conditions makes, answering as an H200 at its 700 W limit would."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("handle", index)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000  # milliwatts

    def nvmlDeviceGetApplicationsClock(self, handle, clock):
        return {1: 1980, 2: 3201}[clock]

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980


def test_gpu_conditions_read_the_power_limit_in_watts_and_the_clocks():
    from reviewkit.measure import sensors

    got = sensors.gpu_conditions("cuda", 0, None, nvml=FakeNvml())
    assert got["available"] is True
    assert got["power_limit_w"] == pytest.approx(700.0)  # 700,000 mW
    assert (got["applications_sm_clock_mhz"], got["applications_memory_clock_mhz"]) == (1980, 3201)
    assert sensors.gpu_conditions("cpu") is None

    class Refusing(FakeNvml):
        def nvmlDeviceGetEnforcedPowerLimit(self, handle):
            raise RuntimeError("Not Supported")

    broken = sensors.gpu_conditions("cuda", 0, None, nvml=Refusing())
    assert broken == {
        "available": False,
        "reason": "NVML could not read power limit or clocks: Not Supported",
    }


# --- int8 and fp8 ceilings --------------------------------------------------------------------


def test_an_int8_ceiling_is_screened_on_integer_matmuls_and_fp8_is_refused_on_a_cpu():
    from reviewkit.measure import calibration

    screen = calibration.screen_compute("int8", CPU, "smoke")
    assert screen.finalists and screen.sizes == suite_profile("smoke").calibration_gemm_sizes
    assert not any(c.startswith("conv") for c in screen.finalists)  # no eager int8 conv
    # each finalist's work is 2 n^3 integer ops: n=512 is 268,435,456
    for config, (_, work) in screen.finalists.items():
        n = int(config.split()[0].removeprefix("n="))
        assert work == 2.0 * n**3
    assert screen.method(3, "n=512 nn").startswith("torch._int_mm over square sizes")
    fp8 = calibration.screen_compute("fp8", CPU, "smoke")
    assert fp8.finalists == {} and fp8.sizes == ()
    assert fp8.method(3, None) == (
        "not measured: no fp8 matrix units on a cpu device (torch emulates fp8 GEMMs there): "
        "no fp8 ceiling"
    )


def test_the_int8_kernel_timed_is_an_exact_integer_matmul(monkeypatch):
    """What the int8 ceiling times is int8 x int8 -> int32, exactly: checked against the same
    product in float64 (entries at most 127 in magnitude, n=64: every sum is an integer under
    64 x 127^2 = 1,032,256, exact in float64)."""
    from reviewkit.measure import calibration

    seen = []
    real = torch._int_mm
    monkeypatch.setattr(torch, "_int_mm", lambda a, b: seen.append((a, b)) or real(a, b))
    calibration.low_precision_gemm_maker(64, "int8", CPU, "nt")()()
    ((a, b),) = seen
    assert a.dtype == b.dtype == torch.int8 and a.abs().max() <= 127
    got = real(a, b)
    assert got.dtype == torch.int32
    assert torch.equal(got.double(), a.double() @ b.double())


def test_the_ceilings_table_counts_an_int8_ceiling_in_operations():
    from rich.console import Console

    from reviewkit.cli.console import ceilings_table

    ceilings = {"compute": {"fp32": {"peak": 1.88e11, "source": "measured"},
                            "int8": {"peak": 7.92e11, "source": "measured"}}}  # fmt: skip
    console = Console(record=True, width=160)
    console.print(ceilings_table(ceilings))
    text = console.export_text()
    assert "compute int8 (GOP/s)" in text and "compute fp32 (GFLOP/s)" in text
    assert "compute int8 (GFLOP/s)" not in text
