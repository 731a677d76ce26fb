"""A property-based fuzz of the review file (issue 18): one leaf of a complete review replaced by
a hostile value -- a wrong type, NaN, an infinity, a negative, a huge number, markup, a
right-to-left override, a NUL, a very long string -- and `check` then `packet --no-pdf` must
end in a report or one clear error naming the file, never a traceback; the review file is never
changed; a rendered page keeps every string inert.

A fixed seed and a few hundred examples keep it in CI's budget; REVIEWKIT_FUZZ_EXAMPLES=N runs
a long fuzz (the figures of the last long run are in docs/reliability.md)."""

from __future__ import annotations

import math
import os

import pytest
import tomlkit
from fuzzing import leaves, replaced
from htmlsafety import parse_inert
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runfactory import complete_review, write_review

from reviewkit.common.errors import ReviewkitError
from reviewkit.render.packet import write_packet
from reviewkit.review.gate import run_check

pytestmark = pytest.mark.fuzz  # `pytest -m fuzz` runs these alone (a long run: see above)

EXAMPLES = int(os.environ.get("REVIEWKIT_FUZZ_EXAMPLES", "150"))
HOSTILE_STRINGS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(2)>',
    "[click](javascript:alert(3))",
    "\u202eevil\u202c",  # a right-to-left override
    "a\x00b",
    "x" * 10_000,
    "word " * 5_000,
    "[red]not markup[/red] [/]",
    "model.[*",
    "../../etc/passwd",
    "",
    " ",
]
HOSTILE_NUMBERS = [math.nan, math.inf, -math.inf, -1.0, 0.0, 1e308, -(2**63), 2**63 - 1, 1e-320]
hostile = st.one_of(
    st.sampled_from(HOSTILE_STRINGS),
    st.sampled_from(HOSTILE_NUMBERS),
    st.booleans(),
    st.lists(st.sampled_from(HOSTILE_STRINGS), max_size=2),
    st.dictionaries(st.sampled_from(["x", "answer", "workload"]),
                    st.sampled_from(HOSTILE_STRINGS), max_size=2),
    st.text(max_size=40),
)  # fmt: skip


LEAVES = sorted(leaves(complete_review()), key=str)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_review(tmp_path_factory.mktemp("fuzz") / "review", complete_review()).parent


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # a fixed seed: the same examples on every run
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(path=st.sampled_from(LEAVES), value=hostile)
def test_a_hostile_value_anywhere_ends_in_a_report_or_one_clear_error(base, tmp_path, path, value):
    review = replaced(complete_review(), path, value)
    try:
        text = tomlkit.dumps(review)
    except Exception:  # a value TOML cannot hold is not a file anyone can send
        return
    file = base / "review.toml"
    file.write_text(text, encoding="utf-8")
    before = file.read_bytes()
    try:
        report = run_check(file)
    except ReviewkitError as exc:
        message = str(exc)
        assert message.startswith(str(file)), message
        assert "\n" not in message and len(message) < 2_000, message[:300]
        assert file.read_bytes() == before
        return
    assert report.verdict in ("pass", "fail")
    out = tmp_path / "packet"
    if os.environ.get("REVIEWKIT_FUZZ_TRACE"):  # the last example, should the process die
        with open(os.environ["REVIEWKIT_FUZZ_TRACE"], "w") as trace:
            trace.write(repr((path, value))[:500])
    try:
        result = write_packet(file, out, pdf=False)
    except ReviewkitError as exc:
        assert str(exc), exc
        assert not out.exists() or not list(out.parent.glob(".packet.*")), "partial output left"
        return
    parse_inert(result.html.read_text(encoding="utf-8"))
    assert file.read_bytes() == before
    assert not list(out.parent.glob(".packet.*")), "a temporary folder was left behind"
