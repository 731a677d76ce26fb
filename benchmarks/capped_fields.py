"""Benchmark: `check` (terminal and --json) and `packet --no-pdf` on the sample review with every
free-text field at its cap (issue 18): the cost of the longest input the review file accepts.

    .venv/bin/python benchmarks/capped_fields.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomlkit

from reviewkit.review.reviewfile import (
    ANSWER_MAX_CHARS,
    SUMMARY_MAX_CHARS,
    TEXT_MAX_CHARS,
    TITLE_MAX_CHARS,
)

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "review-bf16-transformer"
WORDS = "throughput latency rollout kernel bf16 memory-bound "  # breakable, like real prose


def text(n: int) -> str:
    return (WORDS * (n // len(WORDS) + 1))[:n]


def capped(doc: dict) -> dict:
    doc["title"] = text(TITLE_MAX_CHARS)
    doc["summary"] = text(SUMMARY_MAX_CHARS)
    for table in ("rollback", "owner"):
        for key in doc.get(table, {}):
            doc[table][key] = text(TEXT_MAX_CHARS)
    for risk in doc.get("risks", []):
        for key in ("description", "mitigation", "owner"):
            risk[key] = text(TEXT_MAX_CHARS)
    for d in doc.get("disproof", []):
        d["statement"] = text(TEXT_MAX_CHARS)
    for answer in doc.get("answers", {}).values():
        answer["answer"] = text(ANSWER_MAX_CHARS)
    return doc


def timed(cmd: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        assert done.returncode in (0, 1), done.stderr[-2000:]
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "review"
        shutil.copytree(SAMPLE, folder)
        for name, edit in (("sample", lambda d: d), ("every text field at its cap", capped)):
            doc = tomlkit.parse((SAMPLE / "review.toml").read_text())
            (folder / "review.toml").write_text(tomlkit.dumps(edit(doc)))
            review = str(folder / "review.toml")
            base = [sys.executable, "-m", "reviewkit"]
            rows = [
                ("check (terminal)", [*base, "check", review]),
                ("check --json", [*base, "check", review, "--json"]),
                ("packet --no-pdf", [*base, "packet", review, "--out", f"{tmp}/p", "--no-pdf"]),
            ]
            for label, cmd in rows:
                print(f"| {name} | {label} | {timed(cmd, args.repeats):.2f} s |")


if __name__ == "__main__":
    main()
