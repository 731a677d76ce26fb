"""Sensors against a fake sysfs tree: RAPL energy with wrap-around, thermal zones, cpufreq."""

import pytest
from fakesysfs import rapl_zone

from reviewkit.measure.sensors import (
    NVML_ENERGY_UPDATE_S,
    RAPL_UPDATE_S,
    EnergyMeter,
    EnergyReadError,
    NvmlEnergyMeter,
    cpu_clocks_mhz,
    energy_delta_uj,
    energy_meter,
    rapl_domains,
    survey,
    temperatures_c,
)


def test_energy_delta_without_and_with_wrap():
    assert energy_delta_uj(1_000, 5_000, 10_000) == 4_000
    # 9,000 -> wraps at 10,000 -> 2,000: 1,000 before the wrap plus 2,000 after.
    assert energy_delta_uj(9_000, 2_000, 10_000) == 3_000


def test_meter_reads_joules_per_domain_over_the_window(tmp_path):
    pkg = rapl_zone(tmp_path, "package-0", "intel-rapl:0", 5_000_000)
    dram = rapl_zone(tmp_path, "dram", "intel-rapl:0:0", 990, max_uj=1_000)
    domains, ok = rapl_domains(tmp_path)
    assert ok.available and [d.name for d in domains] == ["package-0", "dram"]
    meter = EnergyMeter(domains)
    meter.start()
    (pkg / "energy_uj").write_text("17500000\n")  # +12.5 J
    (dram / "energy_uj").write_text("40\n")  # wrapped: 10 uJ + 40 uJ = 50 uJ
    joules = meter.stop()
    assert joules["package-0"] == pytest.approx(12.5)
    assert joules["dram"] == pytest.approx(50e-6)


def test_no_powercap_says_why(tmp_path):
    domains, ok = rapl_domains(tmp_path / "missing")
    assert domains == [] and not ok.available and "does not exist" in ok.reason


def test_unreadable_counter_says_why(tmp_path):
    zone = rapl_zone(tmp_path, "package-0", "intel-rapl:0", 1)
    (zone / "energy_uj").unlink()
    (zone / "energy_uj").mkdir()  # reading a folder fails like an unreadable file
    domains, ok = rapl_domains(tmp_path)
    assert domains == [] and not ok.available and "not readable" in ok.reason


def test_thermal_and_clocks(tmp_path):
    zone = tmp_path / "thermal" / "thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "type").write_text("x86_pkg_temp\n")
    (zone / "temp").write_text("54250\n")  # millidegrees
    temps, ok = temperatures_c(tmp_path / "thermal")
    assert ok.available and temps == {"x86_pkg_temp (thermal_zone0)": pytest.approx(54.25)}
    freq = tmp_path / "cpu" / "cpu0" / "cpufreq"
    freq.mkdir(parents=True)
    (freq / "scaling_cur_freq").write_text("2450000\n")  # kHz
    clocks, ok = cpu_clocks_mhz(tmp_path / "cpu")
    assert ok.available and clocks == {"cpu0": pytest.approx(2450.0)}


def test_survey_of_an_empty_machine_reports_reasons_not_values(tmp_path):
    result = survey(tmp_path / "a", tmp_path / "b", tmp_path / "c")
    for key in ("rapl", "thermal", "cpu_clocks", "nvml_energy"):
        assert result[key]["available"] is False and result[key]["reason"], key
    assert result["thermal"]["celsius"] == {} and result["rapl"]["domains"] == []


def test_cli_and_the_run_record_the_survey(smoke_run):
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "reviewkit", "sensors", "--json"],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    cli = json.loads(r.stdout)
    run, _ = smoke_run
    assert run.environment["sensors"]["rapl"] == cli["rapl"]  # same machine, same answer
    for entry in cli.values():
        assert entry["available"] or entry["reason"]  # a value, or the reason there is none


# --- the window meters behind one interface: RAPL for cpu, NVML for cuda ----------------------


class FakeNvml:
    """Just the pynvml calls reviewkit makes; the test sets `mj` (the energy counter)."""

    class NVMLError(Exception):
        pass

    def __init__(self, mj=0, supported=True, uuids=("GPU-1234",)):
        self.mj, self.supported, self.uuids, self.inits = mj, supported, uuids, 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("index", index)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in self.uuids:
            raise self.NVMLError("Not Found")
        return ("uuid", uuid)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise self.NVMLError("Not Supported")
        return self.mj


@pytest.fixture()
def fake_nvml(monkeypatch):
    import sys

    fake = FakeNvml(mj=1_000_000)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_nvml_meter_reads_millijoules_over_the_window(fake_nvml):
    meter, ok = energy_meter("cuda", 0, gpu_uuid="1234")
    assert ok.available and isinstance(meter, NvmlEnergyMeter)
    assert fake_nvml.inits == 1
    meter.start()
    fake_nvml.mj = 1_012_500  # +12,500 mJ = 12.5 J
    assert meter.stop() == {"gpu-0": pytest.approx(12.5)}
    assert meter.total_of == ("gpu-0",)
    assert meter.update_interval_s == NVML_ENERGY_UPDATE_S == 0.1
    assert "nvmlDeviceGetTotalEnergyConsumption" in meter.method
    assert "GPU-1234" in meter.method and "matched by UUID" in meter.method


def test_nvml_counter_going_backwards_is_refused(fake_nvml):
    meter, _ = energy_meter("cuda", 1)
    meter.start()
    fake_nvml.mj = 10  # the driver was reloaded: the counter restarted from 0
    with pytest.raises(EnergyReadError, match="went backwards"):
        meter.stop()
    assert "index 1" in meter.method  # no UUID given: found by index, and it says so


def test_nvml_unknown_uuid_falls_back_to_the_index_and_says_so(fake_nvml):
    meter, ok = energy_meter("cuda", 0, gpu_uuid="ffff")
    assert ok.available and meter.handle == ("index", 0)
    assert "UUID GPU-ffff not found by NVML" in meter.method


def test_nvml_unsupported_board_says_why(fake_nvml):
    fake_nvml.supported = False  # pre-Volta boards have no energy counter
    meter, ok = energy_meter("cuda", 0)
    assert meter is None and not ok.available and "Not Supported" in ok.reason


def test_no_pynvml_says_why(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    meter, ok = energy_meter("cuda", 0)
    assert meter is None and "pynvml is not installed" in ok.reason


def test_rapl_meter_totals_packages_and_dram_once(tmp_path):
    pkg0 = rapl_zone(tmp_path, "package-0", "intel-rapl:0", 1_000_000)
    core0 = rapl_zone(tmp_path, "core", "intel-rapl:0:0", 0)
    dram0 = rapl_zone(tmp_path, "dram", "intel-rapl:0:1", 0)
    pkg1 = rapl_zone(tmp_path, "package-1", "intel-rapl:1", 0)
    dram1 = rapl_zone(tmp_path, "dram", "intel-rapl:1:0", 0)
    # The same package counter again through MMIO: the same energy, not more of it.
    rapl_zone(tmp_path, "package-0", "intel-rapl-mmio:0", 1_000_000)
    meter, ok = energy_meter("cpu", None, powercap=tmp_path)
    assert ok.available and meter.update_interval_s == RAPL_UPDATE_S == 1e-3
    # Each socket's dram keeps its zone folder in its name; the mmio duplicate is dropped.
    names = [d.name for d in meter.domains]
    assert names == ["package-0", "core", "dram (intel-rapl:0:1)", "package-1",
                     "dram (intel-rapl:1:0)"]  # fmt: skip
    # core lies inside package-0, so it is read but not added.
    assert meter.total_of == ("package-0", "dram (intel-rapl:0:1)", "package-1",
                              "dram (intel-rapl:1:0)")  # fmt: skip
    assert "package-0+dram (intel-rapl:0:1)+package-1" in meter.method
    assert "core recorded but not added (they overlap the total)" in meter.method
    meter.start()
    for zone, value in ((pkg0, 3_000_000), (core0, 1_500_000), (dram0, 250_000),
                        (pkg1, 4_000_000), (dram1, 250_000)):  # fmt: skip
        (zone / "energy_uj").write_text(f"{value}\n")
    joules = meter.stop()
    # Package-0 +2 J, package-1 +4 J, drams +0.25 J each: total 6.5 J; core's 1.5 J is inside.
    assert sum(joules[n] for n in meter.total_of) == pytest.approx(6.5)
    assert joules["core"] == pytest.approx(1.5)


def test_psys_is_the_total_only_without_packages(tmp_path):
    rapl_zone(tmp_path, "psys", "intel-rapl:1", 0)
    meter, _ = energy_meter("cpu", None, powercap=tmp_path)
    assert meter.total_of == ("psys",)
    rapl_zone(tmp_path, "package-0", "intel-rapl:0", 0)
    meter, _ = energy_meter("cpu", None, powercap=tmp_path)
    assert meter.total_of == ("package-0",)  # psys contains the package: not added


def test_rapl_without_a_domain_to_total_says_why(tmp_path):
    rapl_zone(tmp_path, "core", "intel-rapl:0:0", 0)
    meter, ok = energy_meter("cpu", None, powercap=tmp_path)
    assert meter is None and "no package, dram or psys domain" in ok.reason


def test_no_powercap_and_other_devices_say_why(tmp_path):
    meter, ok = energy_meter("cpu", None, powercap=tmp_path / "missing")
    assert meter is None and "does not exist" in ok.reason
    meter, ok = energy_meter("mps", None)
    assert meter is None and "no energy counter reviewkit can read for mps" in ok.reason
