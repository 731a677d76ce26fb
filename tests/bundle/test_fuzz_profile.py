"""A property-based fuzz of device profiles (issue 18): one field of a profile built from the
ceilings of a recorded run replaced by a hostile value or removed, and rehashed as if written
so (a pinned --device-profile is anyone's file): the profile is refused naming the file and
the key, or it serves a run whose bundle loads, analyses and prints; a profile the run accepts
never yields a bundle the next command refuses. REVIEWKIT_FUZZ_EXAMPLES=N runs a long fuzz."""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import pytest
from fuzzing import leaves, replaced
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from reviewkit.analysis.roofline import analyse_run
from reviewkit.bundle import profile as profiles
from reviewkit.bundle.run import load_run, write_run
from reviewkit.cli.console import print_profile, print_run

pytestmark = pytest.mark.fuzz  # `pytest -m fuzz` runs these alone (a long run: see above)

EXAMPLES = int(os.environ.get("REVIEWKIT_FUZZ_EXAMPLES", "150"))
SAMPLE = Path(__file__).parents[2] / "samples" / "cpu-quick-epyc-2core" / "run.json"
RUN = json.loads(SAMPLE.read_text())
RUN["workloads"] = RUN["workloads"][:6]
PROFILE = profiles.build(
    calibrated={
        **{k: RUN["ceilings"][k] for k in ("compute", "memory", "bandwidth", "threads")},
        "settings": {"threads": RUN["ceilings"]["threads"], "float32_matmul_precision": "highest"},
    },
    fingerprint=RUN["environment"]["fingerprint"],
    torch_build={"torch_version": RUN["environment"]["torch_version"]},
    device="cpu",
    device_name="AMD EPYC",
    calibration="quick",
    created_unix_s=1.0,
    wall_s=10.0,
)
REMOVED = object()
hostile = st.one_of(
    st.sampled_from([None, REMOVED, True, math.nan, math.inf, -math.inf, -1.0, 0.0, 1e308,
                     -(2**63), 10**400, 1e-320]),
    st.sampled_from(["<script>alert(1)</script>", "[red]x[/] [/]", "\u202e", "a\x00b",
                     "x" * 10_000, "", "dram"]),
    st.lists(st.sampled_from([None, 1, "x", -1.0]), max_size=3),
    st.dictionaries(st.sampled_from(["peak", "level", "x"]),
                    st.sampled_from([None, 1, "x", -1.0]), max_size=2),
)  # fmt: skip


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(path=st.sampled_from(sorted(leaves(PROFILE), key=str)), value=hostile)
def test_a_hostile_profile_is_refused_by_key_or_serves_a_loadable_run(tmp_path, path, value):
    doc = replaced(PROFILE, path, value, removed=REMOVED)
    try:
        doc["hash"] = profiles.content_hash(doc)
        text = json.dumps(doc)
    except (ValueError, TypeError, KeyError):
        return
    file = tmp_path / "profile.json"
    file.write_text(text, encoding="utf-8")
    try:
        loaded = profiles.load(file)
    except profiles.ProfileError as exc:
        message = str(exc)
        assert message.startswith(str(file)) and "\n" not in message, message[:300]
        assert len(message) < 2_000, message[:300]
        return
    console = Console(file=io.StringIO(), width=150)
    print_profile(loaded, console, [str(file)])
    run = {**RUN, "ceilings": profiles.ceilings_of(loaded, "pinned", file)}
    write_run(tmp_path / "run", run)
    print_run(analyse_run(load_run(tmp_path / "run")), console, str(tmp_path / "run"))
