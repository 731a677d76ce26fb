"""Energy, temperature and clock sensors of this machine, or the reason each is not available.

Readings come only from counters the machine exposes: RAPL powercap energy (CPU packages and
DRAM), thermal zones, cpufreq, and NVML's energy counter on NVIDIA GPUs. Nothing is estimated
from a TDP: where no counter exists the value is absent and the reason says why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

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
        return _distinct(domains), Availability(True)
    if problems:
        return [], Availability(False, "RAPL zones present but not readable: " + problems[0])
    return [], Availability(False, f"no RAPL zone with an energy counter under {root}")


def _distinct(domains: list[EnergyDomain]) -> list[EnergyDomain]:
    """One domain per counter, each under a name of its own.

    A package exposed a second time through MMIO (`intel-rapl-mmio:N`, same name as the MSR
    zone `intel-rapl:N`) is the same energy: keep the MSR zone. Names still shared (the
    `dram` sub-zone of each socket) get their zone folder appended.
    """
    msr_names = {d.name for d in domains if "mmio" not in d.path.name}
    kept = [d for d in domains if "mmio" not in d.path.name or d.name not in msr_names]
    counts: dict[str, int] = {}
    for d in kept:
        counts[d.name] = counts.get(d.name, 0) + 1
    return [
        d if counts[d.name] == 1 else EnergyDomain(f"{d.name} ({d.path.name})", d.path,
                                                   d.max_range_uj)
        for d in kept
    ]  # fmt: skip


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

    @property
    def total_of(self) -> tuple[str, ...]:
        return rapl_total_of(self.domains)

    @property
    def update_interval_s(self) -> float:
        return RAPL_UPDATE_S

    @property
    def method(self) -> str:
        others = [d.name for d in self.domains if d.name not in self.total_of]
        text = (
            f"RAPL powercap energy_uj, {'+'.join(self.total_of)}, read at window start and end "
            "(whole-socket counters: idle power and anything else running on the socket count "
            "too)"
        )
        if others:
            # core/uncore lie inside their package; psys contains the packages
            text += f"; {', '.join(others)} recorded but not added (they overlap the total)"
        return text


# --- energy over a measured window: one interface for RAPL (CPUs) and NVML (NVIDIA GPUs) -------

# How often each counter advances, for the confidence of a reading over a short window (a
# reading can be stale by up to one update at each end).
# RAPL: the energy status MSRs update about every 1 ms (measured by Haehnel et al., "Measuring
# Energy Consumption for Short Code Paths Using RAPL", 2012).
RAPL_UPDATE_S = 1e-3
# NVML: NVIDIA documents only the unit (mJ since the driver was loaded, Volta and newer), not
# the period. Measured at about 100 ms on recent NVIDIA GPUs (Yang et al., "Accurate and
# Convenient Energy Measurements for GPUs", SC24; the ML.ENERGY Zeus monitor's notes say the
# same and that a short window can read 0). Assumed 100 ms here.
NVML_ENERGY_UPDATE_S = 0.1


class EnergyReadError(RuntimeError):
    """A counter could not be read over the window, or read nonsense (it went backwards)."""


class WindowMeter(Protocol):
    """Joules per domain between start() and stop(); `total_of` names those that add up."""

    method: str
    update_interval_s: float
    total_of: tuple[str, ...]

    def start(self) -> None: ...

    def stop(self) -> dict[str, float]: ...


def rapl_total_of(domains: list[EnergyDomain]) -> tuple[str, ...]:
    """The domains whose sum is the energy of the sockets, without counting anything twice.

    Packages and DRAM are disjoint; core and uncore lie inside their package; psys (the
    platform) contains the packages, so it is the total only where there is no package.
    """
    names = [d.name for d in domains]
    total = tuple(n for n in names if n.startswith(("package", "dram")))
    if any(n.startswith("package") for n in total):
        return total
    return tuple(n for n in names if n.startswith("psys"))


@dataclass
class NvmlEnergyMeter:
    """Joules used by one NVIDIA GPU (the whole board) between start() and stop().

    nvmlDeviceGetTotalEnergyConsumption counts millijoules since the driver was loaded in a
    64-bit counter (2^64 mJ is ~580,000 years at 1 kW): it does not wrap, so a reading that
    goes backwards means the driver was reloaded mid-window, and the window is refused.
    """

    nvml: Any  # the pynvml module
    handle: Any
    label: str  # how the GPU was found, for the method
    name: str = "gpu"
    _start_mj: int | None = None

    update_interval_s: float = NVML_ENERGY_UPDATE_S

    @property
    def total_of(self) -> tuple[str, ...]:
        return (self.name,)

    @property
    def method(self) -> str:
        return (
            f"NVML nvmlDeviceGetTotalEnergyConsumption (mJ since driver load, whole board), "
            f"{self.label}, read at window start and end"
        )

    def _read_mj(self) -> int:
        return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def start(self) -> None:
        self._start_mj = self._read_mj()

    def stop(self) -> dict[str, float]:
        if self._start_mj is None:
            raise EnergyReadError("stop() without start()")
        end = self._read_mj()
        if end < self._start_mj:
            raise EnergyReadError(
                f"NVML energy counter went backwards ({self._start_mj} -> {end} mJ): the driver "
                "was reloaded during the window"
            )
        return {self.name: (end - self._start_mj) * MILLI}


def open_nvml(purpose: str) -> tuple[Any, Availability]:
    """The initialised pynvml module, or None and why not (not installed, no driver, no
    device): the one place NVML is imported and started. `purpose` says what would have been
    read, for the reason."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None, Availability(
            False, f"pynvml is not installed (pip install nvidia-ml-py), so {purpose} cannot "
            "be read"
        )  # fmt: skip
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError: no driver, no device
        return None, Availability(False, f"NVML not usable: {type(exc).__name__}: {exc}")
    return pynvml, Availability(True)


def nvidia_uuid(uuid: str) -> str:
    """A GPU UUID as NVML and nvidia-smi spell it: torch's `props.uuid` lacks the "GPU-"."""
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def nvml_handle(
    nvml: Any, device_index: int, gpu_uuid: str | None = None, pci_bus_id: str | None = None
) -> tuple[Any, str]:
    """The NVML handle of torch's cuda:device_index, and how it was found: by UUID or PCI bus id
    where torch gives one (NVML numbers GPUs in PCI order, CUDA by speed unless told otherwise),
    else by index. The one lookup for the energy meter and the soak's sensors."""
    note = ""
    if gpu_uuid:
        uuid = nvidia_uuid(gpu_uuid)
        try:
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            except TypeError:  # older pynvml wants bytes
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid.encode())
            return handle, f"GPU {uuid} (torch's cuda:{device_index}, matched by UUID)"
        except Exception as exc:  # NVMLError_NotFound, say: fall back to the index
            note = f"; UUID {uuid} not found by NVML ({exc})"
    if pci_bus_id:
        for key in (pci_bus_id, pci_bus_id.encode()):  # older pynvml wants bytes
            try:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(key)
                return handle, f"GPU at PCI {pci_bus_id} (torch's cuda:{device_index})"
            except Exception:
                continue
    # Without a UUID the NVML index is assumed to be torch's; CUDA_VISIBLE_DEVICES or
    # CUDA_DEVICE_ORDER can break that, hence the label.
    handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
    return handle, (
        f"NVML device index {device_index} (assumed to be torch's cuda:{device_index}{note})"
    )


def energy_meter(
    device_type: str,
    device_index: int | None = 0,
    powercap: Path = POWERCAP,
    gpu_uuid: str | None = None,
) -> tuple[WindowMeter | None, Availability]:
    """The energy meter for a device, or None and the reason there is none.

    RAPL (package and DRAM counters of every socket) for `cpu`; NVML's energy counter for
    `cuda` (found by `gpu_uuid` where torch gives one, else by index). Nothing else is read,
    and nothing is ever estimated.
    """
    index = device_index or 0
    if device_type == "cpu":
        domains, ok = rapl_domains(powercap)
        if not ok.available:
            return None, ok
        if not rapl_total_of(domains):
            found = ", ".join(d.name for d in domains)
            return None, Availability(
                False, f"RAPL zones under {powercap} have no package, dram or psys domain to "
                f"total (found: {found})"
            )  # fmt: skip
        return EnergyMeter(domains), Availability(True)
    if device_type == "cuda":
        pynvml, ok = open_nvml("NVML's energy counter")
        if pynvml is None:
            return None, ok
        try:
            handle, label = nvml_handle(pynvml, index, gpu_uuid)
            meter = NvmlEnergyMeter(pynvml, handle, label, name=f"gpu-{index}")
            meter._read_mj()  # readable now (Volta or newer, supported board), or say why not
        except Exception as exc:  # NVMLError subclasses: no driver, no device, not supported
            return None, Availability(False, f"NVML energy counter not readable: {exc}")
        return meter, Availability(True)
    return None, Availability(
        False, f"no energy counter reviewkit can read for {device_type} devices (it reads RAPL "
        "for cpu and NVML for cuda)"
    )  # fmt: skip


def gpu_conditions(device_type: str, device_index: int | None = 0, gpu_uuid: str | None = None,
                   nvml: Any = None) -> dict | None:
    """What a GPU's ceilings are taken under, as NVML reports it: the enforced power limit (W),
    the application clocks and the maximum SM clock (MHz). None for a device that is not a CUDA
    GPU; `available: False` and why where NVML cannot say. `nvml`: a module standing in for
    pynvml (tests)."""
    if device_type != "cuda":
        return None
    if nvml is None:
        nvml, ok = open_nvml("the GPU's power limit and clocks")
        if nvml is None:
            return {"available": False, "reason": ok.reason}
    try:
        handle, label = nvml_handle(nvml, device_index or 0, gpu_uuid)
        return {
            "available": True,
            "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(handle) * MILLI,
            "applications_sm_clock_mhz": nvml.nvmlDeviceGetApplicationsClock(
                handle, nvml.NVML_CLOCK_SM),
            "applications_memory_clock_mhz": nvml.nvmlDeviceGetApplicationsClock(
                handle, nvml.NVML_CLOCK_MEM),
            "max_sm_clock_mhz": nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
            "method": f"NVML, {label}: enforced power limit, application and maximum clocks",
        }  # fmt: skip
    except Exception as exc:  # NVMLError subclasses: not supported on this board, no permission
        return {"available": False, "reason": f"NVML could not read power limit or clocks: {exc}"}


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
    """Whether NVML's total-energy counter of GPU 0 can be read (NVIDIA GPUs, driver and pynvml
    present): the survey's answer, recorded as evidence."""
    pynvml, ok = open_nvml("NVML's energy counter")
    if pynvml is None:
        return ok
    try:
        handle, _ = nvml_handle(pynvml, 0)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        return Availability(True)
    except Exception as exc:  # NVMLError subclasses, no device, not supported
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
