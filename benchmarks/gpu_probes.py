"""Probes for what the next GPU lease should settle (issue 15's GPU L2 level; NVML energy).

1. `l2`: bandwidth of an L2-resident working set by two methods: the `tensor.copy_` calibration
   uses now (one launch per call: a few microseconds on an H200, so launch cost dominates and
   the level read 2.0 TB/s, under HBM's 4.2), and a read stream that sums a stride-0 view,
   re-reading the buffer `reps` times inside one launch (calibration.stream_maker, as on CPU).
   A method that reads above HBM's figure at half the L2 and falls to it at 4x the L2 measures
   the L2.
2. `energy`: NVML's energy counter across a 2 s loop of bf16 GEMMs, read as the runner reads it
   (sensors.energy_meter): its update period and whether a window of that length gives a value
   (every quick workload's window was under 100 ms on the H200, so none had one).

    python benchmarks/gpu_probes.py [--device cuda] [--parts l2,energy]
"""

from __future__ import annotations

import argparse
import time

import torch

from reviewkit.measure import calibration, sensors
from reviewkit.measure.timing import SamplingPolicy, collect_samples

MIB = 1 << 20
POLICY = SamplingPolicy(
    warmup_calls=3, warmup_s=0.05, min_samples=20, min_time_s=0.2, max_samples=2000, budget_s=2.0
)


def l2(device: torch.device) -> None:
    l2_bytes = (
        getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        if device.type == "cuda"
        else 32 * MIB
    ) or 32 * MIB
    print(f"L2 as reported: {l2_bytes / MIB:g} MiB")
    print("| working set | copy_ GB/s | read stream GB/s | stream bytes per call |")
    print("| ---: | ---: | ---: | ---: |")
    for fraction in (0.25, 0.5, 4.0):
        ws = int(l2_bytes * fraction)
        copy_make, copy_bytes = calibration.copy_maker(ws // 2, device)
        per_call = 2 << 30 if device.type == "cuda" else 64 * MIB
        stream_make, stream_bytes = calibration.stream_maker(ws, per_call, device)
        rates = []
        for make, nbytes in ((copy_make, copy_bytes), (stream_make, stream_bytes)):
            result = collect_samples(make(), POLICY, time.perf_counter)
            rates.append(nbytes / min(result.samples_s))
        print(f"| {ws / MIB:g} MiB | {rates[0] / 1e9:.0f} | {rates[1] / 1e9:.0f} | "
              f"{stream_bytes / MIB:g} MiB |")  # fmt: skip


def energy(device: torch.device) -> None:
    uuid = None
    if device.type == "cuda":
        uuid = str(torch.cuda.get_device_properties(device).uuid)
    meter, why = sensors.energy_meter(device.type, device.index, sensors.POWERCAP, uuid)
    if meter is None:
        print(f"no energy meter: {why.reason}")
        return
    print(f"meter: {meter.method}; update about every {meter.update_interval_s * 1e3:g} ms")
    a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    print("| window | calls | joules | watts |")
    print("| ---: | ---: | ---: | ---: |")
    for window_s in (0.01, 0.05, 0.1, 0.5, 2.0):
        sync()
        meter.start()
        start, calls = time.perf_counter(), 0
        while time.perf_counter() - start < window_s:
            a @ a
            calls += 1
        sync()
        elapsed = time.perf_counter() - start
        joules = sum(meter.stop()[name] for name in meter.total_of)
        print(f"| {elapsed:.3f} s | {calls} | {joules:.3g} | {joules / elapsed:.3g} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--parts", default="l2,energy")
    args = parser.parse_args()
    device = torch.device(args.device)
    parts = set(args.parts.split(","))
    if "l2" in parts:
        l2(device)
    if "energy" in parts:
        energy(device)


if __name__ == "__main__":
    main()
