"""Benchmark: wall time of `reviewkit packet` on the sample review, cold and warm cache.

Cold: an empty cache folder (every chart converted, the Vega bundle built). Warm: the same
inputs again (chart SVGs and the bundle come from the cache). Whole commands in subprocesses;
the stage timings are the command's own (`--json`). Target: under 5 s for HTML + PDF.

    .venv/bin/python benchmarks/packet_wall_time.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REVIEW = Path(__file__).resolve().parents[1] / "samples" / "review-bf16-transformer" / "review.toml"


def run(cache: str, out: str, pdf: bool) -> tuple[float, dict]:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    cmd = [sys.executable, "-m", "reviewkit", "packet", str(REVIEW), "--out", out, "--json"]
    start = time.perf_counter()
    done = subprocess.run(cmd + ([] if pdf else ["--no-pdf"]), capture_output=True, text=True,
                          env=env, check=True)  # fmt: skip
    return time.perf_counter() - start, json.loads(done.stdout)["timings_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    stages = ("check_s", "model_s", "charts_s", "html_s", "pdf_s")
    print(f"{'case':22s} {'wall s':>7s} " + " ".join(f"{s[:-2]:>7s}" for s in stages))
    for pdf in (True, False):
        for warm in (False, True):
            walls, timings = [], []
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
                    if warm:
                        run(cache, out + "/first", pdf)
                    wall, t = run(cache, out + "/p", pdf)
                walls.append(wall)
                timings.append(t)
            case = f"{'HTML+PDF' if pdf else 'HTML only'}, {'warm' if warm else 'cold'} cache"
            cells = " ".join(f"{statistics.median(t.get(s, 0) for t in timings):7.2f}"
                             for s in stages)  # fmt: skip
            print(f"{case:22s} {statistics.median(walls):7.2f} {cells}")
    print("target: HTML + PDF under 5 s")


if __name__ == "__main__":
    main()
