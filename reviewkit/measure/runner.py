"""Measure the suite on this device: ceilings, per-call samples, failures as data (torch)."""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import torch

from reviewkit import __version__
from reviewkit.analysis.energy import energy_absent, workload_energy
from reviewkit.analysis.roofline import level_for
from reviewkit.bundle import knobs as knob_registry
from reviewkit.bundle import run_to_run as run_to_run_file
from reviewkit.bundle.run import (
    STATUS_ERROR,
    STATUS_NOT_RUN,
    STATUS_OK,
    STATUS_OOM,
    STATUS_OVER_BUDGET,
    STATUS_TIMEOUT,
    STATUS_UNSUPPORTED,
)
from reviewkit.common.errors import UsageError
from reviewkit.measure import compiled, environment, memory_fit, overhead, projection, sensors
from reviewkit.measure import rounds as rounds_mod
from reviewkit.measure.allocator import steady_heap
from reviewkit.measure.calibration import low_precision_unavailable
from reviewkit.measure.device import (
    device_fingerprint,
    device_name,
    device_timed,
    first_line,
    gpu_uuid,
    resolve_device,
    torch_build,
)
from reviewkit.measure.device_profile import obtain
from reviewkit.measure.device_time import absent as device_time_absent
from reviewkit.measure.device_time import measure_device_times
from reviewkit.measure.energy_loop import measure_energy_loops
from reviewkit.measure.mapping import KnobMapping
from reviewkit.measure.timing import SamplingPolicy, collect_samples
from reviewkit.suite import kernels, production_slice, serving
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import DEFAULT_SUITE_PROFILE, suite_profile
from reviewkit.suite.workloads import WorkloadSpec

SAMPLE_RESOLUTION_DIGITS = 9  # nanoseconds: below any clock we read, keeps run.json small


# --- environment and knobs -------------------------------------------------------------------


def _device_facts(device: torch.device) -> dict:
    facts = {"device_type": device.type, "device_name": device_name(device)}
    fp = device_fingerprint(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            device_memory_bytes=props.total_memory,
            device_multiprocessors=props.multi_processor_count,
            device_capability=f"{props.major}.{props.minor}",
            # the fingerprint has asked nvidia-smi already
            driver=(fp or {}).get("facts", {}).get("driver"),
        )
    if fp is not None:
        facts["fingerprint"] = fp
    return facts


def knobs(device: torch.device, dtypes: Sequence[str], profile: str) -> dict:
    shapes = suite_profile(profile).shapes
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
    if suite_profile(profile).workload_set == "serving":  # its sweeps are its own
        k["seq_sweep"] = list(serving.PREFILL_TOKENS)
        k["batch_sweep"] = list(serving.DECODE_BATCHES)
    if device.type == "cuda":
        k["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        k["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
        k["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
        k["l2_flush"] = False  # t_device's cold-cache flush (CUDA only): off unless --knob
    return k


# --- the suite -----------------------------------------------------------------------------------


class RecompiledError(RuntimeError):
    """torch.compile compiled again while a workload was sampled."""


def failure_status(exc: BaseException) -> str:
    msg = str(exc)
    if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in msg.lower():
        return STATUS_OOM
    if isinstance(exc, NotImplementedError) or "not implemented for" in msg:
        return STATUS_UNSUPPORTED
    return STATUS_ERROR


def reproduce_command(
    spec: WorkloadSpec, profile: str, device: torch.device, threads: int,
    settings: dict | None = None, slice_path: str | None = None,
) -> str:
    knob_args = ",".join(f"{k}={_spelled(v)}" for k, v in (settings or {}).items()
                         if k not in ("threads", "dtype"))  # fmt: skip
    source = f"--slice {shlex.quote(slice_path)} " if slice_path else ""
    return (
        f"reviewkit run {source}--profile {profile} --device {device} --dtype {spec.dtype} "
        f"--threads {threads} --only '{spec.id}'" + (f" --knob '{knob_args}'" if knob_args else "")
    )


def _spelled(value: object) -> str:
    """A knob's value as `--knob` takes it back."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def base_record(spec: WorkloadSpec, reproduce: str, not_applicable: dict | None = None) -> dict:
    """A workload's record before it is measured. `not_applicable`: the knobs set for the run
    that do not change how this workload runs, with why (recorded, never silently ignored)."""
    record = {
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
        # the overhead phase fills both after the rounds (measure/overhead.py)
        "overhead": {"available": False, "method": "not-measured", "reason": "not measured"},
        "op_profile": None,
        # t_device, the device-time phase's (measure/device_time.py)
        "device_time": device_time_absent("not measured"),
        "reproduce": reproduce,
    }
    if not_applicable:
        record["knobs_not_applicable"] = dict(not_applicable)
    return record


def predicted_call_s(
    spec: WorkloadSpec, ceilings_doc: dict, settings: dict | None = None, device_type: str = ""
) -> float | None:
    """Roofline lower bound of one call at the measured ceilings, memory at the level that holds
    its working set: no call can be faster. Under weight `settings` that apply to it, its
    FLOPs are at the peak of the dtype it computes in, and a sparsity's share of them."""
    flops, dtype = spec.flops, spec.dtype
    if settings and knob_registry.maps_weights(settings):
        dtype = knob_registry.compute_dtype(settings, spec.kernel, spec.dtype, device_type)
        if not knob_registry.not_applicable(
            {"sparsity": settings.get("sparsity", knob_registry.DENSE)}, spec.kernel,
            spec.dtype, device_type,
        ):  # fmt: skip
            flops *= knob_registry.target_density(settings.get("sparsity"))
    peak = ceilings_doc["compute"].get(dtype, {}).get("measured")
    levels = ceilings_doc.get("memory") or [ceilings_doc["bandwidth"]]
    bw = level_for(spec.bytes, levels).get("measured")
    if not peak or not bw:
        return None
    return max(flops / peak, spec.bytes / bw)


# --- energy over each workload's measured window ----------------------------------------------

# (meter or None, why not): what `run` found for the device, handed to every workload.
EnergySource = tuple[sensors.WindowMeter | None, sensors.Availability]
NO_METER_GIVEN = sensors.Availability(False, "no energy meter was given to measure_workload")


class Mapping(Protocol):
    """How one side of an A/B maps the workloads (ab.py): its kernels and the settings that
    must hold while they are built and measured."""

    def build(self, spec: WorkloadSpec, device: torch.device) -> Callable[[], object]: ...

    def active(self) -> contextlib.AbstractContextManager: ...


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
            self.error = f"energy counter not readable at the window's start: {first_line(exc)}"

    def stop(self) -> None:
        if self.error:
            return
        try:
            self.joules = self.meter.stop()
        except Exception as exc:
            self.error = f"energy counter not readable at the window's end: {first_line(exc)}"


def energy_source(device: torch.device, powercap: Path = sensors.POWERCAP) -> EnergySource:
    """The energy meter for this device (RAPL for cpu, NVML for cuda), or why there is none."""
    # without a UUID the meter finds the GPU by index, and its method says so
    return sensors.energy_meter(device.type, device.index, powercap, gpu_uuid(device))


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
    whole_budget: SamplingPolicy | None = None,
    mapping: Mapping | None = None,
    builder: Callable[[WorkloadSpec, torch.device], Callable[[], object]] | None = None,
    settings: dict | None = None,
) -> dict:
    """Measure one workload (one round of it, under a round's policy); with `energy`, meter
    its measured window (never its warm-up). The slow-path guard holds the prediction against
    the workload's whole budget (`whole_budget`, default `policy`), not a round's share, at
    the weight knobs of `settings` (default the mapping's)."""
    record = base_record(spec, reproduce)
    meter, available = energy or (None, NO_METER_GIVEN)
    settings = settings if settings is not None else getattr(mapping, "settings", None)
    lower_bound = predicted_call_s(spec, ceilings_doc, settings, device.type)
    whole = whole_budget or policy
    calls = whole.warmup_calls + 1
    if lower_bound is not None and lower_bound * calls > whole.budget_s:
        dtype = knob_registry.compute_dtype(settings or {}, spec.kernel, spec.dtype, device.type)
        peak = ceilings_doc["compute"][dtype]["measured"]
        record["status"] = STATUS_OVER_BUDGET
        record["reason"] = (
            f"not run: at the measured {dtype} ceiling of {peak / 1e9:.3g} GFLOP/s one call "
            f"takes at least {lower_bound:.3g} s, so {calls} calls exceed the "
            f"{whole.budget_s:g} s budget (a slow path on this device)"
        )
        record["energy"] = energy_absent("not measured: over budget")
        return record
    too_big = memory_fit.does_not_fit(spec, *memory_fit.available_bytes(device))
    if too_big:  # status not-run, like a workload the run never reached, with the reason
        record["reason"] = too_big
        record["energy"] = energy_absent("not measured: does not fit the device's memory")
        return record
    window = _EnergyWindow(meter) if meter is not None else None
    hooks = (window.start, window.stop) if window is not None else ()
    try:
        with mapping.active() if mapping is not None else contextlib.nullcontext():
            build = builder or (mapping.build if mapping is not None else kernels.build)
            fn = build(spec, device)
            frames = compiled.frames_compiled()
            with torch.inference_mode():
                result = collect_samples(
                    device_timed(fn, device), policy, time.perf_counter, *hooks
                )
            recompiled = compiled.recompiled_reason(frames)
            if recompiled:
                raise RecompiledError(recompiled)
    except Exception as exc:  # a failure is data: record it and let the run go on
        record["status"] = failure_status(exc)
        record["reason"] = first_line(exc)
        record["energy"] = energy_absent(f"not measured: {record['status']}")
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return record
    record["samples_s"] = [round(s, SAMPLE_RESOLUTION_DIGITS) for s in result.samples_s]
    record["warmup_samples_s"] = [
        round(s, SAMPLE_RESOLUTION_DIGITS) for s in result.warmup_samples_s
    ]
    record["stopped_by"] = result.stopped_by
    record["round_wall_s"] = result.wall_s
    if not result.samples_s:
        record["status"] = STATUS_TIMEOUT
        record["reason"] = (
            f"warm-up alone used the {whole.budget_s:g} s budget "
            f"({len(result.warmup_samples_s)} call(s), last {result.warmup_samples_s[-1]:.3g} s)"
        )
        record["energy"] = energy_absent("no measured window: the warm-up used the budget")
        return record
    record["status"] = STATUS_OK
    record["energy"] = _window_energy(window, available.reason, spec, result)
    emulated = low_precision_unavailable(spec.dtype, device) if spec.dtype == "fp8" else ""
    if emulated:  # measured, but a rate of torch's emulation, not of fp8 units
        record["reason"] = f"emulated: {emulated}"
    if (
        whole_budget is None
        and result.stopped_by == "budget"
        and len(result.samples_s) < policy.min_samples
    ):
        record["reason"] = (
            f"{len(result.samples_s)} samples (fewer than {policy.min_samples}): the "
            f"{policy.budget_s:g} s budget ran out; percentiles are coarse"
        )
    return record


def measure_rounds(
    specs: Sequence[WorkloadSpec],
    records: list[dict],
    plan: rounds_mod.RoundPlan,
    policy: SamplingPolicy,
    ceilings_doc: dict,
    device: torch.device,
    energy: EnergySource | None,
    progress: Callable[[str, int, int], None],
    builder: rounds_mod.BuildCache | None = None,
    settings: dict | None = None,
) -> None:
    """Measure every workload in the plan's rounds, each round in its own order, merging each
    round into the workload's record in place. A workload that failed, or has used its whole
    budget, sits out the later rounds. `settings`: the mapping's knobs (the slow-path guard
    reads its weight knobs)."""
    total = plan.rounds * len(specs)
    builder = builder or rounds_mod.BuildCache(kernels.build)
    for r, order in enumerate(plan.orders):
        one_round = rounds_mod.round_policy(policy, plan.rounds, first=r == 0)
        for step, i in enumerate(order):
            progress(f"round {r + 1}/{plan.rounds}: {specs[i].id}", r * len(specs) + step, total)
            if r > 0 and (
                records[i]["status"] != STATUS_OK or rounds_mod.budget_spent(records[i], policy)
            ):
                continue
            measured = measure_workload(
                specs[i], device, one_round, ceilings_doc, records[i]["reproduce"], energy,
                whole_budget=policy, builder=builder, settings=settings,
            )  # fmt: skip
            records[i] = rounds_mod.merge_round(records[i], measured, r)
    for record in records:
        n = len(record["samples_s"])
        if record["status"] == STATUS_OK and n < policy.min_samples:
            record["reason"] = (
                f"{n} samples in {len(record['round_sizes'])} round(s) (fewer than "
                f"{policy.min_samples}): the {policy.budget_s:g} s budget ran out; percentiles "
                "are coarse"
            )
    progress("done", total, total)


@dataclass(frozen=True)
class RunRequest:
    profile: str = DEFAULT_SUITE_PROFILE
    device: str = "cpu"
    dtypes: tuple[str, ...] = suite.DTYPES
    only: str | None = None
    threads: int | None = None
    # Rounds per workload (None: the profile's default) and the seed of their orders.
    rounds: int | None = None
    round_seed: int = rounds_mod.ROUND_SEED
    # The RAPL powercap folder to read (None: /sys/class/powercap). A seam for tests, which
    # point it at a fake sysfs tree; the survey in `environment.sensors` reads the same one.
    powercap_root: str | None = None
    # The device profile to divide by (--device-profile), and whether to renew the cached one.
    device_profile: str | None = None
    recalibrate: bool = False
    # The mapping's knob settings (`--knob`, checked by bundle/knobs.parse_settings): they hold
    # for the whole run, calibration included, so the ceilings follow them.
    settings: dict = field(default_factory=dict)
    # Measure even when the projected duration passes the profile's confirm_above_s (--yes).
    yes: bool = False
    # A production slice file (`run --slice`): its workloads instead of the profile's, measured
    # at the profile's sampling policy; dtypes None there: the slice's own.
    slice_path: str | None = None


def plan(request: RunRequest) -> list[WorkloadSpec]:
    if request.slice_path:
        return production_slice.plan_slice(Path(request.slice_path), request.dtypes, request.only)
    return suite.plan_specs(request.profile, request.dtypes, request.only)


def new_run_doc(
    request: RunRequest,
    device: torch.device,
    energy: EnergySource,
    powercap: Path,
    policy: SamplingPolicy,
    plan_of_rounds: rounds_mod.RoundPlan,
    started: float,
) -> dict:
    """A run document before measuring: tool, suite, environment, sensors, knobs, sampling, and
    the run-to-run figure of this device as it stands now (so a comparison of this bundle with
    another separate run needs nothing but the two bundles)."""
    facts = _device_facts(device)
    return {
        "schema_version": None,  # set by the bundle writer
        "tool": {"name": "reviewkit", "version": __version__},
        "created_unix_s": round(started, 3),
        "complete": False,
        "profile": request.profile,
        "only": request.only,
        "suite": suite.suite_identity().to_json(),
        "slice": production_slice.identity_of(request.slice_path, device.type, request.dtypes),
        "environment": {
            **environment.host_facts(),
            **torch_build(),
            **facts,
            # what energy, temperature and clock counters exist here, or why not
            "sensors": sensors.survey(powercap),
        },
        # the counter each workload's measured window is metered with, or why there is none
        "energy_meter": energy_meter_doc(energy),
        "knobs": knobs(device, request.dtypes, request.profile),
        "sampling": asdict(policy),
        "rounds": plan_of_rounds.to_json(),
        "run_to_run": run_to_run_file.record(device.type, facts.get("fingerprint")),
        "ceilings": {},
        "workloads": [],
        "distributed": None,  # one process; measure/distributed.py fills it under torchrun
    }


def mark_interrupted(doc: dict) -> None:
    """After Ctrl-C: the run says so, and each workload not reached says why it has no data."""
    doc["interrupted"] = (
        "interrupted by the user (Ctrl-C); workloads marked not-run were not measured"
    )
    for record in doc["workloads"]:
        if record["status"] == STATUS_NOT_RUN:
            record["reason"] = "not measured: the run was interrupted before it"
            record["energy"] = energy_absent(record["reason"])


def run(
    request: RunRequest, on_progress: Callable[[str, int, int], None] | None = None,
    on_projection: Callable[[str], None] | None = None,
) -> dict:
    """Measure the planned workloads and return the raw run document (not yet analysed);
    `on_projection` is told the projected duration (profiles with confirm_above_s) before
    any workload is measured."""
    specs = plan(request)
    device = resolve_device(request.device)
    if request.threads is not None:
        if request.threads < 1:
            raise UsageError(f"--threads {request.threads}: expected a positive integer")
        torch.set_num_threads(request.threads)
    profile = suite_profile(request.profile)
    policy = profile.sampling
    plan_of_rounds = rounds_mod.plan_rounds(
        len(specs), request.rounds or profile.rounds, request.round_seed
    )
    progress = on_progress or (lambda *_: None)
    powercap = Path(request.powercap_root) if request.powercap_root else sensors.POWERCAP
    energy = energy_source(device, powercap)
    started = time.time()
    mapping = KnobMapping(dict(request.settings), request.dtypes)
    with mapping.active(), steady_heap(device.type) as heap:
        doc = new_run_doc(request, device, energy, powercap, policy, plan_of_rounds, started)
        doc["knobs"], doc["environment"]["cpu_allocator"] = mapping.knobs(doc["knobs"]), heap
        threads = torch.get_num_threads()
        doc["workloads"] = [
            base_record(s, reproduce_command(s, request.profile, device, threads, mapping.settings,
                                             request.slice_path),
                        mapping.not_applicable(s, device))
            for s in specs
        ]  # fmt: skip
        _measure_all(request, doc, specs, device, energy, mapping, progress, plan_of_rounds,
                     started, on_projection)  # fmt: skip
    return doc


def confirm_projection(
    request: RunRequest, specs: Sequence[WorkloadSpec], ceilings_doc: dict, device: torch.device,
    settings: dict, rounds: int, on_projection: Callable[[str], None] | None,
) -> None:
    """Tell the projected sampling time; a UsageError above the profile's limit without --yes."""
    profile = suite_profile(request.profile)
    free = memory_fit.available_bytes(device)
    projected = projection.project(
        [predicted_call_s(s, ceilings_doc, settings, device.type) for s in specs],
        [bool(memory_fit.does_not_fit(s, *free)) for s in specs], profile.sampling, rounds,
    )  # fmt: skip
    if on_projection is not None:
        on_projection(f"{request.profile} on {device}: {projected.text()}")
    limit = profile.confirm_above_s
    if limit is not None and projected.total_s > limit and not request.yes:
        raise UsageError(
            f"--profile {request.profile} on {device}: {projected.text()}, over the "
            f"{limit / 60:g} min this profile runs without asking; pass --yes to measure it "
            "anyway, or --only to pick cells"
        )


def _measure_all(
    request: RunRequest, doc: dict, specs: list[WorkloadSpec], device: torch.device,
    energy: EnergySource, mapping: KnobMapping, progress: Callable[[str, int, int], None],
    plan_of_rounds: rounds_mod.RoundPlan, started: float,
    on_projection: Callable[[str], None] | None = None,
) -> None:
    """Ceilings, the rounds, the overhead and device-time phases of the document being written,
    under the run's mapping; Ctrl-C is data."""
    profile = suite_profile(request.profile)
    policy, records = profile.sampling, doc["workloads"]
    phases: dict[str, float] = {}
    try:
        # a quantized mapping divides by its int8 or fp8 GEMM ceiling too (fp8: why there is none)
        obtained = obtain(
            device, mapping.ceiling_dtypes(specs, device), request.profile,
            Path(request.device_profile) if request.device_profile else None,
            request.recalibrate, lambda step: progress(step, 0, len(specs)),
        )  # fmt: skip
        doc["ceilings"] = obtained.ceilings()
        phases["ceilings"] = time.time() - started
        if profile.confirm_above_s is not None:
            confirm_projection(request, specs, doc["ceilings"], device, mapping.settings,
                               plan_of_rounds.rounds, on_projection)  # fmt: skip
        builder = rounds_mod.BuildCache(mapping.build, keep_all=mapping.compiler is not None)
        measure_rounds(specs, records, plan_of_rounds, policy, doc["ceilings"], device, energy,
                       progress, builder, mapping.settings)  # fmt: skip
        phases["workloads"] = time.time() - started - phases["ceilings"]
        begun = time.time()
        doc["overhead_probe"] = overhead.measure_overheads(
            specs, records, device, builder, progress, profile.floor_sampling,
            mapping.eager_build if mapping.compiler is not None else None,
        )  # fmt: skip
        phases["overhead"] = time.time() - begun
        if energy[0] is not None:  # windows too short for the counter: an energy-only loop
            phases["energy_loop"] = measure_energy_loops(
                specs, records, device, builder, energy[0], progress)  # fmt: skip
        begun = time.time()
        measure_device_times(specs, records, device, builder, progress,
                             bool(mapping.settings.get("l2_flush", False)))
        phases["device_time"] = time.time() - begun
        if mapping.compiler is not None:
            begun = time.time()
            compiled.record_compiles(specs, records, device, mapping, progress)
            phases["compile_warm"] = time.time() - begun
        doc["complete"] = True
    except KeyboardInterrupt:
        mark_interrupted(doc)
    mapping.record_weights(records)
    doc["wall_s"] = round(time.time() - started, 3)
    # Where the run's wall time went: the overhead phase is held under 15% of it.
    doc["phases_s"] = {k: round(v, 3) for k, v in phases.items()}
