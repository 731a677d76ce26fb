"""The one reading of a soak result: what the gate and the packet both refuse, and why."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from evidencedocs import soak_doc

from reviewkit.evidence.files import Loaded
from reviewkit.evidence.soak import SoakUnusable, read_soak


def test_a_complete_soak_reads_into_its_record():
    doc = soak_doc()
    soak = read_soak(Loaded(Path("s.json"), doc))
    assert soak.workload_id == doc["workload"]["id"]
    assert soak.window_s == doc["measured_window_s"] and soak.complete is doc["complete"]
    assert soak.verdict == doc["analysis"]["verdict"]
    assert len(soak.subwindows) == len(doc["subwindows"])


@pytest.mark.parametrize(
    ("damage", "key"),
    [
        (lambda d: d.pop("complete"), "`complete` must be true or false"),
        (
            lambda d: d.update(measured_window_s="60"),
            "`measured_window_s` must be a finite number of seconds",
        ),
        (lambda d: d["workload"].pop("id"), "`workload.id` must be a string"),
        (lambda d: d["analysis"].pop("verdict"), "`analysis.verdict` must be a string"),
        (lambda d: d.update(subwindows=[1, 2]), "`subwindows[0]` must be a table"),
        (
            lambda d: d["analysis"]["trend"].update(relative_change=[]),
            "`analysis.trend.relative_change` must be a finite number or null",
        ),
        (lambda d: d["subwindows"][0].update(end_s="3"), "`subwindows[0].end_s` must be a finite"),
    ],
)
def test_a_damaged_soak_names_the_key(damage, key):
    doc = copy.deepcopy(soak_doc())
    damage(doc)
    with pytest.raises(SoakUnusable, match=re.escape(key)):
        read_soak(Loaded(Path("s.json"), doc))
