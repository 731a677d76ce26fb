"""Measure the suite on this device: ceilings, per-call samples, failures as data (torch)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from reviewkit import __version__
from reviewkit.analysis.roofline import energy_absent, workload_energy
from reviewkit.bundle.run import STATUS_OK
from reviewkit.common.errors import DeviceUnavailableError, UsageError
from reviewkit.measure import environment, sensors
from reviewkit.measure.timing import SamplingPolicy, collect_samples, timed_call
from reviewkit.suite import ceilings, kernels
from reviewkit.suite import workloads as suite
from reviewkit.suite.workloads import WorkloadSpec

DEVICE_KINDS = ("cpu", "cuda", "mps", "xpu")

# Per-profile sampling: smoke proves the pipeline in seconds; quick fits ~3 minutes on a
# 2-core CPU; full buys tighter tails with longer windows.
POLICIES = {
    "smoke": SamplingPolicy(
        warmup_calls=1, warmup_s=0.0, min_samples=5, min_time_s=0.01, max_samples=200, budget_s=0.5
    ),
    "quick": SamplingPolicy(
        warmup_calls=2,
        warmup_s=0.02,
        min_samples=20,
        min_time_s=0.2,
        max_samples=1000,
        budget_s=3.0,
    ),
    "full": SamplingPolicy(
        warmup_calls=3,
        warmup_s=0.1,
        min_samples=50,
        min_time_s=1.0,
        max_samples=5000,
        budget_s=15.0,
    ),
}
# Calibration: square GEMM sizes tried per profile (largest that fits the budget wins), and
# the copy buffer size, large enough to spill every cache level of the machines we target.
GEMM_SIZES = {
    "smoke": (128, 256, 512),
    "quick": (256, 384, 512, 768, 1024, 1536, 2048),
    "full": (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096),
}
GPU_GEMM_SIZES = (2048, 4096, 8192)
COPY_BYTES = {"smoke": 32 << 20, "quick": 256 << 20, "full": 512 << 20}
GPU_COPY_BYTES = 1 << 30
# Enough warm-up to reach steady clocks and packed-weight caches, enough samples for a stable
# median; a slow path stops at the budget after a few calls.
CALIBRATION_POLICY = SamplingPolicy(
    warmup_calls=2, warmup_s=0.05, min_samples=5, min_time_s=0.1, max_samples=50, budget_s=2.0
)
SAMPLE_RESOLUTION_DIGITS = 9  # nanoseconds: below any clock we read, keeps run.json small

STATUS_OVER_BUDGET = "over-budget"
STATUS_UNSUPPORTED = "unsupported"
STATUS_OOM = "out-of-memory"
STATUS_TIMEOUT = "timeout"
STATUS_ERROR = "error"
STATUS_NOT_RUN = "not-run"


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


# --- environment and knobs -------------------------------------------------------------------


def _torch_build() -> dict:
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


def _device_facts(device: torch.device) -> dict:
    facts = {"device_type": device.type, "device_name": device_name(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            device_memory_bytes=props.total_memory,
            device_multiprocessors=props.multi_processor_count,
            device_capability=f"{props.major}.{props.minor}",
            driver=_nvidia_driver(),
        )
    return facts


def _nvidia_driver() -> str | None:
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def knobs(device: torch.device, dtypes: Sequence[str], profile: str) -> dict:
    shapes = suite.PROFILE_SHAPES[profile]
    k = {
        "device": str(device),
        "device_name": device_name(device),
        "dtypes": list(dtypes),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "compile_mode": "eager",
        "grad_mode": "inference",
        "memory_format": "contiguous",
        "attention_backend": "torch default dispatch",
        "sparsity": "dense",
        "quantization": "none",
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "mkldnn_enabled": bool(torch.backends.mkldnn.enabled),
        "seq_sweep": list(shapes.seqs),
        "batch_sweep": list(shapes.batches),
    }
    if device.type == "cuda":
        k["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        k["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
        k["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
    return k


# --- ceilings ----------------------------------------------------------------------------------


def _median(samples: Sequence[float]) -> float:
    s = sorted(samples)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


# Both operand layouts: torch.mm(a, b) ("nn") and torch.mm(a, b.t()) ("nt", what nn.Linear
# runs). Some stacks have a slow path in one layout only (fp16 "nn" on this CPU runs ~10x
# slower than "nt"), and the ceiling is the best the device reaches, not the worst.
GEMM_LAYOUTS = ("nn", "nt")


def gemm_rate(
    n: int,
    dtype: str,
    device: torch.device,
    layout: str = "nn",
    policy: SamplingPolicy = CALIBRATION_POLICY,
) -> float:
    """Median FLOP/s of an n x n x n matmul in the given operand layout."""
    gen = torch.Generator().manual_seed(kernels.INPUT_SEED)
    tdt = kernels.TORCH_DTYPES[dtype]
    a = torch.randn(n, n, generator=gen).to(device=device, dtype=tdt)
    b = torch.randn(n, n, generator=gen).to(device=device, dtype=tdt)
    bt = b.t() if layout == "nt" else b
    with torch.inference_mode():
        result = collect_samples(device_timed(lambda: torch.mm(a, bt), device), policy)
    samples = result.samples_s or result.warmup_samples_s
    return 2 * n**3 / _median(samples)


def calibrate_compute(dtype: str, device: torch.device, profile: str) -> tuple[float | None, str]:
    """Best median rate over a sweep of square GEMMs in each layout.

    A layout stops growing once its own rate predicts that the next size's calls would not
    fit the calibration budget: a slow path is confirmed at small sizes, not waited out.
    """
    sizes = GPU_GEMM_SIZES if device.type != "cpu" else GEMM_SIZES[profile]
    calls = CALIBRATION_POLICY.warmup_calls + CALIBRATION_POLICY.min_samples
    best, best_at = None, None
    layout_rate: dict[str, float] = {}
    stopped: list[str] = []
    for n in sizes:
        for layout in GEMM_LAYOUTS:
            if layout in stopped:
                continue
            if layout in layout_rate and 2 * n**3 / layout_rate[layout] * calls > (
                CALIBRATION_POLICY.budget_s
            ):
                stopped.append(layout)
                continue
            try:
                rate = gemm_rate(n, dtype, device, layout)
            except (RuntimeError, NotImplementedError) as exc:
                return best, f"square GEMM sweep stopped at n={n} ({layout}): {_first_line(exc)}"
            layout_rate[layout] = max(rate, layout_rate.get(layout, 0.0))
            if best is None or rate > best:
                best, best_at = rate, f"n={n}, layout {layout}"
    method = (
        f"best median rate of torch.mm over square sizes {list(sizes)} in layouts "
        f"{'/'.join(GEMM_LAYOUTS)}; best at {best_at}"
    )
    if stopped:
        method += f"; layout {'/'.join(stopped)} stopped early (too slow for the budget)"
    return best, method


def copy_rate(
    nbytes: int, device: torch.device, policy: SamplingPolicy = CALIBRATION_POLICY
) -> float:
    """Median bytes/s of a large copy, counting bytes read plus bytes written."""
    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    with torch.inference_mode():
        result = collect_samples(device_timed(lambda: dst.copy_(src), device), policy)
    return 2 * nbytes / _median(result.samples_s or result.warmup_samples_s)


def calibrate(device: torch.device, dtypes: Sequence[str], profile: str) -> dict:
    entry = ceilings.lookup(device_name(device)) if device.type != "cpu" else None
    compute = {}
    for dtype in dtypes:
        measured, method = calibrate_compute(dtype, device, profile)
        compute[dtype] = ceilings.choose(
            measured,
            method,
            entry.peak_flops_per_s.get(dtype) if entry else None,
            entry.reference if entry else "",
        ).to_json()
    nbytes = GPU_COPY_BYTES if device.type != "cpu" else COPY_BYTES[profile]
    try:
        bw = copy_rate(nbytes, device)
        bw_method = f"median of tensor.copy_ over {nbytes >> 20} MiB, bytes read + written"
    except RuntimeError as exc:
        bw, bw_method = None, f"copy calibration failed: {_first_line(exc)}"
    bandwidth = ceilings.choose(
        bw, bw_method, entry.peak_bytes_per_s if entry else None, entry.reference if entry else ""
    ).to_json()
    return {
        "compute": compute,
        "bandwidth": bandwidth,
        "datasheet_entry": entry.name if entry else None,
    }


# --- the suite -----------------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def _failure_status(exc: BaseException) -> str:
    msg = str(exc)
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in msg.lower():
        return STATUS_OOM
    if isinstance(exc, NotImplementedError) or "not implemented for" in msg:
        return STATUS_UNSUPPORTED
    return STATUS_ERROR


def reproduce_command(spec: WorkloadSpec, profile: str, device: torch.device, threads: int) -> str:
    return (
        f"reviewkit run --profile {profile} --device {device} --dtype {spec.dtype} "
        f"--threads {threads} --only '{spec.id}'"
    )


def _base_record(spec: WorkloadSpec, reproduce: str) -> dict:
    return {
        "id": spec.id,
        "layer_type": spec.layer_type,
        "kernel": spec.kernel,
        "source_model": spec.source_model,
        "dtype": spec.dtype,
        "status": STATUS_NOT_RUN,
        "reason": "",
        "inputs": [t.to_json() for t in spec.inputs],
        "params": spec.params,
        "flops": spec.flops,
        "matmul_flops": spec.matmul_flops,
        "bytes": spec.bytes,
        "definition_hash": spec.definition_hash(),
        "samples_s": [],
        "warmup_samples_s": [],
        "stopped_by": None,
        "energy": energy_absent("not measured"),
        "reproduce": reproduce,
    }


def predicted_call_s(spec: WorkloadSpec, ceilings_doc: dict) -> float | None:
    """Roofline lower bound of one call at the measured ceilings: no call can be faster."""
    peak = ceilings_doc["compute"].get(spec.dtype, {}).get("measured")
    bw = ceilings_doc["bandwidth"].get("measured")
    if not peak or not bw:
        return None
    return max(spec.flops / peak, spec.bytes / bw)


# --- energy over each workload's measured window ----------------------------------------------

# (meter or None, why not): what `run` found for the device, handed to every workload.
EnergySource = tuple[sensors.WindowMeter | None, sensors.Availability]
NO_METER_GIVEN = sensors.Availability(False, "no energy meter was given to measure_workload")


class _EnergyWindow:
    """The meter's start and stop as collect_samples' window hooks; a read error is data.

    collect_samples calls start() just before its window clock starts and stop() just after
    it stops, so the counters span the timed window plus two counter reads (microseconds for
    RAPL's sysfs files and NVML's query, next to windows of 10 ms and more).
    """

    def __init__(self, meter: sensors.WindowMeter):
        self.meter = meter
        self.joules: dict[str, float] | None = None
        self.error = ""

    def start(self) -> None:
        try:
            self.meter.start()
        except Exception as exc:
            self.error = f"energy counter not readable at the window's start: {_first_line(exc)}"

    def stop(self) -> None:
        if self.error:
            return
        try:
            self.joules = self.meter.stop()
        except Exception as exc:
            self.error = f"energy counter not readable at the window's end: {_first_line(exc)}"


def energy_source(device: torch.device, powercap: Path = sensors.POWERCAP) -> EnergySource:
    """The energy meter for this device (RAPL for cpu, NVML for cuda), or why there is none."""
    uuid = None
    if device.type == "cuda":
        try:
            uuid = str(torch.cuda.get_device_properties(device).uuid)
        except (RuntimeError, AttributeError):
            uuid = None  # found by index instead; the meter's method says so
    return sensors.energy_meter(device.type, device.index, powercap, uuid)


def energy_meter_doc(source: EnergySource) -> dict:
    meter, ok = source
    if meter is None:
        return {"available": False, "reason": ok.reason}
    return {
        "available": True,
        "method": meter.method,
        "counter_update_s": meter.update_interval_s,
        "total_of": list(meter.total_of),
    }


def _window_energy(window: _EnergyWindow | None, why_not: str, spec: WorkloadSpec, result) -> dict:
    if window is None:
        return energy_absent(why_not)
    if window.error or window.joules is None:
        return energy_absent(window.error or "the energy window was not closed")
    return workload_energy(
        window.joules,
        window.meter.total_of,
        result.window_s,
        len(result.samples_s),
        spec.flops,
        window.meter.method,
        window.meter.update_interval_s,
    )


def measure_workload(
    spec: WorkloadSpec,
    device: torch.device,
    policy: SamplingPolicy,
    ceilings_doc: dict,
    reproduce: str,
    energy: EnergySource | None = None,
) -> dict:
    """Measure one workload; with `energy`, meter its measured window (never its warm-up)."""
    record = _base_record(spec, reproduce)
    meter, available = energy or (None, NO_METER_GIVEN)
    lower_bound = predicted_call_s(spec, ceilings_doc)
    calls = policy.warmup_calls + 1
    if lower_bound is not None and lower_bound * calls > policy.budget_s:
        peak = ceilings_doc["compute"][spec.dtype]["measured"]
        record["status"] = STATUS_OVER_BUDGET
        record["reason"] = (
            f"not run: at the measured {spec.dtype} ceiling of {peak / 1e9:.3g} GFLOP/s one call "
            f"takes at least {lower_bound:.3g} s, so {calls} calls exceed the "
            f"{policy.budget_s:g} s budget (a slow path on this device)"
        )
        record["energy"] = energy_absent("not measured: over budget")
        return record
    window = _EnergyWindow(meter) if meter is not None else None
    hooks = (window.start, window.stop) if window is not None else ()
    try:
        fn = kernels.build(spec, device)
        with torch.inference_mode():
            result = collect_samples(device_timed(fn, device), policy, time.perf_counter, *hooks)
    except Exception as exc:  # a failure is data: record it and let the run go on
        record["status"] = _failure_status(exc)
        record["reason"] = _first_line(exc)
        record["energy"] = energy_absent(f"not measured: {record['status']}")
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return record
    record["samples_s"] = [round(s, SAMPLE_RESOLUTION_DIGITS) for s in result.samples_s]
    record["warmup_samples_s"] = [
        round(s, SAMPLE_RESOLUTION_DIGITS) for s in result.warmup_samples_s
    ]
    record["stopped_by"] = result.stopped_by
    if not result.samples_s:
        record["status"] = STATUS_TIMEOUT
        record["reason"] = (
            f"warm-up alone used the {policy.budget_s:g} s budget "
            f"({len(result.warmup_samples_s)} call(s), last {result.warmup_samples_s[-1]:.3g} s)"
        )
        record["energy"] = energy_absent("no measured window: the warm-up used the budget")
        return record
    record["status"] = STATUS_OK
    record["energy"] = _window_energy(window, available.reason, spec, result)
    if result.stopped_by == "budget" and len(result.samples_s) < policy.min_samples:
        record["reason"] = (
            f"{len(result.samples_s)} samples (fewer than {policy.min_samples}): the "
            f"{policy.budget_s:g} s budget ran out; percentiles are coarse"
        )
    return record


@dataclass(frozen=True)
class RunRequest:
    profile: str = suite.DEFAULT_PROFILE
    device: str = "cpu"
    dtypes: tuple[str, ...] = suite.DTYPES
    only: str | None = None
    threads: int | None = None
    # The RAPL powercap folder to read (None: /sys/class/powercap). A seam for tests, which
    # point it at a fake sysfs tree; the survey in `environment.sensors` reads the same one.
    powercap_root: str | None = None


def plan(request: RunRequest) -> list[WorkloadSpec]:
    return suite.plan_specs(request.profile, request.dtypes, request.only)


def run(request: RunRequest, on_progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Measure the planned workloads and return the raw run document (not yet analysed)."""
    specs = plan(request)
    device = resolve_device(request.device)
    if request.threads is not None:
        if request.threads < 1:
            raise UsageError(f"--threads {request.threads}: expected a positive integer")
        torch.set_num_threads(request.threads)
    policy = POLICIES[request.profile]
    progress = on_progress or (lambda *_: None)
    powercap = Path(request.powercap_root) if request.powercap_root else sensors.POWERCAP
    energy = energy_source(device, powercap)
    started = time.time()
    doc = {
        "schema_version": None,  # set by the bundle writer
        "tool": {"name": "reviewkit", "version": __version__},
        "created_unix_s": round(started, 3),
        "complete": False,
        "profile": request.profile,
        "only": request.only,
        "suite": suite.suite_identity().to_json(),
        "environment": {
            **environment.host_facts(),
            **_torch_build(),
            **_device_facts(device),
            # what energy, temperature and clock counters exist here, or why not
            "sensors": sensors.survey(powercap),
        },
        # the counter each workload's measured window is metered with, or why there is none
        "energy_meter": energy_meter_doc(energy),
        "knobs": knobs(device, request.dtypes, request.profile),
        "sampling": asdict(policy),
        "ceilings": {},
        "workloads": [],
    }
    threads = torch.get_num_threads()
    records = [
        _base_record(s, reproduce_command(s, request.profile, device, threads)) for s in specs
    ]
    doc["workloads"] = records
    try:
        progress("calibrating ceilings", 0, len(specs))
        doc["ceilings"] = calibrate(
            device, sorted(set(request.dtypes), key=suite.DTYPES.index), request.profile
        )
        for i, spec in enumerate(specs):
            progress(spec.id, i, len(specs))
            records[i] = measure_workload(
                spec, device, policy, doc["ceilings"], records[i]["reproduce"], energy
            )
        progress("done", len(specs), len(specs))
        doc["complete"] = True
    except KeyboardInterrupt:
        doc["interrupted"] = (
            "interrupted by the user (Ctrl-C); workloads marked not-run were not measured"
        )
        for record in records:
            if record["status"] == STATUS_NOT_RUN:
                record["reason"] = "not measured: the run was interrupted before it"
                record["energy"] = energy_absent(record["reason"])
    doc["wall_s"] = round(time.time() - started, 3)
    return doc
