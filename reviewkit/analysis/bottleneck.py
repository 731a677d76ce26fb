"""The time decomposition of one call and its bottleneck class, from a measured overhead.

Every definition is the project's (docs/metrics.md): a call of median time t splits into
exposed overhead t_o (measured, never inferred) and kernel time t_k = t - min(t_o, t); the
kernel time splits against the roofs into compute, memory stall, communication and
inefficiency (the time the device works below its roofs). The five fractions sum to 1.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from reviewkit.common.tomlfile import tomllib

COMPUTE_BOUND = "compute-bound"
MEMORY_BOUND = "memory-bound"
OVERHEAD_BOUND = "overhead-bound"
COMMUNICATION_BOUND = "communication-bound"
# A workload of a bundle recorded before overhead was measured, whose roof explains under the
# below-roof share of its time: its class cannot be told from overhead apart, so none is given.
UNCLASSIFIED = "unclassified"
BOTTLENECKS = (COMPUTE_BOUND, MEMORY_BOUND, OVERHEAD_BOUND, COMMUNICATION_BOUND, UNCLASSIFIED)
NOT_MEASURED = "overhead not measured"

# The overhead fraction at which a call is overhead-bound: half its time the device idles on the
# host. Judged on the interval's lower bound, so the class does not flip between two runs.
OVERHEAD_BOUND_FRACTION = 0.5

FRACTIONS = ("compute", "memory_stall", "communication", "overhead", "inefficiency")

# What each class points at (the lever a reviewer should pull first). Below roof, the kernel or
# the mapping, with the evidence the suite holds (levers.py adds it per workload).
LEVERS = {
    OVERHEAD_BOUND: "batching, fusion, CUDA graphs, torch.compile: fewer, larger calls",
    MEMORY_BOUND: "bytes moved: layout, fusion, lower precision",
    COMMUNICATION_BOUND: "overlap with compute, bucket size, topology",
    COMPUTE_BOUND: "a faster kernel or lower precision with a higher compute peak",
    UNCLASSIFIED: "re-measure with this reviewkit: overhead was not measured in this bundle",
}
BELOW_ROOF_LEVER = "the kernel or the mapping: the device works below its roof"


@functools.cache
def default_below_roof_share() -> float:
    """The default rubric's `[roofline] below_roof_share` (policy lives in the rubric)."""
    from importlib.resources import files

    text = files("reviewkit.rubrics").joinpath("default.toml").read_text(encoding="utf-8")
    return float(tomllib.loads(text)["roofline"]["below_roof_share"])


@dataclass(frozen=True)
class Decomposition:
    """One call's time against its roofs and its measured overhead. Times in seconds."""

    time_s: float
    compute_time_s: float  # t_c = F / P (per-op sum for a composite)
    memory_time_s: float  # t_m = B / W (compute plus per-op stall for a composite)
    communication_time_s: float  # t_comm = alpha + wire bytes / beta; 0 in one process
    roof_time_s: float  # t_roof = max(t_c, t_m) + t_comm
    overhead_time_s: float | None  # min(t_o, t), or t - t_roof when over-measured; None: unknown
    kernel_time_s: float | None  # t_k = t - overhead; None when overhead is unknown
    compute_fraction: float
    memory_stall_fraction: float
    communication_fraction: float
    overhead_fraction: float | None
    inefficiency_fraction: float | None
    # 1 - compute - stall - communication when overhead is unknown (overhead and inefficiency
    # together, not told apart); 0 otherwise.
    unattributed_fraction: float
    overhead_fraction_low: float | None  # from the interval's bounds: what the class is judged on
    roof_share: float | None  # t_roof / t_k (t_roof / t when overhead is unknown); None at t_k = 0
    bottleneck: str
    below_roof: bool
    faster_than_roofline: bool
    overhead_overestimated: bool
    note: str  # why the class is what it is, in words
    roof_class: str = COMPUTE_BOUND  # the dominant roof term, whatever the class

    def fractions(self) -> dict:
        return {
            "compute": self.compute_fraction,
            "memory_stall": self.memory_stall_fraction,
            "communication": self.communication_fraction,
            "overhead": self.overhead_fraction,
            "inefficiency": self.inefficiency_fraction,
            "unattributed": self.unattributed_fraction,
        }

    def to_json(self) -> dict:
        return asdict(self)


def roof_class(compute_time_s: float, memory_time_s: float, communication_time_s: float) -> str:
    """The dominant roof term: communication, then memory, else compute."""
    if communication_time_s > max(compute_time_s, memory_time_s):
        return COMMUNICATION_BOUND
    if memory_time_s > compute_time_s:
        return MEMORY_BOUND
    return COMPUTE_BOUND


def decompose(
    time_s: float,
    compute_time_s: float,
    memory_time_s: float,
    communication_time_s: float = 0.0,
    overhead_s: float | None = None,
    below_roof_share: float | None = None,
    time_high_s: float | None = None,
    overhead_low_s: float | None = None,
    roof_class_of: str | None = None,
) -> Decomposition:
    """docs/metrics.md, term by term.

    `overhead_s` is the measured exposed overhead t_o (None: not measured, as in a bundle
    recorded before it was); `time_high_s` and `overhead_low_s` are the upper bound of t's
    interval and the lower bound of t_o's, from which the overhead fraction's lower bound is
    taken (the point values when not given). `roof_class_of` overrides the dominant roof term
    (a composite is classified by its per-op roof, not the fused one)."""
    if time_s <= 0:
        raise ValueError(f"measured time must be positive, got {time_s}")
    threshold = default_below_roof_share() if below_roof_share is None else below_roof_share
    t, t_c, t_m, t_comm = time_s, compute_time_s, memory_time_s, communication_time_s
    t_roof = max(t_c, t_m) + t_comm
    faster = t < t_roof
    roof = roof_class_of or roof_class(t_c, t_m, t_comm)
    if overhead_s is None:
        # Kernel time unknown: fractions against t (overhead taken as 0 for the roof terms), the
        # rest not attributed; the share of roof reached is then a lower bound.
        compute, stall, comm = _roof_fractions(t, t, t_c, t_m, t_comm)
        share = t_roof / t
        unclassified = share < threshold
        return Decomposition(
            t, t_c, t_m, t_comm, t_roof, None, None, compute, stall, comm, None, None,
            max(0.0, 1.0 - compute - stall - comm), None, share,
            UNCLASSIFIED if unclassified else roof,
            below_roof=False,  # no kernel time to hold the roof against
            faster_than_roofline=faster, overhead_overestimated=False,
            note=(f"{UNCLASSIFIED}: {NOT_MEASURED} (the roof explains {share:.0%} of the time, "
                  f"under the {threshold:.0%} below-roof share)" if unclassified
                  else f"{roof} by its roof ({share:.0%} of the time); {NOT_MEASURED}"),
            roof_class=roof,
        )  # fmt: skip
    overhead = min(max(overhead_s, 0.0), t)
    overestimated = t >= t_roof > t - overhead
    if overestimated:
        overhead = t - t_roof  # design: the floor over-measured; keep the roof whole
    t_k = t - overhead
    compute, stall, comm = _roof_fractions(t, t_k, t_c, t_m, t_comm)
    overhead_fraction = overhead / t
    inefficiency = max(0.0, 1.0 - compute - stall - comm - overhead_fraction)
    t_hi = max(time_high_s or t, t)
    o_lo = overhead_s if overhead_low_s is None else min(overhead_low_s, overhead_s)
    low = min(overhead_fraction, min(max(o_lo, 0.0), t_hi) / t_hi)
    share = t_roof / t_k if t_k > 0 else None
    if low >= OVERHEAD_BOUND_FRACTION:
        cls, below = OVERHEAD_BOUND, False
        note = (f"overhead {overhead_fraction:.0%} of the time (at least {low:.0%} across its "
                "interval)")  # fmt: skip
    else:
        cls = roof
        below = share is not None and share < threshold
        note = f"{roof}: the roof is {share:.0%} of the kernel time" if share is not None else roof
        if below:
            note += f", under the {threshold:.0%} below-roof share"
    return Decomposition(
        t, t_c, t_m, t_comm, t_roof, overhead, t_k, compute, stall, comm, overhead_fraction,
        inefficiency, 0.0, low, share, cls, below, faster, overestimated, note, roof,
    )  # fmt: skip


def _roof_fractions(
    t: float, t_k: float, t_c: float, t_m: float, t_comm: float
) -> tuple[float, float, float]:
    compute = min(t_c, t_k)
    stall = min(max(0.0, t_m - t_c), t_k - compute)
    comm = min(t_comm, t_k - min(max(t_c, t_m), t_k))
    return compute / t, stall / t, max(0.0, comm) / t


def lever_for(cls: str, below_roof: bool) -> str:
    """What a class points at: the first lever to pull."""
    if cls in (COMPUTE_BOUND, MEMORY_BOUND, COMMUNICATION_BOUND) and below_roof:
        return f"{BELOW_ROOF_LEVER} ({LEVERS[cls]} come after)"
    return LEVERS[cls]


def lever(d: Decomposition) -> str:
    return lever_for(d.bottleneck, d.below_roof)


def class_label(cls: str | None, below_roof: bool = False, missing: str = "—") -> str:
    """A class as a reviewer reads it: "unclassified: overhead not measured" in full, "(below
    roof)" where flagged, `missing` for none (terminal, packet and checks alike)."""
    if not cls:
        return missing
    if cls == UNCLASSIFIED:
        return f"{UNCLASSIFIED}: {NOT_MEASURED}"
    return cls + (" (below roof)" if below_roof else "")


# --- composites: the per-op roof from the ops one call dispatches -----------------------------


@dataclass(frozen=True)
class PerOpRoof:
    """Sum over the ops a composite dispatches of each op's own roof (no fusion)."""

    compute_time_s: float  # sum of t_c,i
    stall_time_s: float  # sum of max(0, t_m,i - t_c,i)
    roof_time_s: float  # sum of max(t_c,i, t_m,i)
    memory_dominated_s: float  # the roof time of the ops whose memory term dominates
    ops: int

    @property
    def bottleneck(self) -> str:
        """Classified by the ops that carry most of the roof time."""
        compute_dominated = self.roof_time_s - self.memory_dominated_s
        return MEMORY_BOUND if self.memory_dominated_s > compute_dominated else COMPUTE_BOUND


def per_op_roof(op_terms: list[tuple[float, float, int]]) -> PerOpRoof:
    """From (t_c,i, t_m,i, calls) of every op kind a call dispatches."""
    compute = stall = roof = memory = 0.0
    ops = 0
    for t_c, t_m, calls in op_terms:
        compute += calls * t_c
        stall += calls * max(0.0, t_m - t_c)
        roof += calls * max(t_c, t_m)
        memory += calls * t_m if t_m > t_c else 0.0
        ops += calls
    return PerOpRoof(compute, stall, roof, memory, ops)
