"""Load scenarios after MLPerf LoadGen: seeded Poisson schedules, per-level latency, knee, SLA.

Torch-free: the workload call, the clock and the wait are injected, so the scheduler and the
validity rules are tested with a fake clock and run unchanged on any device.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from reviewkit.suite.profiles import Validity  # a suite profile sets a sweep level's rules

Clock = Callable[[], float]
SCHEDULE_SEED = 0  # fixed so the same rate always gives the same arrival times
# time.sleep overshoots by ~50-100 us on Linux; spin the last stretch so arrivals are on time.
SPIN_BELOW_S = 2e-4
# A knee: the first load at which p99 grows past this multiple of the unloaded (single-stream)
# p99. For an M/D/1 queue the mean wait reaches one service time at 67% utilisation, so a 2x
# p99 marks where queueing, not the kernel, starts to dominate latency.
KNEE_P99_FACTOR = 2.0
# Offered load per level as a share of the offline (saturation) throughput: light to overload.
LOAD_FRACTIONS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1)
# Bisection steps between the highest passing and lowest failing level (LoadGen's
# peak-performance search); each step is one more full level.
SLA_SEARCH_STEPS = 3

SINGLE_STREAM, SERVER, OFFLINE = "single-stream", "server", "offline"


def poisson_arrivals_s(rate_per_s: float, count: int, seed: int = SCHEDULE_SEED) -> np.ndarray:
    """Arrival offsets (s from the start) of `count` queries at mean `rate_per_s`, seeded."""
    if rate_per_s <= 0 or count < 0:
        raise ValueError(f"rate {rate_per_s} and count {count} must be positive")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_per_s, size=count)
    return np.cumsum(gaps)


def queries_for(rate_per_s: float, validity: Validity) -> int:
    """Enough queries that the schedule spans the minimum duration and the minimum count."""
    return max(validity.min_queries, int(np.ceil(rate_per_s * validity.min_duration_s)))


def _wait_until(deadline: float, clock: Clock) -> None:
    remaining = deadline - clock()
    if remaining > SPIN_BELOW_S:
        time.sleep(remaining - SPIN_BELOW_S)
    while clock() < deadline:
        pass


@dataclass(frozen=True)
class Level:
    scenario: str
    target_rate_per_s: float | None  # the offered Poisson rate (server only)
    load_fraction: float | None  # target rate / offline throughput
    planned_queries: int
    latencies_s: tuple[float, ...]  # per query: completion - scheduled arrival (or issue)
    duration_s: float  # first arrival (or issue) to last completion
    stopped_by_budget: bool

    @property
    def queries(self) -> int:
        return len(self.latencies_s)

    @property
    def achieved_rate_per_s(self) -> float:
        return self.queries / self.duration_s if self.duration_s > 0 else 0.0


def run_server(
    call: Callable[[], object],
    arrivals_s: Sequence[float],
    max_level_s: float,
    clock: Clock = time.perf_counter,
    wait_until: Callable[[float, Clock], None] = _wait_until,
) -> tuple[list[float], float, bool]:
    """One server: queries arrive on the schedule, run one at a time; latency includes queueing.

    Returns (latencies, duration from the first arrival to the last completion, stopped early).
    """
    start = clock()
    first = start + arrivals_s[0] if len(arrivals_s) else start
    latencies: list[float] = []
    append = latencies.append
    end = start
    stopped = False
    for offset in arrivals_s:
        arrival = start + offset
        now = clock()
        if now - start > max_level_s:
            stopped = True
            break
        if now < arrival:
            wait_until(arrival, clock)
        call()
        end = clock()
        append(end - arrival)
    return latencies, end - first, stopped


def run_back_to_back(
    call: Callable[[], object], count: int, max_level_s: float, clock: Clock = time.perf_counter
) -> tuple[list[float], float, bool]:
    """Each query issued when the previous completes (single-stream; offline on one stream)."""
    start = clock()
    latencies: list[float] = []
    append = latencies.append
    issue = start
    for _ in range(count):
        if issue - start > max_level_s:
            return latencies, issue - start, True
        call()
        done = clock()
        append(done - issue)
        issue = done
    return latencies, issue - start, False


def invalid_reasons(level: Level, validity: Validity) -> list[str]:
    """Why a level cannot be reported as a result; empty when it is valid."""
    reasons = []
    if level.queries < validity.min_queries:
        reasons.append(
            f"{level.queries} queries completed, fewer than the minimum {validity.min_queries}"
        )
    if level.duration_s < validity.min_duration_s:
        reasons.append(
            f"ran {level.duration_s:.3g} s, shorter than the minimum {validity.min_duration_s:g} s"
        )
    if level.stopped_by_budget:
        reasons.append(f"stopped at the {validity.max_level_s:g} s level budget before its "
                       f"{level.planned_queries} planned queries (overloaded or slow)")  # fmt: skip
    return reasons


def latency_summary(latencies_s: Sequence[float]) -> dict:
    """p50/p95/p99/max/mean with numpy's linear interpolation; an empty level has none."""
    if not latencies_s:
        return {}
    data = np.asarray(latencies_s, dtype=float)
    p50, p95, p99 = np.percentile(data, [50, 95, 99])
    return {"p50_s": float(p50), "p95_s": float(p95), "p99_s": float(p99),
            "max_s": float(data.max()), "mean_s": float(data.mean())}  # fmt: skip


def level_json(level: Level, validity: Validity, digits: int = 9) -> dict:
    reasons = invalid_reasons(level, validity)
    return {
        "scenario": level.scenario,
        "target_rate_per_s": level.target_rate_per_s,
        "load_fraction": level.load_fraction,
        "planned_queries": level.planned_queries,
        "queries": level.queries,
        "duration_s": level.duration_s,
        "achieved_rate_per_s": level.achieved_rate_per_s,
        "latency": latency_summary(level.latencies_s),
        "valid": not reasons,
        "invalid_reasons": reasons,
        "latencies_s": [round(x, digits) for x in level.latencies_s],
    }


def find_knee(levels: Sequence[dict], factor: float = KNEE_P99_FACTOR) -> dict:
    """The first valid server level whose p99 exceeds factor x the best p99 at lower loads.

    The reference is the best p99 the server reached below that load, not the single-stream
    p99: a server that idles between arrivals pays wake-up costs that back-to-back calls do
    not, and those are the uncongested latency a queue then multiplies.
    """
    rule = f"first load whose p99 exceeds {factor:g}x the best p99 at lower loads"
    valid = sorted((lv for lv in levels if lv["valid"]), key=lambda lv: lv["target_rate_per_s"])
    best = None
    for before, level in zip([None, *valid], valid, strict=False):
        p99 = level["latency"]["p99_s"]
        if best is not None and p99 > factor * best:
            return {
                "found": True,
                "rate_per_s": level["target_rate_per_s"],
                "last_below_rate_per_s": before["target_rate_per_s"] if before else None,
                "p99_s": p99,
                "reference_p99_s": best,
                "rule": rule,
            }
        best = p99 if best is None else min(best, p99)
    return {
        "found": False,
        "rule": f"no valid level's p99 exceeds {factor:g}x the best p99 at lower loads",
    }


def best_under_sla(levels: Sequence[dict], p99_s: float) -> dict:
    """The highest valid level whose p99 meets the SLA (the peak-performance answer)."""
    passing = [lv for lv in levels if lv["valid"] and lv["latency"]["p99_s"] <= p99_s]
    failing = [lv for lv in levels if lv["valid"] and lv["latency"]["p99_s"] > p99_s]
    best = max(passing, key=lambda lv: lv["target_rate_per_s"], default=None)
    return {
        "p99_s": p99_s,
        "met": best is not None,
        "max_rate_per_s": best["target_rate_per_s"] if best else None,
        "achieved_rate_per_s": best["achieved_rate_per_s"] if best else None,
        "levels_passing": len(passing),
        "levels_failing": len(failing),
    }


@dataclass
class Sweep:
    """Runs the scenarios of one workload: single-stream, offline, then server levels."""

    call: Callable[[], object]
    validity: Validity
    clock: Clock = time.perf_counter
    fractions: tuple[float, ...] = LOAD_FRACTIONS
    seed: int = SCHEDULE_SEED
    wait_until: Callable[[float, Clock], None] = _wait_until
    on_level: Callable[[str], None] = field(default=lambda _label: None)

    def back_to_back(self, scenario: str) -> Level:
        n = self.validity.min_queries
        lat, dur, stopped = run_back_to_back(self.call, n, self.validity.max_level_s, self.clock)
        # A fast call finishes its minimum count before the minimum duration: keep going.
        while not stopped and dur < self.validity.min_duration_s:
            more, extra, stopped = run_back_to_back(
                self.call, n, self.validity.max_level_s - dur, self.clock
            )
            lat += more
            dur += extra
        return Level(scenario, None, None, max(n, len(lat)), tuple(lat), dur, stopped)

    def server(self, rate_per_s: float, saturation_per_s: float) -> Level:
        n = queries_for(rate_per_s, self.validity)
        arrivals = poisson_arrivals_s(rate_per_s, n, self.seed)
        lat, dur, stopped = run_server(
            self.call, arrivals, self.validity.max_level_s, self.clock, self.wait_until
        )
        return Level(SERVER, rate_per_s, rate_per_s / saturation_per_s, n, tuple(lat), dur, stopped)

    def run(self, sla_p99_s: float | None = None) -> dict:
        self.on_level(SINGLE_STREAM)
        single = level_json(self.back_to_back(SINGLE_STREAM), self.validity)
        self.on_level(OFFLINE)
        offline = level_json(self.back_to_back(OFFLINE), self.validity)
        saturation = offline["achieved_rate_per_s"]
        levels = []
        for fraction in self.fractions:
            self.on_level(f"server at {fraction:.0%} of offline")
            levels.append(level_json(self.server(fraction * saturation, saturation), self.validity))
        out = {
            SINGLE_STREAM: single,
            OFFLINE: offline,
            SERVER: levels,
            "knee": find_knee(levels),
        }
        if sla_p99_s is not None:
            extra, stopped = self._search(levels, sla_p99_s, saturation)
            levels += extra
            out[SERVER] = sorted(levels, key=lambda lv: lv["target_rate_per_s"])
            out["sla"] = best_under_sla(levels, sla_p99_s)
            if stopped:
                out["sla"]["search_stopped"] = stopped
        return out

    def _search(
        self, levels: list[dict], p99_s: float, saturation: float
    ) -> tuple[list[dict], str]:
        """Bisect the offered rate between the best passing and the first failing level.

        Stops early, saying why, when the next level could not be valid: at a light load the
        minimum query count spans longer than the level budget, and a level that ran out of
        budget would be tried again at the same rate.
        """
        extra: list[dict] = []
        for _ in range(SLA_SEARCH_STEPS):
            found = best_under_sla(levels + extra, p99_s)
            low = found["max_rate_per_s"] or 0.0
            above = [lv["target_rate_per_s"] for lv in levels + extra
                     if lv["valid"] and lv["target_rate_per_s"] > low
                     and lv["latency"]["p99_s"] > p99_s]  # fmt: skip
            if not above:
                break
            rate = (low + min(above)) / 2 if low else min(above) / 2
            queries = queries_for(rate, self.validity)
            if queries / rate > self.validity.max_level_s:
                return extra, (
                    f"search stopped below {min(above):.3g} queries/s: a level at {rate:.3g}/s "
                    f"needs {queries} queries over about {queries / rate:.3g} s, past the "
                    f"{self.validity.max_level_s:g} s level budget"
                )
            self.on_level(f"SLA search at {rate:.3g}/s")
            extra.append(level_json(self.server(rate, saturation), self.validity))
        return extra, ""


def validity_json(validity: Validity) -> dict:
    return asdict(validity)
