"""Benchmark: wall time of `reviewkit check` and `reviewkit compare` on two `quick` bundles.

Whole commands in subprocesses (interpreter start and imports included), median of N runs,
on the sample review's fp32 and bf16 bundles. Target: under 1 s each.

    .venv/bin/python benchmarks/check_compare_wall_time.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "review-bf16-transformer"
COMMANDS = {
    "check": ["check", str(SAMPLE / "review.toml"), "--json"],
    "compare": ["compare", str(SAMPLE / "runs" / "baseline-fp32"),
                str(SAMPLE / "runs" / "candidate-bf16"), "--json"],
    "show (one bundle)": ["show", str(SAMPLE / "runs" / "candidate-bf16"), "--json"],
    "--help (import floor)": ["--help"],
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'command':24s} {'median s':>9s} {'min s':>7s} {'max s':>7s}")
    for name, argv in COMMANDS.items():
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "reviewkit", *argv], capture_output=True)
            times.append(time.perf_counter() - start)
        print(f"{name:24s} {statistics.median(times):9.3f} {min(times):7.3f} {max(times):7.3f}")
    print("target: check and compare under 1 s each")


if __name__ == "__main__":
    main()
