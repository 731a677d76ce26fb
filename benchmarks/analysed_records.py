"""Benchmark: reading each sample bundle into records (`load_run`), analysing it (`analyse_run`)
and writing the analysed run back as JSON (issue 31's typed records); median of 7, in process.

    .venv/bin/python benchmarks/analysed_records.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle.run import load_run

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    print("| bundle | load_run | analyse_run | analysed run to JSON |")
    print("| --- | ---: | ---: | ---: |")
    for folder in sorted(p.parent for p in SAMPLES.glob("*/run.json")):
        loading, analysing, writing = [], [], []
        for _ in range(repeats):
            started = time.perf_counter()
            run = load_run(folder)
            loaded = time.perf_counter()
            analysed = analyse_run(run)
            done = time.perf_counter()
            json.dumps(analysed.to_json())
            loading.append(loaded - started)
            analysing.append(done - loaded)
            writing.append(time.perf_counter() - done)
        print(f"| {folder.name} | " + " | ".join(
            f"{statistics.median(t) * 1e3:.0f} ms" for t in (loading, analysing, writing)) + " |")


if __name__ == "__main__":
    main()
