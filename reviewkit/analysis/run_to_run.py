"""The run-to-run allowance: a device's figure from its separate runs, and which one an interval
carries.

Between two separate runs an interval carries each run's figure: its device's measured one, the
rubric's default for a device never measured, never below the rubric's floor; said in words.

A machine state that lasts a run (placement, clocks, a neighbour, the page layout it drew) moves
every workload of that run and no statistic inside it can see that, so an interval between two
separate runs adds each run's run-to-run variance (stats.ratio_interval's known variance). That
variance belongs to the device: a shared 2-core VM's 8% is not an H200's 1-2%. It is estimated
per workload with the one-way random-effects moment estimate (stats.run_to_run_variance) and
pooled over workloads; the bundle records the figure of its device (bundle/run_to_run.record),
so a comparison is a function of the two bundles alone.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from reviewkit.analysis.pairing import pairing_of, seed_of
from reviewkit.analysis.stats import (
    cluster_variance,
    hierarchical_draws,
    round_draws,
    round_quantile,
    run_to_run_variance,
    split_rounds,
)
from reviewkit.common.format import pct

if TYPE_CHECKING:
    from reviewkit.bundle.records import Run

METHOD = (
    "per workload, the one-way random-effects moment estimate over separate runs (the variance "
    "of the runs' log medians, each the mean over rounds of the round medians, less the mean of "
    "their within-run variances from the hierarchical bootstrap; 0 when the runs agree better "
    "than their rounds say); pooled over workloads as the mean weighted by runs - 1 (the root "
    "mean square when every workload has as many runs); the square root"
)
# Knobs that name what a run measured rather than how: the same workload at the same setting
# in a run of more dtypes or another shape sweep is the same measurement.
NOT_A_SETTING = ("dtypes", "seq_sweep", "batch_sweep")


def setting_of(run: Run) -> str:
    """A short hash of what makes two runs' medians of one workload comparable as repeats: the
    sampling profile, the torch build and the knobs (threads, precision, ...). Runs at other
    settings differ for a reason, which is no part of the noise."""
    knobs = {k: v for k, v in (run.knobs or {}).items() if k not in NOT_A_SETTING}
    what = {"profile": run.suite_profile, "knobs": knobs,
            "torch": (run.environment or {}).get("torch_version")}  # fmt: skip
    text = json.dumps(what, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def observe(run: Run) -> tuple[dict[str, list[float]], list[str]]:
    """One run's observations: per workload measured in two or more rounds, [log of the
    comparison's statistic (the mean over rounds of each round's median), its within-run
    variance (the hierarchical bootstrap's, scaled back up as compare's t interval does)]; and
    the workloads left out (measured in one round: their rounds show no within-run variance)."""
    points: dict[str, list[float]] = {}
    left_out = []
    for w in run.workloads:
        if w.status != "ok" or not w.samples_s:
            continue
        rounds = split_rounds(w.samples_s, w.round_sizes)
        if len(rounds) < 2:
            left_out.append(w.id)
            continue
        rng = np.random.default_rng(seed_of(w.id))
        draws = hierarchical_draws(rounds, 0.5, round_draws(rng, len(rounds)), rng)
        within = cluster_variance(np.log(draws), len(rounds))
        points[w.id] = [float(np.log(round_quantile(rounds, 0.5))), within]
    return points, left_out


def observation(run: Run, run_id: str, source: str) -> tuple[dict, list[str]]:
    """One run as the run-to-run file pools it (`run` its identity, `source` how it came:
    measured by `calibrate --run-to-run` or recorded before), and the workloads left out."""
    points, left_out = observe(run)
    obs = {"run": run_id, "source": source, "created_unix_s": run.created_unix_s,
           "setting": setting_of(run), "points": points}  # fmt: skip
    return obs, left_out


def refusal(run: Run, where: str, fingerprint_hash: str, suite_hash: str) -> str:
    """Why a run bundle cannot be pooled into this device's figure ("" when it can): taken on
    another device, of another suite, or not a separate run of its own."""
    fp = run.fingerprint
    theirs = fp.get("hash") or (run.knobs or {}).get("device", "").split(":")[0] or None
    if theirs != fingerprint_hash:
        return (f"{where}: recorded on another device ({fp.get('label') or 'no label'}, "
                f"fingerprint {theirs}), but this is fingerprint {fingerprint_hash}: it says "
                "nothing of this device's run-to-run variation; pool it on its own "
                "device")  # fmt: skip
    theirs_suite = (run.suite or {}).get("hash")
    if theirs_suite != suite_hash:
        return (f"{where}: suite hash {theirs_suite}, but this reviewkit's suite is {suite_hash}: "
                "its workloads are not the ones measured now; pool runs of this suite (re-run "
                "it with this reviewkit)")  # fmt: skip
    if pairing_of(run):
        return (f"{where}: one side of an interleaved `reviewkit ab`: both sides ran in one "
                "process, so they are not separate runs; pool `reviewkit run` bundles")  # fmt: skip
    if run.distributed:
        return (f"{where}: a distributed run (its ranks' skew is part of each median); pool "
                "single-process `reviewkit run` bundles")  # fmt: skip
    return ""


@dataclass(frozen=True)
class Estimate:
    """A device's run-to-run figure and what it rests on."""

    sd: float  # log-scale standard deviation of a workload's median between separate runs
    runs: int  # separate runs pooled (those with a workload repeated at one setting)
    workloads: int  # workload and setting pairs measured in two or more runs
    workload_ids: tuple[str, ...]
    per_workload_sd: dict

    def to_json(self) -> dict:
        d = asdict(self)
        d["workload_ids"] = list(self.workload_ids)
        return d


def estimate(observations: Sequence[dict]) -> Estimate:
    """The pooled figure over `observations` (one per run: `run`, `setting`, `points`). A
    workload's runs at one setting form a group; each group of two or more runs gives a
    variance with runs - 1 degrees of freedom, and the pooled variance is their mean weighted
    by them. ValueError when no workload was measured twice at one setting."""
    groups: dict[tuple[str, str], list[tuple[str, list[float]]]] = {}
    for obs in observations:
        for wid, pair in obs["points"].items():
            groups.setdefault((obs["setting"], wid), []).append((obs["run"], pair))
    settings = {s for s, _ in groups}
    variances, weights, runs, per = [], [], set(), {}
    for (setting, wid), members in sorted(groups.items(), key=lambda g: (g[0][1], g[0][0])):
        if len(members) < 2:
            continue
        v = run_to_run_variance([p[0] for _, p in members], [p[1] for _, p in members])
        variances.append(v)
        weights.append(len(members) - 1)
        runs.update(r for r, _ in members)
        per[wid if len(settings) == 1 else f"{wid} [setting {setting}]"] = math.sqrt(v)
    if not variances:
        raise ValueError(
            "no workload was measured in two or more of these runs at one setting (profile, "
            "torch build, knobs): one run shows no run-to-run variation"
        )
    pooled = float(np.average(variances, weights=weights))
    return Estimate(math.sqrt(pooled), len(runs), len(per), tuple(per), per)


def merge(kept: Sequence[dict], new: Sequence[dict]) -> tuple[list[dict], int]:
    """The pooled runs with `new` added, each run once (by its `run` identity: a run passed
    again is not counted twice); and how many of `new` were already there."""
    seen = {o["run"] for o in kept}
    out, repeated = list(kept), 0
    for obs in new:
        if obs["run"] in seen:
            repeated += 1
            continue
        seen.add(obs["run"])
        out.append(obs)
    return out, repeated


# --- which figure a comparison of two separate runs carries ------------------------------------

MEASURED, DEFAULT, FLOOR = "measured", "rubric default", "rubric floor"
NOT_RECORDED = "the bundle records no per-device figure (recorded before reviewkit kept one)"


def date_of(unix_s: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(unix_s)) if unix_s else "date unknown"


@dataclass(frozen=True)
class SideAllowance:
    """The run-to-run standard deviation one side of a comparison carries, and where it came
    from: its device's measured figure, the rubric's default (never measured, or a bundle from
    before figures were recorded), or the rubric's floor (a measured figure under it)."""

    sd: float
    source: str  # MEASURED | DEFAULT | FLOOR
    measured_sd: float | None = None  # the device's figure where one is recorded
    runs: int | None = None
    workloads: int | None = None
    updated_unix_s: float | None = None
    reason: str = ""  # why the rubric's default (DEFAULT)

    def origin(self, whose: str = "this device") -> str:
        """Where the figure came from, in words ("measured for this device: 6 runs of 5
        workloads, 2026-07-10")."""
        if self.source == DEFAULT:
            return f"rubric default run_to_run_sd: {self.reason.replace('this device', whose)}"
        measured = (f"measured for {whose}: {self.runs} runs of {self.workloads} workloads, "
                    f"{date_of(self.updated_unix_s)}")  # fmt: skip
        if self.source == FLOOR:
            return f"rubric floor run_to_run_sd_floor; {measured}, {pct(self.measured_sd)}"
        return measured

    def to_json(self) -> dict:
        return {**asdict(self), "from": self.origin()}


def side_allowance(run: Run, default_sd: float, floor_sd: float) -> SideAllowance:
    """The figure one run carries: its recorded device figure, never below the floor; the
    rubric's default (itself held at the floor or above) where it records none."""
    rec = run.run_to_run
    if isinstance(rec, Mapping) and rec.get("available"):
        sd = float(rec["sd"])
        facts = {"measured_sd": sd, "runs": rec.get("runs"), "workloads": rec.get("workloads"),
                 "updated_unix_s": rec.get("updated_unix_s")}  # fmt: skip
        if sd < floor_sd:
            return SideAllowance(floor_sd, FLOOR, **facts)
        return SideAllowance(sd, MEASURED, **facts)
    reason = NOT_RECORDED
    if isinstance(rec, Mapping):
        reason = "never measured on this device"
    return SideAllowance(max(default_sd, floor_sd), DEFAULT, reason=reason)


@dataclass(frozen=True)
class Allowance:
    """The run-to-run part of every interval between two separate runs: each side's figure
    (two devices, two figures), the log ratio's variance sd_b^2 + sd_c^2."""

    baseline: SideAllowance
    candidate: SideAllowance

    @property
    def variance(self) -> float:
        return self.baseline.sd**2 + self.candidate.sd**2

    @property
    def per_run_sd(self) -> float:
        """The one figure that, on both sides, gives the same variance."""
        return math.sqrt(self.variance / 2)

    def same(self) -> bool:
        return self.baseline == self.candidate

    def text(self) -> str:
        """The clause the comparison's basis carries ("" never: no allowance is said too)."""
        if not self.variance:
            return ("; no run-to-run allowance (run_to_run_sd is 0, or no rubric sets it): the "
                    "intervals show only each run's own rounds")  # fmt: skip
        if self.same():
            return (f"; run-to-run allowance {pct(self.baseline.sd)} per run in every interval "
                    f"(allowance from: {self.baseline.origin()}; how far two separate runs "
                    "differ beyond their rounds)")  # fmt: skip
        return (f"; run-to-run allowance {pct(self.baseline.sd)} for the baseline (allowance "
                f"from: {self.baseline.origin('its device')}) and {pct(self.candidate.sd)} for "
                f"the candidate (from: {self.candidate.origin('its device')}) in every "
                "interval")  # fmt: skip

    def short(self) -> str:
        """Where the figure came from, for a chart's note."""
        if self.same():
            return self.baseline.origin()
        return (f"baseline {self.baseline.origin('its device')}; candidate "
                f"{self.candidate.origin('its device')}")  # fmt: skip

    def to_json(self) -> dict:
        return {"baseline": self.baseline.to_json(), "candidate": self.candidate.to_json(),
                "variance": self.variance, "per_run_sd": self.per_run_sd}  # fmt: skip


def choose(
    base: Run, cand: Run, default_sd: float, floor_sd: float, per_device: bool = True
) -> Allowance:
    """Each side's figure for an interval between two separate runs. Without `per_device` (a
    comparison without a rubric: statistics only) both sides take `default_sd` as given."""
    if not per_device:
        plain = SideAllowance(default_sd, DEFAULT, reason="per-device figures not applied")
        return Allowance(plain, plain)
    return Allowance(side_allowance(base, default_sd, floor_sd),
                     side_allowance(cand, default_sd, floor_sd))  # fmt: skip


def recorded_text(run: Run) -> str:
    """What a run's bundle says about its device's figure, for `show`."""
    rec = run.run_to_run
    if not isinstance(rec, Mapping):
        return (f"run-to-run allowance: {NOT_RECORDED}; a comparison with another separate run "
                "takes the rubric's default run_to_run_sd")  # fmt: skip
    if not rec.get("available"):
        return (f"run-to-run allowance from: {rec.get('reason')}; a comparison with another "
                "separate run takes the rubric's default run_to_run_sd")  # fmt: skip
    side = side_allowance(run, 0.0, 0.0)
    return (f"run-to-run allowance from: {side.origin()}, {pct(side.sd)} per run; a comparison "
            "with another separate run carries it (never below the rubric's floor)")  # fmt: skip
