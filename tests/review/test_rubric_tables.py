"""The rubric's one-key tables, [roofline] and [risk]: read, and refused clearly when wrong."""

from __future__ import annotations

import pytest

from reviewkit.common.errors import InputError
from reviewkit.review.checks import CHECKS
from reviewkit.review.rubric import DEFAULT_RUBRIC, load_rubric

WEIGHTS = "severity_weights = { blocking = 1.0, major = 0.5, minor = 0.0 }"


def _rubric(tmp_path, old: str, new: str):
    text = DEFAULT_RUBRIC.read_text()
    assert old in text
    path = tmp_path / "rubric.toml"
    path.write_text(text.replace(old, new))
    return path


def test_the_default_rubric_weighs_severities():
    assert load_rubric(None, CHECKS).severity_weights == {
        "blocking": 1.0, "major": 0.5, "minor": 0.0,
    }  # fmt: skip


@pytest.mark.parametrize("new, says", [
    ("severity_weights = { blocking = 1.0, major = 0.5 }", "expected a table with a weight"),
    ("severity_weights = { blocking = 2.0, major = 0.5, minor = 0.0 }",
     "severity_weights.blocking = 2.0"),
    ("severity_weight = { blocking = 1.0, major = 0.5, minor = 0.0 }",
     "unknown key 'severity_weight' (did you mean"),
])  # fmt: skip
def test_a_wrong_risk_table_names_the_file_the_key_and_what_it_expects(tmp_path, new, says):
    path = _rubric(tmp_path, WEIGHTS, new)
    with pytest.raises(InputError, match=r"\[risk\]") as err:
        load_rubric(path, CHECKS)
    assert str(path) in str(err.value) and says in str(err.value)


def test_a_misspelt_roofline_key_is_named(tmp_path):
    path = _rubric(tmp_path, "below_roof_share = 0.5", "below_roof_shares = 0.5")
    with pytest.raises(InputError, match=r"\[roofline\] unknown key 'below_roof_shares'"):
        load_rubric(path, CHECKS)


def test_without_a_risk_table_no_risk_is_weighed(tmp_path):
    path = _rubric(tmp_path, "[risk]\n" + WEIGHTS, "")
    assert load_rubric(path, CHECKS).severity_weights is None
