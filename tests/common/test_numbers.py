"""The one test of a number read from a file."""

import math

import numpy as np
import pytest

from reviewkit.common.numbers import finite_number


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, True), (-1.5, True), (1e308, True), (np.float32(2.0), True), (np.int64(3), True),
        (math.nan, False), (math.inf, False), (-math.inf, False), (True, False), (None, False),
        ("1", False), ([1], False),
        # JSON holds integers of any size; one past a float's range is not a finite float
        # (found by the evidence fuzz: math.isfinite raised OverflowError on 10**400)
        (10**400, False), (2**1023, True),
    ],
)  # fmt: skip
def test_finite_number(value, expected):
    assert finite_number(value) is expected
