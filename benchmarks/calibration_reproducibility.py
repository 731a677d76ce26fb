"""Benchmark 11: do separate calibrations of one device agree, and what does a shared profile do?

1. `calibrate`: N separate `reviewkit calibrate --profile P` processes, one after another; per
   ceiling (GEMM per dtype, bandwidth per memory level) each calibration's value and the spread
   max/min - 1 (issue 15's target: within 5% for fp32, bf16 and DRAM), and each one's wall time
   (target: quick within 30 s). On a CPU, DRAM's all-threads median and how many of its trials
   had every thread on its own path are shown beside its ceiling (issue 30, item 2).
2. `estimators`: N separate processes each measure fixed configurations (two fp32 and two bf16
   GEMMs, the LLC stream, the DRAM copy) in 9 interleaved trials of ten calls, keeping every
   call; the spread between processes of each way of reading them (trial medians, pooled
   quantiles, fastest calls, upper quantiles of trials). This chose calibration.py's statistic.
3. `aa-mfu`: two `run --only 'gemm.*'` processes that each calibrate for themselves
   (`--recalibrate`, the behaviour before profiles), two that share the cached profile, and an
   `ab` A/A (both sides in one process, the same profile); the largest gemm MFU difference in
   points (target: within 5 points with a shared profile).

    .venv/bin/python benchmarks/calibration_reproducibility.py [--n 5] [--profile quick]
        [--parts calibrate,estimators,aa-mfu] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ESTIMATOR_CHILD = r"""
import json, sys, torch
from reviewkit.measure import calibration as c
from reviewkit.measure.timing import SamplingPolicy, collect_samples
dev = torch.device("cpu")
cfg = {f"fp32 n={n} {l}": (c.gemm_maker(n, "fp32", dev, l), 2 * n**3)
       for n, l in ((512, "nn"), (1024, "nt"))}
cfg.update({f"bf16 n={n} {l}": (c.gemm_maker(n, "bf16", dev, l), 2 * n**3)
            for n, l in ((512, "nt"), (2048, "nt"))})
cfg["llc stream 16 MiB"] = c.stream_maker(16 << 20, 32 << 20, dev)
cfg["dram copy 256 MiB"] = c.copy_maker(256 << 20, dev)
policy = SamplingPolicy(warmup_calls=1, warmup_s=0.0, min_samples=10, min_time_s=0.0,
                        max_samples=10, budget_s=5.0)
names, out = list(cfg), {k: [] for k in cfg}
for t in range(9):
    for k in names[t % len(names):] + names[:t % len(names)]:
        r = collect_samples(cfg[k][0](), policy)
        out[k].append([cfg[k][1] / s for s in r.samples_s])
json.dump(out, sys.stdout)
"""


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]


ESTIMATORS = {
    "median of trial medians": lambda t: statistics.median(statistics.median(x) for x in t),
    "median of all calls": lambda t: statistics.median([v for x in t for v in x]),
    "0.9 quantile of all calls": lambda t: _quantile([v for x in t for v in x], 0.9),
    "median of trial fastest": lambda t: statistics.median(max(x) for x in t),
    "0.75 q. of trial fastest": lambda t: _quantile([max(x) for x in t], 0.75),
    "best trial fastest": lambda t: max(max(x) for x in t),
}


def _reviewkit(args: list[str], env: dict) -> str:
    """Run `python -m reviewkit ARGS`; its stdout, or its stderr and exit on failure."""
    done = subprocess.run([sys.executable, "-m", "reviewkit", *args],
                          capture_output=True, text=True, env=env)  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"reviewkit {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done.stdout


def _spread(values: list[float]) -> float:
    return max(values) / min(values) - 1


def calibrations(n: int, profile: str, device: str) -> None:
    rows: dict[str, list[float]] = {}
    walls = []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "REVIEWKIT_CACHE_DIR": cache}
        for _ in range(n):
            start = time.perf_counter()
            out = _reviewkit(["calibrate", "--profile", profile, "--device", device,
                              "--dtype", "fp32,bf16", "--json"], env)  # fmt: skip
            walls.append(time.perf_counter() - start)
            print(f"calibration {len(walls)}: {walls[-1]:.1f} s", file=sys.stderr, flush=True)
            doc = json.loads(out)
            for dtype, c in doc["compute"].items():
                rows.setdefault(f"{dtype} GEMM (GFLOP/s)", []).append(c["peak"] / 1e9)
                if c.get("source") == "datasheet" and c.get("measured"):
                    # a known GPU divides by its datasheet peak; the measurement is beside it
                    rows.setdefault(f"{dtype} GEMM measured (GFLOP/s)", []).append(
                        c["measured"] / 1e9
                    )
            for level in doc["memory"]:
                rows.setdefault(f"{level['level']} (GB/s)", []).append(level["peak"] / 1e9)
                if level.get("basis"):
                    # main memory on a CPU: the all-threads copy beside the ceiling, whose two
                    # modes are where the host put the threads (measure/main_memory.py)
                    rows.setdefault(f"{level['level']} all threads, median trial (GB/s)", []
                                    ).append(level["measured"] / 1e9)  # fmt: skip
                    rows.setdefault(f"{level['level']} all-threads trials unshared", []).append(
                        level["unshared_trials"]
                    )
    print(
        f"\n{n} separate `reviewkit calibrate --profile {profile} --device {device} "
        "--dtype fp32,bf16`"
    )
    print(f"| ceiling | {' | '.join(f'#{i + 1}' for i in range(n))} | max/min - 1 |")
    print(f"| --- | {' | '.join('---' for _ in range(n))} | --- |")
    for name, values in rows.items():
        if name.endswith("unshared"):  # a count of trials, not a rate
            print(f"| {name} | {' | '.join(str(v) for v in values)} | |")
            continue
        cells = " | ".join(f"{v:.1f}" for v in values)
        print(f"| {name} | {cells} | {_spread(values):.1%} |")
    print(f"| wall (s, whole process) | {' | '.join(f'{w:.1f}' for w in walls)} | |")


def estimators(n: int) -> None:
    runs = []
    for _ in range(n):
        out = subprocess.run([sys.executable, "-c", ESTIMATOR_CHILD], check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        runs.append(json.loads(out))
    print(f"\nSpread (max/min - 1) between {n} processes of each estimator, 9 trials x 10 calls")
    configs = list(runs[0])
    print(f"| estimator | {' | '.join(configs)} |")
    print(f"| --- | {' | '.join('---' for _ in configs)} |")
    for name, estimate in ESTIMATORS.items():
        cells = [_spread([estimate(run[c]) for run in runs]) for c in configs]
        print(f"| {name} | {' | '.join(f'{x:.1%}' for x in cells)} |")


def _gemm_mfu(bundle: Path) -> dict[str, float]:
    doc = json.loads((bundle / "run.json").read_text())
    return {w["id"]: w["mfu"] for w in doc["workloads"] if w.get("mfu") is not None}


def aa_mfu(profile: str, device: str) -> None:
    print(
        f"\nA/A gemm MFU, two `run --profile {profile} --device {device} --dtype fp32 "
        "--only 'gemm.*'` processes"
    )
    print("| ceilings | largest MFU difference (points) | median difference | workloads |")
    print("| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "REVIEWKIT_CACHE_DIR": str(Path(tmp) / "cache")}
        for label, extra in (("each run calibrates (--recalibrate)", ["--recalibrate"]),
                             ("one cached profile", [])):  # fmt: skip
            mfu = []
            for i in range(2):
                out = Path(tmp) / f"{len(extra)}-{i}"
                _reviewkit(["run", "--profile", profile, "--device", device, "--dtype", "fp32",
                            "--only", "gemm.*", "--out", str(out), *extra], env)  # fmt: skip
                mfu.append(_gemm_mfu(out))
            _mfu_row(label, mfu)
        out = Path(tmp) / "ab"
        _reviewkit(["ab", "--baseline", "", "--candidate", "", "--profile", profile,
                    "--device", device, "--dtype", "fp32", "--only", "gemm.*", "--out", str(out)],
                   env)  # fmt: skip
        _mfu_row("one cached profile, interleaved (`ab` A/A)",
                 [_gemm_mfu(out / "baseline"), _gemm_mfu(out / "candidate")])  # fmt: skip


def _mfu_row(label: str, mfu: list[dict[str, float]]) -> None:
    common = sorted(set(mfu[0]) & set(mfu[1]))
    diffs = [abs(mfu[0][k] - mfu[1][k]) * 100 for k in common]
    print(f"| {label} | {max(diffs):.1f} | {statistics.median(diffs):.1f} | {len(common)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--parts", default="calibrate,estimators,aa-mfu")
    # estimators measure the CPU only; calibrate and aa-mfu measure the device named here
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if "calibrate" in parts:
        calibrations(args.n, args.profile, args.device)
    if "estimators" in parts:
        estimators(args.n)
    if "aa-mfu" in parts:
        aa_mfu(args.profile, args.device)


if __name__ == "__main__":
    main()
