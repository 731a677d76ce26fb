"""SLA targets against measurements: which targets hold a workload, and whether it meets them."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from reviewkit.analysis.stats import SampleStats


class Target(Protocol):
    """What is read of an SLA target (reviewkit.review.reviewfile.SlaTarget has it)."""

    workload: str
    p99_s: float | None
    min_throughput_per_s: float | None


def matching_targets(targets: Iterable[Target], workload_id: str, key: str) -> list[Target]:
    """The targets whose `workload` glob matches the workload's id or its slice key (the id
    without its dtype): a target written for a shape holds every dtype of it, since the dtype
    is so often the knob under review. The gate, the packet and the platform matrix all ask
    this one question."""
    return [t for t in targets if fnmatch.fnmatchcase(workload_id, t.workload)
            or fnmatch.fnmatchcase(key, t.workload)]  # fmt: skip


def calls_per_s(stats: SampleStats) -> float:
    """Throughput of one call at a time, as a run measures it: 1 / mean latency."""
    return 1 / stats.mean_s


@dataclass(frozen=True)
class Judgement:
    """One target against one measurement; None where the target sets no such limit."""

    p99_ok: bool | None
    throughput_ok: bool | None

    @property
    def met(self) -> bool:
        return self.p99_ok is not False and self.throughput_ok is not False


def judge(target: Target, p99_s: float, throughput_per_s: float) -> Judgement:
    """p99 at or under the target's p99, throughput at or over its minimum."""
    return Judgement(
        p99_ok=None if target.p99_s is None else p99_s <= target.p99_s,
        throughput_ok=None
        if target.min_throughput_per_s is None
        else throughput_per_s >= target.min_throughput_per_s,
    )
