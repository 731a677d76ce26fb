"""Benchmark: how many MFU values above 100% `reviewkit check --json` shows, per committed review.

Every review under samples/ and site/decisions/ is checked in a subprocess; every number whose
key starts with `mfu` (a run's, a comparison's per side, a layer type's; not the deltas) is
counted when above 1. Target: none (issue 30: a workload faster than its ceiling raises it).

    .venv/bin/python benchmarks/mfu_over_peak.py [ROOT]
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]


def mfu_values(node: object) -> list[float]:
    """Every `mfu*` number in a check document, deltas left out."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if key.startswith("mfu") and not key.startswith("mfu_delta") and numeric:
                found.append(float(value))
            found += mfu_values(value)
    elif isinstance(node, list):
        for value in node:
            found += mfu_values(value)
    return found


def main() -> None:
    reviews = sorted(glob.glob(str(ROOT / "samples/review-*/review.toml"))
                     + glob.glob(str(ROOT / "site/decisions/*/review.toml")))  # fmt: skip
    total = 0
    print(f"{'review':48} {'MFU > 100%':>10} {'largest MFU':>12}")
    for review in reviews:
        done = subprocess.run([sys.executable, "-m", "reviewkit", "check", review, "--json"],
                              capture_output=True, text=True, cwd=ROOT)  # fmt: skip
        values = mfu_values(json.loads(done.stdout))
        over = [v for v in values if v > 1.0 + 1e-9]
        total += len(over)
        name = str(Path(review).relative_to(ROOT).parent)
        print(f"{name:48} {len(over):>10} {max(values or [0.0]):>12.3f}")
    print(f"{'total':48} {total:>10}")
    print("target: no MFU above 100%")


if __name__ == "__main__":
    main()
