"""How the samples of two runs pair up and the interval their ratio gets: separate runs, the
rounds of an interleaved A/B, or its alternated calls; hierarchical draws per quantile; the
run-to-run allowance of separate runs; what would settle an inconclusive verdict."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from reviewkit.analysis.stats import (
    PERCENTILE,
    RatioInterval,
    hierarchical_draws,
    interval,
    ratio_interval,
    round_draws,
    round_quantile,
    split_rounds,
    widen,
)

if TYPE_CHECKING:
    from reviewkit.bundle.records import Run, Workload

QUANTILES = (0.5, 0.95, 0.99)


def ratio_ci(cand_draws: np.ndarray, base_draws: np.ndarray) -> tuple[float, float]:
    return interval(cand_draws / base_draws)


def settle_hint(paired: bool) -> str:
    """What would narrow an inconclusive interval, for the comparison's design."""
    if paired:
        return "more rounds (--rounds) would narrow it"
    return ("an interleaved `reviewkit ab` would narrow it (two separate runs carry the "
            "machine's run-to-run variation, which more rounds do not remove)")  # fmt: skip


def inconclusive_reason(ci: tuple[float, float], margin: float, paired: bool) -> str:
    """What would settle an inconclusive verdict."""
    return (f"the 95% interval {ci[0]:.3f}-{ci[1]:.3f} crosses the margin 1 +/- {margin:g}: "
            f"{settle_hint(paired)}")  # fmt: skip


PAIRED, INDEPENDENT = "rounds paired (interleaved A/B)", "independent runs"
CALLS_PAIRED = (
    "rounds and calls paired (interleaved A/B: a median's ratio is taken call by call, each "
    "call beside its neighbour of the other side)"
)


# The pairing record's word for an A/B whose two sides alternated call by call within each
# round (measure/ab.py writes it): only then are the i-th calls of the two sides neighbours.
CALLS_ALTERNATED = "alternated"


def pairing_of(run: Run) -> Mapping[str, Any]:
    """The run's pairing record ({} unless it is one side of a `reviewkit ab`)."""
    return run.pairing or {}


def calls_paired(base: Run, cand: Run) -> bool:
    """An interleaved A/B whose calls alternated: the median's ratio is then taken call by
    call (stats.call_paired_log_ratios)."""
    return paired_design(base, cand) and all(
        pairing_of(run).get("calls") == CALLS_ALTERNATED for run in (base, cand)
    )


def paired_design(base: Run, cand: Run) -> bool:
    """Whether the two runs are the two sides of one interleaved `reviewkit ab`: their rounds
    alternated in one process, so round r of one is paired with round r of the other."""
    a, b = pairing_of(base), pairing_of(cand)
    return bool(a.get("id")) and a.get("id") == b.get("id") and a.get("side") != b.get("side")


def seed_of(key: str) -> int:
    """A workload's bootstrap seed from its key: its interval does not depend on which other
    workloads are compared, and the same runs always give the same numbers."""
    return zlib.crc32(key.encode())


def ratio_draws(
    b: Workload, c: Workload, key: str, paired: bool
) -> tuple[dict, dict, tuple[int, int], bool]:
    """Point values and hierarchical bootstrap draws of each quantile of both sides, the
    rounds of each, and whether the rounds were resampled in pairs."""
    rb = split_rounds(b.samples_s, b.round_sizes)
    rc = split_rounds(c.samples_s, c.round_sizes)
    rng = np.random.default_rng(seed_of(key))
    plan_b = round_draws(rng, len(rb))
    in_pairs = paired and len(rb) == len(rc)
    plan_c = plan_b if in_pairs else round_draws(rng, len(rc))
    points, draws = {}, {}
    for q in QUANTILES:
        points[q] = (round_quantile(rb, q), round_quantile(rc, q))
        draws[q] = (hierarchical_draws(rb, q, plan_b, rng), hierarchical_draws(rc, q, plan_c, rng))
    return points, draws, (len(rb), len(rc)), in_pairs


def interval_of(
    point: float,
    base: np.ndarray,
    cand: np.ndarray,
    rounds: tuple[int, int],
    in_pairs: bool,
    run_to_run_variance: float = 0.0,
) -> RatioInterval:
    """The ratio's interval: a t interval on the rounds when both sides have two or more (in
    pairs for an interleaved A/B), else the percentile interval of the samples. Two separate
    runs add the log ratio's run-to-run variance that their rounds cannot show: the sum of
    each side's figure squared (run_to_run.Allowance.variance; 2 sd^2 on one device)."""
    known = 0.0 if in_pairs else run_to_run_variance
    if min(rounds) < 2:
        return RatioInterval(*widen(point, ratio_ci(cand, base), known), None, None, PERCENTILE)
    if in_pairs:
        return ratio_interval(point, [(np.log(cand / base), rounds[0])])
    parts = [(np.log(base), rounds[0]), (np.log(cand), rounds[1])]
    return ratio_interval(point, parts, known_variance=known)
