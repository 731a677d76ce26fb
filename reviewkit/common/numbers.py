"""The one test of a number read from an untrusted file: real, finite, and not a bool."""

from __future__ import annotations

import math
import numbers


def finite_number(x: object) -> bool:
    """A real number (numpy scalars included) that is finite; None, NaN, infinities, booleans
    and an integer too large for a float (JSON allows 10**400) are not."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # math.isfinite converts an int to a float first
        return False
