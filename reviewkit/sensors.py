"""Energy, temperature and clock sensors of this machine, or the reason each is not available.

Readings come only from counters the machine exposes: RAPL powercap energy (CPU packages and
DRAM), thermal zones, cpufreq, and NVML's energy counter on NVIDIA GPUs. Nothing is estimated
from a TDP: where no counter exists the value is absent and the reason says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

POWERCAP = Path("/sys/class/powercap")
THERMAL = Path("/sys/class/thermal")
CPUFREQ = Path("/sys/devices/system/cpu")
MICRO = 1e-6  # RAPL counts microjoules
MILLI = 1e-3  # thermal zones count millidegrees Celsius; NVML counts millijoules


@dataclass(frozen=True)
class EnergyDomain:
    name: str  # "package-0", "dram", ...
    path: Path  # the powercap zone folder holding energy_uj
    max_range_uj: int  # the counter wraps back to 0 after this value


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def rapl_domains(root: Path = POWERCAP) -> tuple[list[EnergyDomain], Availability]:
    """Readable RAPL zones (packages and their sub-zones), or why there are none."""
    if not root.is_dir():
        return [], Availability(False, f"no RAPL powercap interface ({root} does not exist)")
    domains, problems = [], []
    for zone in sorted(p for p in root.glob("*rapl*") if (p / "energy_uj").exists()):
        try:
            name = (zone / "name").read_text().strip() if (zone / "name").exists() else zone.name
            _read_int(zone / "energy_uj")  # readable now, or the zone is useless
            domains.append(EnergyDomain(name, zone, _read_int(zone / "max_energy_range_uj")))
        except (OSError, ValueError) as exc:
            problems.append(f"{zone.name}: {type(exc).__name__}: {exc}")
    if domains:
        return domains, Availability(True)
    if problems:
        return [], Availability(False, "RAPL zones present but not readable: " + problems[0])
    return [], Availability(False, f"no RAPL zone with an energy counter under {root}")


def energy_delta_uj(start_uj: int, end_uj: int, max_range_uj: int) -> int:
    """Energy between two readings of a counter that wraps to 0 after max_range_uj.

    One wrap at most is assumed: the caller reads the counter at least once per wrap period
    (about an hour for a 200 W package with a 2^32 uJ range, far longer than a workload).
    """
    if end_uj >= start_uj:
        return end_uj - start_uj
    return end_uj + max_range_uj - start_uj


@dataclass
class EnergyMeter:
    """Joules consumed between start() and stop(), per RAPL domain, over exactly that window."""

    domains: list[EnergyDomain]
    _start: dict[str, int] = field(default_factory=dict)

    def start(self) -> None:
        self._start = {d.name: _read_int(d.path / "energy_uj") for d in self.domains}

    def stop(self) -> dict[str, float]:
        out = {}
        for d in self.domains:
            end = _read_int(d.path / "energy_uj")
            out[d.name] = energy_delta_uj(self._start[d.name], end, d.max_range_uj) * MICRO
        return out


def temperatures_c(root: Path = THERMAL) -> tuple[dict[str, float], Availability]:
    """Current temperature of every readable thermal zone, by its type."""
    zones = sorted(root.glob("thermal_zone*")) if root.is_dir() else []
    out = {}
    for zone in zones:
        try:
            kind = (zone / "type").read_text().strip()
            out[f"{kind} ({zone.name})"] = _read_int(zone / "temp") * MILLI
        except (OSError, ValueError):
            continue
    if out:
        return out, Availability(True)
    why = "no thermal zones" if not zones else "thermal zones present but not readable"
    return {}, Availability(False, f"{why} under {root}")


def cpu_clocks_mhz(root: Path = CPUFREQ) -> tuple[dict[str, float], Availability]:
    """Current scaling frequency of every CPU that reports one."""
    out = {}
    for freq in sorted(root.glob("cpu[0-9]*/cpufreq/scaling_cur_freq")):
        try:
            out[freq.parent.parent.name] = _read_int(freq) / 1e3  # kHz -> MHz
        except (OSError, ValueError):
            continue
    if out:
        return out, Availability(True)
    return {}, Availability(
        False, f"no cpufreq scaling_cur_freq under {root} (a VM often hides it)"
    )


def nvml_energy() -> Availability:
    """Whether NVML's total-energy counter can be read (NVIDIA GPUs, driver and pynvml present)."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return Availability(False, "pynvml is not installed (no NVIDIA energy counter to read)")
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        return Availability(True)
    except Exception as exc:  # NVMLError subclasses, no driver, no device
        return Availability(False, f"NVML energy counter not readable: {exc}")


def survey(powercap: Path = POWERCAP, thermal: Path = THERMAL, cpufreq: Path = CPUFREQ) -> dict:
    """What this machine lets reviewkit read, with values or reasons: recorded in evidence."""
    domains, rapl = rapl_domains(powercap)
    temps, thermal_ok = temperatures_c(thermal)
    clocks, clocks_ok = cpu_clocks_mhz(cpufreq)
    return {
        "rapl": {**rapl.to_json(), "domains": [d.name for d in domains]},
        "nvml_energy": nvml_energy().to_json(),
        "thermal": {**thermal_ok.to_json(), "celsius": temps},
        "cpu_clocks": {**clocks_ok.to_json(), "mhz": clocks},
    }
