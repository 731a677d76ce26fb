"""Benchmark: `reviewkit site build` on a log of N decisions, from empty and after one change.

The log is generated from the committed decisions (site/decisions), copied round-robin under
new slugs with their titles numbered, so every decision is real data. Cold runs start with an
empty chart cache. Targets (200 decisions): from empty under 60 s; one changed under 3 s.

    .venv/bin/python benchmarks/site_build.py [--decisions 200] [--pdf]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOG = Path(__file__).resolve().parents[1] / "site" / "decisions"


def make_log(root: Path, count: int) -> None:
    sources = sorted(p for p in LOG.iterdir() if (p / "review.toml").exists())
    for i in range(count):
        src = sources[i % len(sources)]
        dst = root / "decisions" / f"{i:03d}-{src.name}"
        shutil.copytree(src, dst)
        review = dst / "review.toml"
        text = review.read_text()
        review.write_text(text.replace('title = "', f'title = "#{i:03d} ', 1))


def build(log: Path, out: Path, pdf: bool, cache: str) -> float:
    cmd = [sys.executable, "-m", "reviewkit", "site", "build", str(log), "--out", str(out)]
    start = time.perf_counter()
    subprocess.run(cmd + ([] if pdf else ["--no-pdf"]), check=True, capture_output=True,
                   env={**os.environ, "XDG_CACHE_HOME": cache})  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--pdf", action="store_true", help="render each packet's PDF too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as cache:
        log, out = Path(tmp) / "log", Path(tmp) / "out"
        make_log(log, args.decisions)
        cold = build(log, out, args.pdf, cache)
        unchanged = build(log, out, args.pdf, cache)
        one = sorted((log / "decisions").iterdir())[args.decisions // 2] / "review.toml"
        one.write_text(one.read_text().replace('title = "#', 'title = "(revised) #', 1))
        changed = build(log, out, args.pdf, cache)
    kind = "HTML + PDF" if args.pdf else "HTML only"
    print(
        f"{'site build, ' + str(args.decisions) + ' decisions (' + kind + ')':48s} {'wall s':>7s}"
    )
    print(f"{'from empty (cold chart cache)':48s} {cold:7.1f}")
    print(f"{'again, nothing changed':48s} {unchanged:7.1f}")
    print(f"{'again, one decision changed':48s} {changed:7.1f}")
    print("targets (200 decisions): from empty < 60 s, one changed < 3 s")


if __name__ == "__main__":
    main()
