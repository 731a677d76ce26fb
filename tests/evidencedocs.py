"""Sweep and soak results made by the real analysis code on fake clocks, for check and packet tests.

Nothing here is typed in by hand: the sweep levels come from `loadgen.Sweep` serving a fake
workload of fixed cost, the soak verdict from `drift.detect` on the sub-windows built here.
"""

from __future__ import annotations

from reviewkit.evidence import drift, loadgen
from reviewkit.evidence.loadgen import Validity


class FakeClock:
    """Time advances only when the fake workload runs or the scheduler waits."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def work(self, seconds: float):
        def call() -> None:
            self.now += seconds

        return call

    def wait_until(self, deadline: float, _clock) -> None:
        self.now = max(self.now, deadline)


SWEEP_VALIDITY = Validity(min_duration_s=0.0, min_queries=200, max_level_s=100.0)


def sweep_workload(
    workload_id: str = "model.toy-decoder.b1s256.bf16",
    call_s: float = 1e-3,
    sla_p99_s: float | None = None,
    validity: Validity = SWEEP_VALIDITY,
    fractions: tuple[float, ...] = (0.25, 0.5, 0.75, 0.9, 1.1),
) -> dict:
    """One workload's sweep on a server that takes exactly call_s per query.

    Offline throughput is 1 / call_s; every level below saturation keeps p50 = call_s, and the
    1.1x level's queue grows without bound, so the knee is there.
    """
    clock = FakeClock()
    sweep = loadgen.Sweep(
        clock.work(call_s), validity, clock=clock, fractions=fractions,
        wait_until=clock.wait_until,
    )  # fmt: skip
    layer_type, _name, _shape, dtype = workload_id.split(".")
    return {
        "id": workload_id,
        "layer_type": layer_type,
        "dtype": dtype,
        "params": {"batch": 1, "seq": 256},
        "flops": 1_000_000,
        "reproduce": f"reviewkit sweep --profile smoke --only '{workload_id}'",
        "status": "ok",
        "reason": "",
        **sweep.run(sla_p99_s),
    }


def sweep_doc(*workloads: dict, sla_p99_s: float | None = None) -> dict:
    """A `reviewkit.sweep` document holding the given workloads (default: one at 1 ms/query)."""
    return {
        "kind": "reviewkit.sweep",
        "schema_version": 1,
        "tool": {"name": "reviewkit", "version": "test"},
        "created_unix_s": 0.0,
        "wall_s": 0.0,
        "profile": "smoke",
        "device": "cpu",
        "schedule": {
            "seed": loadgen.SCHEDULE_SEED,
            "arrivals": "Poisson (exponential gaps)",
            "load_fractions": [0.25, 0.5, 0.75, 0.9, 1.1],
            "knee_p99_factor": loadgen.KNEE_P99_FACTOR,
        },
        "validity": loadgen.validity_json(SWEEP_VALIDITY),
        "sla_p99_s": sla_p99_s,
        "workloads": list(workloads) or [sweep_workload(sla_p99_s=sla_p99_s)],
    }


def soak_doc(
    rates_per_s: list[float] | None = None,
    clocks_mhz: list[float] | None = None,
    temperatures_c: list[float] | None = None,
    subwindow_s: float = 3.0,
    workload_id: str = "model.toy-decoder.b1s256.bf16",
    device: str = "cpu",
) -> dict:
    """A `reviewkit.soak` document of sub-windows at the given throughputs (default: 20 at
    100 calls/s, stable); clock and temperature series make sensors available."""
    rates = rates_per_s or [100.0] * 20
    subwindows, t = [], 0.0
    for i, rate in enumerate(rates):
        calls = round(rate * subwindow_s)
        readings = {}
        if clocks_mhz is not None:
            readings["cpu_clocks_mhz"] = {"cpu0": clocks_mhz[i]}
        if temperatures_c is not None:
            readings["temperatures_c"] = {"pkg": temperatures_c[i]}
        subwindows.append({
            "index": i, "start_s": t, "end_s": t + subwindow_s, "calls": calls,
            "samples_s": [1 / rate] * calls, "readings": readings, "partial": False,
            "calls_per_s": calls / subwindow_s, "flops_per_s": calls / subwindow_s * 1e6,
        })  # fmt: skip
        t += subwindow_s
    reason = "no thermal zones under /sys/class/thermal"
    sensors = {
        "cpu_clocks_mhz": {"available": clocks_mhz is not None,
                           "reason": "" if clocks_mhz is not None else reason},
        "temperatures_c": {"available": temperatures_c is not None,
                           "reason": "" if temperatures_c is not None else reason},
    }  # fmt: skip
    missing = [f"{k}: {v['reason']}" for k, v in sensors.items() if not v["available"]]
    analysis = drift.detect(
        [(s["start_s"] + s["end_s"]) / 2 for s in subwindows],
        [s["calls_per_s"] for s in subwindows],
        subwindows[0]["samples_s"],
        subwindows[-1]["samples_s"],
        clocks_mhz={"cpu_clocks_mhz:cpu0": clocks_mhz} if clocks_mhz else {},
        temperatures_c={"temperatures_c:pkg": temperatures_c} if temperatures_c else {},
        unavailable_reason="; ".join(missing),
    )
    return {
        "kind": "reviewkit.soak",
        "schema_version": 1,
        "tool": {"name": "reviewkit", "version": "test"},
        "created_unix_s": 0.0,
        "complete": True,
        "profile": "quick",
        "device": device,
        "workload": {
            "id": workload_id,
            "layer_type": workload_id.split(".")[0],
            "dtype": workload_id.split(".")[-1],
            "flops": 1_000_000,
            "reproduce": f"reviewkit soak --workload {workload_id}",
        },
        "window_s": subwindow_s * len(rates),
        "subwindows_planned": len(rates),
        "sensors": sensors,
        "readings_at_start": {},
        "critical_c": {},
        "subwindows": subwindows,
        "measured_window_s": subwindow_s * len(rates),
        "energy": {
            "available": False,
            "reason": "no RAPL powercap interface",
            "joules": {},
            "mean_watts": {},
        },
        "analysis": analysis.to_json(),
        "wall_s": subwindow_s * len(rates),
    }


# --- production traces: Chrome-trace files as the PyTorch profiler writes them --------------


def chrome_trace(ops: list[tuple], rank: int | None = None) -> dict:
    """A CPU-only Kineto-style trace: one thread of top-level cpu_op events.

    Each op is (name, ts_us, dur_us, input_dims) laid out as written; Input Dims as
    record_shapes=True records them, one list per argument."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
         "args": {"External id": i + 1, "Input Dims": dims,
                  "Input type": ["float"] * len(dims)}}
        for i, (name, ts, dur, dims) in enumerate(ops)
    ]  # fmt: skip
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": rank + 1}
    return doc


# A production mix for the toy suite of runfactory: 700 us of the b1s128 FFN GEMM's shape
# (input [1, 128, 768]: 98,304 elements, the suite's [128, 768]), 200 us of attention at
# [1, 12, 128, 64] (98,304 elements, the suite's b1s128 SDPA), 100 us of an unmapped op.
# Covered: 700 + 200 of 1000 us = 90%.
TOY_PRODUCTION_OPS = [
    ("aten::linear", 1000, 700, [[1, 128, 768], [3072, 768], [3072]]),
    ("aten::scaled_dot_product_attention", 2000, 200,
     [[1, 12, 128, 64], [1, 12, 128, 64], [1, 12, 128, 64]]),
    ("my_company::custom_op", 3000, 100, [[1, 128]]),
]  # fmt: skip


def trace_summary_doc(folder, ops: list[tuple] | None = None) -> dict:
    """The real importer's summary of a trace of `ops` written to folder/trace.json."""
    import json
    from pathlib import Path

    from reviewkit.evidence.trace.layermap import load_layer_map
    from reviewkit.evidence.trace.summary import summarise

    path = Path(folder) / "production-trace.json"
    path.write_text(json.dumps(chrome_trace(ops or TOY_PRODUCTION_OPS)))
    return summarise([path], load_layer_map(), clock=lambda: 1_764_700_000.0)
