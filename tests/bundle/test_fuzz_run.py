"""A property-based fuzz of run bundles (issue 18): one field of a real recorded run.json (the
samples/ bundles, cut to one workload per layer type) replaced by a hostile value or removed,
then `show`, `show --json` and `compare` against the untouched bundle, as a user types them:
exit 0, 1 or 2 with a report or one clear error naming the file, never a traceback; the bundle
is never changed. REVIEWKIT_FUZZ_EXAMPLES=N runs a long fuzz."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from fuzzing import field_paths, replaced
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewkit.cli.app import main

pytestmark = pytest.mark.fuzz  # `pytest -m fuzz` runs these alone (a long run: see above)

EXAMPLES = int(os.environ.get("REVIEWKIT_FUZZ_EXAMPLES", "80"))  # ~40 s on the 2-core VM
SAMPLES = Path(__file__).parents[2] / "samples"
REMOVED = object()  # the field deleted rather than replaced
hostile = st.one_of(
    st.sampled_from([None, REMOVED, True, math.nan, math.inf, -math.inf, -1.0, 0.0, -0.0, 1e308,
                     -(2**63), 2**63 - 1, 10**400, 1e-320]),
    st.sampled_from(["<script>alert(1)</script>", "[red]x[/] [/]", "\u202eevil", "a\x00b",
                     "x" * 10_000, "", "1e3", "nan", "ok", "fp32"]),
    st.lists(st.sampled_from([None, 1, "x", -1.0]), max_size=3),
    st.dictionaries(st.sampled_from(["peak", "source", "x", "available"]),
                    st.sampled_from([None, 1, "x", math.nan]), max_size=2),
)  # fmt: skip


def _cut(doc: dict) -> dict:
    """The bundle with its first workload of each layer type and dtype: every field kind, at a
    fraction of the cost per example."""
    seen, kept = set(), []
    for w in doc["workloads"]:
        if (w["layer_type"], w["dtype"]) not in seen:
            seen.add((w["layer_type"], w["dtype"]))
            kept.append(w)
    return {**doc, "workloads": kept}


BUNDLES = {
    name: _cut(json.loads((SAMPLES / name / "run.json").read_text()))
    for name in ("cpu-quick-epyc-2core", "cpu-quick-tp2-gloo-2core")
}
FIELDS = [
    (name, paths)
    for name, doc in BUNDLES.items()
    for _, paths in sorted(field_paths(doc).items(), key=lambda kv: str(kv[0]))
]


@pytest.fixture(scope="module")
def untouched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run-fuzz")
    for name, doc in BUNDLES.items():
        (folder / name).mkdir()
        (folder / name / "run.json").write_text(json.dumps(doc))
    return folder


def _invoke(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # a fixed seed: the same examples on every run
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(field=st.sampled_from(FIELDS), data=st.data(), value=hostile)
def test_a_hostile_run_field_ends_in_a_report_or_one_clear_error(
    untouched, tmp_path, capsys, field, data, value
):
    name, paths = field
    path = data.draw(st.sampled_from(paths))
    doc = replaced(BUNDLES[name], path, value, removed=REMOVED)
    try:
        text = json.dumps(doc)  # NaN and infinities as Python's json writes them
    except (ValueError, TypeError):
        return
    file = tmp_path / "run.json"
    file.write_text(text, encoding="utf-8")
    before = file.read_bytes()
    for args in (("show", str(file)), ("show", str(file), "--json"),
                 ("compare", str(untouched / name), str(file))):  # fmt: skip
        code, out, err = _invoke(capsys, *args)
        assert code in (0, 1, 2), (args, code, err[-500:])
        assert "Traceback" not in out + err, (args, err[-2000:])
        if code == 2:
            assert str(file) in " ".join(err.split()), (args, err[-500:])
        elif "--json" in args:
            json.loads(out)  # stdout carries one JSON document
        assert file.read_bytes() == before
