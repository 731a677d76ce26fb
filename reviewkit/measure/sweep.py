"""Latency-throughput sweep of suite workloads on this device (imports torch; it measures)."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from reviewkit.bundle.run import STATUS_OK
from reviewkit.common.errors import UsageError
from reviewkit.evidence import files as evidence
from reviewkit.evidence import loadgen
from reviewkit.measure import environment
from reviewkit.suite import kernels
from reviewkit.suite import workloads as suite
from reviewkit.suite.profiles import DEFAULT_SUITE_PROFILE, suite_profile

KIND = evidence.SWEEP
SCHEMA_VERSION = evidence.SCHEMA_VERSIONS[KIND]
# The profile's primary model cell is what production serves (suite.default_model); any
# workload can be named instead.
DEFAULT_DTYPE = "fp32"


def reproduce_command(workload_id: str, profile: str, device: str, dtype: str,
                      sla_p99_s: float | None) -> str:  # fmt: skip
    sla = f" --sla-p99-s {sla_p99_s:g}" if sla_p99_s is not None else ""
    return (f"reviewkit sweep --profile {profile} --device {device} --dtype {dtype} "
            f"--only '{workload_id}'{sla}")  # fmt: skip


def run_sweep(
    profile: str = DEFAULT_SUITE_PROFILE,
    device: str = "cpu",
    dtype: str = DEFAULT_DTYPE,
    only: str | None = None,
    sla_p99_s: float | None = None,
    validity: loadgen.Validity | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Single-stream, offline and server levels for every selected workload."""
    from reviewkit.measure.allocator import steady_heap
    from reviewkit.measure.device import resolve_device, synchroniser
    from reviewkit.measure.runner import knobs

    if sla_p99_s is not None and not sla_p99_s > 0:
        raise UsageError(f"--sla-p99-s {sla_p99_s}: expected a positive number of seconds")
    if only is None:
        suite.plan_specs(profile, (dtype,), None)  # raises on a bad profile or dtype
        specs = [suite.default_model(profile, dtype)]
    else:
        specs = suite.plan_specs(profile, (dtype,), only)
    dev = resolve_device(device)
    sync = synchroniser(dev)
    rules = validity or suite_profile(profile).sweep_validity
    progress = on_progress or (lambda *_: None)
    results = []
    started = time.time()
    # the CPU heap held as `run` holds it (measure/allocator.py): no call faults in fresh pages
    with steady_heap(dev.type) as heap:
        for i, spec in enumerate(specs):
            row = {
                "id": spec.id,
                "layer_type": spec.layer_type,
                "dtype": spec.dtype,
                "params": spec.params,
                "flops": spec.flops,
                "reproduce": reproduce_command(spec.id, profile, device, dtype, sla_p99_s),
            }
            try:
                fn = kernels.build(spec, dev)

                def call(fn=fn) -> None:
                    fn()
                    sync()

                def label(text: str, i=i, spec=spec) -> None:
                    progress(f"{spec.id}: {text}", i, len(specs))

                with torch.inference_mode():
                    for _ in range(2):  # warm-up: allocator growth, oneDNN primitive creation
                        call()
                    sweep = loadgen.Sweep(call, rules, on_level=label)
                    row.update(status=STATUS_OK, reason="", **sweep.run(sla_p99_s))
            except Exception as exc:  # a failure is data: record it, go on
                row.update(status="error", reason=f"{type(exc).__name__}: {exc}"[:300])
            results.append(row)
    progress("done", len(specs), len(specs))
    return {
        **evidence.header(KIND, started),
        "wall_s": round(time.time() - started, 3),
        "profile": profile,
        "device": str(dev),
        "suite": suite.suite_identity().to_json(),
        "environment": {**environment.host_facts(), "torch_version": torch.__version__,
                        "cpu_allocator": heap},
        "knobs": knobs(dev, (dtype,), profile),
        "schedule": {
            "seed": loadgen.SCHEDULE_SEED,
            "arrivals": "Poisson (exponential gaps)",
            "load_fractions": list(loadgen.LOAD_FRACTIONS),
            "knee_p99_factor": loadgen.KNEE_P99_FACTOR,
        },
        "validity": loadgen.validity_json(rules),
        "sla_p99_s": sla_p99_s,
        "workloads": results,
    }
