"""Long-window stability: one workload back to back per sub-window, with clocks and temperatures.

Imports torch (it measures). The loop itself (`measure_window`) takes the call, the clock and
the sensor read as arguments, so its bookkeeping is tested on a fake clock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from reviewkit.common.errors import UsageError
from reviewkit.evidence import drift
from reviewkit.evidence import files as evidence
from reviewkit.measure import environment, sensors
from reviewkit.measure.allocator import steady_heap
from reviewkit.measure.device import device_timed, resolve_device
from reviewkit.measure.runner import (
    SAMPLE_RESOLUTION_DIGITS,  # nanoseconds, as run bundles store samples
    knobs,
)
from reviewkit.measure.sensors import Availability
from reviewkit.suite import kernels
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import DEFAULT_SUITE_PROFILE, suite_profile

KIND = evidence.SOAK
SCHEMA_VERSION = evidence.SCHEMA_VERSIONS[KIND]
# Twenty points give a trend interval worth reading and a first/last sub-window of 5% of the
# window each, long enough for a median of many calls at every profile's model workload.
SUBWINDOWS = 20
# The model-level workload is what production serves; any single workload id can be named.
DEFAULT_DTYPE = "fp32"

Reading = tuple[dict[str, float], Availability]
ReadFn = Callable[[], Reading]
Clock = Callable[[], float]
# Series names end in their unit: "_c" are temperatures, "_mhz" clocks (see `series`).
TEMPERATURE_SUFFIX, CLOCK_SUFFIX = "_c", "_mhz"
# Throttling is judged on the sensors of the device measured: a GPU soak leaves the host CPU
# mostly waiting, so its cpufreq reading falls with idleness, not with throttling.
THROTTLE_READERS = {
    "cpu": ("temperatures_c", "cpu_clocks_mhz"),
    "cuda": ("gpu_temperatures_c", "gpu_clocks_mhz"),
}


# --- NVML (NVIDIA GPUs) ------------------------------------------------------------------------


def _nvml_read(index: int, pci_bus_id: str | None, what: str) -> Reading:
    """One NVML value of one GPU: what = "temperature" | "sm_clock" | "slowdown"."""
    pynvml, ok = sensors.open_nvml(f"the GPU {what.replace('_', ' ')}")
    if pynvml is None:
        return {}, ok
    try:
        # NVML numbers GPUs in PCI order, CUDA by speed unless told otherwise: the bus id
        # names the same GPU in both.
        handle, _ = sensors.nvml_handle(pynvml, index, pci_bus_id=pci_bus_id)
        if what == "temperature":
            value = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
        elif what == "sm_clock":
            value = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        else:
            value = pynvml.nvmlDeviceGetTemperatureThreshold(
                handle, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
            )
        return {f"gpu{index}": float(value)}, Availability(True)
    except Exception as exc:
        return {}, Availability(False, f"NVML {what} not readable: {type(exc).__name__}: {exc}")
    finally:
        with contextlib.suppress(Exception):  # a failed shutdown changes no reading
            pynvml.nvmlShutdown()


def nvml_temperatures_c(index: int = 0, pci_bus_id: str | None = None) -> Reading:
    """GPU core temperature in degrees Celsius, keyed "gpu<index>"."""
    return _nvml_read(index, pci_bus_id, "temperature")


def nvml_clocks_mhz(index: int = 0, pci_bus_id: str | None = None) -> Reading:
    """Current SM clock in MHz, keyed "gpu<index>"."""
    return _nvml_read(index, pci_bus_id, "sm_clock")


def nvml_slowdown_c(index: int = 0, pci_bus_id: str | None = None) -> Reading:
    """The temperature at which the GPU slows its clocks (NVML's slowdown threshold)."""
    return _nvml_read(index, pci_bus_id, "slowdown")


def thermal_critical_c(root: Path = sensors.THERMAL) -> dict[str, float]:
    """Each thermal zone's critical trip point, keyed as `sensors.temperatures_c` keys zones."""
    out = {}
    for zone in sorted(root.glob("thermal_zone*")) if root.is_dir() else []:
        try:
            kind = (zone / "type").read_text().strip()
            for trip in sorted(zone.glob("trip_point_*_type")):
                if trip.read_text().strip() == "critical":
                    temp = trip.with_name(trip.name.replace("_type", "_temp"))
                    out[f"{kind} ({zone.name})"] = int(temp.read_text().strip()) * sensors.MILLI
                    break
        except (OSError, ValueError):
            continue
    return out


def _not_for(device: torch.device) -> ReadFn:
    why = f"the soak runs on {device.type}; GPU sensors are read through NVML on NVIDIA GPUs only"
    return lambda: ({}, Availability(False, why))


def default_readings(device: torch.device) -> dict[str, ReadFn]:
    """The readers a soak on this device records at every sub-window end."""
    readers: dict[str, ReadFn] = {
        "temperatures_c": sensors.temperatures_c,
        "cpu_clocks_mhz": sensors.cpu_clocks_mhz,
    }
    if device.type == "cuda" and not getattr(torch.version, "hip", None):
        index = device.index if device.index is not None else torch.cuda.current_device()
        bus = _pci_bus_id(index)
        readers["gpu_temperatures_c"] = lambda: nvml_temperatures_c(index, bus)
        readers["gpu_clocks_mhz"] = lambda: nvml_clocks_mhz(index, bus)
    else:
        readers["gpu_temperatures_c"] = readers["gpu_clocks_mhz"] = _not_for(device)
    return readers


def default_critical_c(device: torch.device) -> dict[str, float]:
    """Known critical temperatures, keyed by series ("reader:sensor"), for the throttling check."""
    out = {f"temperatures_c:{k}": v for k, v in thermal_critical_c().items()}
    if device.type == "cuda" and not getattr(torch.version, "hip", None):
        index = device.index if device.index is not None else torch.cuda.current_device()
        values, _ = nvml_slowdown_c(index, _pci_bus_id(index))
        out.update({f"gpu_temperatures_c:{k}": v for k, v in values.items()})
    return out


def _pci_bus_id(index: int) -> str | None:
    props = torch.cuda.get_device_properties(index)
    if not hasattr(props, "pci_bus_id"):
        return None
    return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


# --- the window ----------------------------------------------------------------------------------


def _read_all(readings: Mapping[str, ReadFn]) -> tuple[dict[str, dict], dict[str, Availability]]:
    values, availability = {}, {}
    for name, read in readings.items():
        try:
            v, ok = read()
        except Exception as exc:  # a sensor that breaks is data too
            v, ok = {}, Availability(False, f"{type(exc).__name__}: {exc}")
        values[name], availability[name] = dict(v), ok
    return values, availability


def measure_window(
    call: Callable[[], float],
    window_s: float,
    subwindows: int,
    clock: Clock = time.perf_counter,
    read: Callable[[], dict] = dict,
    on_subwindow: Callable[[int], None] | None = None,
) -> tuple[list[dict], bool]:
    """Call back to back for window_s, closing sub-window k at the first call that ends past
    begin + (k + 1) * window_s / subwindows, then taking `read()` (sensors) before the next.

    Every sub-window holds at least one call, so a call longer than a sub-window stretches the
    window rather than leaving empty sub-windows. Times are seconds since the window began; the
    sensor reads fall between sub-windows, outside both. Returns (sub-windows, complete): a
    KeyboardInterrupt ends the window early, keeping what was measured (the sub-window in
    progress marked partial).
    """
    begin = clock()
    start = begin
    out: list[dict] = []
    samples: list[float] = []
    k = 0
    try:
        for k in range(subwindows):
            if on_subwindow:
                on_subwindow(k)
            deadline = begin + (k + 1) * window_s / subwindows
            samples = []
            while True:
                samples.append(call())
                now = clock()
                if now >= deadline:
                    break
            out.append(_subwindow(k, start - begin, now - begin, samples, read()))
            samples = []
            start = clock()
    except KeyboardInterrupt:
        if samples:
            partial = _subwindow(k, start - begin, clock() - begin, samples, {})
            out.append({**partial, "partial": True})
        return out, False
    return out, True


def _subwindow(index: int, start_s: float, end_s: float, samples: list[float], readings) -> dict:
    return {
        "index": index,
        "start_s": round(start_s, SAMPLE_RESOLUTION_DIGITS),
        "end_s": round(end_s, SAMPLE_RESOLUTION_DIGITS),
        "calls": len(samples),
        "samples_s": [round(s, SAMPLE_RESOLUTION_DIGITS) for s in samples],
        "readings": readings,
        "partial": False,
    }


def _throughput(sw: dict, flops: int) -> dict:
    wall = sw["end_s"] - sw["start_s"]
    rate = sw["calls"] / wall if wall > 0 else None
    return {**sw, "calls_per_s": rate, "flops_per_s": rate * flops if rate else None}


def series(subwindows: list[dict], reader: str) -> dict[str, list[float | None]]:
    """One reading per sub-window end for each sensor of a reader, keyed "reader:sensor"."""
    names: list[str] = []
    for sw in subwindows:
        names += [n for n in sw["readings"].get(reader, {}) if n not in names]
    return {
        f"{reader}:{n}": [sw["readings"].get(reader, {}).get(n) for sw in subwindows] for n in names
    }


def analyse(doc: dict) -> drift.Drift:
    """The drift verdict of a soak document, from its full (not partial) sub-windows."""
    full = [sw for sw in doc["subwindows"] if not sw["partial"] and sw["calls_per_s"]]
    times = [(sw["start_s"] + sw["end_s"]) / 2 for sw in full]
    rates = [sw["calls_per_s"] for sw in full]
    first = full[0]["samples_s"] if full else []
    last = full[-1]["samples_s"] if len(full) > 1 else []
    judged = THROTTLE_READERS.get(doc["device"].split(":", 1)[0], ())
    clocks, temps, missing = {}, {}, []
    for reader in judged:
        got = series(full, reader)
        if reader.endswith(CLOCK_SUFFIX):
            clocks.update(got)
        elif reader.endswith(TEMPERATURE_SUFFIX):
            temps.update(got)
        ok = doc["sensors"].get(reader, {})
        if not got and ok.get("reason"):
            missing.append(f"{reader}: {ok['reason']}")
    if not judged:
        missing.append(f"no clock or temperature reader for {doc['device']} devices")
    return drift.detect(
        times,
        rates,
        first,
        last,
        clocks_mhz=clocks,
        temperatures_c=temps,
        critical_c=doc.get("critical_c") or {},
        unavailable_reason="; ".join(missing),
    )


# --- the soak ------------------------------------------------------------------------------------


def reproduce_command(profile: str, device: str, workload_id: str, window_s: float) -> str:
    return (
        f"reviewkit soak --profile {profile} --device {device} --workload {workload_id} "
        f"--window-s {window_s:g}"
    )


def find_spec(profile: str, workload_id: str | None) -> suite.WorkloadSpec:
    """The one workload a soak runs: by id, or the profile's model workload in fp32."""
    if workload_id is None:
        suite_profile(profile)
        specs = [suite.default_model(profile, DEFAULT_DTYPE)]
    else:
        try:
            specs = suite.plan_specs(profile, suite.DTYPES, workload_id)
        except UsageError:
            specs = []
    if not specs:
        raise UsageError(
            f"--workload {workload_id!r} matches no workload of profile {profile}; "
            f"name one id from `reviewkit suite --profile {profile}`"
        )
    if len(specs) != 1:
        shown = ", ".join(s.id for s in specs[:3])
        raise UsageError(
            f"--workload {workload_id!r} matches {len(specs)} workloads of profile {profile} "
            f"({shown}, ...); name exactly one id (see `reviewkit suite --profile {profile}`)"
        )
    return specs[0]


def run_soak(
    profile: str = DEFAULT_SUITE_PROFILE,
    device: str = "cpu",
    workload_id: str | None = None,
    window_s: float | None = None,
    subwindows: int | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
    clock: Clock = time.perf_counter,
    readings: Mapping[str, ReadFn] | None = None,
    critical_c: Callable[[], Mapping[str, float]] | None = None,
    rapl: Callable[[], tuple[list[sensors.EnergyDomain], Availability]] = sensors.rapl_domains,
) -> dict:
    """Run one workload back to back for the window; a versioned `reviewkit.soak` document."""
    spec = find_spec(profile, workload_id)
    window = suite_profile(profile).soak_window_s if window_s is None else float(window_s)
    parts = SUBWINDOWS if subwindows is None else subwindows
    if not window > 0:
        raise UsageError(f"--window-s {window_s}: expected a positive number of seconds")
    if not isinstance(parts, int) or parts < 1:
        raise UsageError(f"--subwindows {subwindows}: expected a positive integer")
    dev = resolve_device(device)
    readers = dict(default_readings(dev) if readings is None else readings)
    progress = on_progress or (lambda *_: None)
    started = time.time()
    doc = {
        **evidence.header(KIND, started),
        "complete": False,
        "profile": profile,
        "device": str(dev),
        "workload": {
            "id": spec.id,
            "layer_type": spec.layer_type,
            "kernel": spec.kernel,
            "source_model": spec.source_model,
            "dtype": spec.dtype,
            "params": spec.params,
            "flops": spec.flops,
            "bytes": spec.bytes,
            "definition_hash": spec.definition_hash(),
            "reproduce": reproduce_command(profile, str(dev), spec.id, window),
        },
        "suite": suite.suite_identity().to_json(),
        "environment": {**environment.host_facts(), "torch_version": torch.__version__},
        "knobs": knobs(dev, (spec.dtype,), profile),
        "window_s": window,
        "subwindows_planned": parts,
    }
    progress("warming up", 0, parts)
    fn = kernels.build(spec, dev)
    call = device_timed(fn, dev)
    policy = suite_profile(profile).sampling
    values, availability = _read_all(readers)
    doc["sensors"] = {name: ok.to_json() for name, ok in availability.items()}
    doc["readings_at_start"] = values
    doc["critical_c"] = dict((critical_c or (lambda: default_critical_c(dev)))())
    domains, rapl_ok = rapl()
    meter = sensors.EnergyMeter(domains) if rapl_ok.available else None
    complete = False
    # the CPU heap held as `run` holds it (measure/allocator.py): no call faults in fresh pages
    with torch.inference_mode(), steady_heap(dev.type) as heap:
        doc["environment"]["cpu_allocator"] = heap
        warm, begin = [], clock()
        try:
            # the policy's warm-up drains one-off costs (allocator, primitive creation) only:
            # the heating of the device is what the window is there to see
            while len(warm) < policy.warmup_calls or clock() - begin < policy.warmup_s:
                warm.append(call())
            doc["warmup_samples_s"] = [round(s, SAMPLE_RESOLUTION_DIGITS) for s in warm]
            if meter:
                meter.start()
            window_start = clock()
            measured, complete = measure_window(
                call,
                window,
                parts,
                clock,
                read=lambda: _read_all(readers)[0],
                on_subwindow=lambda k: progress(f"sub-window {k + 1}/{parts}", k, parts),
            )
            window_end = clock()
        except KeyboardInterrupt:  # during warm-up: nothing of the window was measured
            doc["warmup_samples_s"] = [round(s, SAMPLE_RESOLUTION_DIGITS) for s in warm]
            measured, window_start = [], None
            window_end = clock()
    doc["subwindows"] = [_throughput(sw, spec.flops) for sw in measured]
    doc["measured_window_s"] = (
        round(window_end - window_start, SAMPLE_RESOLUTION_DIGITS)
        if window_start is not None
        else 0.0
    )
    if meter and window_start is not None:
        joules = meter.stop()
        span = doc["measured_window_s"]
        doc["energy"] = {
            "available": True,
            "reason": "",
            "scope": "whole RAPL domains (every process on the package), over the window",
            "joules": joules,
            "mean_watts": {k: j / span for k, j in joules.items()} if span > 0 else {},
        }
    else:
        why = rapl_ok.reason if not rapl_ok.available else "the window was interrupted"
        doc["energy"] = {"available": False, "reason": why, "joules": {}, "mean_watts": {}}
    doc["complete"] = complete
    if not complete:
        doc["interrupted"] = (
            "interrupted by the user (Ctrl-C): the sub-windows measured are kept; the one in "
            "progress is marked partial and left out of the analysis"
        )
    doc["analysis"] = analyse(doc).to_json()
    doc["wall_s"] = round(time.time() - started, 3)
    progress("done", parts, parts)
    return doc


def write_soak(path: Path | str, doc: dict) -> Path:
    """Write the document atomically (temporary file, fsync, rename)."""
    from reviewkit.bundle.run import write_json_atomic

    path = Path(path)
    write_json_atomic(path, doc)
    return path
