"""The device a run measures on: resolving --device, its name, and timing one call on it."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable

import torch

from reviewkit.common.errors import DeviceUnavailableError, UsageError
from reviewkit.measure import environment, fingerprint, sensors
from reviewkit.measure.timing import timed_call

DEVICE_KINDS = ("cpu", "cuda", "mps", "xpu")


def resolve_device(name: str) -> torch.device:
    kind = name.split(":", 1)[0]
    if kind not in DEVICE_KINDS or not re.fullmatch(r"[a-z]+(:\d+)?", name):
        raise UsageError(
            f"--device {name!r} is not a device reviewkit knows; choose one of "
            f"{', '.join(DEVICE_KINDS)} (optionally with an index, e.g. cuda:1)"
        )
    available = {
        "cpu": lambda: True,
        "cuda": lambda: torch.cuda.is_available(),
        "mps": lambda: hasattr(torch.backends, "mps") and torch.backends.mps.is_available(),
        "xpu": lambda: hasattr(torch, "xpu") and torch.xpu.is_available(),
    }[kind]()
    if not available:
        raise DeviceUnavailableError(
            f"--device {name}: no {kind} device is available to torch {torch.__version__} on this "
            f"machine; run with --device cpu, or on a machine with a {kind} device"
        )
    device = torch.device(name)
    if kind == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceUnavailableError(
            f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) present"
        )
    return device


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        return environment.cpu_model()
    return device.type


def synchroniser(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    if device.type == "mps":
        return torch.mps.synchronize
    if device.type == "xpu":
        return torch.xpu.synchronize
    return lambda: None


def device_timed(fn: Callable[[], object], device: torch.device) -> Callable[[], float]:
    """Per-call duration: CUDA events on NVIDIA GPUs, else the host clock with a device sync."""
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)

        def call() -> float:
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds

        return call
    return timed_call(fn, time.perf_counter, synchroniser(device))


def current_settings(device: torch.device) -> dict:
    """The settings this process holds that move a ceiling (bundle/profile.py SETTING_KEYS): the
    intra-op threads and float32 matmul precision, as torch reports them now."""
    return {
        "threads": torch.get_num_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def gpu_uuid(device: torch.device) -> str | None:
    """torch's UUID of a CUDA device (NVML finds the same board by it), None elsewhere."""
    if device.type != "cuda":
        return None
    try:
        return str(torch.cuda.get_device_properties(device).uuid)
    except (AttributeError, RuntimeError):  # older torch, or a device that will not say
        return None


def device_conditions(device: torch.device) -> dict | None:
    """What a GPU's ceilings are taken under (power limit, clocks); None for other devices."""
    return sensors.gpu_conditions(device.type, device.index, gpu_uuid(device))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def torch_build() -> dict:
    """The torch build a measurement ran under: version, BLAS, oneDNN, CPU capability, CUDA."""
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", config)
    onednn = re.search(r"(?:MKL-DNN|oneDNN) v([\d.]+)", config)
    mkl = re.search(r"Math Kernel Library Version ([\w.\-]+)", config)
    cap = re.search(r"CPU capability usage: (\S+)", config)
    return {
        "torch_version": torch.__version__,
        "blas": blas.group(1) if blas else None,
        "mkl": mkl.group(1) if mkl else None,
        "onednn": onednn.group(1) if onednn else None,
        "cpu_capability": cap.group(1) if cap else None,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "config": config.strip().splitlines(),
    }


def nvidia_smi_query(fields: tuple[str, ...], gpu: str | None = None) -> dict[str, str] | None:
    """`nvidia-smi --query-gpu=FIELDS` for one GPU (its UUID, as torch gives it; else the
    first GPU listed): field -> value as printed, None where nvidia-smi is absent or fails.
    A field the driver cannot report comes back as its "[N/A]"-style text; callers parse."""
    command = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    if gpu:
        command.append(f"--id={sensors.nvidia_uuid(gpu)}")
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return None
    values = [v.strip() for v in lines[0].split(",")]
    return dict(zip(fields, values, strict=False)) if len(values) == len(fields) else None


def nvidia_driver() -> str | None:
    found = nvidia_smi_query(("driver_version",))
    return found["driver_version"] if found else None


def _mhz(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def device_fingerprint(device: torch.device) -> dict | None:
    """The fingerprint of the device a run measures on (None for kinds without one yet)."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        # the maximum SM clock sets the compute peak (a capped part is another device);
        # torch stopped reporting clocks, nvidia-smi does
        smi = nvidia_smi_query(("driver_version", "clocks.max.sm"), str(getattr(props, "uuid", "")))
        return fingerprint.gpu_fingerprint(
            {
                "name": device_name(device),
                "compute_capability": f"{props.major}.{props.minor}",
                "sm_count": props.multi_processor_count,
                "memory_bytes": props.total_memory,
                "max_clock_mhz": _mhz(smi["clocks.max.sm"]) if smi else None,
                "driver": smi["driver_version"] if smi else nvidia_driver(),
            }
        )
    if device.type == "cpu":
        return fingerprint.cpu_fingerprint()
    return None
