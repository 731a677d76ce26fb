"""An SLA target judged on a latency-throughput sweep, once: p99 at the SLA's load, under load."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reviewkit.evidence.sweep import SweptLevel

# numpy's linear p99 of n values lies between the two slowest when n <= 100: the "p99" of so few
# queries is about the slowest one, and the sentence says so.
P99_NEEDS_QUERIES = 100

AT_LOAD = "at-load"  # the nearest measured load at or above the SLA's
BEST_LOAD = "best-load"  # the SLA sets no load (or the sweep stopped under it): the highest met
MISSED_EVERYWHERE = "missed-everywhere"
NO_VALID_LEVEL = "no-valid-level"


@dataclass(frozen=True)
class LoadJudgement:
    """One p99 target on one swept workload's server levels."""

    kind: str
    met: bool
    p99_target_s: float
    load_per_s: float | None  # the SLA's load (its minimum throughput), None when it sets none
    level: SweptLevel | None  # the level the verdict rests on
    single_stream: SweptLevel | None
    invalid_levels: int = 0  # server levels not counted (too few queries, out of budget)
    invalid_at_load: SweptLevel | None = None  # the measured load at the SLA's, if invalid

    def sentence(self) -> str:
        """The result in words, with the numbers it rests on (never interpolated)."""
        target = f"p99 <= {_ms(self.p99_target_s)}"
        load = f" at {self.load_per_s:.3g} queries/s" if self.load_per_s is not None else ""
        lv = self.level
        if self.kind == NO_VALID_LEVEL:
            text = f"{target}{load}: the sweep has no valid server level to judge it on"
        elif self.kind == AT_LOAD:
            nearest = "" if lv.target_rate_per_s == self.load_per_s else (
                " (the nearest measured load at or above it)")  # fmt: skip
            text = (f"{'meets' if self.met else 'misses'} {target}{load}: p99 {_ms(lv.p99_s)} at "
                    f"{lv.target_rate_per_s:.3g} queries/s offered{nearest}"
                    f"{_queries(lv)}")  # fmt: skip
        elif self.kind == BEST_LOAD:
            text = (f"{target} held up to {lv.target_rate_per_s:.3g} queries/s offered (p99 "
                    f"{_ms(lv.p99_s)}{_queries(lv)})")  # fmt: skip
            if self.invalid_at_load is not None:
                text += (f"; the level at {self.invalid_at_load.target_rate_per_s:.3g} "
                         f"queries/s, the SLA's {self.load_per_s:.3g}/s or the next above, is "
                         "invalid: unjudged there")  # fmt: skip
            elif self.load_per_s is not None:
                text += (f"; the sweep measured no load at or above the SLA's "
                         f"{self.load_per_s:.3g} queries/s: unjudged there")  # fmt: skip
        else:
            text = (f"misses {target} at every measured load: p99 {_ms(lv.p99_s)} already at "
                    f"the lowest, {lv.target_rate_per_s:.3g} queries/s offered"
                    f"{_queries(lv)}")  # fmt: skip
            if self.invalid_at_load is not None:
                text += (f" (the level at {self.invalid_at_load.target_rate_per_s:.3g} "
                         "queries/s, at or above the SLA's load, is invalid)")  # fmt: skip
        single = self.single_stream
        if single is not None and single.p99_s is not None:
            text += f"; one query at a time p99 {_ms(single.p99_s)}{_queries(single)}"
        if self.invalid_levels:
            text += f"; {self.invalid_levels} invalid level(s) not counted"
        return text


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _queries(level: SweptLevel) -> str:
    n = level.queries
    if n is None:
        return ""
    if n <= P99_NEEDS_QUERIES:
        return f", {n} queries: about the slowest of them"
    return f", {n} queries"


def judge_under_load(
    server: Sequence[SweptLevel],
    single_stream: SweptLevel | None,
    p99_target_s: float,
    load_per_s: float | None,
) -> LoadJudgement:
    """At the SLA's load when the sweep measured it (the nearest valid level at or above it),
    else the highest valid load meeting the target, else missed at every load (the lowest)."""
    measured = sorted((lv for lv in server if lv.target_rate_per_s is not None),
                      key=lambda lv: lv.target_rate_per_s)  # fmt: skip
    levels = [lv for lv in measured if lv.valid]
    common = {"single_stream": single_stream, "invalid_levels": len(measured) - len(levels)}
    if not levels:
        return LoadJudgement(NO_VALID_LEVEL, False, p99_target_s, load_per_s, None, **common)
    invalid_at = None
    if load_per_s is not None:
        # the nearest measured load at or above the SLA's: if it is invalid, the SLA's load is
        # unjudged (a valid level further up is another load)
        at = next((lv for lv in measured if lv.target_rate_per_s >= load_per_s), None)
        if at is not None and at.valid:
            return LoadJudgement(AT_LOAD, at.p99_s <= p99_target_s, p99_target_s, load_per_s,
                                 at, **common)  # fmt: skip
        invalid_at = at
    meeting = [lv for lv in levels if lv.p99_s <= p99_target_s]
    if meeting:
        # with a load the sweep did not judge, a lower load meeting the target settles nothing
        return LoadJudgement(BEST_LOAD, load_per_s is None, p99_target_s, load_per_s,
                             meeting[-1], invalid_at_load=invalid_at, **common)  # fmt: skip
    return LoadJudgement(MISSED_EVERYWHERE, False, p99_target_s, load_per_s, levels[0],
                         invalid_at_load=invalid_at, **common)  # fmt: skip
