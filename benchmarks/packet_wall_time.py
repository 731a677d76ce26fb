"""Benchmark: wall time of `reviewkit packet` on the sample review, cold and warm cache.

Cold: an empty cache folder (every chart converted, the Vega bundle built). Warm: the same
inputs again (chart SVGs and the bundle come from the cache). Whole commands in subprocesses;
the stage timings are the command's own (`--json`). Target: under 5 s for HTML + PDF.

With `--against REV`, the working tree against a git worktree of REV instead: HTML + PDF,
interleaved in rounds of alternating order (each tree a cold command, then a warm one), so a
minute's noise on this machine reaches both sides; median [min, max] per tree and case.

    .venv/bin/python benchmarks/packet_wall_time.py [--repeats 3]
    .venv/bin/python benchmarks/packet_wall_time.py --against HEAD~1 [--rounds 6]
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

ROOT = Path(__file__).resolve().parents[1]
REVIEW = ROOT / "samples" / "review-bf16-transformer" / "review.toml"


def run(cache: str, out: str, pdf: bool, tree: Path = ROOT) -> tuple[float, dict]:
    """One command; `python -m` runs the reviewkit of `tree` (its folder comes first on the
    path, for the PDF worker too), whatever this environment has installed."""
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    cmd = [sys.executable, "-m", "reviewkit", "packet", str(REVIEW), "--out", out, "--json"]
    start = time.perf_counter()
    done = subprocess.run(cmd + ([] if pdf else ["--no-pdf"]), capture_output=True, text=True,
                          env=env, check=True, cwd=tree)  # fmt: skip
    return time.perf_counter() - start, json.loads(done.stdout)["timings_s"]


def against(rev: str, rounds: int) -> None:
    """The working tree against REV, interleaved."""
    with tempfile.TemporaryDirectory() as scratch:
        old = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(old),
                        rev], check=True)  # fmt: skip
        try:
            trees = {rev: old, "working tree": ROOT}
            walls: dict[tuple[str, str], list[float]] = {}
            for r in range(rounds):
                for name in list(trees)[:: 1 if r % 2 == 0 else -1]:
                    with tempfile.TemporaryDirectory() as cache:
                        for case in ("cold", "warm"):
                            wall, _ = run(cache, f"{cache}/out-{case}", True, trees[name])
                            walls.setdefault((name, case), []).append(wall)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                           check=False)  # fmt: skip
    print(f"HTML+PDF, {rounds} rounds in alternating order, median [min, max] s")
    print(f"{'tree':24s} {'cold':>22s} {'warm':>22s}")
    for name in trees:
        cells = [walls[(name, case)] for case in ("cold", "warm")]
        text = [f"{statistics.median(w):.2f} [{min(w):.2f}, {max(w):.2f}]" for w in cells]
        print(f"{name:24s} {text[0]:>22s} {text[1]:>22s}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", metavar="REV", help="interleave with a worktree of REV")
    parser.add_argument("--rounds", type=int, default=6, help="rounds for --against")
    args = parser.parse_args()
    if args.against:
        against(args.against, args.rounds)
        return
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
