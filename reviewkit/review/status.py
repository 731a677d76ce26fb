"""A finding's statuses and a disproof criterion's outcomes, named once for every check."""

from __future__ import annotations

PASS, WARN, FAIL, MISSING = "pass", "warn", "fail", "missing"
STATUS_ORDER = {PASS: 0, WARN: 1, MISSING: 2, FAIL: 3}
# A disproof criterion's outcome, judged on the interval where there is one: disproved when the
# whole interval meets it, not disproved when the whole interval is clear of its threshold,
# cannot rule out when the interval straddles it.
HOLDS, DISPROVED, NOT_EVALUABLE = "not disproved", "disproved", "not evaluable"
CANNOT_RULE_OUT = "cannot rule out"
