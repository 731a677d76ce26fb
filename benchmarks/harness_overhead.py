"""Benchmark 2: the sampling loop's own cost per sample, measured on a no-op.

Two figures: the loop's wall time per sample (everything the harness adds between calls) and
the median sample itself (the clock reads that land inside every measurement).
Target: under 5 us per sample on CPU.

    .venv/bin/python benchmarks/harness_overhead.py
"""

from __future__ import annotations

import statistics

from reviewkit.measure.timing import SamplingPolicy, collect_samples, timed_call

N = 200_000


def noop() -> None:
    return None


def main() -> None:
    policy = SamplingPolicy(
        warmup_calls=100, warmup_s=0.0, min_samples=N, min_time_s=0.0, max_samples=N, budget_s=60.0
    )
    rows = []
    for _ in range(5):
        result = collect_samples(timed_call(noop), policy)
        rows.append((result.wall_s / len(result.samples_s), statistics.median(result.samples_s)))
    per_sample = statistics.median(r[0] for r in rows)
    inside = statistics.median(r[1] for r in rows)
    print(f"{'figure':48s} {'value':>10s}")
    print(f"{'loop wall time per sample (no-op), median of 5':48s} {per_sample * 1e6:7.3f} us")
    print(f"{'median no-op sample (clock reads inside it)':48s} {inside * 1e6:7.3f} us")
    print("target: under 5 us per sample")


if __name__ == "__main__":
    main()
