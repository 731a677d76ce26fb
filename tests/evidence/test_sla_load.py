"""An SLA target judged on a sweep's server levels, worked by hand (never interpolated)."""

from reviewkit.evidence.sla_load import (
    AT_LOAD,
    BEST_LOAD,
    MISSED_EVERYWHERE,
    NO_VALID_LEVEL,
    judge_under_load,
)
from reviewkit.evidence.sweep import SweptLevel


def level(rate, p99, queries=100, valid=True):
    return SweptLevel(target_rate_per_s=rate, load_fraction=None, achieved_rate_per_s=rate,
                      p50_s=p99 / 2, p99_s=p99, valid=valid, queries=queries)  # fmt: skip


# The committed bf16 sample's sweep, rounded: p99 246, 289, 669, 705 ms at 2.76-9.95 queries/s.
SERVER = (level(2.76, 0.246), level(5.53, 0.289), level(8.29, 0.669), level(9.95, 0.705))
SINGLE = level(None, 0.097)


def test_the_p99_at_the_slas_load_is_the_nearest_measured_load_at_or_above_it():
    # 150 ms at 8 queries/s: the nearest level at or above 8/s is 8.29/s, p99 669 ms: missed
    j = judge_under_load(SERVER, SINGLE, 0.150, 8.0)
    assert (j.kind, j.met, j.level.target_rate_per_s) == (AT_LOAD, False, 8.29)
    text = j.sentence()
    assert "misses p99 <= 150 ms at 8 queries/s: p99 669 ms at 8.29 queries/s offered" in text
    assert "(the nearest measured load at or above it)" in text
    assert "100 queries: about the slowest of them" in text  # a p99 of 100 is ~the maximum
    assert "one query at a time p99 97 ms" in text
    # 300 ms at 5/s: the 5.53/s level's 289 ms meets it (not the 2.76/s one below the load)
    j = judge_under_load(SERVER, SINGLE, 0.300, 5.0)
    assert (j.kind, j.met, j.level.target_rate_per_s) == (AT_LOAD, True, 5.53)


def test_without_a_load_the_highest_load_meeting_the_target():
    j = judge_under_load(SERVER, SINGLE, 0.300, None)
    assert (j.kind, j.met, j.level.target_rate_per_s) == (BEST_LOAD, True, 5.53)
    assert "p99 <= 300 ms held up to 5.53 queries/s offered (p99 289 ms" in j.sentence()


def test_a_load_beyond_the_sweep_is_unjudged_never_met():
    # 1 s at 20/s: every level meets 1 s, but the sweep stops at 9.95/s, under the SLA's load
    j = judge_under_load(SERVER, SINGLE, 1.0, 20.0)
    assert (j.kind, j.met, j.level.target_rate_per_s) == (BEST_LOAD, False, 9.95)
    assert "no load at or above the SLA's 20 queries/s: unjudged there" in j.sentence()


def test_missed_at_every_load_shows_the_lowest():
    j = judge_under_load(SERVER, SINGLE, 0.150, None)
    assert (j.kind, j.met, j.level.target_rate_per_s) == (MISSED_EVERYWHERE, False, 2.76)
    assert "at every measured load: p99 246 ms already at the lowest, 2.76 queries/s" in (
        j.sentence())


def test_an_invalid_level_at_the_slas_load_leaves_it_unjudged():
    # 150 ms at 3/s: the level at 4/s (the nearest at or above) is invalid, so the 2/s level
    # that meets it settles nothing about 3/s: not met, and said why
    server = (level(2.0, 0.1), level(4.0, 0.12, valid=False), level(8.0, 0.4))
    j = judge_under_load(server, None, 0.150, 3.0)
    assert (j.kind, j.met, j.level.target_rate_per_s) == (BEST_LOAD, False, 2.0)
    assert "the level at 4 queries/s, the SLA's 3/s or the next above, is invalid" in (
        j.sentence())


def test_invalid_levels_are_not_judged_and_large_counts_need_no_caveat():
    server = (level(2.0, 0.1, valid=False), level(4.0, 0.12, queries=1000))
    j = judge_under_load(server, None, 0.150, 3.0)
    assert (j.kind, j.met, j.level.target_rate_per_s) == (AT_LOAD, True, 4.0)
    assert j.sentence().endswith("1000 queries; 1 invalid level(s) not counted")
    assert judge_under_load((level(2.0, 0.1, valid=False),), None, 0.15, None).kind == \
        NO_VALID_LEVEL
