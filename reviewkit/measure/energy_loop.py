"""Energy per workload from a loop of its calls long enough for the energy counter (torch).

A workload's timed window is often shorter than the counter's update period (NVML's board
energy advances about every 100 ms; the windows of a GPU sample were 0.3-45 ms), so the
window's reading is stale or absent. After the rounds, each such workload runs an energy-only
loop of back-to-back calls for at least ENERGY_LOOP_UPDATES update periods, metered from its
start to its end, and its `energy` record comes from that loop, said so (Zeus measures GPU
energy over windows much longer than the counter's period for the same reason).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from reviewkit.analysis.energy import ENERGY_HIGH_CONFIDENCE_UPDATES, workload_energy
from reviewkit.bundle.run import STATUS_OK
from reviewkit.measure.device import first_line
from reviewkit.suite.workloads import WorkloadSpec

# Ten counter updates: a stale reading at either end is then at most ~20% of the energy, and
# the loop is seconds on NVML (100 ms updates), milliseconds on RAPL (~1 ms).
ENERGY_LOOP_UPDATES = 10
# Never shorter than this: the first calls of a loop carry clock ramp-up, which a short loop
# would over-weight.
ENERGY_LOOP_MIN_S = 0.5
# A loop stops after this many calls even if the window is not yet long enough (a workload of
# a few microseconds would otherwise make millions of Python calls).
ENERGY_LOOP_MAX_CALLS = 1_000_000
ENERGY_LOOP = "energy-loop"

Progress = Callable[[str, int, int], None]


def needs_loop(energy: dict | None) -> bool:
    """Whether a workload's window reading falls short: absent because the window was too short
    or the counter did not advance, or spanning fewer counter updates than the loop would."""
    if not isinstance(energy, dict):
        return True
    if energy.get("available"):
        updates = energy["window_s"] / energy["counter_update_s"]
        return updates < ENERGY_LOOP_UPDATES
    reason = str(energy.get("reason") or "")
    return "did not advance" in reason or "no measured window" in reason


def loop_seconds(update_interval_s: float) -> float:
    return max(ENERGY_LOOP_MIN_S, ENERGY_LOOP_UPDATES * update_interval_s)


def measure_energy_loops(
    specs: Sequence[WorkloadSpec],
    records: list[dict],
    device: torch.device,
    build: Callable[[WorkloadSpec, torch.device], Callable[[], object]],
    meter,
    progress: Progress,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Replace each measured workload's short-window `energy` by an energy-only loop's, in
    place; returns the seconds the loops took. A loop whose counter cannot be read keeps the
    window's record with the loop's error added."""
    target_s = loop_seconds(meter.update_interval_s)
    began = clock()
    for i, (spec, record) in enumerate(zip(specs, records, strict=True)):
        if record["status"] != STATUS_OK or not needs_loop(record.get("energy")):
            continue
        progress(f"energy loop: {spec.id}", i, len(specs))
        try:
            record["energy"] = _loop(spec, build(spec, device), device, meter, target_s, clock)
        except Exception as exc:  # a failure is data: the window's reading stays, said why
            energy = dict(record.get("energy") or {})
            energy["loop_error"] = f"the energy loop failed: {first_line(exc)}"
            record["energy"] = energy
    return clock() - began


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _loop(spec, fn, device, meter, target_s, clock) -> dict:
    with torch.inference_mode():
        fn()  # warm: the loop meters steady calls, not a first one
        _sync(device)
        calls = 0
        meter.start()
        start = clock()
        # no sync inside the loop: launches queue as a serving loop's do (the host blocks
        # once the device's queue is full, so its clock follows the device's); one at the end
        while calls < ENERGY_LOOP_MAX_CALLS:
            fn()
            calls += 1
            if clock() - start >= target_s:
                break
        _sync(device)
        window_s = clock() - start
        joules = meter.stop()
    energy = workload_energy(joules, meter.total_of, window_s, calls, spec.flops,
                             meter.method, meter.update_interval_s)  # fmt: skip
    if energy.get("available"):
        energy["source"] = ENERGY_LOOP
        energy["source_reason"] = (
            f"an energy-only loop of {calls} back-to-back calls over {window_s:.3g} s (at least "
            f"{ENERGY_LOOP_UPDATES} counter updates): the timed window was too short for the "
            f"counter (high confidence needs {ENERGY_HIGH_CONFIDENCE_UPDATES} updates)"
        )
    return energy
