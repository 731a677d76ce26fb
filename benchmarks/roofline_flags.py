"""Benchmark 12: how many workloads beat the roofline, held against DRAM alone and cache-aware.

Runs `reviewkit run --profile P --dtype fp32` (or reads `--bundle`), then analyses the one set
of samples twice: every working set against the DRAM bandwidth (what reviewkit did before
device profiles), and each against the level that holds it. Prints the share of ok workloads
flagged faster-than-roofline (issue 15's target: at most 2% cache-aware), and every flagged
workload with its reason: the rate it reached against the ceiling it beat.

    .venv/bin/python benchmarks/roofline_flags.py [--profile quick] [--bundle DIR]
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
from pathlib import Path

from reviewkit.analysis.roofline import FASTER_THAN_ROOFLINE, analyse_run, measured
from reviewkit.bundle.run import load_run


def _flagged(doc: dict) -> list[dict]:
    return [w for w in measured(doc) if FASTER_THAN_ROOFLINE in (w.get("flags") or [])]


def _reason(w: dict, doc: dict) -> str:
    t = w["stats"]["p50_s"]
    if w["compute_time_s"] > w["memory_time_s"]:
        peak = doc["ceilings"]["compute"][w["dtype"]]["peak"]
        return f"{w['flops'] / t / 1e9:.3g} GFLOP/s against the {peak / 1e9:.3g} GFLOP/s GEMM peak"
    reached = w["bytes"] / t / 1e9
    bound = w["bytes"] / w["memory_time_s"] / 1e9
    return f"{reached:.3g} GB/s against {w.get('memory_level')} at {bound:.3g} GB/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--bundle", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = args.bundle
        if bundle is None:
            bundle = Path(tmp) / "run"
            subprocess.run([sys.executable, "-m", "reviewkit", "run", "--profile", args.profile,
                            "--dtype", "fp32", "--out", str(bundle)], check=True,
                           capture_output=True)  # fmt: skip
        doc = load_run(bundle)
    aware = analyse_run(copy.deepcopy(doc))
    dram_only = copy.deepcopy(doc)
    dram_only["ceilings"].pop("memory", None)
    dram_only = analyse_run(dram_only)
    ok = len(measured(aware))
    print(f"\n{ok} ok workloads of `run --profile {args.profile} --dtype fp32`")
    print("| memory bound held against | faster-than-roofline | share |")
    print("| --- | --- | --- |")
    for label, d in (("DRAM for every working set", dram_only), ("the level that holds it", aware)):
        n = len(_flagged(d))
        print(f"| {label} | {n} | {n / ok:.1%} |")
    levels = {}
    for w in measured(aware):
        levels[w.get("memory_level")] = levels.get(w.get("memory_level"), 0) + 1
    print(f"\nworking sets by level: {levels}")
    for w in _flagged(aware):
        print(f"- cache-aware flag: {w['id']}: {_reason(w, aware)}")


if __name__ == "__main__":
    main()
