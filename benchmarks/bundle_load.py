"""Benchmark: loading a run bundle (issue 18): parse, the schema check (run.schema.json), the
samples check, and `show` end to end, on each recorded sample bundle.

    .venv/bin/python benchmarks/bundle_load.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from reviewkit.bundle import schema
from reviewkit.bundle.run import check_values, load_run

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def _cpu() -> str:
    """The CPU's model name and the ISA flags that decide its kernels, from /proc/cpuinfo."""
    info = Path("/proc/cpuinfo").read_text().splitlines()
    name = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")),
                platform.processor() or "unknown CPU")  # fmt: skip
    flags = next((ln.split(":", 1)[1].split() for ln in info if ln.startswith("flags")), [])
    shown = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
    cpus = sum(1 for ln in info if ln.startswith("processor"))
    return f"{name} ({', '.join(shown) or 'no AVX2'}; {cpus} CPUs)"


def median_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"{_cpu()}, Python {platform.python_version()}, median of {args.repeats}")
    print("| bundle | size | parse | schema check | samples check | load_run | `show` |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for file in sorted(SAMPLES.glob("*/run.json")):
        text = file.read_text()
        doc = load_run(file)  # migrated, as the checks see it
        schema.check(doc, file)  # the validator is built once per process, as in a command
        show = [sys.executable, "-m", "reviewkit", "show", str(file)]
        cells = [
            median_of(lambda t=text: schema.parse(t), args.repeats),
            median_of(lambda d=doc, f=file: schema.check(d, f), args.repeats),
            median_of(lambda d=doc, f=file: check_values(d, f), args.repeats),
            median_of(lambda f=file: load_run(f), args.repeats),
            median_of(lambda c=show: subprocess.run(c, capture_output=True, check=True), 3),
        ]
        ms = " | ".join(f"{c * 1e3:.0f} ms" for c in cells)
        print(f"| {file.parent.name} | {len(text) / 1024:.0f} KiB | {ms} |")


if __name__ == "__main__":
    main()
