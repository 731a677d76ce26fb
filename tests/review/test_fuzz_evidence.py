"""A property-based fuzz of the evidence files a review cites (issue 18): one field of the
quality, sweep, soak or trace-summary result of a complete review replaced by a hostile value
or removed, then `check` and `packet --no-pdf`: a report (the file named as not used, with its
reason, or used) or one clear error naming the file, never a traceback; the evidence file never
changed; no partial output; the page inert. REVIEWKIT_FUZZ_EXAMPLES=N runs a long fuzz."""

from __future__ import annotations

import json
import math
import os

import pytest
from fuzzing import field_paths, replaced
from htmlsafety import parse_inert
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runfactory import complete_review, write_review

from reviewkit.common.errors import ReviewkitError
from reviewkit.render.packet import write_packet
from reviewkit.review.gate import run_check

pytestmark = pytest.mark.fuzz  # `pytest -m fuzz` runs these alone (a long run: see above)

EXAMPLES = int(os.environ.get("REVIEWKIT_FUZZ_EXAMPLES", "60"))
FILES = ("quality.json", "sweep.json", "soak.json", "trace_summary.json")
REMOVED = object()
hostile = st.one_of(
    st.sampled_from([None, REMOVED, True, math.nan, math.inf, -math.inf, -1.0, 0.0, 1e308,
                     -(2**63), 10**400]),
    st.sampled_from(["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>',
                     "[red]x[/] [/]", "\u202eevil", "a\x00b", "x" * 10_000, "", "ok"]),
    st.lists(st.sampled_from([None, 1, "x", -1.0, math.nan]), max_size=3),
    st.dictionaries(st.sampled_from(["status", "id", "x", "reason"]),
                    st.sampled_from([None, 1, "<b>x</b>", math.inf]), max_size=2),
)  # fmt: skip


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    return write_review(tmp_path_factory.mktemp("evidence-fuzz") / "review", complete_review())


def _originals(review):
    return {name: json.loads((review.parent / "evidence" / name).read_text()) for name in FILES}


@pytest.fixture(scope="module")
def fields(review):
    docs = _originals(review)
    return docs, [
        (name, paths)
        for name in FILES
        for _, paths in sorted(field_paths(docs[name]).items(), key=lambda kv: str(kv[0]))
    ]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # a fixed seed: the same examples on every run
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), value=hostile)
def test_a_hostile_evidence_field_ends_in_a_report_or_one_clear_error(
    review, fields, tmp_path, data, value
):
    docs, choices = fields
    name, paths = data.draw(st.sampled_from(choices))
    path = data.draw(st.sampled_from(paths))
    file = review.parent / "evidence" / name
    try:
        file.write_text(json.dumps(replaced(docs[name], path, value, removed=REMOVED)))
        before = file.read_bytes()
        try:
            report = run_check(review)
        except ReviewkitError as exc:
            message = str(exc)
            assert "\n" not in message and len(message) < 2_000, message[:300]
            assert file.read_bytes() == before
            return
        assert report.verdict in ("pass", "fail")
        out = tmp_path / "packet"
        try:
            result = write_packet(review, out, pdf=False)
        except ReviewkitError as exc:
            assert str(exc), exc
            assert not list(out.parent.glob(".packet.*")), "partial output left"
            return
        parse_inert(result.html.read_text(encoding="utf-8"))
        assert file.read_bytes() == before
        assert not list(out.parent.glob(".packet.*")), "a temporary folder was left behind"
    finally:
        file.write_text(json.dumps(docs[name]))
