"""Benchmark 4: wall time of `reviewkit run` for the smoke and quick profiles, end to end.

.venv/bin/python benchmarks/run_wall_time.py [--profiles smoke,quick] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="smoke,quick")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"{'profile':8s} {'wall s':>8s} {'workloads':>10s} {'ok':>5s} {'other':>6s}")
    for profile in args.profiles.split(","):
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "reviewkit",
                        "run",
                        "--profile",
                        profile,
                        "--out",
                        tmp,
                        "--json",
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                wall = time.perf_counter() - start
            w = json.loads(out.stdout)["workloads"]
            ok = sum(x["status"] == "ok" for x in w)
            print(f"{profile:8s} {wall:8.1f} {len(w):10d} {ok:5d} {len(w) - ok:6d}")


if __name__ == "__main__":
    main()
