"""Scheduler and recording cost per query of the sweep: a no-op workload, median of 5 rounds.

Server: arrivals all due at once, so the loop never waits and its own cost is all that is
timed. Target (issue 6): under 20 us per query.
"""

from __future__ import annotations

import statistics
import time

from reviewkit.evidence import loadgen
from reviewkit.suite.profiles import suite_profile

QUERIES = 200_000
ROUNDS = 5


def per_query_us(run) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) / QUERIES * 1e6)
    return statistics.median(times)


def main() -> None:
    arrivals = [0.0] * QUERIES
    noop = lambda: None  # noqa: E731
    server = per_query_us(lambda: loadgen.run_server(noop, arrivals, 1e9))
    back = per_query_us(lambda: loadgen.run_back_to_back(noop, QUERIES, 1e9))
    summary = per_query_us(
        lambda: loadgen.level_json(
            loadgen.Level("server", 1.0, 1.0, QUERIES, tuple([1e-3] * QUERIES), 1.0, False),
            suite_profile("quick").sweep_validity,
        )
    )
    arrivals_cost = per_query_us(lambda: loadgen.poisson_arrivals_s(1000.0, QUERIES))
    print("| figure | per query |\n| --- | ---: |")
    print(f"| server loop (no-op call, no wait) | {server:.3f} us |")
    print(f"| back-to-back loop (no-op call) | {back:.3f} us |")
    print(f"| Poisson schedule generation | {arrivals_cost:.3f} us |")
    print(f"| level summary and rounding for the JSON | {summary:.3f} us |")
    total = server + arrivals_cost + summary
    print(f"| **server total** | **{total:.3f} us** (target < 20 us) |")


if __name__ == "__main__":
    main()
