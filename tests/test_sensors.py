"""Sensors against a fake sysfs tree: RAPL energy with wrap-around, thermal zones, cpufreq."""

import pytest

from reviewkit.sensors import (
    EnergyMeter,
    cpu_clocks_mhz,
    energy_delta_uj,
    rapl_domains,
    survey,
    temperatures_c,
)


def rapl_zone(root, name, folder, energy_uj, max_uj=262143328850):
    zone = root / folder
    zone.mkdir(parents=True)
    (zone / "name").write_text(name + "\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return zone


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
    doc, _ = smoke_run
    assert doc["environment"]["sensors"]["rapl"] == cli["rapl"]  # same machine, same answer
    for entry in cli.values():
        assert entry["available"] or entry["reason"]  # a value, or the reason there is none
