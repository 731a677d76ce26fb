"""A property-based fuzz of the rubric (issue 18): one leaf of the default rubric replaced by a
hostile value, then the rubric loaded and a complete review checked against it: a report or one
clear error naming the rubric file, never a traceback; the rubric file never changed.
REVIEWKIT_FUZZ_EXAMPLES=N runs a long fuzz."""

from __future__ import annotations

import math
import os

import pytest
import tomlkit
from fuzzing import leaves, replaced
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runfactory import complete_review, write_review

from reviewkit.common.errors import ReviewkitError
from reviewkit.common.tomlfile import read_toml
from reviewkit.review.gate import run_check
from reviewkit.review.rubric import DEFAULT_RUBRIC

pytestmark = pytest.mark.fuzz  # `pytest -m fuzz` runs these alone (a long run: see above)

EXAMPLES = int(os.environ.get("REVIEWKIT_FUZZ_EXAMPLES", "100"))
DEFAULT = read_toml(DEFAULT_RUBRIC)
hostile = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0, 2.0, 1e308, -(2**63), True]),
    st.sampled_from(["<script>alert(1)</script>", "\u202e", "a\x00b", "x" * 10_000, "", "manual",
                     "blocking", "no-such-check", "[red]x[/]"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["min_effect", "x", "fdr"]), st.floats(), max_size=2),
)  # fmt: skip


LEAVES = sorted(leaves(DEFAULT), key=str)


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    return write_review(tmp_path_factory.mktemp("rubric-fuzz") / "review", complete_review())


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(path=st.sampled_from(LEAVES), value=hostile)
def test_a_hostile_rubric_value_ends_in_a_report_or_one_clear_error(review, tmp_path, path, value):
    doc = replaced(DEFAULT, path, value)
    try:
        text = tomlkit.dumps(doc)
    except Exception:  # a value TOML cannot hold
        return
    rubric = tmp_path / "team.toml"
    rubric.write_text(text, encoding="utf-8")
    before = rubric.read_bytes()
    try:
        report = run_check(review, rubric)
    except ReviewkitError as exc:
        message = str(exc)
        assert str(rubric) in message, message[:300]
        assert "\n" not in message and len(message) < 2_000, message[:300]
    else:
        assert report.verdict in ("pass", "fail")
    assert rubric.read_bytes() == before
