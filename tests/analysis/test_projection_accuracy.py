"""The projection's measured error table: read, checked, and shown by kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reviewkit.analysis import projection_accuracy as acc
from reviewkit.common.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_table_holds_both_kinds_and_matches_the_benchmark_it_cites():
    table = acc.shipped_errors()
    assert set(table) == {"measured", "borrowed"} and all(table.values())
    # each same-device case: the workloads of its --held-out runs that its --fit runs lack,
    # counted here from the bundles (56: the full shapes absent from quick, 28 per dtype; 34:
    # the serving profile's decode shapes, 31 of them absent from a quick run of suite 1.4)
    def ids(path: str) -> set[str]:
        return {w["id"] for w in json.loads((ROOT / path / "run.json").read_text())["workloads"]}

    for case in table["measured"]:
        words = case.command.split()
        runs = {flag: [words[i + 1] for i, w in enumerate(words) if w == flag]
                for flag in ("--fit", "--held-out")}  # fmt: skip
        fitted = set().union(*(ids(p) for p in runs["--fit"]))
        held = [ids(p) - fitted for p in runs["--held-out"]]
        assert case.held_out == sum(map(len, held))
        assert [len(h) for h in held] in ([28, 28], [34], [31])


def test_a_label_finds_its_kind_and_every_case_of_it():
    assert acc.kind_of("measured") == "measured"
    assert acc.kind_of("borrowed from AMD EPYC, NVIDIA H200") == "borrowed"
    case = acc.MeasuredError("borrowed", "A from B", 10, 0.25, 0.5, 0.8, "B", "2026", "cmd")
    note = acc.error_note("borrowed from B", {"measured": (), "borrowed": (case, case)})
    assert note == ("A from B: median |error| 25%, p90 50%, 80% intervals held 80% of 10 "
                    "held-out workloads; " * 2).rstrip("; ")


def test_the_brief_is_the_range_of_the_cases_medians():
    def case(median: float) -> acc.MeasuredError:
        return acc.MeasuredError("measured", "c", 10, median, 0.5, 0.8, "B", "2026", "cmd")

    def brief(*medians: float) -> str:
        cases = tuple(case(m) for m in medians)
        return acc.error_brief("measured", {"measured": cases, "borrowed": cases})

    assert brief(0.25, 0.104, 0.5) == "median |error| 10%-50% (3 cases)"
    assert brief(0.101, 0.099) == "median |error| 10% (2 cases)"  # both round to 10%
    assert brief(0.25) == "median |error| 25%"


@pytest.mark.parametrize("text,key", [
    ("version = 2\n", "version"),
    ("version = 1\n[[kinds.measured]]\ncase = 'a'\n", "kinds"),
    ("version = 1\nkinds.measured = []\nkinds.borrowed = []\n", "kinds.measured"),
    ("version = 1\n[[kinds.measured]]\ncase = 'a'\nheld_out = 3\nmedian_abs_error = 'big'\n"
     "p90_abs_error = 1\ncoverage_80 = 1\nmeasured_on = 'x'\ndate = 'd'\ncommand = 'c'\n"
     "[[kinds.borrowed]]\n", "kinds.measured[0].median_abs_error"),
    # TOML's nan is a float and never below 0: still not a figure
    ("version = 1\n[[kinds.measured]]\ncase = 'a'\nheld_out = 3\nmedian_abs_error = nan\n"
     "p90_abs_error = 1\ncoverage_80 = 1\nmeasured_on = 'x'\ndate = 'd'\ncommand = 'c'\n"
     "[[kinds.borrowed]]\n", "kinds.measured[0].median_abs_error"),
])  # fmt: skip
def test_a_bad_table_names_the_file_and_key(tmp_path, text, key):
    path = tmp_path / "projection_error.toml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        acc.read_errors(path)
    assert str(path) in str(err.value) and repr(key) in str(err.value)
