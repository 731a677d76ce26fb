"""The rubric's checks: one registry (`@check(name)`), filled by the family modules below."""

from reviewkit.review.checks import (
    bottleneck,  # noqa: F401  (registers its checks)
    claim,  # noqa: F401  (registers its checks)
    distributed,  # noqa: F401  (registers its checks)
    evidence,  # noqa: F401  (registers its checks)
    mapping_wins,  # noqa: F401  (registers its checks)
    stack,  # noqa: F401  (registers its checks)
)
from reviewkit.review.checks.disproof import evaluate_disproof
from reviewkit.review.checks.precision import (
    DTYPE_BITS,
    lowered_dtypes,
    precision_lowered,
    sparsity_changed,
)
from reviewkit.review.checks.registry import CHECKS, Check, CheckResult, Context, Evidence, check
from reviewkit.review.checks.shapes import shape_family
from reviewkit.review.status import (
    DISPROVED,
    FAIL,
    HOLDS,
    MISSING,
    NOT_EVALUABLE,
    PASS,
    STATUS_ORDER,
    WARN,
)

__all__ = [
    "CHECKS",
    "DISPROVED",
    "DTYPE_BITS",
    "FAIL",
    "HOLDS",
    "MISSING",
    "NOT_EVALUABLE",
    "PASS",
    "STATUS_ORDER",
    "WARN",
    "Check",
    "CheckResult",
    "Context",
    "Evidence",
    "check",
    "evaluate_disproof",
    "lowered_dtypes",
    "precision_lowered",
    "shape_family",
    "sparsity_changed",
]
