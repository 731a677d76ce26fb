"""reviewkit soak: a real short window on the CPU, the sub-window bookkeeping on a fake clock,
the sensor wiring with fake readers, and the NVML reader with a fake pynvml."""

import itertools
import json
import sys
import types

import pytest

from reviewkit.cli.console import soak_text
from reviewkit.common.errors import UsageError
from reviewkit.measure import allocator, sensors, soak
from reviewkit.measure.sensors import Availability
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import SUITE_PROFILES

TICK = 1 / 1024  # binary-exact fake clock steps, so the hand counts below hold exactly


class FakeClock:
    """Advances one tick per read; `reads` counts them."""

    def __init__(self):
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.reads * TICK


@pytest.fixture(scope="module")
def real_soak():
    return soak.run_soak("smoke", "cpu", window_s=0.5, subwindows=5)


def test_real_smoke_soak_document(real_soak, tmp_path):
    doc = real_soak
    assert doc["kind"] == "reviewkit.soak" and doc["schema_version"] == 1
    assert doc["complete"] is True and "interrupted" not in doc
    assert doc["profile"] == "smoke" and doc["device"] == "cpu" and doc["window_s"] == 0.5
    spec = suite.plan_specs("smoke", ("fp32",), "model.*")[0]
    w = doc["workload"]
    assert (w["id"], w["layer_type"], w["dtype"], w["flops"]) == (
        spec.id,
        "model",
        "fp32",
        spec.flops,
    )
    assert w["reproduce"] == (
        f"reviewkit soak --profile smoke --device cpu --workload {spec.id} --window-s 0.5"
    )
    assert doc["environment"]["torch_version"] and doc["tool"]["name"] == "reviewkit"
    # the CPU heap held as `run` holds it, or said why not (measure/allocator.py)
    held = allocator._glibc()[0] is not None and not allocator.user_settings()
    assert (allocator.WHY in doc["environment"]["cpu_allocator"]) == held
    assert len(doc["warmup_samples_s"]) >= 1
    subs = doc["subwindows"]
    assert [s["index"] for s in subs] == [0, 1, 2, 3, 4]
    for k, s in enumerate(subs):
        # sub-window k closes at the first call ending past (k + 1) * 0.5 / 5 s
        assert s["end_s"] >= (k + 1) * 0.1 - 1e-9
        assert s["calls"] == len(s["samples_s"]) >= 1 and not s["partial"]
        wall = s["end_s"] - s["start_s"]
        assert 0 < sum(s["samples_s"]) <= wall + 1e-6  # each call lies inside its sub-window
        assert s["calls_per_s"] == pytest.approx(s["calls"] / wall) and s["calls_per_s"] > 0
        assert s["flops_per_s"] == pytest.approx(s["calls_per_s"] * spec.flops)
        assert set(s["readings"]) == set(doc["sensors"])
    assert all(a["end_s"] <= b["start_s"] for a, b in itertools.pairwise(subs))
    assert doc["measured_window_s"] >= 0.5
    assert doc["analysis"]["verdict"] in ("drift", "stable", "insufficient data")
    assert doc["analysis"]["trend"]["points"] == 5


def test_real_soak_sensors_have_values_or_reasons(real_soak):
    doc = real_soak
    assert set(doc["sensors"]) == {
        "temperatures_c",
        "cpu_clocks_mhz",
        "gpu_temperatures_c",
        "gpu_clocks_mhz",
    }
    for name, ok in doc["sensors"].items():
        if ok["available"]:
            assert any(s["readings"][name] for s in doc["subwindows"]), name
        else:
            assert ok["reason"], name
            assert all(s["readings"][name] == {} for s in doc["subwindows"]), name
    e = doc["energy"]
    assert (e["available"] and e["joules"]) or (not e["available"] and e["reason"])
    th = doc["analysis"]["throttling"]
    cpu_sensors = [doc["sensors"][n]["available"] for n in soak.THROTTLE_READERS["cpu"]]
    if not any(cpu_sensors):
        assert th["status"] == "not available" and th["reason"]
    else:
        assert th["status"] in ("throttled", "not throttled", "not available")


def test_write_and_render(real_soak, tmp_path):
    path = soak.write_soak(tmp_path / "deep" / "soak.json", real_soak)
    assert json.loads(path.read_text()) == json.loads(json.dumps(real_soak))
    assert not list(path.parent.glob(".*.tmp"))  # the temporary file was renamed away
    text = soak_text(real_soak)
    assert f"verdict: {real_soak['analysis']['verdict']}" in text
    assert "throughput trend:" in text and "first -> last" in text and "throttling:" in text
    for name, ok in real_soak["sensors"].items():
        assert (f"{name}: available" if ok["available"] else ok["reason"]) in text
    assert real_soak["workload"]["reproduce"] in text


def test_window_bookkeeping_on_a_fake_clock():
    # Each call lasts 0.25 s and each sensor read 0.125 s. Window 2 s in 4 sub-windows: the
    # boundaries are at 0.5, 1.0, 1.5, 2.0 s.
    #   sw0: calls end at 0.25, 0.5 (>= 0.5)    -> 2 calls, [0, 0.5];   read -> 0.625
    #   sw1: 0.875, 1.125 (>= 1.0)             -> 2 calls, [0.625, 1.125]; read -> 1.25
    #   sw2: 1.5 (>= 1.5)                      -> 1 call,  [1.25, 1.5];  read -> 1.625
    #   sw3: 1.875, 2.125 (>= 2.0)             -> 2 calls, [1.625, 2.125]
    now = [0.0]

    def call():
        now[0] += 0.25
        return 0.25

    def read():
        now[0] += 0.125
        return {"r": {"x": now[0]}}

    subs, complete = soak.measure_window(call, 2.0, 4, clock=lambda: now[0], read=read)
    assert complete
    assert [s["calls"] for s in subs] == [2, 2, 1, 2]
    assert [s["start_s"] for s in subs] == [0, 0.625, 1.25, 1.625]
    assert [s["end_s"] for s in subs] == [0.5, 1.125, 1.5, 2.125]
    assert [s["readings"]["r"]["x"] for s in subs] == [0.625, 1.25, 1.625, 2.25]
    assert all(s["samples_s"] == [0.25] * s["calls"] for s in subs)


def test_interrupt_keeps_what_was_measured():
    now = [0.0]
    calls = [0]

    def call():
        calls[0] += 1
        if calls[0] == 6:
            raise KeyboardInterrupt
        now[0] += 0.25
        return 0.25

    # 0.5 s sub-windows of two calls each: calls 1-2 and 3-4 fill sw0 and sw1, call 5 starts
    # sw2, call 6 is interrupted: sw2 is kept with its one sample, marked partial.
    subs, complete = soak.measure_window(call, 2.0, 4, clock=lambda: now[0])
    assert not complete
    assert [(s["calls"], s["partial"]) for s in subs] == [(2, False), (2, False), (1, True)]


def fake_readers(tmp_path, interrupt_at=None):
    """Clock falling 100 MHz and temperature rising 5 C per read; each read adds 1 J to RAPL."""
    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("0\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    n = [0]

    def clocks():
        if n[0] == interrupt_at:
            raise KeyboardInterrupt
        value = 3000.0 - 100 * n[0]
        n[0] += 1
        uj = int((zone / "energy_uj").read_text())
        (zone / "energy_uj").write_text(f"{uj + 1_000_000}\n")
        return {"cpu0": value}, Availability(True)

    def temps():
        return {"pkg": 60.0 + 5 * (n[0] - 1)}, Availability(True)

    readers = {
        "cpu_clocks_mhz": clocks,
        "temperatures_c": temps,
        "gpu_clocks_mhz": lambda: ({}, Availability(False, "no GPU here")),
    }
    return readers, (lambda: sensors.rapl_domains(tmp_path / "powercap"))


def test_run_soak_on_a_fake_clock_wires_sensors_energy_and_throttling(tmp_path):
    readers, rapl = fake_readers(tmp_path)
    doc = soak.run_soak(
        "smoke",
        "cpu",
        window_s=128 * TICK,
        subwindows=4,
        clock=FakeClock(),
        readings=readers,
        critical_c=lambda: {"temperatures_c:pkg": 90.0},
        rapl=rapl,
    )
    # The clock reads once after each call, once to open each later sub-window: deadlines at
    # 32, 64, 96, 128 ticks after the window began give 32, 31, 31, 31 calls, each sub-window
    # spanning exactly as many ticks as it made calls, so 1024 calls/s in every one.
    subs = doc["subwindows"]
    assert [s["calls"] for s in subs] == [32, 31, 31, 31]
    # (times are stored rounded to the nanosecond, hence approx)
    assert [s["start_s"] * 1024 for s in subs] == pytest.approx([0, 33, 65, 97], abs=1e-5)
    assert [s["end_s"] * 1024 for s in subs] == pytest.approx([32, 64, 96, 128], abs=1e-5)
    assert [s["calls_per_s"] for s in subs] == pytest.approx([1024] * 4, rel=1e-6)
    assert doc["analysis"]["trend"]["relative_change"] == pytest.approx(0, abs=1e-6)
    # Readings: read 0 at the start (3000 MHz, 60 C), then one per sub-window end:
    # 2900, 2800, 2700, 2600 MHz and 65 .. 80 C. First to last sub-window: 2600 / 2900 - 1
    # = -10.3%: throttled; 80 C stays below the 90 C critical value.
    assert doc["readings_at_start"]["cpu_clocks_mhz"] == {"cpu0": 3000.0}
    assert [s["readings"]["cpu_clocks_mhz"]["cpu0"] for s in subs] == [2900, 2800, 2700, 2600]
    th = doc["analysis"]["throttling"]
    assert th["status"] == "throttled" and "cpu_clocks_mhz:cpu0 fell 10.3%" in th["reason"]
    assert th["clocks"][0]["change"] == pytest.approx(2600 / 2900 - 1)
    (temp,) = th["temperatures"]
    assert (temp["max_c"], temp["critical_c"], temp["reached"]) == (80.0, 90.0, False)
    assert doc["sensors"]["gpu_clocks_mhz"] == {"available": False, "reason": "no GPU here"}
    # Energy: the meter starts after the start reading, so it sees the 4 sub-window reads:
    # 4 J over the measured window.
    e = doc["energy"]
    assert e["available"] and e["joules"] == {"package-0": pytest.approx(4.0)}
    assert e["mean_watts"]["package-0"] == pytest.approx(4.0 / doc["measured_window_s"])


def test_run_soak_interrupted_is_incomplete_and_analysed(tmp_path):
    # the reader raises at its 4th call: the start read, sw0 and sw1 ends went through, sw2's
    # end read is interrupted, so sw2 is kept as partial and two full sub-windows remain
    readers, rapl = fake_readers(tmp_path, interrupt_at=3)
    doc = soak.run_soak(
        "smoke",
        "cpu",
        window_s=128 * TICK,
        subwindows=4,
        clock=FakeClock(),
        readings=readers,
        critical_c=dict,
        rapl=rapl,
    )
    assert doc["complete"] is False and "interrupted" in doc["interrupted"]
    assert [s["partial"] for s in doc["subwindows"]] == [False, False, True]
    # two full sub-windows: no trend, so never "stable"; the first/last rule still runs on the
    # real (host-timed) samples and may find drift on a busy host, so either verdict is right
    trend = doc["analysis"]["trend"]
    assert trend["points"] == 2 and "at least 3" in trend["reason"]
    assert doc["analysis"]["verdict"] in ("insufficient data", "drift")
    assert doc["analysis"]["first_last"]["first_samples"] == 32
    assert "INCOMPLETE" in soak_text(doc)


def test_throttling_is_judged_on_the_measured_device():
    def sub(k, cpu, gpu):
        return {
            "index": k,
            "start_s": k,
            "end_s": k + 1,
            "calls": 1,
            "samples_s": [1.0],
            "partial": False,
            "calls_per_s": 1.0,
            "readings": {"cpu_clocks_mhz": {"cpu0": cpu}, "gpu_clocks_mhz": {"gpu0": gpu}},
        }

    doc = {
        "device": "cuda:0",
        "sensors": {},
        "critical_c": {},
        "subwindows": [sub(0, 3000, 1980), sub(1, 2000, 1980), sub(2, 1000, 1975)],
    }
    # host clocks fall 67% (idle host thread), GPU SM clock 1980 -> 1975 (-0.25%)
    th = soak.analyse(doc).throttling
    assert th.status == "not throttled" and [c.series for c in th.clocks] == ["gpu_clocks_mhz:gpu0"]
    cpu = soak.analyse({**doc, "device": "cpu"}).throttling
    assert cpu.status == "throttled" and [c.series for c in cpu.clocks] == ["cpu_clocks_mhz:cpu0"]
    other = soak.analyse({**doc, "device": "mps"}).throttling
    assert other.status == "not available" and "mps" in other.reason


def test_default_workload_and_bad_input():
    spec = soak.find_spec("smoke", None)
    assert spec.layer_type == "model" and spec.dtype == "fp32"
    assert soak.find_spec("quick", None).id == "model.gpt-2-small-decoder-2l.b1s256.fp32"
    assert soak.find_spec("smoke", spec.id.replace(".fp32", ".bf16")).dtype == "bf16"
    with pytest.raises(UsageError, match="name exactly one"):
        soak.find_spec("smoke", "gemm.*")
    with pytest.raises(UsageError, match="matches no workload"):
        soak.find_spec("smoke", "no-such-workload")
    with pytest.raises(UsageError, match="window-s"):
        soak.run_soak("smoke", "cpu", window_s=0)
    with pytest.raises(UsageError, match="subwindows"):
        soak.run_soak("smoke", "cpu", subwindows=0)
    assert [p.soak_window_s for p in SUITE_PROFILES] == [2.0, 60.0, 600.0]
    assert soak.SUBWINDOWS == 20


def test_thermal_critical_trip_points(tmp_path):
    zone = tmp_path / "thermal_zone0"
    zone.mkdir()
    (zone / "type").write_text("x86_pkg_temp\n")
    (zone / "temp").write_text("54000\n")
    (zone / "trip_point_0_type").write_text("passive\n")
    (zone / "trip_point_0_temp").write_text("95000\n")
    (zone / "trip_point_1_type").write_text("critical\n")
    (zone / "trip_point_1_temp").write_text("105000\n")  # millidegrees -> 105 C
    crit = soak.thermal_critical_c(tmp_path)
    assert crit == {"x86_pkg_temp (thermal_zone0)": 105.0}
    assert set(crit) == set(sensors.temperatures_c(tmp_path)[0])  # same keys as the readings
    assert soak.thermal_critical_c(tmp_path / "missing") == {}


def fake_pynvml(init_error=None, bytes_only=False):
    calls = {"init": 0, "shutdown": 0, "by_bus": [], "by_index": []}
    mod = types.ModuleType("pynvml")
    mod.NVML_TEMPERATURE_GPU, mod.NVML_CLOCK_SM = 0, 1
    mod.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1

    class NVMLError(Exception):
        pass

    def init():
        calls["init"] += 1
        if init_error:
            raise NVMLError(init_error)

    def by_bus(bus):
        if bytes_only and not isinstance(bus, bytes):
            raise TypeError("expected bytes")
        calls["by_bus"].append(bus)
        return ("handle", bus)

    def by_index(i):
        calls["by_index"].append(i)
        return ("handle", i)

    def shutdown():
        calls["shutdown"] += 1

    mod.nvmlInit, mod.nvmlShutdown = init, shutdown
    mod.nvmlDeviceGetHandleByPciBusId, mod.nvmlDeviceGetHandleByIndex = by_bus, by_index
    mod.nvmlDeviceGetTemperature = lambda h, sensor: 64 if sensor == 0 else -1
    mod.nvmlDeviceGetClockInfo = lambda h, clock: 1980 if clock == 1 else -1
    mod.nvmlDeviceGetTemperatureThreshold = lambda h, kind: 87 if kind == 1 else -1
    return mod, calls


def test_nvml_reader_with_a_fake_pynvml(monkeypatch):
    mod, calls = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    bus = "00000000:65:00.0"
    assert soak.nvml_temperatures_c(0, bus) == ({"gpu0": 64.0}, Availability(True))
    assert soak.nvml_clocks_mhz(0, bus) == ({"gpu0": 1980.0}, Availability(True))
    assert soak.nvml_slowdown_c(0, bus) == ({"gpu0": 87.0}, Availability(True))
    assert calls["by_bus"] == [bus] * 3 and calls["by_index"] == []
    assert calls["init"] == calls["shutdown"] == 3
    # no bus id: by index
    assert soak.nvml_clocks_mhz(1)[0] == {"gpu1": 1980.0} and calls["by_index"] == [1]


def test_nvml_reader_older_pynvml_wants_bytes(monkeypatch):
    mod, calls = fake_pynvml(bytes_only=True)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    assert soak.nvml_clocks_mhz(0, "0000:65:00.0")[0] == {"gpu0": 1980.0}
    assert calls["by_bus"] == [b"0000:65:00.0"]


def test_nvml_not_available_says_why(monkeypatch):
    mod, _ = fake_pynvml(init_error="Driver Not Loaded")
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    values, ok = soak.nvml_temperatures_c()
    assert values == {} and not ok.available and "Driver Not Loaded" in ok.reason
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    values, ok = soak.nvml_clocks_mhz()
    assert values == {} and not ok.available and "pynvml is not installed" in ok.reason


def test_cli_soak_smoke_writes_the_document_and_rejects_bad_input(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "soak.json"
    cmd = [sys.executable, "-m", "reviewkit", "soak", "--profile", "smoke", "--window-s", "0.5",
           "--subwindows", "5", "--out", str(out), "--json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc == json.loads(out.read_text())
    assert doc["kind"] == "reviewkit.soak" and doc["complete"] is True
    assert len(doc["subwindows"]) == 5 and doc["window_s"] == 0.5
    assert doc["command"].startswith("reviewkit soak --profile smoke")
    assert doc["analysis"]["verdict"] in {"stable", "drift", "insufficient data"}
    bad = tmp_path / "bad.json"
    for args, said in [(["--workload", "nope"], "matches no workload"),
                       (["--window-s", "-1"], "--window-s"),
                       (["--profile", "nope"], "--profile 'nope'")]:  # fmt: skip
        proc = subprocess.run([*cmd[:4], *args, "--out", str(bad)], capture_output=True, text=True)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
        assert not bad.exists()
