"""Rounds: every workload measured in N short rounds spread over the run, in a seeded order.

Run-to-run variation on a shared machine (clock frequency, neighbours, cache and page
placement) is larger than the spread of the samples inside one window, and never enters an
interval built from one window. Rounds put it in: each round is a separate window, at a
different time, after different neighbours, so the hierarchical bootstrap (analysis/stats.py)
sees how much a workload moves between rounds. Torch-free: the runner passes the measuring.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from reviewkit.analysis.energy import energy_absent, workload_energy
from reviewkit.bundle.run import STATUS_OK, STATUS_TIMEOUT
from reviewkit.measure.timing import SamplingPolicy

# Rounds unless --rounds: the suite profile's `rounds` (suite/profiles.py says why).
ROUND_SEED = 0  # fixed so the same command measures in the same order
MAX_ROUNDS = 100  # beyond this a round is a handful of samples of the fastest workloads
# A block or model whose build takes this long (its modules' weights: ~0.5 s to initialise on
# a 2-core CPU) is kept between rounds instead of rebuilt, while the kept ones' bytes stay under
# the budget: rebuilding the quick suite's three models five times cost ~6 s of a 30 s run.
# Every other workload is rebuilt every round, however slow, so each round sees fresh
# allocations: a tensor op's build is slow only because its tensors are large, and where a
# large tensor's pages land (huge pages or not, which memory they map to) can move a streaming
# call's time for as long as the tensor lives. Kept, the fp32 GELU at 4096 tokens
# (50 MB in, 50 MB out) read 0.91 and `faster` in two of three A/As on the 2-core EPYC, the
# same placement every round; rebuilt, 0.98-0.99, equivalent or inconclusive (docs/metrics.md).
SLOW_BUILD_S = 0.05
KEPT_LAYER_TYPES = frozenset({"block", "model"})
BUILD_CACHE_BYTES = 1 << 30


@dataclass(frozen=True)
class RoundPlan:
    rounds: int
    seed: int
    orders: tuple[tuple[int, ...], ...]  # the workload indices of each round, in order

    def to_json(self) -> dict:
        return {"rounds": self.rounds, "seed": self.seed}


def plan_rounds(n_workloads: int, rounds: int, seed: int = ROUND_SEED) -> RoundPlan:
    """A random workload order per round, reproducible from the seed: no workload always
    follows the same neighbour or sits at the same point of the run."""
    if not 1 <= rounds <= MAX_ROUNDS:
        raise ValueError(f"rounds must be 1..{MAX_ROUNDS}, got {rounds}")
    rng = np.random.default_rng(seed)
    orders = tuple(tuple(int(i) for i in rng.permutation(n_workloads)) for _ in range(rounds))
    return RoundPlan(rounds, seed, orders)


def round_policy(policy: SamplingPolicy, rounds: int, first: bool) -> SamplingPolicy:
    """One round's share of a workload's sampling: the sample targets and the sampling budget
    divided by the rounds, so N rounds cost about what one window did.

    The first round keeps the profile's warm-up calls (one-off costs: allocator growth,
    primitive creation); later ones need one call to bring the workload back into cache.
    The warm-up may use the workload's whole budget (a call slower than that still times out
    as before), and a round that finishes its warm-up always takes a sample."""
    return replace(
        policy,
        warmup_calls=policy.warmup_calls if first else 1,
        warmup_s=policy.warmup_s / rounds,
        min_samples=max(1, math.ceil(policy.min_samples / rounds)),
        min_time_s=policy.min_time_s / rounds,
        max_samples=max(1, math.ceil(policy.max_samples / rounds)),
        budget_s=policy.budget_s / rounds,
        warmup_budget_s=policy.budget_s,
    )


def merge_round(record: dict, measured: dict, round_index: int) -> dict:
    """The workload's record after one more round: samples appended with the round's size,
    energy totalled over the rounds' windows. A round that fails makes the workload's status
    that failure (the reason names the round); it is not measured again."""
    if round_index == 0 or record["status"] != STATUS_OK:
        out = dict(measured)
        out["round_sizes"] = [len(measured["samples_s"])] if measured["status"] == STATUS_OK else []
        out["round_wall_s"] = measured.get("round_wall_s", 0.0)
        if "knobs_not_applicable" in record:  # the run's, set before any round
            out["knobs_not_applicable"] = record["knobs_not_applicable"]
        return out
    if measured["status"] == STATUS_TIMEOUT:
        # The warm-up alone used the workload's budget this round (a neighbour's load, say):
        # the rounds already measured stand, and the workload sits out the rest.
        return {
            **record,
            "reason": record["reason"]
            or f"round {round_index + 1} timed out in its warm-up: "
            f"{len(record['round_sizes'])} round(s) measured",
            "rounds_closed": True,
        }
    if measured["status"] != STATUS_OK:
        return {
            **record,
            "status": measured["status"],
            "reason": f"round {round_index + 1}: {measured['reason']}",
            "energy": energy_absent(f"not measured: round {round_index + 1} {measured['status']}"),
        }
    out = dict(record)
    out["samples_s"] = record["samples_s"] + measured["samples_s"]
    out["warmup_samples_s"] = record["warmup_samples_s"] + measured["warmup_samples_s"]
    out["round_sizes"] = [*record["round_sizes"], len(measured["samples_s"])]
    out["round_wall_s"] = record["round_wall_s"] + measured.get("round_wall_s", 0.0)
    if measured["stopped_by"] != "target":
        out["stopped_by"] = measured["stopped_by"]
    out["energy"] = _total_energy(record["energy"], measured["energy"], record["flops"])
    if measured["reason"] and not record["reason"]:
        out["reason"] = measured["reason"]
    return out


def _total_energy(total: dict, more: dict, flops: float) -> dict:
    """Energy summed over the rounds' metered windows; absent if any round was not metered
    (a total missing a round would read as less energy per call than was spent)."""
    if not total.get("available"):
        return total
    if not more.get("available"):
        return more
    domains = {
        name: total["joules_by_domain"].get(name, 0.0) + more["joules_by_domain"].get(name, 0.0)
        for name in {*total["joules_by_domain"], *more["joules_by_domain"]}
    }
    return workload_energy(
        domains,
        total["total_of"],
        total["window_s"] + more["window_s"],
        total["calls"] + more["calls"],
        flops,
        total["method"],
        total["counter_update_s"],
    )


def budget_spent(record: dict, policy: SamplingPolicy) -> bool:
    """Whether the workload has used its whole budget in the rounds so far: a slow workload
    gets fewer rounds rather than a longer run."""
    return bool(record.get("rounds_closed")) or record.get("round_wall_s", 0.0) >= policy.budget_s


class BuildCache:
    """Builds workloads for the rounds, keeping the slow-to-build blocks and models (within a
    byte budget) so later rounds do not pay their build again; a run's cache dies with the
    run."""

    def __init__(self, build, max_bytes: int = BUILD_CACHE_BYTES, clock=time.perf_counter,
                 keep_all: bool = False):
        # A compiled workload is kept whatever its size: built again, it would compile again
        # (its cost paid a second time, and a second dynamo entry for one workload).
        self._keep_all = keep_all
        self._build = build
        self._max_bytes = max_bytes
        self._clock = clock
        self._kept: dict[str, object] = {}
        self._bytes = 0

    def __call__(self, spec, device):
        if spec.id in self._kept:
            return self._kept[spec.id]
        start = self._clock()
        fn = self._build(spec, device)
        took = self._clock() - start
        constructed = spec.layer_type in KEPT_LAYER_TYPES and took >= SLOW_BUILD_S
        if self._keep_all or (constructed and self._bytes + spec.bytes <= self._max_bytes):
            self._kept[spec.id] = fn
            self._bytes += spec.bytes
        return fn
