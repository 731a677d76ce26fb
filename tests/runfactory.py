"""Synthetic run bundles and review folders for the gate tests, from known distributions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import tomlkit
from evidencedocs import soak_doc, sweep_doc, sweep_workload, trace_summary_doc

from reviewkit.analysis.energy import energy_absent, workload_energy
from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import write_run
from reviewkit.suite import collectives as coll

KNOBS = {
    "device": "cpu", "device_name": "Test CPU", "dtypes": ["fp32"], "threads": 2,
    "interop_threads": 2, "compile_mode": "eager", "grad_mode": "inference",
    "memory_format": "contiguous", "attention_backend": "torch default dispatch",
    "sparsity": "dense", "quantization": "none", "float32_matmul_precision": "highest",
    "mkldnn_enabled": True, "seq_sweep": [128, 512], "batch_sweep": [1, 4],
}  # fmt: skip
# (name, layer type, params, FLOPs, bytes, median seconds in the baseline)
WORKLOADS = [
    ("gemm.toy-ffn-up.b1s128", "gemm", {"batch": 1, "seq": 128}, 6e8, 1e7, 5e-3),
    ("gemm.toy-ffn-up.b4s512", "gemm", {"batch": 4, "seq": 512}, 9.6e9, 4e7, 8e-2),
    ("attention.toy-sdpa.b1s128", "attention", {"batch": 1, "seq": 128}, 5e7, 1.5e6, 1e-3),
    ("attention.toy-sdpa.b4s512", "attention", {"batch": 4, "seq": 512}, 3.2e9, 2.5e7, 3e-2),
    ("model.toy-decoder.b1s256", "model", {"batch": 1, "seq": 256}, 2.7e10, 2.6e8, 0.25),
]
# The first input's shape, as the suite records it: what a production trace's shapes are
# matched against (the GEMM's activations [tokens, 768], the SDPA's query).
INPUT_SHAPES = {
    "gemm.toy-ffn-up.b1s128": [128, 768],
    "gemm.toy-ffn-up.b4s512": [2048, 768],
    "attention.toy-sdpa.b1s128": [1, 12, 128, 64],
    "attention.toy-sdpa.b4s512": [4, 12, 512, 64],
    "model.toy-decoder.b1s256": [1, 256],
}


TEST_METHOD = "RAPL powercap energy_uj, package-0 (test bundle)"


def samples(median_s: float, n: int = 200, rel_sd: float = 0.02, seed: int = 0) -> list[float]:
    """Normal samples around a median, clipped positive."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(median_s, rel_sd * median_s, n), median_s * 0.5, None).tolist()


def make_run(
    folder: Path,
    dtype: str = "fp32",
    speedup: float = 1.0,
    seed: int = 0,
    knobs: dict | None = None,
    only: tuple[str, ...] | None = None,
    samples_for: dict | None = None,
    status_for: dict | None = None,
    complete: bool = True,
    energy_for: dict | None = None,
    watts: float | None = None,
    pairing: dict | None = None,
    overhead_for: dict | None = None,
) -> Path:
    """Write an analysed run bundle: each workload's median is the base median / speedup.

    Overhead (absent from the record unless asked for: not measured, as in a bundle recorded
    before it was): `overhead_for` maps a workload name to its measured exposed overhead, either
    seconds (a floor-call record of 50 samples around it) or a whole `overhead` record.

    Energy (absent from the record unless asked for): `watts` gives every measured workload a
    RAPL-like reading of `watts` x its window, the window being the sum of its samples (a real
    window is a little longer); `energy_for` maps a workload name to {"joules", "window_s"} or
    to a string, the reason it has none. `pairing` ({"id", "side"}) makes the run one side of
    an interleaved `reviewkit ab`; without it the two runs of a review are separate runs.
    """
    workloads = []
    for i, (name, layer_type, params, flops, nbytes, median_s) in enumerate(WORKLOADS):
        if only is not None and name not in only:
            continue
        wid = f"{name}.{dtype}"
        data = (samples_for or {}).get(name) or samples(median_s / speedup, seed=seed * 100 + i)
        status = (status_for or {}).get(name, "ok")
        workloads.append({
            "id": wid, "layer_type": layer_type, "kernel": "test", "source_model": "toy",
            "dtype": dtype, "status": status,
            "reason": "" if status == "ok" else "RuntimeError: not implemented for 'Half'",
            "inputs": [{"shape": INPUT_SHAPES[name], "dtype": dtype}], "params": params,
            "flops": flops, "matmul_flops": flops,
            "bytes": nbytes, "definition_hash": "0" * 16,
            "samples_s": data if status == "ok" else [], "warmup_samples_s": [],
            "stopped_by": "target", "reproduce": f"reviewkit run --only '{wid}'",
        })  # fmt: skip
        overhead = (overhead_for or {}).get(name)
        if isinstance(overhead, dict):
            workloads[-1]["overhead"] = overhead
        elif overhead is not None:
            workloads[-1]["overhead"] = {
                "available": True, "method": "floor-call",
                "samples_s": samples(overhead, n=50, rel_sd=0.01, seed=seed * 100 + i + 50),
            }  # fmt: skip
        reading = (energy_for or {}).get(name)
        if reading is None and watts is not None:
            reading = {"joules": watts * sum(data), "window_s": sum(data)}
        if isinstance(reading, str):
            workloads[-1]["energy"] = energy_absent(reading)
        elif reading is not None and status == "ok":
            workloads[-1]["energy"] = workload_energy(
                {"package-0": reading["joules"]}, ["package-0"], reading["window_s"], len(data),
                flops, TEST_METHOD, 1e-3,
            )  # fmt: skip
    doc = {
        "tool": {"name": "reviewkit", "version": "test"},
        "complete": complete,
        "profile": "quick",
        "suite": {"name": "reviewkit-core", "version": "1.0", "hash": "testhash"},
        "environment": {"torch_version": "2.13.0+cpu", "blas": "mkl", "os": "Linux"},
        "knobs": {**KNOBS, "dtypes": [dtype], **(knobs or {})},
        "ceilings": {
            "compute": {dtype: {"peak": 2e11, "source": "measured"}},
            "bandwidth": {"peak": 3e10, "source": "measured"},
        },
        "workloads": workloads,
    }
    if pairing:
        doc["pairing"] = pairing
    if not complete:
        doc["interrupted"] = "interrupted by the user (Ctrl-C)"
    write_run(folder, analysed(doc))
    return folder


def quality_doc(rel_error: float = 3e-3, top1: float = 1.0, kl: float = 1e-6,
                source: str = "model") -> dict:  # fmt: skip
    """A `reviewkit quality` result (schema 2) for bf16 (rel. error near bf16's unit roundoff
    2^-8): a suite GEMM, and a model row from the team's exported program (`source` "model",
    as `quality --model` writes it) or the suite's random-weight decoder ("suite")."""
    return {"kind": "reviewkit.quality", "schema_version": 2, "reference": "fp64", "results": [
        {"id": "gemm.toy-ffn-up.b1s128", "layer_type": "gemm", "dtype": "bf16", "status": "ok",
         "mapping": {"dtype": "bf16"}, "source": "suite",
         "rel_error": rel_error, "max_abs_error": 0.01},
        {"id": "model.toy-decoder.b1s256", "layer_type": "model", "dtype": "bf16", "status": "ok",
         "mapping": {"dtype": "bf16"}, "source": source,
         "rel_error": rel_error, "max_abs_error": 0.02, "top1_agreement": top1,
         "kl_divergence": kl},
    ]}  # fmt: skip


def quality_doc_v1(rel_error: float = 3e-3, top1: float = 1.0, kl: float = 1e-6) -> dict:
    """The same result as schema 1 wrote it: no mapping, no source (the model row was always
    the suite's random-weight decoder)."""
    doc = quality_doc(rel_error, top1, kl)
    for row in doc["results"]:
        del row["mapping"], row["source"]
    return {**doc, "schema_version": 1}


def complete_review() -> dict:
    """A review that answers every rubric item: baseline fp32, candidate bf16."""
    return {
        "schema_version": 1,
        "title": "Toy decoder in bf16",
        "summary": "bf16 is faster because the decoder is **compute-bound**.",
        "runs": {"baseline": "runs/base", "candidates": ["runs/cand"]},
        "owner": {"name": "Ada", "team": "Inference"},
        "reviewers": ["Grace"],
        "sla": {"load": "single stream", "targets": [
            {"workload": "model.*", "p99_s": 0.5, "min_throughput_per_s": 2.0}]},
        "risks": [{"description": "logit drift", "level": "high", "likelihood": "low",
                   "owner": "Quality team", "mitigation": "top-1 agreement gate"}],
        "rollback": {"boundary": "decoder dtype", "trigger": "p99 > 0.5 s",
                     "procedure": "flip the dtype flag", "fallback": "fp32 weights kept"},
        "disproof": [{"statement": "model not 1.5x faster", "workload": "model.*",
                      "metric": "median_ratio", "comparison": ">", "threshold": 0.667}],
        "evidence": {"production_traces": ["evidence/trace_summary.json"],
                     "long_window": "evidence/soak.json", "quality": "evidence/quality.json",
                     "power": "evidence/power.json", "sweep": "evidence/sweep.json"},
        "answers": {
            "senior-question": {"answer": "compute-bound", "evidence": "runs/cand/run.json"},
            "primary-metric": {"answer": "model p99", "evidence": "runs/cand/run.json"},
            "representativeness": {"answer": "matches trace",
                                   "evidence": "evidence/trace_summary.json"},
        },
        "decision": {"status": "proposed", "date": "2026-12-02"},
    }  # fmt: skip


def write_review(
    folder: Path, review: dict, base_kw: dict | None = None, cand_kw: dict | None = None
) -> Path:
    """A self-contained review folder: runs, evidence files and review.toml."""
    folder.mkdir(parents=True, exist_ok=True)
    make_run(folder / "runs" / "base", **{"dtype": "fp32", "seed": 0, **(base_kw or {})})
    make_run(folder / "runs" / "cand", **{"dtype": "bf16", "speedup": 2.5, "seed": 1,
                                          **(cand_kw or {})})  # fmt: skip
    (folder / "evidence").mkdir(exist_ok=True)
    for name in ("trace.json", "power.json"):
        (folder / "evidence" / name).write_text('{"note": "test artifact"}\n')
    # A stable 60 s soak with steady clocks and temperatures, and a sweep of a 0.1 s/query
    # server (offline 10 queries/s), both of the candidate's model workload.
    soak = soak_doc(clocks_mhz=[3000.0] * 20, temperatures_c=[60.0] * 20)
    (folder / "evidence" / "soak.json").write_text(json.dumps(soak) + "\n")
    sweep = sweep_doc(sweep_workload(call_s=0.1))
    (folder / "evidence" / "sweep.json").write_text(json.dumps(sweep) + "\n")
    (folder / "evidence" / "quality.json").write_text(json.dumps(quality_doc()) + "\n")
    # The real importer's summary of a production mix the toy suite covers 90% of.
    summary = trace_summary_doc(folder / "evidence")
    (folder / "evidence" / "trace_summary.json").write_text(json.dumps(summary) + "\n")
    path = folder / "review.toml"
    path.write_text(tomlkit.dumps(review))
    return path


MIB = 1 << 20


# --- a two-rank run worked by hand (run --distributed's bundle, without measuring) ---------


def _workload(wid, layer_type, kernel, params, per_rank, flops=0, nbytes=1024, wire=None):
    w = {
        "id": wid, "layer_type": layer_type, "kernel": kernel, "source_model": "hand",
        "dtype": "fp32", "status": "ok", "reason": "", "inputs": [], "params": params,
        "flops": flops, "matmul_flops": flops, "bytes": nbytes, "definition_hash": "0" * 16,
        "samples_s": [max(c) for c in zip(*per_rank, strict=True)],
        "rank_samples_s": per_rank, "warmup_samples_s": [], "stopped_by": "target",
        "round_sizes": [len(per_rank[0])],
        "reproduce": f"torchrun --nproc-per-node 2 -m reviewkit run --distributed --only '{wid}'",
    }  # fmt: skip
    if wire is not None:
        w["wire_bytes"] = wire
    if layer_type == "collective":  # as measure/distributed.py records a collective's
        w["overhead"] = {"available": True, "method": "in-collective-latency",
                         "reason": "the host cost is inside alpha"}  # fmt: skip
    return w


def distributed_doc(t1_s=0.060, t2_s=0.040, probe_slowdown=1.0, incomplete=None) -> dict:
    """An analysed two-rank run: an 8 MiB all-reduce taking 8 ms on both ranks, the decoder
    layer at tp 2 (t2_s) and unsharded (t1_s), and a gemm probe of 10 ms that rank 1 runs
    `probe_slowdown` x."""
    n = 21
    probe = {"role": coll.PROBE}
    workloads = [
        _workload("collective.ar.8MiB.fp32", "collective", "all_reduce",
                  {"op": "all_reduce", "message_bytes": 8 * MIB, "elements": 2 * MIB,
                   "world_size": 2}, [[0.008] * n, [0.008] * n], nbytes=16 * MIB,
                  wire=8 * MIB),
        _workload("model.tp.tp2.fp32", "model", coll.TP_DECODER_KERNEL, {"tp": 2},
                  [[t2_s] * n, [t2_s] * n], flops=int(2e9), wire=2 * MIB),
        _workload("model.tp.tp1.fp32", "model", coll.TP_DECODER_KERNEL, {"tp": 1},
                  [[t1_s] * n, [t1_s] * n], flops=int(4e9), wire=0),
        _workload("gemm.probe.fp32", "gemm", "linear", probe,
                  [[0.010] * n, [0.010 * probe_slowdown] * n], flops=int(6e8)),
    ]  # fmt: skip
    doc = {
        "tool": {"name": "reviewkit", "version": "test"},
        "complete": incomplete is None,
        "profile": "quick",
        "suite": {"name": "reviewkit-core", "version": "1.1", "hash": "h"},
        "environment": {},
        "knobs": {"device": "cpu", "dtypes": ["fp32"]},
        "ceilings": {
            "compute": {"fp32": {"peak": 1e11}},
            "bandwidth": {"peak": 3e10},
            "interconnect": {"peak": 4e9},
        },
        "workloads": workloads,
        "distributed": {
            "world_size": 2,
            "backend": "gloo",
            "ranks": [{"rank": 0, "host": "a"}, {"rank": 1, "host": "b"}],
            "incomplete": incomplete,
        },
    }
    if incomplete:
        doc["interrupted"] = f"incomplete: {incomplete}"
    return analysed(doc)


def fake_clock_run(workloads: list[dict], pairing: dict | None = None) -> dict:
    """An analysed one-dtype run of hand-made workloads (samples from a fake clock) on a test
    CPU with fixed ceilings; `pairing` makes it one side of an interleaved A/B."""
    doc = {
        "suite": {"hash": "h"},
        "environment": {},
        "knobs": {"dtypes": ["fp32"], "device": "cpu", "device_name": "Test CPU"},
        "ceilings": {"compute": {"fp32": {"peak": 1e12}}, "bandwidth": {"peak": 1e11}},
        "workloads": workloads,
    }
    if pairing:
        doc["pairing"] = pairing
    return analysed(doc)


# Five workloads of five layer types, as `calibrate --run-to-run` measures.
SEPARATE_RUN_NAMES = ("gemm.a", "attention.b", "norm.c", "softmax.d", "elementwise.e")


def separate_run(rng, run_sd, effect=1.0, rounds=5, calls=20, round_sd=0.005, call_sd=0.002,
                 names=SEPARATE_RUN_NAMES, record=None):  # fmt: skip
    """One separate run on a fake clock: each workload's level for the whole run is drawn once
    (log-normal, sd `run_sd`: the state a process draws and keeps), then each round drifts by
    `round_sd` and each call by `call_sd` around it."""
    workloads = []
    for i, name in enumerate(names):
        level = effect * (1 + i) * 1e-3 * math.exp(rng.normal(0.0, run_sd))
        by_round = [level * (1 + rng.normal(0.0, round_sd)) * (1 + rng.normal(0.0, call_sd, calls))
                    for _ in range(rounds)]  # fmt: skip
        workloads.append({
            "id": f"{name}.fp32", "layer_type": name.split(".")[0], "dtype": "fp32",
            "status": "ok", "flops": 1e6, "bytes": 1e6, "params": {}, "reproduce": "",
            "samples_s": np.concatenate(by_round).tolist(), "round_sizes": [calls] * rounds,
        })  # fmt: skip
    run = fake_clock_run(workloads)
    return run if record is None else run.with_values(run_to_run=record)


def square_gemm_doc(share: float, overhead_s: float | None, sizes, name: str = "Test CPU",
                    fingerprint: str = "fp-a", peak: float = 1e12, bandwidth: float = 1e11
                    ) -> dict:  # fmt: skip
    """A run document of n x n x n fp32 GEMMs (one per size) that each take t = t_roof / share
    + overhead_s, every sample the same: compute-bound at intensity n / 6 FLOP/B once n / 6 is
    over the ridge peak / bandwidth, t_roof = 2n^3 / peak. `overhead_s` None: not measured."""
    workloads = []
    for n in sizes:
        flops, nbytes = 2.0 * n**3, 12.0 * n**2
        t = flops / peak / share + (overhead_s or 0.0)
        w = {"id": f"gemm.sq{n}.fp32", "layer_type": "gemm", "kernel": "linear",
             "dtype": "fp32", "status": "ok", "params": {"m": n, "k": n, "n": n},
             "flops": flops, "matmul_flops": flops, "bytes": nbytes, "samples_s": [t] * 40,
             "definition_hash": "0" * 16, "inputs": [], "warmup_samples_s": []}  # fmt: skip
        if overhead_s is not None:
            w["overhead"] = {"available": True, "method": "floor-call",
                             "samples_s": [overhead_s] * 40}  # fmt: skip
        workloads.append(w)
    return {
        "tool": {"name": "reviewkit", "version": "test"}, "complete": True, "profile": "quick",
        "suite": {"name": "reviewkit-core", "version": "1.2", "hash": "h"},
        "environment": {"fingerprint": {"hash": fingerprint}, "cpu_model": name},
        "knobs": {"device": "cpu", "dtypes": ["fp32"]},
        "ceilings": {"compute": {"fp32": {"peak": peak}}, "bandwidth": {"peak": bandwidth}},
        "workloads": workloads,
    }  # fmt: skip


def analysed(doc: dict, below_roof_share: float | None = None):
    """A run document (as a test writes it) read into a record and analysed."""
    from reviewkit.bundle.records import Run

    return analyse_run(Run.from_json(doc), below_roof_share)
